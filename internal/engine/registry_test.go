package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRegistryOrder(t *testing.T) {
	want := []string{"sglang", "sgl-router", "vllm", "tgi", "triton", "llamacpp", "trtllm-serve", "lmdeploy", "dynamo"}
	if diff := cmp.Diff(want, NewRegistry().Names()); diff != "" {
		t.Errorf("detection order (-want +got):\n%s", diff)
	}
}

// TestDisabledHints: every adapter says how to turn its metrics on.
func TestDisabledHints(t *testing.T) {
	for _, a := range NewRegistry().Adapters() {
		h, ok := a.(DisabledHint)
		if !ok || h.DisabledHint() == "" {
			t.Errorf("%s has no DisabledHint", a.Name())
		}
	}
}

// TestWantCoversEveryAdapter: the filter keeps every name an adapter reads,
// and every name is in canonical form (the filter compares canonical names).
func TestWantCoversEveryAdapter(t *testing.T) {
	r := NewRegistry()
	for _, a := range r.Adapters() {
		for _, n := range a.MetricNames() {
			if !r.Want(n) {
				t.Errorf("%s reads %q but Want drops it", a.Name(), n)
			}
			if strings.HasPrefix(n, "sglang_") || strings.HasPrefix(n, "vllm_") || strings.HasPrefix(n, "lmdeploy_") || strings.HasPrefix(n, "llamacpp_") {
				t.Errorf("%s lists %q, not its canonical colon form", a.Name(), n)
			}
		}
	}
	if r.Want("sglang:time_to_first_token_seconds_bucket") {
		t.Error("Want keeps histogram buckets no adapter reads")
	}
}

func TestByName(t *testing.T) {
	r := NewRegistry()
	if a, err := r.ByName("trtllm-serve"); err != nil || a.Name() != "trtllm-serve" {
		t.Errorf("ByName(trtllm-serve) = %v, %v", a, err)
	}
	_, err := r.ByName("ollama")
	if want := `unknown engine "ollama"; want one of sglang, sgl-router, vllm, tgi, triton, llamacpp, trtllm-serve, lmdeploy, dynamo`; err == nil || err.Error() != want {
		t.Errorf("ByName(ollama) = %v, want %q", err, want)
	}
}
