package alerting

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// TestStatePoolAlertReadsBinding: serve evaluates the stack's state-pool
// alert over its own history, whose series carry no job or instance, and
// its description reads kvwatch_binding_pool through the template's query
// as promtool does. Three hybrid servers hold their state pool at 95 % for
// 12m (above the 0.90 warning for its 10m): hyb-0's Mamba pool caps its
// concurrency, hyb-1's SWA pool does not (KV tokens do), and hyb-2 has no
// binding series. dense-0, a model without a state pool at 95 % KV usage,
// has no state-pool alert.
func TestStatePoolAlertReadsBinding(t *testing.T) {
	st := history.New(history.Options{Retention: 2 * time.Hour})
	m, err := New(Options{Groups: stackRules(), Storage: st, ExternalURL: "http://127.0.0.1:9477/", ResendDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	add := func(ms int64, v float64, name string, l ...string) {
		st.Append(labels.FromStrings(append([]string{model.MetricNameLabel, name}, l...)...), ms, v)
	}
	type server struct{ name, pool, binds string }
	servers := []server{{"hyb-0", "mamba", "mamba_slots"}, {"hyb-1", "swa", "kv_tokens"}, {"hyb-2", "mamba", ""}}
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for ts := start; !ts.After(start.Add(12 * time.Minute)); ts = ts.Add(15 * time.Second) {
		ms := ts.UnixMilli()
		for _, s := range servers {
			id := []string{signal.LabelServer, s.name, signal.LabelRole, "decode"}
			add(ms, 0.95, signal.KVPoolUsageRatio.Name, append(id, signal.LabelPoolType, s.pool, signal.LabelKVTier, "gpu")...)
			add(ms, 0.5, signal.KVUsageRatio.Name, id...)
			if s.binds == "" {
				continue
			}
			for _, b := range []string{"running_limit", "kv_tokens", "mamba_slots", "swa_tokens"} {
				v := 0.0
				if b == s.binds {
					v = 1
				}
				add(ms, v, signal.BindingPool.Name, append(id, signal.LabelBinding, b)...)
			}
		}
		add(ms, 0.95, signal.KVUsageRatio.Name, signal.LabelServer, "dense-0", signal.LabelRole, "decode")
		m.EvalAt(context.Background(), ts)
	}
	want := map[string]string{
		"hyb-0": "The mamba state pool of hyb-0 is 95% full (warning above 90% for 10m). kvwatch_binding_pool names this pool as what caps the server's concurrency: " +
			"the state pool, not the KV cache, limits how many requests run at once. Run fewer requests at once or give the state pool more room; more KV does not help.",
		"hyb-1": "The swa state pool of hyb-1 is 95% full (warning above 90% for 10m). kvwatch_binding_pool names KV tokens as what caps the server's concurrency, not this pool.",
		"hyb-2": "The mamba state pool of hyb-2 is 95% full (warning above 90% for 10m). What caps the server's concurrency is unknown (no kvwatch_binding_pool).",
	}
	got := map[string]string{}
	for _, a := range m.Alerts() {
		if a.Labels.Get("alertname") != stack.AlertStateHigh {
			continue
		}
		if a.State != StateFiring {
			t.Errorf("%s: %s, want firing after 12m above the warning", a.Labels.Get(signal.LabelServer), a.State)
		}
		got[a.Labels.Get(signal.LabelServer)] = a.Annotations.Get("description")
	}
	for s, w := range want {
		if got[s] != w {
			t.Errorf("%s: description\n%q\nwant\n%q", s, got[s], w)
		}
	}
	if d, ok := got["dense-0"]; ok {
		t.Errorf("dense-0 (no state pool) has a state-pool alert: %q", d)
	}
}
