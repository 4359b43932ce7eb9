package expo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/sim"
)

// gauges keeps SGLang's, vLLM's and llama.cpp's names but not their
// histograms' samples, much as the engine registry does: most lines of a
// page are then skipped.
func gauges(n string) bool {
	if !strings.HasPrefix(n, "sglang:") && !strings.HasPrefix(n, "vllm:") && !strings.HasPrefix(n, "llamacpp:") {
		return false
	}
	for _, s := range []string{"_bucket", "_sum", "_count", "_created"} {
		if strings.HasSuffix(n, s) {
			return false
		}
	}
	return true
}

// dumpOrdered renders a page's samples in page order with their keys,
// and what the accessors return, beside dumpPage.
func dumpOrdered(p *Page) []string {
	out := dumpPage(p)
	for _, s := range p.all {
		out = append(out, fmt.Sprintf("all %q %s %x key=%x", s.Name, s.Labels.String(), math.Float64bits(s.Value), s.SeriesKey()))
	}
	names := p.Names()
	slices.Sort(names)
	for _, n := range names {
		out = append(out, fmt.Sprintf("name %q has=%v len=%d", n, p.Has(n), len(p.Samples(n))))
	}
	for _, f := range slices.Sorted(maps.Keys(p.types)) {
		out = append(out, fmt.Sprintf("Type(%q) = %s", f, p.Type(f)))
	}
	return append(out, fmt.Sprintf("len=%d shape=%+v", p.Len(), p.Shape()))
}

// checkSame parses body with pr through lay and with a Parser of its own
// without a layout, and fails unless both return the same.
func checkSame(t *testing.T, pr *Parser, lay *Layout, body []byte, contentType string, want Want) {
	t.Helper()
	wantPage, wantErr := parse(body, contentType, want)
	got, err := pr.ParseWith(body, contentType, want, lay)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("ParseWith error = %v, Parse error = %v", err, wantErr)
	}
	if err != nil {
		if got != nil {
			t.Fatalf("ParseWith returned a page with error %v", err)
		}
		return
	}
	if diff := cmp.Diff(dumpOrdered(wantPage), dumpOrdered(got)); diff != "" {
		t.Fatalf("ParseWith differs from Parse (-Parse +ParseWith):\n%s", diff)
	}
	pr.Release(got)
}

// fits reports whether body has lay's structure (ParseWith reads it in one
// walk), without changing lay.
func fits(pr *Parser, lay *Layout, body []byte) bool {
	if lay.cur == nil {
		return false
	}
	p, ok := pr.readLaidOut(body, lay.cur)
	pr.Release(p)
	return ok
}

// bump changes every sample value of a text page (the last token of a
// line that is not a comment) by a step of its own, keeping the lines'
// structure: a page of the next scrape.
func bump(body []byte, step int) []byte {
	var out []byte
	for n, rest := 0, body; len(rest) > 0; n++ {
		var line []byte
		line, rest = nextLine(rest)
		core := bytes.TrimSuffix(line, []byte("\n"))
		sp := bytes.LastIndexByte(core, ' ')
		if len(core) == 0 || core[0] == '#' || sp < 0 {
			out = append(out, line...)
			continue
		}
		v, err := strconv.ParseFloat(string(core[sp+1:]), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			out = append(out, line...)
			continue
		}
		out = append(out, core[:sp+1]...)
		out = strconv.AppendFloat(out, v+float64(step)*(1.5+float64(n)), 'g', -1, 64)
		out = append(out, line[len(core):]...)
	}
	return out
}

// simulatedPages returns n pages of a simulated SGLang TP=8 server, 5 s of
// simulated time apart.
func simulatedPages(t testing.TB, n int) [][]byte {
	pages, _ := simulatedPagesAs(t, n, "", "")
	return pages
}

// simulatedPagesAs is simulatedPages from the simulator's SGLang at
// version (its default when ""), asked with the Accept header accept (none
// when ""), and the pages' content type.
func simulatedPagesAs(t testing.TB, n int, version, accept string) ([][]byte, string) {
	t.Helper()
	sc, err := sim.GeneratedScenario(1, sim.EngineSGLang, 8)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sim.NewCluster(sc, sim.Options{Seed: 1, ManualClock: true, ListenHost: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ep := cl.Endpoints()[0]
	if version != "" {
		if err := cl.SetVersion(ep.Name, version); err != nil {
			t.Fatal(err)
		}
	}
	var pages [][]byte
	var contentType string
	for range n {
		cl.Advance(5 * time.Second)
		req, err := http.NewRequest(http.MethodGet, ep.URL+ep.MetricsPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		pages, contentType = append(pages, b), resp.Header.Get("Content-Type")
	}
	return pages, contentType
}

// Successive pages of a server (the simulator's, whose values move with
// time, and the captures with their values changed) are read through the
// layout built from the first, and ParseWith returns what Parse returns.
func TestLayoutRealPages(t *testing.T) {
	pages := map[string][][]byte{"sim-sglang-tp8": simulatedPages(t, 3)}
	if bytes.Equal(pages["sim-sglang-tp8"][0], pages["sim-sglang-tp8"][1]) {
		t.Fatal("the simulator's pages do not change")
	}
	for name, b := range fixturePages(t) {
		pages[name] = [][]byte{b, bump(b, 1), bump(b, 2)}
	}
	prefix := func(n string) bool {
		return strings.HasPrefix(n, "sglang:") || strings.HasPrefix(n, "vllm:") || strings.HasPrefix(n, "llamacpp:")
	}
	laidOut := 0
	for name, pp := range pages {
		for wi, want := range []Want{gauges, prefix} {
			t.Run(fmt.Sprintf("%s/want%d", name, wi), func(t *testing.T) {
				pr, lay := NewParser(testColon...), new(Layout)
				checkSame(t, pr, lay, pp[0], "", want)
				for _, p := range pp[1:] {
					hit := fits(pr, lay, p)
					if hit {
						laidOut++
					}
					checkSame(t, pr, lay, p, "", want)
					if hit && !fits(pr, lay, p) {
						t.Errorf("the layout changed on a page that fits it")
					}
				}
			})
		}
	}
	// Pages whose kept lines are all of the usual shape are laid out.
	pr, lay := NewParser(testColon...), new(Layout)
	sp := pages["sim-sglang-tp8"]
	checkSame(t, pr, lay, sp[0], "", gauges)
	if !fits(pr, lay, sp[1]) {
		t.Errorf("the simulator's second page does not fit the first's layout")
	}
	// Kept series texts are shared with the series cache, runs of skipped
	// lines are one entry: the layout is a fraction of the page.
	sh := lay.cur
	if len(sh.text) > len(sp[0])/8 || len(sh.lines) > 500 {
		t.Errorf("the layout of a %d-byte page of %d lines holds %d bytes of text in %d entries", len(sp[0]), bytes.Count(sp[0], []byte("\n")), len(sh.text), len(sh.lines))
	}
	t.Logf("the layout of a %d-byte page of %d lines holds %d bytes of text in %d entries, %d series and %d samples", len(sp[0]), bytes.Count(sp[0], []byte("\n")), len(sh.text), len(sh.lines), len(sh.series), len(sh.samples))
	for _, f := range []string{"sglang-docs-production_metrics.prom", "vllm-docs-design-metrics-http_filtered.prom", "llamacpp-real-load.prom"} {
		pr, lay := NewParser(testColon...), new(Layout)
		checkSame(t, pr, lay, pages[f][0], "", gauges)
		if !fits(pr, lay, pages[f][1]) {
			t.Errorf("%s: the page with new values does not fit the layout", f)
		}
	}
	t.Logf("%d pages read through a layout", laidOut)
}

// A second page of another structure than the first is read as Parse
// reads it, error included, and the layout follows the page after.
func TestLayoutChanges(t *testing.T) {
	base := `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",tp_rank="1"} 3.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0"} 0.25
sglang:token_usage{model_name="m",tp_rank="1"} 0.25
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 1.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 2.0
sglang:time_to_first_token_seconds_sum{model_name="m"} 0.3
sglang:time_to_first_token_seconds_count{model_name="m"} 2.0
# HELP sglang:cache_hit_rate The cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate 0.5
# HELP sglang:generation_tokens_total Tokens generated.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 1234.0
process_open_fds 12
process_open_fds 12
`
	r := strings.NewReplacer
	tests := []struct {
		name string
		edit func(string) string
	}{
		{"same", func(s string) string { return s }},
		{"line added", r(`sglang:token_usage{model_name="m",tp_rank="1"} 0.25`+"\n", `sglang:token_usage{model_name="m",tp_rank="1"} 0.25`+"\n"+`sglang:token_usage{model_name="m",tp_rank="2"} 0.5`+"\n").Replace},
		{"line removed", r(`sglang:num_running_reqs{model_name="m",tp_rank="1"} 3.0`+"\n", "").Replace},
		{"skipped line removed", r(`sglang:time_to_first_token_seconds_sum{model_name="m"} 0.3`+"\n", "").Replace},
		{"series renamed", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_ratio 0.5").Replace},
		{"label value changed", r(`tp_rank="1"} 3.0`, `tp_rank="7"} 3.0`).Replace},
		{"family now wanted", r("sglang:time_to_first_token_seconds_sum", "sglang:time_to_first_token_seconds_total").Replace},
		{"family now unwanted", r("sglang:token_usage{", "sglang:token_usage_bucket{").Replace},
		{"help changed", r("The token usage.", "The token usage, 0-1.").Replace},
		{"type changed", r("# TYPE sglang:cache_hit_rate gauge", "# TYPE sglang:cache_hit_rate counter").Replace},
		{"timestamp", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate 0.5 1700000000000").Replace},
		{"two blanks", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate  0.5").Replace},
		{"tab", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate\t0.5").Replace},
		{"value not a number", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate half").Replace},
		{"value NaN", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate NaN").Replace},
		{"value hex", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate 0x1p-1").Replace},
		{"no value", r("sglang:cache_hit_rate 0.5", "sglang:cache_hit_rate ").Replace},
		{"skipped line without value", r(`sglang:time_to_first_token_seconds_sum{model_name="m"} 0.3`, `sglang:time_to_first_token_seconds_sum{model_name="m"}`).Replace},
		{"skipped bare line odd value", r("process_open_fds 12\nprocess_open_fds 12", "process_open_fds 12\nprocess_open_fds x12").Replace},
		{"skipped bare line tab", r("process_open_fds 12\nprocess_open_fds 12", "process_open_fds 12\nprocess_open_fds\t12").Replace},
		{"garbage in an unwanted family", r(`sglang:time_to_first_token_seconds_sum{`, "garbage here!\nsglang:time_to_first_token_seconds_sum{").Replace},
		{"bad name in an unwanted family", r("process_open_fds 12\n", "process-open-fds 12\n").Replace},
		{"comment inserted", r("# HELP sglang:cache_hit_rate", "# a comment\n# HELP sglang:cache_hit_rate").Replace},
		{"blank line inserted", r("# HELP sglang:cache_hit_rate", "\n# HELP sglang:cache_hit_rate").Replace},
		{"leading blank", r("sglang:cache_hit_rate 0.5", "  sglang:cache_hit_rate 0.5").Replace},
		{"escape in a label", r(`tp_rank="1"} 3.0`, `tp_rank="\"1"} 3.0`).Replace},
		{"duplicate series", r(`sglang:token_usage{model_name="m",tp_rank="1"} 0.25`, `sglang:token_usage{model_name="m",tp_rank="0"} 0.25`).Replace},
		{"names interleaved", r("# HELP sglang:cache_hit_rate", `sglang:num_running_reqs{model_name="m",tp_rank="9"} 1`+"\n# HELP sglang:cache_hit_rate").Replace},
		{"CRLF", r("\n", "\r\n").Replace},
		{"CRLF in a skipped line", r("process_open_fds 12\nprocess_open_fds 12\n", "process_open_fds 12\r\nprocess_open_fds 12\r\n").Replace},
		{"no last newline", func(s string) string { return strings.TrimSuffix(s, "\n") }},
		{"cut mid-line", func(s string) string { return s[:len(s)/2] }},
		{"cut after a kept line", func(s string) string { return s[:strings.Index(s, "# HELP sglang:time")] }},
		{"cut in a value", func(s string) string { return s[:strings.Index(s, "1234.0")+2] }},
		{"empty", func(string) string { return "" }},
		{"blank", func(string) string { return "\n\n" }},
		{"html", func(string) string { return "<html>" }},
		{"json", func(string) string { return `{"a": 1}` }},
		{"appended", func(s string) string { return s + "sglang:extra 1\n" }},
		{"appended junk", func(s string) string { return s + "}\n" }},
		{"NUL", r("0.25", "0.2\x005").Replace},
		{"invalid UTF-8", r(`model_name="m",tp_rank="0"} 3.0`, `model_name="m\xff",tp_rank="0"} 3.0`).Replace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, lay := NewParser(testColon...), new(Layout)
			page1 := []byte(base)
			checkSame(t, pr, lay, page1, "", gauges)
			if !fits(pr, lay, bump(page1, 1)) {
				t.Fatal("the base page with new values does not fit its layout")
			}
			edited := tt.edit(base)
			if (edited == base) != (tt.name == "same") {
				t.Fatalf("the edit changed nothing")
			}
			page2 := bump([]byte(edited), 1)
			checkSame(t, pr, lay, page2, "", gauges)
			checkSame(t, pr, lay, page2, "application/openmetrics-text; version=1.0.0", gauges)
			checkSame(t, pr, lay, append(page2, "# EOF\n"...), "application/openmetrics-text; version=1.0.0", gauges)
			// Back to the first structure: read right, and laid out again
			// by the page after.
			checkSame(t, pr, lay, bump(page1, 2), "", gauges)
			if page3 := bump(page1, 3); !fits(pr, lay, page3) {
				t.Error("the layout did not recover")
			} else {
				checkSame(t, pr, lay, page3, "", gauges)
			}
		})
	}
}

// A page whose structure changes at every scrape stops being tried for a
// while, and is read right all along.
func TestLayoutWaitsAfterMisses(t *testing.T) {
	pr, lay := NewParser(testColon...), new(Layout)
	waits := map[int]bool{}
	for i := range 1000 {
		body := fmt.Sprintf("sglang:x{a=\"%d\"} 1\n", i)
		checkSame(t, pr, lay, []byte(body), "", gauges)
		if i >= 900 {
			waits[lay.wait] = true
		}
	}
	if !waits[64] || len(waits) != 65 {
		t.Errorf("waits in the last 100 of 1,000 pages of other structures: %v; want 64 down to 0", waits)
	}
	for i := range 100 {
		checkSame(t, pr, lay, []byte(fmt.Sprintf("sglang:x{a=\"z\"} %d\n", i)), "", gauges)
	}
	if lay.misses != 0 || !fits(pr, lay, []byte("sglang:x{a=\"z\"} 7\n")) {
		t.Errorf("after 100 pages of one structure, misses = %d and the page does not fit", lay.misses)
	}
	// Pages that fail (a JSON page before each retried one, a cut body)
	// are no misses and leave the layout.
	for i := range 10 {
		checkSame(t, pr, lay, []byte(`{"a": 1}`), "", gauges)
		checkSame(t, pr, lay, []byte("sglang:x{a=\"z\"} 1\nsglang:x{"), "", gauges)
		if !fits(pr, lay, []byte(fmt.Sprintf("sglang:x{a=\"z\"} %d\n", i))) || lay.wait != 0 {
			t.Fatalf("after %d failed pages, the layout is gone or waits %d", 2*(i+1), lay.wait)
		}
		checkSame(t, pr, lay, []byte(fmt.Sprintf("sglang:x{a=\"z\"} %d\n", i)), "", gauges)
	}
}

// A Layout given to another Parser (another Canonical) starts again; the
// series cache being emptied does not change what a layout returns.
func TestLayoutParserAndCacheReset(t *testing.T) {
	body := []byte("sglang_x{a=\"1\"} 1\nsglang_x{a=\"2\"} 2\n")
	lay := new(Layout)
	checkSame(t, NewParser(testColon...), lay, body, "", nil)
	pr := NewParser(testColon...)
	checkSame(t, pr, lay, body, "", func(n string) bool { return strings.HasPrefix(n, "sglang") })
	other := NewParser()
	got, err := other.ParseWith(bump(body, 1), "", func(n string) bool { return strings.HasPrefix(n, "sglang") }, lay)
	if err != nil || !got.Has("sglang_x") || got.Has("sglang:x") {
		t.Fatalf("another Parser's page: %v, %v", dumpOrdered(got), err)
	}
	// Fill the cache until it is emptied.
	for i := 0; pr.Stats().Resets == 0; i++ {
		if _, err := pr.Parse([]byte(fmt.Sprintf("sglang:y{i=\"%d\"} 1\n", i)), "", gauges); err != nil {
			t.Fatal(err)
		}
	}
	lay = new(Layout)
	checkSame(t, pr, lay, body, "", gauges)
	for i := 0; pr.Stats().Resets < 2; i++ {
		if _, err := pr.Parse([]byte(fmt.Sprintf("sglang:z{i=\"%d\"} 1\n", i)), "", gauges); err != nil {
			t.Fatal(err)
		}
	}
	if !fits(pr, lay, bump(body, 1)) {
		t.Fatal("the page does not fit its layout")
	}
	checkSame(t, pr, lay, bump(body, 1), "", gauges)
}

// A page too big for a layout is read without one.
func TestLayoutBounded(t *testing.T) {
	var b bytes.Buffer
	for i := range maxLayoutLines + 1 {
		fmt.Fprintf(&b, "sglang:x{i=\"%d\"} 1\n", i)
	}
	pr, lay := NewParser(testColon...), new(Layout)
	checkSame(t, pr, lay, b.Bytes(), "", gauges)
	if lay.cur != nil {
		t.Errorf("a page of %d lines has a layout", maxLayoutLines+1)
	}
	b.Reset()
	fmt.Fprintf(&b, "# HELP sglang:x %s\nsglang:x 1\n", strings.Repeat("h", maxLayoutText))
	checkSame(t, pr, lay, b.Bytes(), "", gauges)
	if lay.cur != nil {
		t.Errorf("a page of %d bytes of text has a layout", b.Len())
	}
}

// FuzzParseWithMatchesParse: pages read one after the other through one
// Layout come out exactly as Parse reads each alone. The fuzzer gives two
// pages; the sequence goes from one to the other and back, each also with
// its values changed (which fits the layout the page before built).
//
//	go test ./internal/expo -run '^$' -fuzz FuzzParseWithMatchesParse -fuzztime 60s -fuzzminimizetime 3s
func FuzzParseWithMatchesParse(f *testing.F) {
	for _, b := range fixturePages(f) {
		f.Add(b, bump(b, 1), "")
		f.Add(b, b[:len(b)/2], "")
	}
	base := "# TYPE sglang:x gauge\nsglang:x{a=\"1\"} 1\nsglang:h_bucket{le=\"1\"} 1\nsglang:h_sum 2\nother 3\n"
	for _, s := range []string{
		strings.Replace(base, "sglang:h_sum 2", "garbage!", 1),
		strings.Replace(base, "sglang:x{a=\"1\"} 1", "sglang:x{a=\"1\"} 1 1000", 1),
		strings.Replace(base, "sglang:x{a=\"1\"}", "sglang:x{a=\"2\"}", 1),
		strings.ReplaceAll(base, "\n", "\r\n"),
		strings.TrimSuffix(base, "\n"),
		"",
		"{\"utf8.name\",a=\"b\"} 1\n" + base,
		base + "sglang:x{a=\"2\"} 1\n",
	} {
		f.Add([]byte(base), []byte(s), "")
	}
	f.Fuzz(func(t *testing.T, a, b []byte, contentType string) {
		for _, want := range []Want{gauges, func(n string) bool { return strings.HasPrefix(n, "sglang:") }} {
			pr, lay := NewParser(testColon...), new(Layout)
			for _, body := range [][]byte{a, bump(a, 1), b, bump(b, 1), bump(b, 2), a, bump(a, 2)} {
				checkSame(t, pr, lay, body, contentType, want)
			}
		}
	})
}

// Samples of one name that are not in one run are filed by name (the page
// order of all is sorted): the layout still pairs each line with its own
// series.
func TestLayoutInterleavedNames(t *testing.T) {
	pr, lay := NewParser(testColon...), new(Layout)
	checkSame(t, pr, lay, []byte("sglang:a{i=\"1\"} 1\nsglang:b 1\nsglang:a{i=\"2\"} 1\n"), "", gauges)
	page2 := []byte("sglang:a{i=\"1\"} 2\nsglang:b 3\nsglang:a{i=\"2\"} 4\n")
	if !fits(pr, lay, page2) {
		t.Error("the second page does not fit the layout")
	}
	checkSame(t, pr, lay, page2, "", gauges)
}

// BenchmarkParseWith reads the simulator's 96 KB SGLang TP=8 page (its
// values changing between two pages) with a Parser, without a layout and
// through one; and the same server as SGLang 0.5.16 answers a Prometheus
// 3 scraper (OpenMetrics, names escaped with underscores), which the fast
// path does not read (it falls back to Prometheus' parser).
//
//	go test ./internal/expo -run '^$' -bench BenchmarkParseWith -benchmem -count 5
func BenchmarkParseWith(b *testing.B) {
	text := simulatedPages(b, 2)
	om, omType := simulatedPagesAs(b, 2, sim.VersionSGLang0516, "application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.6,text/plain;version=0.0.4;q=0.3")
	if !strings.HasPrefix(omType, "application/openmetrics-text") {
		b.Fatalf("the simulated SGLang 0.5.16 answered %q, want OpenMetrics", omType)
	}
	for _, bb := range []struct {
		name        string
		pages       [][]byte
		contentType string
		lay         *Layout
	}{
		{"Parse", text, "text/plain; version=0.0.4", nil},
		{"Layout", text, "text/plain; version=0.0.4", new(Layout)},
		{"OpenMetrics", om, omType, new(Layout)},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.pages[0])))
			b.ReportAllocs()
			pr := NewParser(testColon...)
			i := 0
			for b.Loop() {
				p, err := pr.ParseWith(bb.pages[i%2], bb.contentType, gauges, bb.lay)
				if err != nil || p.Len() == 0 {
					b.Fatal(err)
				}
				pr.Release(p)
				i++
			}
		})
	}
}

// TestLayoutsShareShapes: the Layouts of targets whose pages have one
// structure share one shape; a target whose page changes builds a shape of
// its own and leaves the shared one as it was, which still reads the other
// targets' pages exactly as Parse does.
func TestLayoutsShareShapes(t *testing.T) {
	sp := simulatedPages(t, 2)
	pr := NewParser(testColon...)
	lays := make([]*Layout, 5)
	for i := range lays {
		lays[i] = new(Layout)
		checkSame(t, pr, lays[i], bump(sp[0], i), "", gauges)
		if lays[i].cur == nil {
			t.Fatalf("target %d has no layout", i)
		}
		if lays[i].cur != lays[0].cur {
			t.Errorf("target %d's layout is not the shape target 0's page built", i)
		}
	}
	shared := lays[0].cur
	text, lines := slices.Clone(shared.text), slices.Clone(shared.lines)
	// Target 1's page gains a line: it builds a shape of its own.
	other := append(append([]byte(nil), sp[1]...), "sglang:num_running_reqs{engine_type=\"unified\",tp_rank=\"9\"} 3\n"...)
	checkSame(t, pr, lays[1], other, "", gauges)
	checkSame(t, pr, lays[1], other, "", gauges) // built on the miss before
	if lays[1].cur == nil || lays[1].cur == shared {
		t.Fatalf("target 1's changed page did not get a shape of its own")
	}
	if !bytes.Equal(shared.text, text) || !slices.Equal(shared.lines, lines) {
		t.Fatal("building target 1's shape changed the shared one")
	}
	for i, lay := range lays {
		if i == 1 {
			continue
		}
		if !fits(pr, lay, sp[1]) {
			t.Errorf("target %d's next page does not fit the shared shape", i)
		}
		checkSame(t, pr, lay, bump(sp[1], 10+i), "", gauges)
	}
	// Back to the usual page: target 1 shares the first shape again.
	checkSame(t, pr, lays[1], sp[1], "", gauges)
	checkSame(t, pr, lays[1], sp[1], "", gauges)
	if lays[1].cur != shared {
		t.Errorf("target 1's usual page again: its shape is not the shared one")
	}
}

// TestShapeCacheBounded: more structures than the cache holds empty it
// (counted); every Layout still reads its pages as Parse does.
func TestShapeCacheBounded(t *testing.T) {
	pr := NewParser(testColon...)
	lays := make([]*Layout, maxShapes+10)
	body := func(i int) []byte { return []byte(fmt.Sprintf("sglang:x{target=\"%d\"} 1\nsglang:y 2\n", i)) }
	for i := range lays {
		lays[i] = new(Layout)
		checkSame(t, pr, lays[i], body(i), "", gauges)
	}
	if pr.shapes.resets == 0 || pr.shapes.n > maxShapes {
		t.Errorf("%d structures: %d resets, %d kept; want a reset and at most %d", len(lays), pr.shapes.resets, pr.shapes.n, maxShapes)
	}
	for i, lay := range lays {
		if !fits(pr, lay, body(i)) {
			t.Fatalf("target %d's page does not fit its layout", i)
		}
		checkSame(t, pr, lay, bytes.Replace(body(i), []byte("} 1"), []byte("} 5"), 1), "", gauges)
	}
}
