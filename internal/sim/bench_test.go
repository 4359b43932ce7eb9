package sim

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkScale2000 serves 2,000 SGLang TP=8 endpoints from one process and
// measures one /metrics request (round robin over the endpoints, rendered
// once per tick) plus one load-model step of the whole fleet per 2,000
// requests, as a scrape every tick would.
func BenchmarkScale2000(b *testing.B) {
	sc, err := GeneratedScenario(2000, EngineSGLang, 8)
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 1, ManualClock: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Advance(5 * time.Minute)
	eps := c.Endpoints()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxIdleConns: 4000}}
	var bytes int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(eps) == 0 {
			c.Advance(time.Second)
		}
		resp, err := client.Get(eps[i%len(eps)].URL + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		bytes += n
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/page")
}

// BenchmarkStep2000 measures one load-model step of 2,000 servers.
func BenchmarkStep2000(b *testing.B) {
	sc, _ := GeneratedScenario(2000, EngineSGLang, 8)
	c, _ := NewCluster(sc, Options{Seed: 1, ManualClock: true})
	c.Advance(5 * time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Advance(sc.Step)
	}
}
