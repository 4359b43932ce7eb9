package catalog_test

import (
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/catalog"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestEntriesAreComplete(t *testing.T) {
	c := catalog.Default()
	engines := map[string]bool{}
	for _, e := range c.Engines() {
		engines[e.Name] = true
	}
	for _, m := range c.Metrics() {
		if m.Source == "" || !engines[m.Engine] || m.Type == "" {
			t.Errorf("%s: engine %q, type %q, source %q: every entry needs a known engine, a type and a source", m.Name, m.Engine, m.Type, m.Source)
		}
		// prometheus_client adds _total to every counter; Rust's metrics
		// crate (TGI, the gateway) and hand-written pages do not.
		if m.Type == catalog.Counter && c.PythonClient(m.Engine) && !strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: a %s counter is exposed with _total", m.Name, m.Engine)
		}
	}
	for _, r := range c.Renames() {
		if r.Source == "" || r.Version == "" {
			t.Errorf("rename %s → %s: needs a version and a source", r.Old, r.New)
		}
		if r.New != "" && len(c.Lookup(r.New)) == 0 {
			t.Errorf("rename %s → %s: the new name is not in the catalog", r.Old, r.New)
		}
		if r.Deprecated && len(c.Family(r.Old)) == 0 {
			t.Errorf("rename %s → %s: deprecated, so still exposed, but the old name is not in the catalog", r.Old, r.New)
		}
		if r.Differs != "" && r.New == "" {
			t.Errorf("rename %s: Differs %q says how a new name differs, but there is none", r.Old, r.Differs)
		}
		if len(c.Lookup(r.Old)) > 0 {
			for _, m := range c.Family(r.Old) {
				if m.Current() {
					t.Errorf("rename %s → %s: the old name is listed as current (Until empty)", r.Old, r.New)
				}
			}
		}
	}
}

// TestChangesAreComplete: a name whose meaning changed is a current
// family, with its version, source, note and a current name to use instead.
func TestChangesAreComplete(t *testing.T) {
	c := catalog.Default()
	if len(c.Changes()) == 0 {
		t.Fatal("Default() has no meaning changes; sglang:token_usage (#22555) is one")
	}
	for _, ch := range c.Changes() {
		if ch.Source == "" || ch.Version == "" || ch.Note == "" {
			t.Errorf("change of %s: needs a version, a note and a source", ch.Name)
		}
		for _, n := range []string{ch.Name, ch.Use} {
			fam := c.Family(n)
			if n != "" && (len(fam) == 0 || !fam[0].Current() || fam[0].Engine != ch.Engine) {
				t.Errorf("change of %s: %s is not a current %s family of the catalog", ch.Name, n, ch.Engine)
			}
		}
		if got := c.ChangesOf(ch.Name); len(got) == 0 || got[0] != ch {
			t.Errorf("ChangesOf(%s) = %+v, want %+v", ch.Name, got, ch)
		}
	}
}

// TestKnowsWhatTheAdaptersRead: every name an adapter reads is in the
// catalog (its canonical colon form, or the sample of a known family).
func TestKnowsWhatTheAdaptersRead(t *testing.T) {
	c := catalog.Default()
	for _, a := range engine.NewRegistry().Adapters() {
		for _, n := range a.MetricNames() {
			if len(c.Lookup(n)) == 0 && len(c.RenamesOf(n)) == 0 {
				t.Errorf("adapter %s reads %s, which the catalog does not know", a.Name(), n)
			}
		}
	}
}

// TestKnowsEverySimulatedFamily: the simulator writes its pages with its
// own code from the engines' sources; every sample name on them must
// resolve in the catalog (the SGLang server with metric_prefix sglang_ in
// the canonical colon form).
func TestKnowsEverySimulatedFamily(t *testing.T) {
	cl := testenv.Builtin(t, "mixed", sim.Options{Seed: 1, ManualClock: true})
	c := catalog.Default()
	for _, ep := range cl.Endpoints() {
		page := testenv.Page(t, ep)
		for _, n := range page.Names() {
			exposed := page.Samples(n)[0].Labels.Get(model.MetricNameLabel)
			if len(c.Lookup(n)) == 0 && len(c.RenamesOf(n)) == 0 {
				t.Errorf("%s (%s) exposes %s, which the catalog does not know", ep.Name, ep.Engine, exposed)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	c := catalog.Default()
	for _, tc := range []struct {
		sample, family, suffix string
	}{
		{"vllm:e2e_request_latency_seconds_bucket", "vllm:e2e_request_latency_seconds", "_bucket"},
		{"vllm:num_preemptions_created", "vllm:num_preemptions_total", "_created"},
		{"tgi_request_skipped_tokens_count", "tgi_request_skipped_tokens", "_count"},
		{"sglang:token_usage", "sglang:token_usage", ""},
	} {
		ss := c.Lookup(tc.sample)
		if len(ss) == 0 || ss[0].Metric.Name != tc.family || ss[0].Suffix != tc.suffix {
			t.Errorf("Lookup(%s) = %+v, want family %s suffix %q", tc.sample, ss, tc.family, tc.suffix)
		}
	}
	if ss := c.Lookup("vllm:kv_cache_usage_perc_bucket"); len(ss) != 0 {
		t.Errorf("Lookup of a gauge's _bucket = %+v, want nothing", ss)
	}
	r := c.RenamesOf("vllm:time_per_output_token_seconds_sum")
	if len(r) != 1 || r[0].New != "vllm:inter_token_latency_seconds_sum" {
		t.Errorf("RenamesOf(histogram _sum) = %+v, want the family's rename with _sum", r)
	}
	// finished → completed (0.12.1), then completed split into succeeded
	// and failed (0.12.3): a chain of two ending in a removal.
	chain := c.Final(c.RenamesOf("lmdeploy:num_requests_finished")[0])
	if len(chain) != 2 || chain[0].New != "lmdeploy:num_requests_completed" || chain[1].New != "" || !strings.Contains(chain[1].Note, "lmdeploy:num_requests_succeeded") {
		t.Errorf("Final(lmdeploy:num_requests_finished) = %+v, want finished → completed, then a split", chain)
	}
}
