package serve

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// walkRound returns the entries of round i of TestWalkRecordsWhatGatherRecords:
// servers in two pools with plans and drains, one with cache pools, one
// with two DP ranks; a server is down every third round, one joins in
// the middle from round 4 on, values and labels change.
func walkRound(t *testing.T, tr *report.Tracker, i int) []entry {
	t.Helper()
	type srv struct {
		name, pool              string
		role                    kv.Role
		capacity, used, running float64
		down                    bool
	}
	servers := []srv{
		{"d0", "p1", kv.RoleDecode, 100000, 60000 + float64(i%4)*1000, 30, false},
		{"d1", "p1", kv.RoleDecode, 100000, 20000, 10, i%3 == 1},
		{"p0", "p2", kv.RolePrefill, 50000, 10000, 5 + float64(i%2), false},
		{"dp", "p2", kv.RolePrefill, 2000, 1000, 2, false},
	}
	if i >= 4 {
		servers = append(servers[:2], append([]srv{{"d2", "p1", kv.RoleDecode, 80000, 1000, 1, false}}, servers[2:]...)...)
	}
	at := time.Unix(1000, 0).Add(time.Duration(i) * 5 * time.Second)
	var es []entry
	for _, c := range servers {
		u, _ := url.Parse("http://" + c.name + "/metrics")
		cluster := "c1"
		if i%5 == 2 && c.name == "d0" {
			cluster = "" // an empty label value for one round
		}
		tg := &scrape.Target{Name: c.name, URL: u, Labels: map[string]string{config.TargetLabelCluster: cluster, config.TargetLabelPool: c.pool}}
		res := scrape.Result{Target: tg, Time: at, Duration: time.Millisecond, BodyBytes: 1000}
		if c.down {
			res.Err, res.Reason = errors.New("connection refused"), signal.ReasonRefused
		} else {
			s := &kv.Server{Engine: "sglang", Role: c.role, Signals: kv.Signals{Capacity: kv.Of(c.capacity), Used: kv.Of(c.used),
				Running: kv.Of(c.running), Queued: kv.Queues{Waiting: kv.Of(float64(i % 3))}}}
			switch c.name {
			case "p0":
				s.CachePools = []kv.CachePool{
					{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(8000), Used: kv.Of(4000 + float64(i)), UsageRatio: kv.DerivedOf(0.5)},
					{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs", Unit: kv.UnitBytes, Used: kv.Of(5e10)},
				}
				if i%4 == 3 {
					s.CachePools[1].Used = kv.Value{} // unknown this round
				}
			case "dp":
				s.Signals = kv.Signals{}
				s.Ranks = []kv.Rank{rank("0", "0", "0", 1000, 500), rank("1", "0", "0", 1000, 500+float64(i))}
			}
			s.Rollup()
			res.Server = s
		}
		row := tr.Update(res.Time, []scrape.Result{res}).Servers[0]
		e := entry{target: tg, scraped: true, res: res, row: row, role: c.role, scrapes: uint64(i + 1), lastSuccess: time.Unix(900, 0)}
		if c.down {
			e.failures[0] = uint64(i)
		}
		es = append(es, e)
	}
	return es
}

// What the history records from the collector's Walk (serve's feeder) is
// what it records from a Gather of the same collector, series and samples
// byte for byte (compared as snapshots), gather after gather while
// servers go down and come back, join, and change values and labels.
func TestWalkRecordsWhatGatherRecords(t *testing.T) {
	tr := report.NewTracker(nil)
	var es []entry
	coll := newCollector(func() []entry { return es })
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(coll); err != nil {
		t.Fatal(err)
	}
	opts := history.Options{Retention: time.Hour, Interval: 5 * time.Second}
	walked, gathered := history.New(opts), history.New(opts)
	dir := t.TempDir()
	snapshot := func(st *history.Store, name string) []byte {
		path := filepath.Join(dir, name)
		if err := st.WriteSnapshot(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t1 := time.Unix(1_800_000_000, 0)
	for i := range 12 {
		es = walkRound(t, tr, i)
		t1 = t1.Add(5 * time.Second)
		b := walked.Begin(t1)
		coll.walk(b.Add)
		b.Commit()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		gathered.AppendFamilies(t1, mfs)
		w, g := snapshot(walked, "walked"), snapshot(gathered, "gathered")
		if !bytes.Equal(w, g) {
			t.Fatalf("round %d: the history of Walk (%d series) differs from that of Gather (%d series)", i,
				walked.Stats().Series, gathered.Stats().Series)
		}
	}
	if n := walked.Stats().Series; n < 100 {
		t.Errorf("only %d series recorded", n)
	}
	t.Logf("%d series", walked.Stats().Series)
}
