package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/forecast"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/web"
)

// page is a real SGLang page (DP=2): 1,024 bytes and more.
func page(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../serve/testdata/sglang-dp2.prom")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// started runs serve from the config file f until the test ends.
func started(t *testing.T, f string) (*Serve, string) {
	t.Helper()
	testenv.StateDir(t)
	srv, err := New(Options{Sources: config.Sources{File: f}, ListenAddresses: []string{"127.0.0.1:0"},
		Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "the first round of scrapes", srv.Daemon().Ready)
	return srv, srv.Daemon().URL()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}

// ruleQuery is the query of the rule named name in /api/v1/rules.
func ruleQuery(t *testing.T, base, name string) (query string, interval float64) {
	t.Helper()
	var r struct {
		Data struct {
			Groups []struct {
				Interval float64 `json:"interval"`
				Rules    []struct {
					Name  string `json:"name"`
					Query string `json:"query"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	getJSON(t, base+"api/v1/rules", &r)
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			if rule.Name == name {
				return rule.Query, g.Interval
			}
		}
	}
	t.Fatalf("no rule %s in /api/v1/rules", name)
	return "", 0
}

// uiSettings is the web UI's settings endpoint.
func uiSettings(t *testing.T, base string) map[string]any {
	t.Helper()
	var m map[string]any
	getJSON(t, base+strings.TrimPrefix(web.PathSettings, "/"), &m)
	return m
}

// A reload of each config key reaches every component that reads it: the
// target loops and report (daemon), the history, the rules and their
// notifiers, the web UI and the remote writer. Each case starts serve on
// a base config, rewrites the file with one key changed, reloads through
// POST /-/reload (what SIGHUP calls too) and checks every component that
// reads the key.
func TestReloadReachesEveryComponent(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t))
	other := testenv.EngineServer(t, "", page(t))
	hook := testenv.EngineServer(t, "/hook", []byte("ok"))
	// An http_sd endpoint listing the other engine, as Prometheus reads one.
	sd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"targets": [%q], "labels": {"role": "decode", "__meta_team": "kv"}}]`, strings.TrimPrefix(other.URL, "http://"))
	}))
	t.Cleanup(sd.Close)
	dir := t.TempDir()
	base := fmt.Sprintf("targets:\n  - {name: a, url: %q}\n", eng.URL)
	for _, c := range []struct {
		key, after string
		check      func(t *testing.T, s *Serve, url string)
	}{
		// The page's KV usage is between 0.01 and 0.9: KV becomes the
		// server's limiting factor only under the new threshold.
		{"alerts.kv_usage_warning", "alerts: {kv_usage_warning: 0.01}\n", func(t *testing.T, s *Serve, url string) {
			if q, _ := ruleQuery(t, url, "KVCacheUsageHigh"); !strings.HasSuffix(q, "> 0.01") {
				t.Errorf("rules: KVCacheUsageHigh = %q, want the threshold 0.01", q)
			}
			if got := uiSettings(t, url)["kv_usage_warning"]; got != 0.01 {
				t.Errorf("web UI: kv_usage_warning = %v, want 0.01", got)
			}
			if got := s.Projector().Settings().Warning; got != 0.01 {
				t.Errorf("projection: warning = %v, want 0.01", got)
			}
			waitFor(t, "the report's limiting factor under the new threshold", func() bool {
				r := s.Daemon().Report()
				return len(r.Servers) == 1 && r.Servers[0].Plan != nil && r.Servers[0].Plan.Limit == kv.FactorKV &&
					strings.Contains(r.Servers[0].Plan.Why, "warning")
			})
		}},
		// The page holds 750 of 2,000 tokens: at the default 0.8 one
		// server (and the N−1 spare) is 2, at 0.1 750 / 200 = 3.75 → 4, 5.
		{"autoscaling.target_kv_usage", "autoscaling: {target_kv_usage: 0.1}\n", func(t *testing.T, s *Serve, url string) {
			if q, _ := ruleQuery(t, url, stack.RecPoolDesiredServers); !strings.Contains(q, "(0.1 * (") {
				t.Errorf("rules: %s = %q, want the target 0.1", stack.RecPoolDesiredServers, q)
			}
			if got := s.Daemon().Setup().PlanOptions().Target(); got != 0.1 {
				t.Errorf("targets: autoscaling target = %g, want 0.1", got)
			}
			waitFor(t, "the report's and the exporter's desired servers under the new target", func() bool {
				r := s.Daemon().Report()
				v, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.PoolDesiredServers.Name, nil)
				return len(r.Planning) == 1 && r.Planning[0].DesiredServers.V == 5 && ok && v == 5
			})
		}},
		{"alerts.kv_usage_critical", "alerts: {kv_usage_critical: 0.95}\n", func(t *testing.T, s *Serve, url string) {
			if q, _ := ruleQuery(t, url, "KVCacheUsageCritical"); !strings.HasSuffix(q, "> 0.95") {
				t.Errorf("rules: KVCacheUsageCritical = %q, want the threshold 0.95", q)
			}
			if got := uiSettings(t, url)["kv_usage_critical"]; got != 0.95 {
				t.Errorf("web UI: kv_usage_critical = %v, want 0.95", got)
			}
		}},
		{"alerts.kv_usage_exhausted, alerts.kv_usage_exhausted_window", "alerts: {kv_usage_exhausted: 0.995, kv_usage_exhausted_window: 1m}\n", func(t *testing.T, s *Serve, url string) {
			if q, _ := ruleQuery(t, url, "KVCacheExhausted"); !strings.HasSuffix(q, "[1m]) > 0.995") {
				t.Errorf("rules: KVCacheExhausted = %q, want the window 1m and the threshold 0.995", q)
			}
		}},
		{"global.evaluation_interval", "global: {evaluation_interval: 7s}\n", func(t *testing.T, s *Serve, url string) {
			if _, iv := ruleQuery(t, url, "KVCacheUsageHigh"); iv != 7 {
				t.Errorf("rules: group interval = %gs, want 7s", iv)
			}
		}},
		{"global.scrape_interval", "global: {scrape_interval: 2s}\n", func(t *testing.T, s *Serve, url string) {
			if got := s.History().Settings().Interval; got != 2*time.Second {
				t.Errorf("history: interval = %s, want 2s", got)
			}
			if got := uiSettings(t, url)["scrape_interval_seconds"]; got != 2.0 {
				t.Errorf("web UI: scrape_interval_seconds = %v, want 2", got)
			}
			if got := s.Daemon().Setup().Targets[0].Interval; got != 2*time.Second {
				t.Errorf("targets: interval = %s, want 2s", got)
			}
		}},
		{"global.body_size_limit", "global: {body_size_limit: 200B}\n", func(t *testing.T, s *Serve, url string) {
			waitFor(t, "target a to fail over the body limit", func() bool {
				up, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetUp.Name, map[string]string{"server": "a"})
				return ok && up == 0
			})
		}},
		{"global.headroom_tokens", "global: {headroom_tokens: [1024, 2048]}\n", func(t *testing.T, s *Serve, url string) {
			waitFor(t, "a row with the new headroom sizes", func() bool {
				r := s.Daemon().Report()
				if len(r.Servers) == 0 {
					return false
				}
				var sizes []int
				for _, h := range r.Servers[0].Headroom {
					if !h.Context {
						sizes = append(sizes, h.Tokens)
					}
				}
				return slices.Equal(sizes, []int{1024, 2048})
			})
		}},
		{"global.labels", "global: {labels: {cluster: east}}\n", func(t *testing.T, s *Serve, url string) {
			waitFor(t, "target a's series with kv_cluster=east", func() bool {
				_, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetUp.Name, map[string]string{"server": "a", "kv_cluster": "east"})
				return ok
			})
		}},
		{"targets", fmt.Sprintf("  - {name: b, url: %q}\n", other.URL), func(t *testing.T, s *Serve, url string) {
			waitFor(t, "target b", func() bool {
				_, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetUp.Name, map[string]string{"server": "b"})
				return ok
			})
		}},
		{"http_sd_configs", "http_sd_configs:\n  - url: " + sd.URL + "\n    relabel_configs: [{source_labels: [__meta_team], target_label: pool}, {target_label: name, replacement: c}]\n", func(t *testing.T, s *Serve, url string) {
			waitFor(t, "target c, found by http_sd and relabeled", func() bool {
				up, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetUp.Name, map[string]string{"server": "c", "role": "decode", "pool": "kv"})
				return ok && up == 1
			})
			if got, _ := testenv.Value(t, s.o.Registry, signal.DiscoveryTargets.Name, map[string]string{signal.LabelSDConfig: "http_sd_configs[0]"}); got != 1 {
				t.Errorf("%s = %g, want 1", signal.DiscoveryTargets.Name, got)
			}
		}},
		{"probe.allow", "probe: {allow: [127.0.0.1]}\n", func(t *testing.T, s *Serve, url string) {
			resp, err := http.Get(url + "probe?target=" + eng.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("/probe of an allowed host = %d, want 200", resp.StatusCode)
			}
		}},
		{"history.retention", "history: {retention: 2h}\n", func(t *testing.T, s *Serve, url string) {
			if got := s.History().Settings().Retention; got != 2*time.Hour {
				t.Errorf("history: retention = %s, want 2h", got)
			}
			if got := uiSettings(t, url)["history_seconds"]; got != 7200.0 {
				t.Errorf("web UI: history_seconds = %v, want 7200", got)
			}
			waitFor(t, "the projection's reason under the new retention", func() bool {
				var pr forecast.Projection
				getJSON(t, url+strings.TrimPrefix(web.PathProjection, "/"), &pr)
				return !pr.Available && pr.Reason == "needs 5 days of history, has 2h: set history.retention (or --history) to 5d or more"
			})
		}},
		{"history.snapshot_file", "history: {snapshot_file: " + filepath.Join(dir, "h.snap") + ", snapshot_interval: 1s}\n", func(t *testing.T, s *Serve, url string) {
			if got := s.History().Settings().SnapshotFile; got != filepath.Join(dir, "h.snap") {
				t.Errorf("history: snapshot file = %q, want h.snap", got)
			}
			waitFor(t, "the snapshot file", func() bool { _, err := os.Stat(filepath.Join(dir, "h.snap")); return err == nil })
		}},
		{"history.max_series", "history: {max_series: 1234}\n", func(t *testing.T, s *Serve, url string) {
			if got := s.History().Settings().MaxSeries; got != 1234 {
				t.Errorf("history: max_series = %d, want 1234", got)
			}
		}},
		{"history.max_series_per_target", "history: {max_series_per_target: 0}\n", func(t *testing.T, s *Serve, url string) {
			if got := s.History().Settings().MaxSeriesPerTarget; got != 0 {
				t.Errorf("history: max_series_per_target = %d, want 0 (no limit)", got)
			}
		}},
		{"alerting.webhooks", "alerting: {webhooks: [" + hook.URL + "/hook]}\n", func(t *testing.T, s *Serve, url string) {
			if n := s.Rules().Config().Notifiers; len(n) != 1 {
				t.Errorf("rules: %d notifiers, want the webhook", len(n))
			} else if _, ok := n[0].(*alerting.Webhook); !ok {
				t.Errorf("rules: notifier %T, want a webhook", n[0])
			}
		}},
		{"alerting.alertmanagers", "alerting: {alertmanagers: [" + hook.URL + "]}\n", func(t *testing.T, s *Serve, url string) {
			if n := s.Rules().Config().Notifiers; len(n) != 1 {
				t.Errorf("rules: %d notifiers, want the Alertmanager", len(n))
			} else if _, ok := n[0].(*alerting.Alertmanager); !ok {
				t.Errorf("rules: notifier %T, want an Alertmanager", n[0])
			}
		}},
		{"remote_write", "remote_write: [{url: " + hook.URL + "/api/v1/write}]\n", func(t *testing.T, s *Serve, url string) {
			rws := s.RemoteWriter().Remotes()
			if len(rws) != 1 || rws[0].URL != hook.URL+"/api/v1/write" {
				t.Errorf("remote write: remotes %+v, want the new store", rws)
			}
			waitFor(t, "the remote-write queue's metrics", func() bool {
				_, ok := testenv.Value(t, s.o.Registry, signal.RemoteWriteQueueCapacity.Name, nil)
				return ok
			})
		}},
	} {
		t.Run(c.key, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "kvwatch.yml")
			writeFile(t, f, base)
			s, url := started(t, f)
			writeFile(t, f, base+c.after)
			resp, err := http.Post(url+strings.TrimPrefix(serve.PathReload, "/"), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("reload = %d: %s", resp.StatusCode, b)
			}
			if got, _ := testenv.Value(t, s.o.Registry, signal.ConfigReloadSuccess.Name, nil); got != 1 {
				t.Errorf("%s = %g after a good reload, want 1", signal.ConfigReloadSuccess.Name, got)
			}
			c.check(t, s, url)
		})
	}
}

// A reload that any component refuses changes no component: the rules,
// the UI and the targets keep the old thresholds, the reload gauge says 0
// and the error names the key and why.
func TestFailedReloadKeepsTheOldConfigEverywhere(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t))
	f := filepath.Join(t.TempDir(), "kvwatch.yml")
	base := fmt.Sprintf("targets:\n  - {name: a, url: %q}\n", eng.URL)
	writeFile(t, f, base)
	s, url := started(t, f)
	for _, c := range []struct {
		name, yml, want string
	}{
		// Valid as a file, refused by the history: it is on and a
		// reload cannot turn it off.
		{"component refuses", base + "alerts: {kv_usage_warning: 0.77}\nhistory: {retention: 0s}\n",
			"history: history.retention 0s: history is on and cannot be turned off by a reload; restart serve to turn it off"},
		// Refused by the config check, with its line.
		{"config refuses", base + "alerts: {kv_usage_warning: 0.77, kv_usage_critical: 0.5}\n", "kv_usage_critical"},
	} {
		t.Run(c.name, func(t *testing.T) {
			writeFile(t, f, c.yml)
			err := s.Reload(t.Context())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Reload error = %v, want one saying %q", err, c.want)
			}
			if got, _ := testenv.Value(t, s.o.Registry, signal.ConfigReloadSuccess.Name, nil); got != 0 {
				t.Errorf("%s = %g after a failed reload, want 0", signal.ConfigReloadSuccess.Name, got)
			}
			if q, _ := ruleQuery(t, url, "KVCacheUsageHigh"); !strings.HasSuffix(q, "> 0.9") {
				t.Errorf("rules: KVCacheUsageHigh = %q, want the old threshold 0.9", q)
			}
			if got := uiSettings(t, url)["kv_usage_warning"]; got != 0.9 {
				t.Errorf("web UI: kv_usage_warning = %v, want the old 0.9", got)
			}
			if got := s.Daemon().Setup().PlanOptions().Threshold(); got != 0.9 {
				t.Errorf("targets: planning threshold = %g, want the old 0.9", got)
			}
			if got := s.History().Settings().Retention; got != time.Hour {
				t.Errorf("history: retention = %s, want the old 1h", got)
			}
			if got := s.Config().Config.Alerts.KVUsageWarning; got != 0.9 {
				t.Errorf("config in effect: kv_usage_warning = %g, want the old 0.9", got)
			}
		})
	}
	writeFile(t, f, base+"alerts: {kv_usage_warning: 0.77}\n")
	if err := s.Reload(t.Context()); err != nil {
		t.Fatalf("a good reload after failed ones: %v", err)
	}
	if got, _ := testenv.Value(t, s.o.Registry, signal.ConfigReloadSuccess.Name, nil); got != 1 {
		t.Errorf("%s = %g after a good reload, want 1", signal.ConfigReloadSuccess.Name, got)
	}
}

// An alert that fires keeps firing over a reload that keeps its rule (as
// in Prometheus), instead of starting over as pending.
func TestReloadKeepsAlertState(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t))
	f := filepath.Join(t.TempDir(), "kvwatch.yml")
	// The page's usage is above 0.01: KVCacheUsageHigh is due at once.
	base := fmt.Sprintf("targets:\n  - {name: a, url: %q}\nglobal: {scrape_interval: 1s, evaluation_interval: 1s}\n", eng.URL)
	writeFile(t, f, base+"alerts: {kv_usage_warning: 0.01, kv_usage_warning_for: 0s}\n")
	s, _ := started(t, f)
	firing := func() bool {
		for _, a := range s.Rules().Alerts() {
			if a.Labels.Get("alertname") == "KVCacheUsageHigh" && a.State == alerting.StateFiring {
				return true
			}
		}
		return false
	}
	waitFor(t, "KVCacheUsageHigh to fire", firing)
	writeFile(t, f, base+"alerts: {kv_usage_warning: 0.02, kv_usage_warning_for: 0s}\n")
	if err := s.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !firing() {
		t.Errorf("KVCacheUsageHigh is not firing right after the reload: %+v", s.Rules().Alerts())
	}
}

// Assembling serve leaves the process's GOGC alone; only the run sets it,
// and restores it when it returns.
func TestServeSetsGOGCOnlyWhileRunning(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: serve leaves it alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	testenv.StateDir(t)
	srv, err := New(Options{Sources: config.Sources{Extra: []config.Target{{URL: "http://127.0.0.1:1"}}},
		ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gogc(); got != 77 {
		t.Fatalf("GOGC after assembling serve = %d, want 77 (unchanged)", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	waitFor(t, "GOGC to be set while serve runs with history", func() bool { return gogc() == HistoryGCPercent })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := gogc(); got != 77 {
		t.Errorf("GOGC after serve returned = %d, want 77 (restored)", got)
	}
}

func gogc() int {
	old := debug.SetGCPercent(100)
	debug.SetGCPercent(old)
	return old
}

// Every component that reads the config is on the reload list.
func TestComponents(t *testing.T) {
	testenv.StateDir(t)
	srv, err := New(Options{Sources: config.Sources{Extra: []config.Target{{URL: "http://127.0.0.1:1"}}},
		ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Daemon().Close()
	want := []string{"discovery", "targets", "history", "rules", "projection", "web UI", "remote write"}
	if got := srv.Components(); !slices.Equal(got, want) {
		t.Errorf("components = %v, want %v", got, want)
	}
}

// /probe reads through the pipeline of the config in effect, as the
// target loops do: its body limit and its planning threshold (the probe
// used to plan with 0.90 whatever the config said).
func TestProbeReadsTheConfigInEffect(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t))
	// The page: 750 of 2,000 tokens used (37.5 %) with 3 requests queued.
	for _, c := range []struct {
		yml string
		// want is the line of the series prefix that ends in " 1"
		// and holds the label; no label: no such line.
		prefix, label string
	}{
		{"", `kvwatch_limiting_factor{`, `factor="queue"`},
		{"alerts: {kv_usage_warning: 0.3}\n", `kvwatch_limiting_factor{`, `factor="kv"`},
		{"global: {body_size_limit: 200B}\n", `kvwatch_target_up{`, ""},
	} {
		f := filepath.Join(t.TempDir(), "kvwatch.yml")
		writeFile(t, f, c.yml+"probe: {allow: [127.0.0.1]}\ntargets: [{name: a, url: '"+eng.URL+"'}]\n")
		_, url := started(t, f)
		resp, err := http.Get(url + "probe?target=" + eng.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var one []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, c.prefix) && strings.HasSuffix(l, " 1") {
				one = append(one, l)
			}
		}
		switch {
		case c.label == "" && len(one) != 0:
			t.Errorf("/probe with %q: %v, want none at 1\n%s", c.yml, one, b)
		case c.label != "" && (len(one) != 1 || !strings.Contains(one[0], c.label)):
			t.Errorf("/probe with %q: %v, want one %s...%s...} 1\n%s", c.yml, one, c.prefix, c.label, b)
		}
	}
}
