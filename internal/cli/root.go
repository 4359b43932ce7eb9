// Package cli turns command lines into option structs and runs kvwatch's
// subcommands. It is the only layer that knows about flags; it never calls
// os.Exit or reads os.Args, so every subcommand runs in-process in tests.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
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

// Run parses args, runs the chosen subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, s Streams) int {
	app := kingpin.New("kvwatch", "KV-cache observability for LLM inference servers: how full is the KV cache, and how much more fits?")
	app.Version(version.Print("kvwatch"))
	app.HelpFlag.Short('h')
	app.UsageWriter(s.Stdout)
	app.ErrorWriter(s.Stderr)
	exited := -1
	app.Terminate(func(code int) {
		if exited < 0 {
			exited = code
		}
	})
	logCfg := &promslog.Config{}
	promslogflag.AddFlags(app, logCfg)

	r := registry{}
	// The subcommands, in the order --help lists them.
	addStatus(app, r)
	addTop(app, r)
	addServe(app, r)
	addCheck(app, r)
	addSimulate(app, r)
	addDemo(app, r)
	addStack(app, r)

	cmd, err := app.Parse(args)
	if exited >= 0 { // --help or --version
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(s.Stderr, "kvwatch: %v; see 'kvwatch --help'\n", err)
		return exitUsage
	}
	logCfg.Writer = s.Stderr
	e := &env{Streams: s, Logger: promslog.New(logCfg), Interactive: isTerminal(s.Stdout)}
	run, ok := r[cmd]
	if !ok {
		fmt.Fprintf(s.Stderr, "kvwatch: no command given; see 'kvwatch --help'\n")
		return exitUsage
	}
	return run(ctx, e)
}

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
