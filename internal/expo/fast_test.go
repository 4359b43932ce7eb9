package expo

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// takesFastPath reports whether Parse reads body (text format, want) with
// fastText rather than the text parser.
func takesFastPath(t *testing.T, body []byte, want Want) (bool, error) {
	t.Helper()
	sc := getScratch()
	defer putScratch(sc)
	pr := NewParser(testColon...)
	filtered, _, _, n, err := pr.filter(body, want, sc)
	if err != nil {
		return false, err
	}
	sb := labels.NewScratchBuilder(8)
	var ls simpleSeries
	_, ok := pr.fastText(filtered, want, map[string]model.MetricType{}, &sb, &ls, nil, n, new(LabelShape))
	return ok, nil
}

// The pages engines really write take the fast path (else the text
// parser's lexer is back as the largest cost of a scrape), and what it
// returns is what the reference parse returns.
func TestFastPathOnRealPages(t *testing.T) {
	want := func(n string) bool {
		return strings.HasPrefix(n, "sglang:") || strings.HasPrefix(n, "vllm:") || strings.HasPrefix(n, "llamacpp:")
	}
	for _, f := range []string{"sglang-docs-production_metrics.prom", "vllm-docs-design-metrics-http_filtered.prom", "llamacpp-real-load.prom"} {
		b, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "fixtures", f))
		if err != nil {
			t.Fatal(err)
		}
		if fast, err := takesFastPath(t, b, want); err != nil || !fast {
			t.Errorf("%s: the fast path declined the page (%v)", f, err)
		}
		ref, err := parseReference(b, "", want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parse(b, "", want)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(dumpPage(ref), dumpPage(got)); diff != "" {
			t.Errorf("%s: differs from the reference (-want +got):\n%s", f, diff)
		}
	}
}

// Each shape the fast path does not read exactly like the text parser
// sends the page to the text parser, so errors and odd lines come out as
// the parser has them.
func TestFastPathDeclines(t *testing.T) {
	want := func(n string) bool { return strings.HasPrefix(n, "sglang:") }
	ok := "# HELP sglang:x Help ünïcode.\n# TYPE sglang:x gauge\nsglang:x{a=\"1\",b=\"\"} 1.5\nsglang:x{c=\"2\",} NaN\nsglang:y{} +Inf\nsglang:z 2e3\n"
	if fast, err := takesFastPath(t, []byte(ok), want); err != nil || !fast {
		t.Fatalf("the fast path declined %q", ok)
	}
	p, err := parse([]byte(ok), "", want)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Samples("sglang:x"); len(s) != 2 || s[0].Value != 1.5 || math.Float64bits(s[1].Value) != 0x7ff8000000000001 ||
		s[0].Labels.String() != `{__name__="sglang:x", a="1", b=""}` {
		t.Errorf("sglang:x = %v", s)
	}
	if s := p.Samples("sglang:z"); len(s) != 1 || s[0].Value != 2000 {
		t.Errorf("sglang:z = %v", s)
	}
	for _, tt := range []struct {
		body string
		fast bool // read by fastText (some lines by the parser alone)
	}{
		{"sglang:x 1 1700000000000\n", true}, // timestamp
		{"sglang:x  1\n", true},              // two blanks
		{"sglang:x{a=\"1\"}\t1\n", true},     // tab
		{"sglang:x{a=\"q\\\"\"} 1\n", true},  // escape
		{"sglang:x{le=\"1\"} 1\n", true},     // le: the parser rewrites it
		{"# TYPE sglang:h histogram\nsglang:h_bucket{le=\"1\"} 1\n# TYPE sglang:g gauge\nsglang:h_bucket{le=\"1\"} 1\n", true}, // le by the last type
		{"sglang:x{quantile=\"0.50\"} 1\n", true},             // quantile
		{"sglang:x{a=\"1\",__name__=\"sglang:y\"} 1\n", true}, // a second name
		{"sglang:x{a=\"1\" ,b=\"2\"} 1\n", true},              // blank in the labels
		{"sglang:x{a=\"1\"} 1_0\n", false},                    // underscore in the value
		{"sglang:x{a=\"1\"} 0x1p3\n", false},                  // hex float
		{"sglang:x{a=\"1\"} one\n", false},                    // no number
		{"sglang:x{a=\"\xff\"} 1\n", false},                   // invalid UTF-8
		{"sglang:x{a=\"1\"} 1\r\n", false},                    // CR
		{"sglang:x{a=\"\x00\"} 1\n", true},                    // NUL
		{"# TYPE sglang:x  gauge\n", false},                   // two blanks
		{"# TYPE sglang:x Gauge\n", false},                    // not a type
		{"# TYPE sglang:x gauge \n", false},                   // trailing blank
		{"# HELP sglang:x\n", false},                          // no text
		{"#  HELP sglang:x h\n", false},                       // two blanks
		{"# a comment sglang:x\n", true},                      // comment
		{"{\"sglang:x\",a=\"1\"} 1\n", true},                  // quoted name
		{"sglang:x{\"a.b\"=\"1\"} 1\n", true},                 // quoted label name
		{"sglang:x{a=\"1\"\n", false},                         // no closing brace
		{"sglang:x{a=\"1\"}{b=\"2\"} 1\n", false},             // two label sets
		{"sglang:x{a=\"1\"} 1 # {t=\"1\"} 1\n", false},        // exemplar
		{"sglang:x 1\nsglang:x{a=\"\xff\"} 1\n", false},       // a bad line after a good one
	} {
		body := tt.body
		ref, rerr := parseReference([]byte(body), "", want)
		got, err := parse([]byte(body), "", want)
		if (err == nil) != (rerr == nil) || (err != nil && err.Error() != rerr.Error()) {
			t.Errorf("%q: error %v, reference %v", body, err, rerr)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(dumpPage(ref), dumpPage(got)); diff != "" {
				t.Errorf("%q differs from the reference (-want +got):\n%s", body, diff)
			}
		}
		if fast, ferr := takesFastPath(t, []byte(body), want); ferr == nil && fast != tt.fast {
			t.Errorf("%q: fast path %v, want %v", body, fast, tt.fast)
		}
	}
}

// A released page's maps and array serve the next page; what the first
// page returned stays valid, and the second page holds nothing of the
// first.
func TestReleaseReuse(t *testing.T) {
	want := func(n string) bool { return strings.HasPrefix(n, "sglang:") }
	pr := NewParser(testColon...)
	a, err := pr.Parse([]byte("# TYPE sglang:a gauge\nsglang:a{x=\"1\"} 1\nsglang:a{x=\"2\"} 2\nsglang:b 3\n"), "", want)
	if err != nil {
		t.Fatal(err)
	}
	lset := a.Samples("sglang:a")[1].Labels
	pr.Release(a)
	body := "# TYPE sglang:c counter\nsglang:c_total 4\n"
	b, err := pr.Parse([]byte(body), "", want)
	if err != nil {
		t.Fatal(err)
	}
	if lset.String() != `{__name__="sglang:a", x="2"}` {
		t.Errorf("label set of the released page = %s", lset)
	}
	ref, err := parseReference([]byte(body), "", want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dumpPage(ref), dumpPage(b)); diff != "" {
		t.Errorf("second page differs from the reference (-want +got):\n%s", diff)
	}
	pr.Release(nil)
	(*Parser)(nil).Release(b)
}

// metaFields returns what fields3 does.
func TestMetaFields(t *testing.T) {
	for _, line := range []string{
		"# HELP sglang:x Help text.\n", "# TYPE sglang:x gauge\n", "# TYPE sglang:x\n", "# TYPE sglang:x", "# HELP \n",
		"# HELP  sglang:x two blanks\n", "# HELP sglang:x\u00a0nbsp\n", "# HELP sgl\u0085ang x\n", "# HELP s\tx\n",
		"# UNIT sglang:x s\n", "#HELP sglang:x h\n", "# HELPsglang:x h\n", "# HELP sglang:x\r\n", "# HELP ü x\n",
	} {
		f, n := metaFields([]byte(line))
		g, m := fields3([]byte(line))
		if n != m || string(f[0]) != string(g[0]) || string(f[1]) != string(g[1]) || string(f[2]) != string(g[2]) {
			t.Errorf("%q: metaFields = %q %d, fields3 = %q %d", line, f, n, g, m)
		}
	}
}
