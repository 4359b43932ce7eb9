package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/querycheck"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// checkQueriesOptions are the flags of `kvwatch check queries`.
type checkQueriesOptions struct {
	files      []string
	against    []string
	httpConfig string
	window     time.Duration
	limit      int
	timeout    time.Duration
	output     string
	fix        bool
	verbose    bool
	strict     bool
}

// addCheckQueries registers `check queries` under the check command.
func addCheckQueries(c *kingpin.CmdClause, r registry) {
	o := &checkQueriesOptions{}
	cmd := c.Command("queries", "Find dashboard, alert and autoscaler queries that match nothing: Grafana dashboards (.json), rule files and PrometheusRule manifests (.yml), files of bare expressions, checked against a Prometheus-compatible API, engine /metrics URLs, or offline against kvwatch's catalog of engine metrics. Exit code 1 if a query is broken, 2 on usage errors or when --against cannot be read.")
	cmd.Arg("file", "Dashboards, rule files, manifests or expression files to check.").Required().StringsVar(&o.files)
	cmd.Flag("against", "A Prometheus-compatible API's base URL (Prometheus, kvwatch serve, VictoriaMetrics, Thanos), or engine /metrics URLs (a URL whose path ends in /metrics is scraped once); repeat for several engines. Without it, names are checked offline.").PlaceHolder("URL").StringsVar(&o.against)
	cmd.Flag("against.http-config", "Auth and TLS for --against, in the keys a kvwatch target uses (basic_auth, authorization, bearer_token_file, tls_config, proxy_url).").PlaceHolder("FILE").StringVar(&o.httpConfig)
	cmd.Flag("against.window", "How far back a series counts as existing in the API.").Default("1h").DurationVar(&o.window)
	cmd.Flag("against.limit", "Bound on each list the API returns (metric names, label values).").Default("10000").IntVar(&o.limit)
	cmd.Flag("against.timeout", "Timeout of the whole check against --against.").Default("30s").DurationVar(&o.timeout)
	cmd.Flag("output", "Output format: text or json (stable schema, see docs/check-queries.md).").Short('o').Default("text").EnumVar(&o.output, "text", "json")
	cmd.Flag("fix", "Write the suggested renames into FILE.fixed next to each file with a fixable finding; the original stays untouched. A name whose meaning changed, or whose replacement is not the same series, is reported, not rewritten.").BoolVar(&o.fix)
	cmd.Flag("verbose", "Also print info findings (accepted escaped names, templated names).").Short('v').BoolVar(&o.verbose)
	cmd.Flag("strict", "Warnings fail too (exit code 1).").BoolVar(&o.strict)
	r.add(cmd, o.run)
}

func (o *checkQueriesOptions) run(ctx context.Context, e *env) int {
	in := &querycheck.Inputs{}
	for _, f := range o.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return exitCode(e, usageError{fmt.Errorf("check queries: %w", err)})
		}
		if err := in.ReadFile(f, b); err != nil {
			return exitCode(e, usageError{fmt.Errorf("check queries: %s", querycheck.Sanitize(err.Error()))})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	store, err := o.store(ctx)
	if err != nil {
		// A scraped page's parse error can quote the page: made safe.
		return exitCode(e, usageError{errors.New(querycheck.Sanitize(err.Error()))})
	}
	ch := &querycheck.Checker{Store: store}
	rep, err := ch.Check(ctx, in)
	if err != nil {
		return exitCode(e, usageError{fmt.Errorf("check queries against %s: %s", strings.Join(o.against, ", "), querycheck.Sanitize(err.Error()))})
	}
	if o.output == "json" {
		if err := rep.WriteJSON(e.Stdout); err != nil {
			return exitCode(e, err)
		}
	} else {
		rep.WriteText(e.Stdout, o.verbose)
	}
	if o.fix {
		for file, fixes := range rep.Fixes() {
			b, err := os.ReadFile(file)
			if err != nil {
				return exitCode(e, err)
			}
			out, n := querycheck.ApplyFixes(string(b), fixes)
			if err := os.WriteFile(file+".fixed", []byte(out), 0o644); err != nil {
				return exitCode(e, fmt.Errorf("check queries --fix: %w", err))
			}
			fmt.Fprintf(e.Stderr, "wrote %s.fixed (%d replacements)\n", file, n)
		}
		for file, kinds := range rep.Unfixed() {
			fmt.Fprintf(e.Stderr, "not rewritten in %s: the %s findings need a person (see each one's suggestion)\n", querycheck.Sanitize(file), kindList(kinds))
		}
	}
	if rep.Errors > 0 || o.strict && rep.Warnings > 0 {
		return exitFailed
	}
	return exitOK
}

// kindList joins finding kinds for a sentence: "a, b and c".
func kindList(ks []querycheck.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// store builds the store --against names; nil (offline) without it.
func (o *checkQueriesOptions) store(ctx context.Context) (querycheck.Store, error) {
	if len(o.against) == 0 {
		if o.httpConfig != "" {
			return nil, errors.New("--against.http-config needs --against")
		}
		return nil, nil
	}
	hc := promcfg.DefaultHTTPClientConfig
	if o.httpConfig != "" {
		c, _, err := promcfg.LoadHTTPConfigFile(o.httpConfig)
		if err != nil {
			return nil, fmt.Errorf("--against.http-config: %w", err)
		}
		hc = *c
	}
	var pages []string
	var apis []*url.URL
	for _, a := range o.against {
		u, err := url.Parse(a)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--against %q: want an http(s) URL, e.g. http://prometheus:9090 or http://10.0.0.5:8000/metrics", a)
		}
		if strings.HasSuffix(u.Path, "/metrics") {
			pages = append(pages, a)
		} else {
			apis = append(apis, u)
		}
	}
	switch {
	case len(apis) > 1, len(apis) == 1 && len(pages) > 0:
		return nil, errors.New("--against: give one Prometheus API, or any number of engine /metrics URLs, not a mix")
	case len(apis) == 1:
		client, err := promcfg.NewClientFromConfig(hc, "kvwatch-check", promcfg.WithUserAgent("kvwatch/"+version.Version))
		if err != nil {
			return nil, fmt.Errorf("--against.http-config: %w", err)
		}
		return &querycheck.API{Base: apis[0], Client: client, Window: o.window, Limit: o.limit}, nil
	}
	// The engine pages are read by the pipeline of the default config
	// (its body limit, the engines' adapters), as status reads them.
	pl, err := pipeline.Load(config.Sources{}, nil)
	if err != nil {
		return nil, err
	}
	s := pl.Scraper()
	st := &querycheck.Pages{}
	for _, p := range pages {
		t, err := scrape.NewTarget(&config.Target{URL: p, HTTPClientConfig: hc})
		if err != nil {
			return nil, fmt.Errorf("--against %s: %w", p, err)
		}
		page, err := s.Page(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("--against: %w", err)
		}
		st.AddPage(t.URL.Redacted(), page)
	}
	return st, nil
}
