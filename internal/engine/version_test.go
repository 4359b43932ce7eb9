package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/expo"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		name, engine, body, want string
	}{
		{"vLLM show_version", "vllm", `{"version":"0.26.0"}`, "0.26.0"},
		{"vLLM development build", "vllm", `{"version": "0.25.1rc1.dev164+ga6183563b"}`, "0.25.1rc1.dev164+ga6183563b"},
		{"trtllm-serve", "trtllm-serve", `{"version": "1.3.0rc4"}`, "1.3.0rc4"},
		{"TGI /info, other fields around it", "tgi", `{"model_id":"m","max_total_tokens":4096,"version":"3.3.4","sha":"abc"}`, "3.3.4"},
		{"HTML", "vllm", `<html><body>Not Found</body></html>`, ""},
		{"a number", "vllm", `{"version": 26}`, ""},
		{"no field", "vllm", `{"detail":"Not Found"}`, ""},
		{"a terminal escape", "vllm", "{\"version\": \"0.26.0\\u001b[31m\"}", ""},
		{"spaces and text", "vllm", `{"version": "rm -rf / please"}`, ""},
		{"far too long", "vllm", `{"version": "` + strings.Repeat("9", 200) + `"}`, ""},
		{"an engine without an endpoint", "sglang", `{"version":"0.5.16"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVersion(tc.engine, []byte(tc.body))
			if got != tc.want {
				t.Errorf("ParseVersion = %q, %v; want %q", got, err, tc.want)
			}
			if tc.want == "" && err == nil {
				t.Errorf("no error for %s", tc.body)
			}
			if tc.want == "" && tc.engine != "sglang" && !errors.Is(err, ErrNoVersion) {
				t.Errorf("error %v is not ErrNoVersion", err)
			}
		})
	}
}

func TestVersionPath(t *testing.T) {
	for engine, want := range map[string]string{"vllm": "/version", "trtllm-serve": "/version", "tgi": "/info", "sglang": "", "llamacpp": "", "dynamo": ""} {
		if got := VersionPath(engine); got != want {
			t.Errorf("VersionPath(%s) = %q, want %q", engine, got, want)
		}
	}
}

func TestBefore(t *testing.T) {
	for _, tc := range []struct {
		v, since string
		is, ok   bool
	}{
		{"0.25.1", "0.26.0", true, true},
		{"0.26.0", "0.26.0", false, true},
		{"v0.26.1", "0.26.0", false, true},
		{"0.9.1", "0.9.2", true, true},
		{"0.10.0", "0.9.2", false, true}, // numbers, not strings
		{"0.9.2.post1", "0.9.2", false, true},
		{"0.12", "0.12.0", false, true},
		{"0.25.1rc1.dev164+ga6183563b", "0.26.0", false, false},
		{"0.26.0+cu130", "0.26.0", false, false},
		{"b10587-3f545be", "0.26.0", false, false},
		{"", "0.26.0", false, false},
	} {
		is, ok := before(tc.v, tc.since)
		if is != tc.is || ok != tc.ok {
			t.Errorf("before(%q, %q) = %v, %v; want %v, %v", tc.v, tc.since, is, ok, tc.is, tc.ok)
		}
	}
}

func TestVersionMeanings(t *testing.T) {
	for _, tc := range []struct {
		engine, from, to string
		want             bool // vllm#48860 named
	}{
		{"vllm", "0.25.1", "0.26.0", true},
		{"vllm", "0.24.0", "0.28.1", true},
		{"vllm", "0.26.0", "0.25.1", true}, // a downgrade steps back
		{"vllm", "0.26.0", "0.26.1", false},
		{"vllm", "0.25.0", "0.25.1", false},
		{"vllm", "", "0.26.0", false},
		{"vllm", "0.25.1", "0.26.0rc1", false}, // a development build: no conclusion
		{"sglang", "0.25.1", "0.26.0", false},
	} {
		got := VersionMeanings(tc.engine, tc.from, tc.to)
		named := len(got) == 1 && strings.Contains(got[0].Text, "vllm#48860")
		if named != tc.want || (!tc.want && len(got) != 0) {
			t.Errorf("VersionMeanings(%s, %q, %q) = %v, want vllm#48860: %v", tc.engine, tc.from, tc.to, got, tc.want)
		}
	}
}

func TestContradictions(t *testing.T) {
	current := []string{"vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:prefix_cache_hits", "vllm:prefix_cache_queries"}
	old := []string{"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_hits", "vllm:gpu_prefix_cache_queries", "vllm:num_requests_running"}
	for _, tc := range []struct {
		name, version string
		families      []string
		want          []string // names the sentences start with
	}{
		{"current names, a current release", "0.26.0", current, nil},
		{"current names, a release before the rename", "0.8.5", current, []string{"vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries"}},
		{"old names, a release that hides them", "0.11.2", old, nil},
		{"old names, a release without them", "0.12.0", old, []string{"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries"}},
		{"old names, a development build", "0.13.0.dev12+g1234", old, nil},
		{"unknown version", "", old, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Contradictions("vllm", tc.version, tc.families)
			if len(got) != len(tc.want) {
				t.Fatalf("Contradictions = %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w+" is on the page, but "+tc.version) {
					t.Errorf("sentence %d = %q, want it about %s and %s", i, got[i], w, tc.version)
				}
			}
		})
	}
}

// TestVersionedNamesAreReleases: the catalog's renames with known releases
// give the names Contradictions checks, each release one kvwatch can
// compare (a number, no development build), both sides of vLLM's 0.9.2
// renames among them.
func TestVersionedNamesAreReleases(t *testing.T) {
	var names []string
	for _, n := range versionedNames() {
		for _, v := range []string{n.Since, n.Until} {
			if r, ok := parseRelease(v); v != "" && (!ok || r.dev) {
				t.Errorf("%s: %q is no release", n.Name, v)
			}
		}
		names = append(names, n.Name)
	}
	for _, want := range []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"} {
		if !slices.Contains(names, want) {
			t.Errorf("versioned names %q lack %s", names, want)
		}
	}
}

// TestLlamaCppBuild: llama.cpp's /props carries its build (the real
// capture's "b10587-3f545be"); a build made outside git says
// "b0-unknown", which is no version.
func TestLlamaCppBuild(t *testing.T) {
	page, err := expo.Parse(readFixture(t, "llamacpp-real-load.prom"), "", NewRegistry().Want)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ props, want string }{
		{"llamacpp-real-props.json", "b10587-3f545be"},
		{"llamacpp-real-b5440-props.json", ""},
	} {
		srv, err := normalizeLlamaCpp(Input{Page: page, Extra: map[string][]byte{PathProps: readFixture(t, tc.props)}})
		if err != nil {
			t.Fatal(err)
		}
		if srv.EngineVersion != tc.want {
			t.Errorf("%s: version %q, want %q", tc.props, srv.EngineVersion, tc.want)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{`{"version":"0.26.0"}`, `{"version":1}`, `<html>`, `{"version":"\u001b"}`, `{"model_id":"m","version":"3.3.4"}`} {
		f.Add("vllm", []byte(s))
		f.Add("tgi", []byte(s))
	}
	f.Fuzz(func(t *testing.T, engine string, body []byte) {
		v, err := ParseVersion(engine, body)
		if err == nil && !versionRE.MatchString(v) {
			t.Fatalf("ParseVersion accepted %q", v)
		}
		if err != nil && v != "" {
			t.Fatalf("ParseVersion returned %q with error %v", v, err)
		}
	})
}
