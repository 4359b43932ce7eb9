package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// largeSGLangPage writes, deterministically, a /metrics page like a
// current SGLang decode server with TP=8 and
// --enable-metrics-for-all-schedulers: every scheduler family once per TP
// rank, per-stage latency histograms per rank, and the tokenizer's
// request histograms with many buckets. About 500 KB.
func largeSGLangPage() []byte {
	var b bytes.Buffer
	const model = `model_name="meta-llama/Llama-3.1-70B-Instruct"`
	rank := func(tp int) string {
		return fmt.Sprintf(`dp_rank="0",engine_type="decode",moe_ep_rank="0",%s,pp_rank="0",tp_rank="%d"`, model, tp)
	}
	gauges := []struct {
		name string
		v    float64
	}{
		{"max_total_num_tokens", 1290752}, {"kv_used_tokens", 310112}, {"kv_available_tokens", 950000},
		{"kv_evictable_tokens", 30640}, {"full_token_usage", 0.24}, {"token_usage", 0.24},
		{"swa_token_usage", 0}, {"mamba_usage", 0}, {"num_used_tokens", 310112}, {"num_running_reqs", 37},
		{"num_running_reqs_offline_batch", 0}, {"num_queue_reqs", 2}, {"num_grammar_queue_reqs", 0},
		{"num_prefill_bootstrap_queue_reqs", 0}, {"num_prefill_inflight_queue_reqs", 0},
		{"num_decode_prealloc_queue_reqs", 1}, {"num_decode_transfer_queue_reqs", 0},
		{"pending_prealloc_token_usage", 0.01}, {"gen_throughput", 1834.5}, {"cache_hit_rate", 0.41},
		{"spec_accept_length", 0}, {"spec_accept_rate", 0}, {"total_retracted_reqs", 0},
		{"num_retracted_reqs", 0}, {"num_paused_reqs", 0}, {"utilization", 0.93},
		{"max_running_requests_under_SLO", 0}, {"engine_startup_time", 312.4}, {"engine_load_weights_time", 98.1},
		{"context_len", 131072}, {"max_prefill_tokens", 16384}, {"max_running_requests", 2048},
		{"page_size", 1}, {"kv_transfer_speed_gb_s", 18.2}, {"kv_transfer_latency_ms", 4.1},
		{"pending_prealloc_num_reqs", 1}, {"new_token_ratio", 0.7}, {"num_decode_steps", 123456},
		{"is_cuda_graph", 1}, {"avg_request_queue_latency", 0.02},
	}
	for _, g := range gauges {
		fmt.Fprintf(&b, "# HELP sglang:%s The %s.\n# TYPE sglang:%s gauge\n", g.name, strings.ReplaceAll(g.name, "_", " "), g.name)
		for tp := 0; tp < 8; tp++ {
			fmt.Fprintf(&b, "sglang:%s{%s} %g\n", g.name, rank(tp), g.v)
		}
	}
	counters := []string{"num_retracted_requests", "prompt_tokens", "generation_tokens", "evicted_tokens", "num_requests",
		"num_aborted_requests", "num_so_requests", "num_bootstrap_failed_reqs", "num_transfer_failed_reqs"}
	for i, c := range counters {
		fmt.Fprintf(&b, "# HELP sglang:%s_total Number of %s.\n# TYPE sglang:%s_total counter\n", c, c, c)
		for tp := 0; tp < 8; tp++ {
			fmt.Fprintf(&b, "sglang:%s_total{%s} %d\n", c, rank(tp), 1000003*(i+1))
		}
	}
	fmt.Fprintf(&b, "# HELP sglang:realtime_tokens_total Total tokens.\n# TYPE sglang:realtime_tokens_total counter\n")
	for tp := 0; tp < 8; tp++ {
		for _, m := range []string{"prefill_compute", "prefill_cache", "decode"} {
			fmt.Fprintf(&b, "sglang:realtime_tokens_total{%s,mode=\"%s\"} %d\n", rank(tp), m, 7654321)
		}
	}
	hist := func(name, lbl string, buckets []float64) {
		var cum float64
		for i, le := range buckets {
			cum += float64((i*37)%11 + 1)
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%g\"} %g\n", name, lbl, le, cum)
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %g\n%s_sum{%s} %g\n%s_count{%s} %g\n", name, lbl, cum, name, lbl, cum*0.37, name, lbl, cum)
	}
	var latency []float64
	for le := 0.001; le < 400; le *= 1.8 {
		latency = append(latency, float64(int(le*10000))/10000)
	}
	stages := []string{"prefill_waiting", "prefill_bootstrap", "prefill_forward", "prefill_transfer_kv_cache",
		"decode_prepare", "decode_bootstrap", "decode_waiting", "decode_transferred", "decode_forward", "request_process"}
	fmt.Fprintf(&b, "# HELP sglang:per_stage_req_latency_seconds Per-stage latency.\n# TYPE sglang:per_stage_req_latency_seconds histogram\n")
	for tp := 0; tp < 8; tp++ {
		for _, st := range stages {
			hist("sglang:per_stage_req_latency_seconds", rank(tp)+`,stage="`+st+`"`, latency)
		}
	}
	var tokens []float64
	for le := 1.0; le <= 131072; le *= 2 {
		tokens = append(tokens, le, le*1.5)
	}
	for _, h := range []struct {
		name    string
		buckets []float64
	}{
		{"time_to_first_token_seconds", latency}, {"inter_token_latency_seconds", latency},
		{"e2e_request_latency_seconds", latency}, {"queue_time_seconds", latency},
		{"prompt_tokens_histogram", tokens}, {"generation_tokens_histogram", tokens},
	} {
		fmt.Fprintf(&b, "# HELP sglang:%s Histogram.\n# TYPE sglang:%s histogram\n", h.name, h.name)
		for _, stream := range []string{"true", "false"} {
			hist("sglang:"+h.name, model+`,is_streaming="`+stream+`"`, h.buckets)
		}
	}
	return b.Bytes()
}

var benchPage = sync.OnceValue(largeSGLangPage)

// TestLargeSGLangPage checks the benchmark's page: its size, and that
// kvwatch reads it right (TP=8 duplicates collapsed into one DP rank).
func TestLargeSGLangPage(t *testing.T) {
	body := benchPage()
	t.Logf("benchmark page: %d bytes, %d lines", len(body), bytes.Count(body, []byte("\n")))
	if n := len(body); n < 400_000 || n > 700_000 {
		t.Errorf("page is %d bytes, want about 500 KB", n)
	}
	s := normalizeBody(t, string(body), "", nil)
	if s.Engine != "sglang" || len(s.Ranks) != 8 || !s.Capacity.OK() || s.Capacity.V != 1290752 || s.Used.V != 310112 {
		t.Errorf("large page read as %s with %d ranks, %v / %v", s.Engine, len(s.Ranks), s.Used, s.Capacity)
	}
	// The filter must not change what is read.
	full, err := expo.Parse(body, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := normalizeSGLang(Input{Page: full})
	if err != nil {
		t.Fatal(err)
	}
	if s.Used != s2.Used || s.Capacity != s2.Capacity || s.Running != s2.Running || s.Counters != s2.Counters {
		t.Errorf("filtered and unfiltered reads differ: %+v vs %+v", s.Signals, s2.Signals)
	}
}

// sampleValue is a text-format sample line's value (without timestamp).
var sampleValue = regexp.MustCompile(`(?m)^([^#\n][^\n]* )[0-9.e+-]+$`)

// With the registry's Want, the benchmark's page and the captures are read
// through the layout of their page before (no want call at all: the
// layout made every decision), and give what Parse gives.
func TestLayoutWithRegistryWant(t *testing.T) {
	r := NewRegistry()
	pages := map[string][]byte{"benchmark": benchPage()}
	files, _ := filepath.Glob(filepath.Join("testdata", "fixtures", "*.prom"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pages[filepath.Base(f)] = b
	}
	laidOut, read := 0, 0
	for name, page1 := range pages {
		page2 := sampleValue.ReplaceAll(page1, []byte("${1}7.25"))
		pr, lay := expo.NewParser(r.ColonPrefixes()...), new(expo.Layout)
		calls := 0
		want := func(n string) bool { calls++; return r.Want(n) }
		if _, err := pr.ParseWith(page1, "", want, lay); err != nil {
			continue // a capture kvwatch does not read as text
		}
		read++
		calls = 0
		got, err := pr.ParseWith(page2, "", want, lay)
		ref, rerr := expo.Parse(page2, "", r.Want)
		if err != nil || rerr != nil {
			t.Fatalf("%s: %v, Parse: %v", name, err, rerr)
		}
		if calls == 0 {
			laidOut++
		} else if name == "benchmark" || strings.HasPrefix(name, "sglang-") || strings.HasPrefix(name, "vllm-docs-") || strings.HasPrefix(name, "llamacpp-real") {
			t.Errorf("%s: the page with new values was not read through the layout (%d want calls)", name, calls)
		}
		if diff := cmp.Diff(dump(ref), dump(got)); diff != "" {
			t.Errorf("%s: ParseWith differs from Parse (-Parse +ParseWith):\n%s", name, diff)
		}
	}
	t.Logf("%d of the %d pages read as text read through a layout", laidOut, read)
}

// dump renders what a page's accessors return.
func dump(p *expo.Page) []string {
	out := []string{fmt.Sprintf("families=%d example=%q len=%d shape=%+v", p.Families, p.Example, p.Len(), p.Shape())}
	for _, n := range p.Names() {
		out = append(out, fmt.Sprintf("type %q %s", n, p.Type(n)))
		for _, s := range p.Samples(n) {
			out = append(out, fmt.Sprintf("%q %s %x %x", s.Name, s.Labels, math.Float64bits(s.Value), s.SeriesKey()))
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkParse compares, on the same ~500 KB SGLang TP=8 page:
//
//   - Kvwatch: expo.Parse with the registry's Want, Detect and Normalize;
//
//   - KvwatchLayout: the same through a Parser and a Layout, as a scrape
//     reads a target's page;
//
//   - TextparseFull: Prometheus textparse over every entry, labels built;
//
//   - Expfmt: prometheus/common expfmt.TextParser into metric families.
//
//     go test ./internal/engine -run '^$' -bench BenchmarkParse -benchmem -count 5
func BenchmarkParse(b *testing.B) {
	body := benchPage()
	r := NewRegistry()
	b.Run("Kvwatch", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		var srv kv.Server
		for b.Loop() {
			p, err := expo.Parse(body, "text/plain; version=0.0.4", r.Want)
			if err != nil {
				b.Fatal(err)
			}
			srv = detectNormalize(b, r, p)
		}
		if !srv.Used.OK() {
			b.Fatal("nothing read")
		}
	})
	// KvwatchLayout is Kvwatch with a Parser (label sets shared between
	// pages) and the page's layout kept from one call to the next, as a
	// scrape target reads its page.
	b.Run("KvwatchLayout", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		pr, lay := expo.NewParser(r.ColonPrefixes()...), new(expo.Layout)
		var srv kv.Server
		for b.Loop() {
			p, err := pr.ParseWith(body, "text/plain; version=0.0.4", r.Want, lay)
			if err != nil {
				b.Fatal(err)
			}
			srv = detectNormalize(b, r, p)
			pr.Release(p)
		}
		if !srv.Used.OK() {
			b.Fatal("nothing read")
		}
	})
	b.Run("TextparseFull", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			st := labels.NewSymbolTable()
			p := textparse.NewPromParser(body, st, false)
			var lset labels.Labels
			n := 0
			for {
				e, err := p.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if e == textparse.EntrySeries {
					p.Labels(&lset)
					n++
				}
			}
			if n == 0 {
				b.Fatal("no series")
			}
		}
	})
	b.Run("Expfmt", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			tp := expfmt.NewTextParser(model.LegacyValidation)
			fams, err := tp.TextToMetricFamilies(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if len(fams) == 0 {
				b.Fatal("no families")
			}
		}
	})
}

// BenchmarkNormalize measures what a scrape does after parsing, on the
// ~500 KB SGLang TP=8 page: Detect and Normalize. The page is read by a
// Parser that read it once before, as a scraper's does scrape after
// scrape: its label sets are shared, and their memoized reads
// (expo.Memoized) warm after the first loop.
//
//	go test ./internal/engine -run '^$' -bench BenchmarkNormalize -benchmem -count 5
func BenchmarkNormalize(b *testing.B) {
	r := NewRegistry()
	pr := expo.NewParser(r.ColonPrefixes()...)
	var p *expo.Page
	for range 2 {
		var err error
		if p, err = pr.Parse(benchPage(), "text/plain; version=0.0.4", r.Want); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var srv kv.Server
	for b.Loop() {
		srv = detectNormalize(b, r, p)
	}
	if !srv.Used.OK() {
		b.Fatal("nothing read")
	}
}

// detectNormalize is what a scrape does with a parsed page: the adapter
// that detects it normalizes it.
func detectNormalize(b *testing.B, r *Registry, p *expo.Page) kv.Server {
	b.Helper()
	a, err := r.Detect(p)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := a.Normalize(Input{Page: p})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}
