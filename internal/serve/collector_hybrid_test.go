package serve

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// TestCollectorHybrid: a hybrid server's concurrency, the pool that binds
// it, and its state pool in requests; a dense idle server has none of
// them (unknown, not 0).
func TestCollectorHybrid(t *testing.T) {
	// The Qwen3-Next page of internal/engine: KV 126,000 / 56 = 2,250 tok
	// each, 524,288 / 2,250 → 233; 96 Mamba slots, one each, 40 free;
	// min(128, 233, 96) = 96, the Mamba slots.
	hybrid := &kv.Server{Engine: "sglang", Role: kv.RoleUnified, MaxRunning: kv.Of(128),
		Signals:    kv.Signals{Capacity: kv.Of(524288), Used: kv.Of(126000), UsageRatio: kv.Of(126000.0 / 524288), Running: kv.Of(56), Queued: kv.Queues{Waiting: kv.Of(3)}},
		CachePools: []kv.CachePool{{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, Capacity: kv.DerivedOf(96), Used: kv.Of(56), UsageRatio: kv.Of(56.0 / 96)}}}
	idle := &kv.Server{Engine: "vllm", Role: kv.RoleUnified, Signals: kv.Signals{Capacity: kv.Of(1000), Used: kv.Of(0), UsageRatio: kv.Of(0), Running: kv.Of(0)}}
	var es []entry
	for name, s := range map[string]*kv.Server{"hybrid": hybrid, "idle": idle} {
		p := kv.PlanServer(s, 0, kv.Value{}, 0.9)
		es = append(es, entry{target: &scrape.Target{Name: name, Labels: map[string]string{}}, scraped: true,
			res: scrape.Result{Server: s}, role: s.Role, row: report.Server{Plan: &p}})
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newCollector(func() []entry { return es })); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range signal.Hybrid() {
			if mf.GetName() != m.Name {
				continue
			}
			for _, s := range mf.GetMetric() {
				lv := map[string]string{}
				for _, l := range s.GetLabel() {
					lv[l.GetName()] = l.GetValue()
				}
				k := mf.GetName() + "{" + lv[signal.LabelServer]
				for _, l := range m.Labels {
					k += "," + lv[l]
				}
				got[k+"}"] = value(s)
			}
		}
	}
	want := map[string]float64{
		"kvwatch_kv_capacity_requests{hybrid}":          233,
		"kvwatch_state_capacity_requests{hybrid,mamba}": 96,
		"kvwatch_state_headroom_requests{hybrid,mamba}": 40,
		"kvwatch_concurrency_requests{hybrid}":          96,
		"kvwatch_binding_pool{hybrid,mamba_slots}":      1,
		"kvwatch_binding_pool{hybrid,kv_tokens}":        0,
		"kvwatch_binding_pool{hybrid,swa_tokens}":       0,
		"kvwatch_binding_pool{hybrid,running_limit}":    0,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("hybrid series (-want +got):\n%s", d)
	}
	for k := range got {
		if strings.Contains(k, "{idle") {
			t.Errorf("the idle dense server has %s: unknown is no series", k)
		}
	}
}
