package expo

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/model/labels"
)

// FuzzParse: Parse never panics, and what it keeps is canonical and wanted.
// Seeds are the real captures in ../engine/testdata/fixtures.
//
//	go test ./internal/expo -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 3s
func FuzzParse(f *testing.F) {
	for _, b := range fixturePages(f) {
		f.Add(b, "")
		f.Add(append(b, "# EOF\n"...), "application/openmetrics-text; version=1.0.0")
	}
	f.Add([]byte("{\"utf8.name\",a=\"b\"} 1\n"), "")
	f.Add([]byte("<html>"), "")
	f.Add([]byte("ok 1\nbare_name"), "")
	want := func(n string) bool {
		return strings.HasPrefix(n, "sglang:") || strings.HasPrefix(n, "vllm:") || strings.HasPrefix(n, "llamacpp:")
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		for _, w := range []Want{want, nil} {
			p, err := parse(body, contentType, w)
			if err != nil {
				if p != nil {
					t.Fatalf("Parse returned a page with error %v", err)
				}
				continue
			}
			for _, n := range p.Names() {
				if w != nil && !w(n) {
					t.Errorf("kept unwanted %q", n)
				}
				if testParser.Canonical(n) != n {
					t.Errorf("kept non-canonical name %q", n)
				}
				for _, s := range p.Samples(n) {
					if s.Name != n {
						t.Errorf("sample %q filed under %q", s.Name, n)
					}
				}
			}
			if p.Families < 0 || len(p.Example) > 5 {
				t.Errorf("Families = %d, Example = %v", p.Families, p.Example)
			}
		}
	})
}

// FuzzParseMatchesReference: Parse returns exactly what the straightforward
// parse it replaced (parseReference) returns: the same error text, or the
// same samples (labels, value bits, order), types, family count and
// examples. Repeated calls check that pooled buffers leak nothing between
// pages.
//
//	go test ./internal/expo -run '^$' -fuzz FuzzParseMatchesReference -fuzztime 60s -fuzzminimizetime 3s
func FuzzParseMatchesReference(f *testing.F) {
	for _, b := range fixturePages(f) {
		f.Add(b, "")
		f.Add(append(b, "# EOF\n"...), "application/openmetrics-text; version=1.0.0")
	}
	for _, s := range []string{
		"{\"utf8.name\",a=\"b\"} 1\n",
		"sglang:x{a=\"1\",} 1\nsglang:x{ a=\"2\"} 2\nsglang:x {b=\"3\"} 3\n",
		"sglang:x{a=\"q\\\"\\\\\\n\",__name__=\"y\"} 1\nsglang:x{le=\"1\",quantile=\"0.5\"} 2\n",
		"# TYPE sglang:h histogram\nsglang:h_bucket{le=\"1\"} 1\nsglang:h_count 1\n",
		"sglang_x{\"a.b\"=\"c\",z=\"\"} 1 1000\n",
		"#\u00a0TYPE\u00a0sglang:x gauge\n# TYPE\u0085sglang:y gauge\nsglang:y 1\n",
	} {
		f.Add([]byte(s), "")
	}
	want := func(n string) bool {
		return strings.HasPrefix(n, "sglang:") || strings.HasPrefix(n, "vllm:") || strings.HasPrefix(n, "llamacpp:")
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		for _, w := range []Want{want, nil} {
			wantPage, wantErr := parseReference(body, contentType, w)
			for range 2 {
				got, err := parse(body, contentType, w)
				if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
					t.Fatalf("Parse error = %v, want %v", err, wantErr)
				}
				if err != nil {
					continue
				}
				if diff := cmp.Diff(dumpPage(wantPage), dumpPage(got)); diff != "" {
					t.Fatalf("Parse differs from parseReference (-want +got):\n%s", diff)
				}
				if n, sh := measure(wantPage); got.Len() != n || got.Shape() != sh {
					t.Fatalf("Len, Shape = %d, %+v; the reference's samples: %d, %+v", got.Len(), got.Shape(), n, sh)
				}
			}
		}
	})
}

// measure counts a page's samples and finds its largest label count, label
// name and label value, the metric name aside, label by label.
func measure(p *Page) (n int, sh LabelShape) {
	for _, ss := range p.samples {
		for _, s := range ss {
			n++
			count := 0
			s.Labels.Range(func(lb labels.Label) {
				if lb.Name == "__name__" {
					return
				}
				count++
				if len(lb.Name) > sh.MaxName {
					sh.MaxName = len(lb.Name)
				}
				if len(lb.Value) > sh.MaxValue {
					sh.MaxValue = len(lb.Value)
				}
			})
			if count > sh.Labels {
				sh.Labels = count
			}
		}
	}
	return n, sh
}

// dumpPage renders everything a page holds, NaN payloads included.
func dumpPage(p *Page) []string {
	out := []string{fmt.Sprintf("families=%d example=%q", p.Families, p.Example)}
	for n, t := range p.types {
		out = append(out, fmt.Sprintf("type %q %s", n, t))
	}
	for n, ss := range p.samples {
		for i, s := range ss {
			out = append(out, fmt.Sprintf("sample %q[%d] %q %s %x", n, i, s.Name, s.Labels.String(), math.Float64bits(s.Value)))
		}
	}
	sort.Strings(out)
	return out
}

// fixturePages returns the real /metrics pages of the engine fixtures
// (internal/engine/testdata/fixtures), by file name.
func fixturePages(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "engine", "testdata", "fixtures", "*.prom"))
	if len(files) == 0 {
		tb.Fatal("no fixtures")
	}
	out := map[string][]byte{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		out[filepath.Base(name)] = b
	}
	return out
}
