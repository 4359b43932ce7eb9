package serve

import (
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

func TestCollectorPlanning(t *testing.T) {
	mk := func(name string, role kv.Role, pool string, capacity, used, running, waiting float64) (*scrape.Target, *kv.Server) {
		u, _ := url.Parse("http://" + name + "/metrics")
		tg := &scrape.Target{Name: name, URL: u, Labels: map[string]string{config.TargetLabelCluster: "c1", config.TargetLabelPool: pool}}
		s := &kv.Server{Engine: "sglang", Role: role, Signals: kv.Signals{Capacity: kv.Of(capacity), Used: kv.Of(used),
			Running: kv.Of(running), Queued: kv.Queues{Waiting: kv.Of(waiting)}}}
		s.Rollup()
		return tg, s
	}
	tr := report.NewTracker(nil)
	var es []entry
	for _, c := range []struct {
		name                             string
		role                             kv.Role
		pool                             string
		capacity, used, running, waiting float64
	}{
		{"d0", kv.RoleDecode, "p1", 100000, 60000, 30, 0},
		{"d1", kv.RoleDecode, "p1", 100000, 20000, 10, 4},
		{"p0", kv.RolePrefill, "p2", 50000, 10000, 5, 0},
	} {
		tg, s := mk(c.name, c.role, c.pool, c.capacity, c.used, c.running, c.waiting)
		res := scrape.Result{Target: tg, Time: time.Unix(1000, 0), Server: s}
		row := tr.Update(res.Time, []scrape.Result{res}).Servers[0]
		es = append(es, entry{target: tg, scraped: true, res: res, row: row, role: c.role})
	}
	coll := newCollector(func() []entry { return es })
	coll.planOptions = func() report.PlanOptions { return report.PlanOptions{Warning: 0.9, TargetKVUsage: 0.8} }
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(coll); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "kvwatch_") {
			continue
		}
		planning := false
		for _, m := range append(signal.Planning(), signal.PoolPlanning()...) {
			planning = planning || m.Name == mf.GetName()
		}
		if !planning {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				if n := l.GetName(); n == "server" || n == "factor" || n == "role" || n == "state" || n == "binding" {
					ls = append(ls, l.GetValue())
				}
			}
			sort.Strings(ls)
			got[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	// By hand: d0 holds 60,000 for 30 requests (2,000 each), 40,000 free:
	// 20 more; d1 2,000 each, 80,000 free: 40; p0 2,000 each, 40,000
	// free: 20. Decode pool load 80,000; drain d0 (the first of two equal
	// servers): 0.9 × 100,000 − 80,000 = 10,000, ratio 0.9 − 0.8 = 0.1.
	// Saturation (0.6 × 100,000 + 0.2 × 100,000) / 200,000 = 0.4. The
	// prefill pool has one server: no drain series. Desired servers at the
	// 0.8 target: decode 80,000 over 0.8 × 100,000 is 1 server, and one
	// for N−1: 2; prefill 10,000 over 0.8 × 50,000 is 0.25, 1, and 2.
	want := map[string]float64{
		"kvwatch_kv_per_running_request_tokens{d0,decode}":  2000,
		"kvwatch_kv_per_running_request_tokens{d1,decode}":  2000,
		"kvwatch_kv_per_running_request_tokens{p0,prefill}": 2000,
		"kvwatch_kv_workload_headroom_requests{d0,decode}":  20,
		"kvwatch_kv_workload_headroom_requests{d1,decode}":  40,
		"kvwatch_kv_workload_headroom_requests{p0,prefill}": 20,
		"kvwatch_saturation_ratio{d0,decode}":               0.6,
		"kvwatch_saturation_ratio{d1,decode}":               0.2,
		"kvwatch_saturation_ratio{p0,prefill}":              0.2,
		"kvwatch_drain_margin_tokens{d0,decode}":            10000,
		"kvwatch_drain_margin_tokens{d1,decode}":            10000,
		"kvwatch_drain_margin_ratio{d0,decode}":             0.1,
		"kvwatch_drain_margin_ratio{d1,decode}":             0.1,
		"kvwatch_pool_servers{decode}":                      2,
		"kvwatch_pool_servers{prefill}":                     1,
		"kvwatch_pool_workload_headroom_requests{decode}":   60,
		"kvwatch_pool_workload_headroom_requests{prefill}":  20,
		"kvwatch_pool_saturation_ratio{decode}":             0.4,
		"kvwatch_pool_saturation_ratio{prefill}":            0.2,
		"kvwatch_pool_drain_margin_tokens{decode}":          10000,
		"kvwatch_pool_drain_margin_ratio{decode}":           0.1,
		"kvwatch_pool_desired_servers{decode}":              2,
		"kvwatch_pool_desired_servers{prefill}":             2,
	}
	for _, srv := range []struct{ name, role, factor string }{{"d0", "decode", "none"}, {"d1", "decode", "queue"}, {"p0", "prefill", "none"}} {
		for _, f := range kv.Factors() {
			ls := []string{srv.name, srv.role, string(f)}
			sort.Strings(ls)
			v := 0.0
			if string(f) == srv.factor {
				v = 1
			}
			want["kvwatch_limiting_factor{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	// Concurrency: no running limit and no state pool, so the KV's
	// requests bind: d0 and d1 100,000 / 2,000 = 50, p0 50,000 / 2,000 = 25.
	for _, srv := range []struct {
		name, role string
		n          float64
	}{{"d0", "decode", 50}, {"d1", "decode", 50}, {"p0", "prefill", 25}} {
		for _, m := range []string{"kvwatch_kv_capacity_requests", "kvwatch_concurrency_requests"} {
			ls := []string{srv.name, srv.role}
			sort.Strings(ls)
			want[m+"{"+strings.Join(ls, ",")+"}"] = srv.n
		}
		for _, b := range kv.Bindings() {
			ls := []string{srv.name, srv.role, string(b)}
			sort.Strings(ls)
			v := 0.0
			if b == kv.BindingKV {
				v = 1
			}
			want["kvwatch_binding_pool{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	// Every server holds what its running requests hold, below the
	// warning: ok, and so are both pools.
	for _, ids := range [][]string{{"d0", "decode"}, {"d1", "decode"}, {"p0", "prefill"}, {"decode"}, {"prefill"}} {
		name := signal.ServerState.Name
		if len(ids) == 1 {
			name = signal.PoolState.Name
		}
		for _, st := range kv.States() {
			ls := append(slices.Clone(ids), string(st))
			sort.Strings(ls)
			v := 0.0
			if st == kv.StateOK {
				v = 1
			}
			want[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %v", k, got[k])
		}
	}
}
