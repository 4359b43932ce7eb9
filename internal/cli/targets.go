package cli

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/discovery"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/pipeline"
)

// targetFlags are the target-selection flags shared by status and top.
type targetFlags struct {
	args       []string
	configFile string
	engine     string
	headroom   string
	timeout    string
	kvUnified  string
}

// register adds the flags and the TARGET arguments to cmd.
func (f *targetFlags) register(cmd *kingpin.CmdClause) {
	cmd.Arg("target", "Servers to read, as [ROLE=]URL (ROLE: prefill, decode, unified, router, cache), NAME=URL or ROLE:NAME=URL, e.g. decode=http://127.0.0.1:30002 or decode:d0=http://127.0.0.1:30002. A URL without a path means /metrics.").StringsVar(&f.args)
	cmd.Flag("config.file", "Read targets (and headroom sizes, timeouts, auth) from this kvwatch config file, the same file serve reads: its targets, file_sd files and service discovery (run once, at most 10s).").PlaceHolder("FILE").StringVar(&f.configFile)
	cmd.Flag("engine", "Force this engine's adapter instead of detecting it: "+strings.Join(engine.NewRegistry().Names(), ", ")+".").PlaceHolder("ENGINE").StringVar(&f.engine)
	cmd.Flag("headroom", "Request sizes in tokens for headroom, comma-separated (the server's own context length is added when it reports one). Default: the config's global.headroom_tokens.").PlaceHolder("4096,8192,32768").StringVar(&f.headroom)
	cmd.Flag("scrape.timeout", "Timeout of one scrape. Default: the config's global.scrape_timeout.").PlaceHolder("DURATION").StringVar(&f.timeout)
	cmd.Flag("kv-unified", "llama.cpp: whether the TARGET servers' slots share one KV cache (true: llama-server --kv-unified, its default without -np) or each hold their own (false: --parallel N); the kv_unified of the command line's targets (config targets set their own). Unset, a server of several slots has no KV capacity.").PlaceHolder("true|false").StringVar(&f.kvUnified)
}

// load builds the pipeline (config, targets, scraper, trackers) from the
// flags with package pipeline, as serve and `check config` do (file_sd
// files included), and adds the targets the config's service discovery
// finds (discovery.Once: at most discovery.DefaultOnceTimeout). Errors are
// usage errors (exit code 2).
func (f *targetFlags) load(ctx context.Context, log *slog.Logger) (*pipeline.Pipeline, error) {
	reg := engine.NewRegistry()
	src := config.Sources{File: f.configFile, Engines: pipeline.EngineNames(reg)}
	kvUnified, err := config.ParseKVUnified(f.kvUnified)
	if err != nil {
		return nil, usageError{fmt.Errorf("--kv-unified: %w", err)}
	}
	for _, a := range f.args {
		t, err := parseTargetArg(a)
		if err != nil {
			return nil, usageError{err}
		}
		t.KVUnified = kvUnified
		src.Extra = append(src.Extra, t)
	}
	if f.engine != "" {
		if err := src.Engines(f.engine); err != nil {
			return nil, usageError{fmt.Errorf("--engine: %w", err)}
		}
		src.Engine = f.engine
	}
	if f.timeout != "" {
		d, err := parseDuration(f.timeout)
		if err != nil || d <= 0 {
			return nil, usageError{fmt.Errorf("--scrape.timeout: %q is not a positive duration; write e.g. 5s or 2m", f.timeout)}
		}
		src.ScrapeTimeout = time.Duration(d)
	}
	if f.headroom != "" {
		sizes, err := parseSizes(f.headroom)
		if err != nil {
			return nil, usageError{fmt.Errorf("--headroom: %w", err)}
		}
		src.HeadroomTokens = sizes
	}
	p, err := pipeline.Load(src, reg)
	if err != nil {
		return nil, usageError{err}
	}
	if p, err = discovery.Once(ctx, p, log, src.Engines, 0); err != nil {
		return nil, usageError{err}
	}
	if len(p.Targets) == 0 {
		if p.Config.HasDiscovery() {
			return nil, usageError{fmt.Errorf("no targets: service discovery found none (the log says why when it knows) and the config lists none")}
		}
		return nil, usageError{fmt.Errorf("no targets: give URLs (e.g. http://127.0.0.1:30000) or --config.file")}
	}
	return p, nil
}

// parseTargetArg reads [ROLE=]URL, NAME=URL or ROLE:NAME=URL. A prefix
// that is a role (prefill, decode, unified, router, cache) is the role; any other
// is the target's name (the default name is host:port).
func parseTargetArg(a string) (config.Target, error) {
	t := config.Target{URL: a}
	if i := strings.Index(a, "="); i > 0 && !strings.Contains(a[:i], "/") {
		prefix := a[:i]
		role, name, named := strings.Cut(prefix, ":")
		switch {
		case named: // the config check says when ROLE is not a role
			t.Role, t.Name, t.URL = role, name, a[i+1:]
		case isRole(prefix):
			t.Role, t.URL = prefix, a[i+1:]
		default:
			t.Name, t.URL = prefix, a[i+1:]
		}
	}
	if _, err := config.ParseTargetURL(t.URL); err != nil {
		return t, fmt.Errorf("target %q: %w", a, err)
	}
	return t, nil
}

// isRole reports whether s is a role a target may have (config.Roles).
func isRole(s string) bool { return slices.Contains(config.Roles, s) }

// parseSizes reads "4096,8192,32k" into token counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(strings.ToLower(p))
		if p == "" {
			continue
		}
		mult := 1
		if strings.HasSuffix(p, "k") {
			mult, p = 1024, strings.TrimSuffix(p, "k")
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number of tokens", p)
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes given")
	}
	return out, nil
}
