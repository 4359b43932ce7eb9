package alerting

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// aggServer is one simulated server of TestAggregatesEqualDirect.
type aggServer struct {
	name, cluster, pool, role string
	capacity                  float64
	used                      float64
	counters                  [5]float64
	// noCapacity: used tokens without capacity (left out of the sums).
	noCapacity, demand bool
	// downFrom/downTo: target_up 0 and no KV series in between; startAt,
	// stopAt: no series at all before, after (0: never); resetAt: the
	// counters restart from 0.
	downFrom, downTo, startAt, stopAt, resetAt time.Duration
}

func (s *aggServer) down(e time.Duration) bool { return e >= s.downFrom && e < s.downTo }

// aggFleet is 36 servers: every combination of cluster c1, c2 or none and
// pool p1, p2 or none, each with a decode and a prefill server, a second
// decode server, and a router (pool p1), a cache server (p2) or a unified
// server (no pool; a usage ratio only, so no unified server reports KV at
// any level). Some are down for a while, start late, stop, reset their
// counters, or report used tokens without capacity.
func aggFleet() []*aggServer {
	var out []*aggServer
	for i := range 36 {
		cp := i % 9
		s := &aggServer{name: fmt.Sprintf("s%d", i), cluster: []string{"c1", "c2", ""}[cp%3], pool: []string{"p1", "p2", ""}[cp/3],
			role:     []string{"decode", "prefill", "decode", []string{"router", "cache", "unified"}[cp/3]}[i/9],
			capacity: float64(1000 * (i%7 + 1)), demand: i%2 == 0, noCapacity: i%7 == 3}
		s.used = math.Floor(s.capacity / 3) // token counts are whole numbers
		switch {
		case i%5 == 1:
			s.downFrom, s.downTo = 10*time.Minute, 25*time.Minute
		case i%11 == 3:
			s.startAt = 20 * time.Minute
		case i%13 == 4:
			s.stopAt = 40 * time.Minute
		}
		if i%6 == 2 {
			s.resetAt = 30 * time.Minute
		}
		out = append(out, s)
	}
	return out
}

// gather records every live server's series at elapsed into b. A few
// values are NaN for a while: a NaN sums to NaN at every level, directly
// or through the level below.
func gatherAgg(b *history.Batch, fleet []*aggServer, elapsed time.Duration, rnd *rand.Rand) {
	for i, s := range fleet {
		if elapsed < s.startAt || (s.stopAt > 0 && elapsed >= s.stopAt) {
			continue
		}
		id := []string{signal.LabelServer, s.name, signal.LabelCluster, s.cluster, signal.LabelPool, s.pool, signal.LabelRole, s.role}
		add := func(name string, counter bool, v float64, extra ...string) {
			b.Add(name, counter, v, append(slices.Clone(id), extra...)...)
		}
		nan := func(from, to time.Duration, v float64) float64 {
			if elapsed >= from && elapsed < to {
				return math.NaN()
			}
			return v
		}
		if s.down(elapsed) {
			add(signal.TargetUp.Name, false, 0)
			continue
		}
		add(signal.TargetUp.Name, false, 1)
		switch s.role {
		case "cache":
			continue
		case "router":
			add(signal.RequestsRunning.Name, false, float64(rnd.IntN(30)))
			add(signal.RequestsQueued.Name, false, float64(rnd.IntN(10)), signal.LabelQueue, signal.QueueWaiting)
			continue
		case "unified":
			add(signal.KVUsageRatio.Name, false, 0.4)
			continue
		}
		s.used = min(max(s.used+float64(rnd.IntN(201)-100), 0), s.capacity)
		used, avail := s.used, s.capacity-s.used
		switch i {
		case 5:
			used = nan(33*time.Minute, 36*time.Minute, used)
		case 7:
			avail = nan(12*time.Minute, 14*time.Minute, avail)
		}
		add(signal.KVUsedTokens.Name, false, used)
		if !s.noCapacity {
			add(signal.KVCapacityTokens.Name, false, s.capacity)
		}
		add(signal.KVUsageRatio.Name, false, s.used/s.capacity)
		add(signal.KVAvailableTokens.Name, false, avail)
		if s.demand {
			add(signal.KVDemandTokens.Name, false, float64(rnd.IntN(3000)))
		}
		for _, r := range []string{"1024", "8192"} {
			add(signal.KVHeadroomRequests.Name, false, float64(rnd.IntN(40)), signal.LabelRequest, r)
		}
		add(signal.RequestsRunning.Name, false, float64(rnd.IntN(30)))
		for _, q := range []string{signal.QueueWaiting, signal.QueueTransfer} {
			add(signal.RequestsQueued.Name, false, float64(rnd.IntN(10)), signal.LabelQueue, q)
		}
		for j, m := range equivCounters {
			if s.resetAt > 0 && elapsed == s.resetAt {
				s.counters[j] = 0
			}
			s.counters[j] += float64(rnd.IntN(5001))
			add(m.Name, true, s.counters[j])
		}
	}
}

// TestAggregatesEqualDirect: the stack's recording rules, whose cluster
// and fleet levels sum the level below's recorded series and whose
// planning rules read the pool sums, record the same series with the same
// values as the rules before, which summed every server's raw series at
// every level (testdata/recording-direct.yml), over an hour of 5s gathers
// of aggFleet evaluated every 15s, compared once a minute. Both are run as
// serve runs them (server rules on demand), with the outputs stored twice:
// exactly, and in serve's history, which rounds rates and ratios to 21
// significant bits.
//
// Stored exactly, every series is equal, and bit for bit except the rate
// sums (and ratios of them), which add the same rates in another order
// (1e-12 relative). In the history, the cluster and fleet rates sum the
// lower level's rounded rates, then are rounded themselves. With ε = 2^-21,
// the bound of one rounding: a cluster rate is within 3ε of what the
// direct rules stored (the pool rates' rounding, and each side's own), a
// fleet rate within 4ε (the cluster rates carry 2ε), and a hit ratio, a
// quotient of two such rates rounded on each side, within 10ε. Every other
// series is equal bit for bit, in the history too.
func TestAggregatesEqualDirect(t *testing.T) {
	directGroups, err := LoadFiles([]string{"testdata/recording-direct.yml"})
	if err != nil {
		t.Fatal(err)
	}
	newGroups := stack.RecordingRules(stack.Options{}).Groups
	in := history.New(history.Options{Retention: 2 * time.Hour, Interval: 5 * time.Second})
	type run struct {
		mode        string
		direct, cur *Manager
		dOut, cOut  Storage
		// maxError and maxName: the largest relative difference of a rate
		// (false) and of a ratio of rates (true) in the history, and where.
		maxError map[bool]float64
		maxName  map[bool]string
		// rates and differ count the cluster and fleet rate samples
		// compared, and those not bit for bit equal.
		rates, differ int
	}
	var runs []*run
	for _, mode := range []string{"exact", "history"} {
		r := &run{mode: mode, maxError: map[bool]float64{}, maxName: map[bool]string{}}
		if mode == "exact" {
			r.dOut, r.cOut = &exactStore{}, &exactStore{}
		} else {
			opts := history.Options{Retention: 2 * time.Hour, Interval: 15 * time.Second}
			r.dOut, r.cOut = history.New(opts), history.New(opts)
		}
		if r.direct, err = New(Options{Groups: directGroups, Storage: mergedStore{in, r.dOut}}); err != nil {
			t.Fatal(err)
		}
		if r.cur, err = New(Options{Groups: newGroups, Storage: mergedStore{in, r.cOut}}); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	stored := func(m *Manager) []string {
		var out []string
		for _, g := range m.Groups() {
			for _, r := range g.Rules {
				if r.Type == "recording" && !r.OnDemand {
					out = append(out, r.Name)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	names := stored(runs[0].direct)
	// A rule added after the reference was written (not a rewrite of a
	// direct one) has nothing there to equal: the sim tests of package
	// stack compare the desired servers with their Go arithmetic, and the
	// projection's promtool tests (rules/kvwatch-alerts-projection.test.yml)
	// its daily peaks and their line with values worked out by hand.
	added := func(n string) bool {
		return slices.Contains([]string{stack.RecPoolDesiredServers, stack.RecPoolLoadRatio, stack.RecPoolPeakRatio, stack.RecPoolProjectedPeak}, n)
	}
	if got := slices.DeleteFunc(stored(runs[0].cur), added); !slices.Equal(got, names) {
		t.Fatalf("stored recording rules:\n now    %v\n direct %v", got, names)
	}

	instant := instantQuerier(t, testEngine())
	ctx := context.Background()
	fleet := aggFleet()
	rnd := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	compared, nans, zeros := map[string]int{}, 0, 0
	for elapsed := time.Duration(0); elapsed <= time.Hour; elapsed += 5 * time.Second {
		ts := start.Add(elapsed)
		b := in.Begin(ts)
		gatherAgg(b, fleet, elapsed, rnd)
		b.Commit()
		if elapsed%(15*time.Second) != 0 {
			continue
		}
		for _, r := range runs {
			r.direct.EvalAt(ctx, ts)
			r.cur.EvalAt(ctx, ts)
		}
		if elapsed%time.Minute != 0 {
			continue
		}
		for _, r := range runs {
			for _, name := range names {
				got := instant(mergedStore{in, r.cOut}, name, ts)
				want := instant(mergedStore{in, r.dOut}, name, ts)
				level, _, _ := strings.Cut(name, ":")
				rate := strings.Contains(name, ":rate") || strings.Contains(name, "ratio_rate")
				tol := 0.0
				switch {
				case rate && r.mode == "exact":
					tol = 1e-12
				case rate && (level == signal.LabelCluster || level == "fleet") && strings.Contains(name, "ratio"):
					tol = 10.01 * 0x1p-21
				case rate && (level == signal.LabelCluster || level == "fleet"):
					tol = 4.01 * 0x1p-21
				}
				if len(got) != len(want) {
					t.Fatalf("%s, %s at %v: %d series, direct rules %d:\n now    %v\n direct %v", r.mode, name, elapsed, len(got), len(want), got, want)
				}
				for i := range got {
					g, w := got[i], want[i]
					same := g.F == w.F || (math.IsNaN(g.F) && math.IsNaN(w.F))
					var rel float64
					if !same && tol > 0 {
						rel = math.Abs(g.F-w.F) / math.Max(math.Abs(g.F), math.Abs(w.F))
						same = rel <= tol
					}
					if !labels.Equal(g.Metric, w.Metric) || g.T != w.T || !same {
						t.Fatalf("%s, %s at %v:\n now    %v\n direct %v", r.mode, name, elapsed, g, w)
					}
					if rate && (level == signal.LabelCluster || level == "fleet") {
						r.rates++
						if g.F != w.F {
							r.differ++
						}
					}
					if rate && r.mode == "history" && rel > r.maxError[strings.Contains(name, "ratio")] {
						r.maxError[strings.Contains(name, "ratio")], r.maxName[strings.Contains(name, "ratio")] = rel, name
					}
					if math.IsNaN(w.F) {
						nans++
					}
					if w.F == 0 && (name == stack.RecReporting(signal.LabelCluster) || name == stack.RecReporting("fleet")) {
						zeros++
					}
				}
				compared[name] += len(got)
			}
		}
	}
	for _, name := range names {
		if compared[name] == 0 {
			t.Errorf("%s: no sample compared; the fixture does not exercise it", name)
		}
	}
	if nans == 0 || zeros == 0 {
		t.Errorf("compared %d NaN samples and %d cluster or fleet reporting counts of 0; want some of each", nans, zeros)
	}
	t.Logf("samples compared per rule (both modes): %v; %d NaN", compared, nans)
	t.Logf("stored exactly, %d of %d cluster and fleet rate samples differ (float rounding of the sums' other order)", runs[0].differ, runs[0].rates)
	t.Logf("in the history, %d of %d cluster and fleet rate samples differ; the largest relative difference, in units of 2^-21: a rate %.3g (%s), a ratio of rates %.3g (%s)",
		runs[1].differ, runs[1].rates, runs[1].maxError[false]/0x1p-21, runs[1].maxName[false], runs[1].maxError[true]/0x1p-21, runs[1].maxName[true])
}
