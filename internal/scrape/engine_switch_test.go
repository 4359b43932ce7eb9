package scrape

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// vllmPage is a vLLM V1 page: 1,000 blocks of 16 tokens, half used.
const vllmPage = `# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="1000"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
`

// TestEngineSwitch: a target whose pages come from SGLang and vLLM in
// turn (two servers behind one address) is read as each page's engine;
// the scrape whose page's engine differs from the last page read says so
// (PrevEngine and a two_engines warning), a failed scrape in between
// changes nothing, and the target keeps its configured role throughout.
func TestEngineSwitch(t *testing.T) {
	answers := []string{"sglang", "sglang", "vllm", "error", "vllm", "sglang", "vllm"}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" { // vLLM's /version, asked on its first page: not one of the answers
			http.NotFound(w, r)
			return
		}
		switch answers[n.Add(1)-1] {
		case "sglang":
			fmt.Fprint(w, sglangPage)
		case "vllm":
			fmt.Fprint(w, vllmPage)
		default:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	tg := target(t, config.Target{URL: srv.URL, Role: "prefill"})
	s := New(nil2reg(), 0)
	want := []struct {
		engine   string  // "" for a failed scrape
		capacity float64 // tokens, from the page
		prev     string
	}{
		{"sglang", 100000, ""}, {"sglang", 100000, ""}, {"vllm", 16000, "sglang"}, {"", 0, ""},
		{"vllm", 16000, ""}, {"sglang", 100000, "vllm"}, {"vllm", 16000, "sglang"},
	}
	for i, w := range want {
		res := s.Scrape(t.Context(), tg)
		if w.engine == "" {
			if res.OK() {
				t.Fatalf("scrape %d: ok, want a failure", i)
			}
			continue
		}
		if !res.OK() {
			t.Fatalf("scrape %d: %s %v", i, res.Reason, res.Err)
		}
		sv := res.Server
		if sv.Engine != w.engine || sv.Capacity.V != w.capacity || sv.Role != kv.RolePrefill || res.PrevEngine != w.prev {
			t.Errorf("scrape %d: engine %s, capacity %g, role %s, previous engine %q; want %s, %g, prefill, %q",
				i, sv.Engine, sv.Capacity.V, sv.Role, res.PrevEngine, w.engine, w.capacity, w.prev)
		}
		var changed []string
		for _, x := range sv.Warnings {
			if x.Reason == kv.WarnTwoEngines {
				changed = append(changed, x.Detail)
			}
		}
		switch {
		case w.prev == "" && len(changed) != 0:
			t.Errorf("scrape %d: warnings %q, want none", i, changed)
		case w.prev != "" && (len(changed) != 1 || !strings.Contains(changed[0], "engine changed from "+w.prev+" to "+w.engine) ||
			!strings.Contains(changed[0], "role is prefill (the configured one)")):
			t.Errorf("scrape %d: two_engines warnings %q, want one naming %s to %s and the configured role", i, changed, w.prev, w.engine)
		}
	}
}
