// Package cli turns command lines into option structs and runs kvwatch's
// subcommands. It is the only layer that knows about flags; it never calls
// os.Exit or reads os.Args, so every subcommand runs in-process in tests.
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/kvwatch/kvwatch/internal/discovery"
	"github.com/kvwatch/kvwatch/internal/safetext"
)

// Exit codes shared by every subcommand.
const (
	exitOK     = 0 // everything worked
	exitFailed = 1 // the command ran, but a target or check failed
	exitUsage  = 2 // the command line or a config file is wrong
)

// Streams are the process's standard streams. Program output goes to Stdout,
// logs and errors to Stderr.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// env is what every subcommand receives after flags are parsed.
type env struct {
	Streams
	Logger *slog.Logger
	// Interactive is true when Stdout is a terminal (set by Run from the
	// real file descriptor; tests leave it false).
	Interactive bool
}

// runFunc runs one parsed subcommand and returns its exit code.
type runFunc func(ctx context.Context, e *env) int

// registry maps a subcommand's full name ("stack generate") to its run function.
type registry map[string]runFunc

func (r registry) add(c *kingpin.CmdClause, f runFunc) { r[c.FullCommand()] = f }

// helpFlags are the flags that print something and stop, with exit code 0.
var helpFlags = map[string]bool{"--help": true, "-h": true, "--help-long": true, "--version": true, "--completion-bash": true}

// appSummary is kvwatch in one line: the man page's NAME.
const appSummary = "KV-cache observability for LLM inference servers: how full is the KV cache, and how much more fits?"

// newApp builds the command line: every subcommand and its flags. The
// usage and man page generators read it too.
func newApp() (*kingpin.Application, registry, *promslog.Config) {
	app := kingpin.New("kvwatch", appSummary+"\n\n"+
		"Try it without a GPU: kvwatch demo\n\n"+
		"Completion: source <(kvwatch --completion-script-bash); also -zsh, -fish.")
	app.Version(versionText())
	app.HelpFlag.Short('h')
	logCfg := &promslog.Config{}
	promslogflag.AddFlags(app, logCfg)

	r := registry{}
	// The subcommands, in the order --help lists them.
	addStatus(app, r)
	addTop(app, r)
	addServe(app, r)
	addCheck(app, r)
	addPlan(app, r)
	addSimulate(app, r)
	addDemo(app, r)
	addStack(app, r)
	return app, r, logCfg
}

// versionText is what --version prints. A build without the Makefile's
// -ldflags has no build user or date; they say so instead of being empty.
// The text is rewritten, not the version package's variables: cli.Run may
// run concurrently (tests), and serve's build-info collector reads them.
func versionText() string {
	return unknownBuildField.ReplaceAllString(version.Print("kvwatch"), "${1}unknown (built without make)")
}

var unknownBuildField = regexp.MustCompile(`(?m)^(\s*build (?:user|date):\s*)$`)

// firstWord is the first argument that is not a flag: the subcommand.
func firstWord(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// terminated carries kingpin's exit code out of Parse: kingpin calls
// Terminate after --help or --version and expects it not to return.
type terminated struct{ code int }

// parse runs app.Parse, turning kingpin's Terminate into a return.
func parse(app *kingpin.Application, args []string) (cmd string, code int, err error) {
	code = -1
	defer func() {
		if v := recover(); v != nil {
			t, ok := v.(terminated)
			if !ok {
				panic(v)
			}
			code = t.code
		}
	}()
	app.Terminate(func(c int) { panic(terminated{c}) })
	cmd, err = app.Parse(args)
	return cmd, code, err
}

// Run parses args, runs the chosen subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, s Streams) int {
	app, r, logCfg := newApp()
	// Generated scripts and pages are written here, not by kingpin, which
	// would append the usage to them (kingpin's own flags of these names are
	// hidden, and never reached).
	if !slices.Contains(args, "--completion-bash") {
		for _, a := range args {
			if sh, ok := strings.CutPrefix(a, "--completion-script-"); ok {
				return writeCompletionScript(s, sh)
			}
			if a == "--help-man" {
				if err := writeManPage(s.Stdout, app); err != nil {
					fmt.Fprintf(s.Stderr, "kvwatch: man page: %v\n", err)
					return exitFailed
				}
				return exitOK
			}
		}
	}
	var usage bytes.Buffer
	app.UsageWriter(&usage)
	app.ErrorWriter(s.Stderr)
	cmd, code, err := parse(app, args)
	helpAsked := slices.ContainsFunc(args, func(a string) bool { return helpFlags[a] }) || firstWord(args) == "help"
	if code == exitOK && !helpAsked || errors.Is(err, kingpin.ErrCommandNotSpecified) {
		// No (sub)command given: the usage is the answer, but on stderr and
		// as a usage error, as for any other wrong command line.
		s.Stderr.Write(usage.Bytes())
		return exitUsage
	}
	s.Stdout.Write(usage.Bytes())
	if code >= 0 { // --help or --version
		return code
	}
	if err != nil {
		fmt.Fprintf(s.Stderr, "kvwatch: %v; see 'kvwatch --help'\n", err)
		return exitUsage
	}
	logCfg.Writer = s.Stderr
	// Every log line is redacted and escaped (text from targets, URLs).
	e := &env{Streams: s, Logger: slog.New(safetext.Handler(promslog.New(logCfg).Handler())), Interactive: isTerminal(s.Stdout)}
	discovery.LogKubernetesClient(e.Logger) // service discovery's Kubernetes client logs through ours
	run, ok := r[cmd]
	if !ok {
		fmt.Fprintf(s.Stderr, "kvwatch: no command given; see 'kvwatch --help'\n")
		return exitUsage
	}
	if parsed, ok := ctx.Value(parseOnlyKey{}).(func(app *kingpin.Application, cmd string)); ok {
		parsed(app, cmd)
		return exitOK
	}
	return run(ctx, e)
}

// parseOnlyKey is a context key for tests (flags_test.go): a
// func(app *kingpin.Application, cmd string) under it makes Run stop after
// the command line is parsed and hand it the parsed application instead of
// running the command, so that commands which run until stopped (serve,
// demo, top) have their flags parsed by Run itself.
type parseOnlyKey struct{}

// usageError marks an error caused by the command line or a config file; it
// maps to exit code 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// exitCode reports err on stderr and maps it to an exit code.
func exitCode(e *env, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(e.Stderr, "kvwatch: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailed
}

// parseDuration reads a Prometheus-style duration flag ("5s", "1m30s"), as
// every subcommand writes them.
func parseDuration(s string) (model.Duration, error) {
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; write e.g. 5s or 2m", s)
	}
	return d, nil
}
