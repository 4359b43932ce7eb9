package serve

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestDriftSentinelEndToEnd: serve scrapes the simulator's PD SGLang
// cluster, its prefill server at the version before sglang#24341. A long
// steady run changes nothing: every kvwatch_target_changes_total is 0, no
// page warns, nothing is logged. The simulator then upgrades the prefill
// server in place to 0.5.16 (POST /-/sim/version): its fingerprint (the
// bootstrap queue's new name), format (OpenMetrics, which kvwatch asks
// for first and 0.5.16's prometheus_client answers) and escaping (it
// declares allow-utf-8) change once each, kvwatch_target_info says so,
// the report warns naming the change and the queue's rename, serve logs
// it once, and the decode server, untouched, stays silent.
func TestDriftSentinelEndToEnd(t *testing.T) {
	cl := testenv.Builtin(t, "pd-sglang", sim.Options{Seed: 1, ManualClock: true, ListenHost: "127.0.0.1"})
	cl.Advance(time.Minute)
	if err := cl.SetVersion("prefill", sim.VersionSGLangBefore); err != nil {
		t.Fatal(err)
	}
	var prefillURL string
	cfg := configWith(t)
	for _, ep := range cl.Endpoints() {
		if ep.Name == "prefill" || ep.Name == "decode" {
			cfg.Targets = append(cfg.Targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, KVUnified: ep.KVUnified})
		}
		if ep.Name == "prefill" {
			prefillURL = ep.URL
		}
	}
	var logs testenv.Buffer
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: cfg}), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	g := d.Gatherer()
	scrapes := func(target string) float64 { // 0 before the first
		n := 0.0
		for _, v := range series(t, g, signal.TargetScrapes.Name, map[string]string{signal.LabelServer: target}) {
			n += v
		}
		return n
	}
	changes := func(target string) map[string]float64 {
		out := map[string]float64{}
		for _, what := range signal.Changes {
			out[what] = one(t, g, signal.TargetChanges.Name, map[string]string{signal.LabelServer: target, signal.LabelWhat: what})
		}
		return out
	}
	dialectWarnings := func(target string) []string {
		var out []string
		for _, s := range d.Report().Servers {
			if s.Server != nil && s.Name == target {
				for _, w := range s.Server.Warnings {
					if w.Reason == kv.WarnDialect {
						out = append(out, w.Detail)
					}
				}
			}
		}
		return out
	}
	info := func(target string) map[string]float64 {
		return series(t, g, signal.TargetInfo.Name, map[string]string{signal.LabelServer: target})
	}
	none := map[string]float64{signal.ChangeEngine: 0, signal.ChangeVersion: 0, signal.ChangeFingerprint: 0, signal.ChangeFormat: 0, signal.ChangeEscaping: 0}
	equal := func(a, b map[string]float64) bool {
		for k, v := range b {
			if a[k] != v {
				return false
			}
		}
		return len(a) == len(b)
	}

	// The steady run: 5 scrapes of each target.
	waitFor(t, "5 scrapes of each target", func() bool { return scrapes("prefill") >= 5 && scrapes("decode") >= 5 })
	for _, target := range []string{"prefill", "decode"} {
		if c := changes(target); !equal(c, none) {
			t.Errorf("%s after a steady run: changes %v, want all 0", target, c)
		}
		if w := dialectWarnings(target); w != nil {
			t.Errorf("%s after a steady run: warnings %q", target, w)
		}
	}
	before := info("prefill")
	if len(before) != 1 {
		t.Fatalf("prefill target info %v, want one series", before)
	}
	for k := range before {
		for _, part := range []string{"engine=sglang", "format=PrometheusText0.0.4", "escaping=none"} {
			if !strings.Contains(k, part) {
				t.Errorf("prefill before the upgrade: info %s, want %s", k, part)
			}
		}
	}

	resp, err := http.Post(prefillURL+"/-/sim/version?version="+sim.VersionSGLang0516, "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	resp.Body.Close()
	waitFor(t, "the upgrade to be seen", func() bool { return changes("prefill")[signal.ChangeFingerprint] > 0 })
	at := scrapes("prefill")
	waitFor(t, "5 more scrapes", func() bool { return scrapes("prefill") >= at+5 && scrapes("decode") >= at+5 })

	want := map[string]float64{signal.ChangeEngine: 0, signal.ChangeVersion: 0, signal.ChangeFingerprint: 1, signal.ChangeFormat: 1, signal.ChangeEscaping: 1}
	if c := changes("prefill"); !equal(c, want) {
		t.Errorf("prefill after the upgrade: changes %v, want %v", c, want)
	}
	after := info("prefill")
	for k := range after {
		if _, same := before[k]; same || !strings.Contains(k, "escaping=allow-utf-8") || !strings.Contains(k, "format=OpenMetricsText1.0.0") || len(after) != 1 {
			t.Errorf("prefill after the upgrade: info %v (before %v), want one series with OpenMetricsText1.0.0, allow-utf-8 and another fingerprint", after, before)
		}
	}
	w := dialectWarnings("prefill")
	if len(w) != 1 {
		t.Fatalf("prefill after the upgrade: warnings %q, want one", w)
	}
	for _, part := range []string{"format PrometheusText0.0.4 → OpenMetricsText1.0.0", "escaping none → allow-utf-8", "stores sglang_x where it stored sglang:x", "new: sglang:num_prefill_bootstrap_queue_reqs; gone: sglang:num_prefill_prealloc_queue_reqs", "sglang#24341"} {
		if !strings.Contains(w[0], part) {
			t.Errorf("warning %q does not say %q", w[0], part)
		}
	}
	if c := changes("decode"); !equal(c, none) {
		t.Errorf("decode: changes %v, want all 0", c)
	}
	if w := dialectWarnings("decode"); w != nil {
		t.Errorf("decode: warnings %q", w)
	}
	if n := strings.Count(logs.String(), "target's page changed"); n != 1 {
		t.Errorf("logged the change %d times, want once:\n%s", n, logs.String())
	}
}

// TestVersionUpgradeEndToEnd: serve scrapes the simulator's vLLM at 0.25.1
// (before vllm#48860, whose page is 0.26.0's): kvwatch_target_info
// carries the version /version answers and a steady run changes nothing.
// The simulator upgrades it to 0.26.0 in place (its process restarts,
// the page's names do not change): the version, and only the version,
// changes once, kvwatch_target_info says 0.26.0, and the report warns
// naming both releases and vllm#48860.
func TestVersionUpgradeEndToEnd(t *testing.T) {
	cl := testenv.Builtin(t, "vllm-dp", sim.Options{Seed: 1, ManualClock: true, ListenHost: "127.0.0.1"})
	cl.Advance(time.Minute)
	if err := cl.SetVersion("vllm", sim.VersionVLLMBefore48860); err != nil {
		t.Fatal(err)
	}
	cfg := configWith(t)
	ep := cl.Endpoints()[0]
	cfg.Targets = append(cfg.Targets, config.Target{Name: "vllm", URL: ep.URL + ep.MetricsPath})
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: cfg})})
	g := d.Gatherer()
	sel := map[string]string{signal.LabelServer: "vllm"}
	scrapes := func() float64 {
		n := 0.0
		for _, v := range series(t, g, signal.TargetScrapes.Name, sel) {
			n += v
		}
		return n
	}
	changes := func() map[string]float64 {
		out := map[string]float64{}
		for _, what := range signal.Changes {
			out[what] = one(t, g, signal.TargetChanges.Name, map[string]string{signal.LabelServer: "vllm", signal.LabelWhat: what})
		}
		return out
	}
	version := func() string {
		info := series(t, g, signal.TargetInfo.Name, sel)
		if len(info) != 1 {
			t.Fatalf("target info %v, want one series", info)
		}
		for k := range info {
			for _, part := range strings.Split(k, ",") {
				if v, ok := strings.CutPrefix(part, signal.LabelVersion+"="); ok {
					return v
				}
			}
		}
		return ""
	}
	warning := func() string {
		for _, s := range d.Report().Servers {
			if s.Server != nil && s.Name == "vllm" {
				for _, w := range s.Server.Warnings {
					if w.Reason == kv.WarnDialect {
						return w.Detail
					}
				}
			}
		}
		return ""
	}

	waitFor(t, "5 scrapes", func() bool { return scrapes() >= 5 })
	if v := version(); v != "0.25.1" {
		t.Errorf("before the upgrade: version label %q, want 0.25.1", v)
	}
	for what, n := range changes() {
		if n != 0 {
			t.Errorf("steady run: %s changed %g times", what, n)
		}
	}
	if w := warning(); w != "" {
		t.Errorf("steady run: warning %q", w)
	}

	cl.Advance(time.Minute) // the upgrade restarts the process a minute on
	if err := cl.SetVersion("vllm", sim.VersionCurrent); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the upgrade to be seen", func() bool { return changes()[signal.ChangeVersion] > 0 })
	at := scrapes()
	waitFor(t, "5 more scrapes", func() bool { return scrapes() >= at+5 })
	for what, n := range changes() {
		if want := map[string]float64{signal.ChangeVersion: 1}[what]; n != want {
			t.Errorf("after the upgrade: %s changed %g times, want %g", what, n, want)
		}
	}
	if v := version(); v != "0.26.0" {
		t.Errorf("after the upgrade: version label %q, want 0.26.0", v)
	}
	w := warning()
	for _, part := range []string{"version 0.25.1 → 0.26.0", "vllm#48860", "prefix hit ratio steps"} {
		if !strings.Contains(w, part) {
			t.Errorf("warning %q does not say %q", w, part)
		}
	}
}
