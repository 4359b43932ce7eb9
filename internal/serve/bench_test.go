package serve

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// BenchmarkScrapeSGLangTP8 measures one scrape of a simulated SGLang server
// with 8 TP ranks through the daemon's scrape path (fetch, parse, normalize,
// report row, state update). See docs/benchmarks.md ("serve").
func BenchmarkScrapeSGLangTP8(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := simulatedSGLangTP8(ctx, b)
	url := ep.URL + ep.MetricsPath
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	d, err := New(Options{Pipeline: pipe(b, config.Sources{Config: configWith(b, url)}), ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.closeListeners()
	stopped, stop := context.WithCancel(context.Background())
	stop()
	d.apply(stopped, d.setup.Load())
	d.stopAll()
	st := d.states[d.order[0]]
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, ok := d.scrapeOnce(ctx, st.target)
		if !ok || !res.OK() {
			b.Fatalf("scrape failed: %v", res.Err)
		}
		d.record(st, res)
	}
}

// BenchmarkMetrics2000 measures one /metrics exposition of 2,000 SGLang TP=8
// servers (the kvwatch_* families only: what Gatherer returns, text-encoded).
func BenchmarkMetrics2000(b *testing.B) {
	d := scraped2000(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkFeed2000 measures what serve's history costs every interval at
// 2,000 SGLang TP=8 servers: walk is the collector's Walk alone (into a
// function that keeps nothing), history one full gather into a warm store
// as history.Store.Run does it with serve's feeder (Begin, Walk into
// Batch.Add, Commit), one 5 s interval later each time.
func BenchmarkFeed2000(b *testing.B) {
	d := scraped2000(b)
	b.Run("walk", func(b *testing.B) {
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			d.Walk(func(string, bool, float64, ...string) { n++ })
		}
		b.ReportMetric(float64(n)/float64(b.N), "samples/op")
	})
	b.Run("history", func(b *testing.B) {
		st := history.New(history.Options{Retention: time.Hour, Interval: 5 * time.Second})
		t := time.Now()
		gather := func() {
			t = t.Add(5 * time.Second)
			bt := st.Begin(t)
			d.Walk(bt.Add)
			bt.Commit()
		}
		// The series exist from the first gather on, and the store is
		// warm after the second.
		gather()
		gather()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			gather()
		}
		b.ReportMetric(float64(st.Stats().Series), "series")
	})
}

// scraped2000 returns a stopped daemon with 2,000 targets, each scraped
// once from one simulated SGLang TP=8 server.
func scraped2000(b *testing.B) *Daemon {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ep := simulatedSGLangTP8(ctx, b)
	urls := make([]string, 2000)
	for i := range urls {
		urls[i] = ep.URL + ep.MetricsPath
	}
	d, err := New(Options{Pipeline: pipe(b, config.Sources{Config: configWith(b, urls...)}), ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.closeListeners)
	stopped, stop := context.WithCancel(context.Background())
	stop()
	d.apply(stopped, d.setup.Load())
	d.stopAll()
	for _, n := range d.order {
		st := d.states[n]
		res, ok := d.scrapeOnce(ctx, st.target)
		if !ok || !res.OK() {
			b.Fatalf("scrape failed: %v", res.Err)
		}
		d.record(st, res)
	}
	return d
}

// simulatedSGLangTP8 starts one simulated SGLang server with 8 TP ranks on
// loopback until ctx ends, and returns its endpoint.
func simulatedSGLangTP8(ctx context.Context, b *testing.B) sim.Endpoint {
	b.Helper()
	sc, err := sim.GeneratedScenario(1, sim.EngineSGLang, 8)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := sim.NewCluster(sc, sim.Options{Seed: 1, Speed: 1, Tick: time.Second, ListenHost: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	return cl.Endpoints()[0]
}
