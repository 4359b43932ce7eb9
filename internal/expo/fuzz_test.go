package expo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and what it keeps is canonical and wanted.
// Seeds are the real captures in ../engine/testdata/fixtures.
//
//	go test ./internal/expo -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 3s
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "engine", "testdata", "fixtures", "*.prom"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
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
			p, err := Parse(body, contentType, w)
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
				if Canonical(n) != n {
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
