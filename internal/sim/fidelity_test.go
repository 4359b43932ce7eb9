package sim

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// fixtures holds the real captures, the repository's own copy (the engine
// adapters' test data; see SOURCES.md there).
const fixtures = "../engine/testdata/fixtures"

// explained lists every difference between a real capture and the
// simulator's page for the same engine that the engine reference
// (../shared/reference/engine-metrics.md) explains by version or by the
// simulator's documented scope. A difference not listed fails the test; an
// entry that no longer matches a difference fails it too.
var explained = []struct {
	fixture, family, diff, reason string
}{
	// SGLang late 2024 (docs sample): label model_name only.
	{"sglang-docs-production_metrics.prom", "*", "labels +engine_type", "tokenizer families: engine_type was added by ~0.4.4 (PR #4412), after this sample (§1.1, §1.2)"},
	{"sglang-docs-production_metrics.prom", "*", "labels +engine_type +moe_ep_rank +pp_rank +tp_rank", "scheduler families: engine_type and the rank labels of the current collector (§1.2) postdate the sample"},
	{"sglang-docs-production_metrics.prom", "sglang:time_per_output_token_seconds", "absent", "older versions only; inter_token_latency_seconds now (§1.3)"},
	{"sglang-docs-production_metrics.prom", "sglang:func_latency_seconds", "absent", "older versions only (§1.3)"},
	// SGLang ~0.4.4 (PR #4412): model_name, engine_type.
	{"sglang-pr4412-description-partial.prom", "*", "labels +moe_ep_rank +pp_rank +tp_rank", "rank labels of the current collector (§1.2)"},
	// SGLang's first metrics (PR #1853): label name. Compared with sglang-legacy.
	{"sglang-pr1853-review-partial.prom", "*", "labels +engine_type +model_name +pp_rank +tp_rank -name", "scheduler families: label name became model_name, then engine_type and rank labels were added (§1.1, §1.2)"},
	{"sglang-pr1853-review-partial.prom", "*", "labels +engine_type +model_name -name", "tokenizer families: label name became model_name (+engine_type) (§1.1)"},
	{"sglang-pr1853-review-partial.prom", "sglang:max_prefill_tokens", "absent", "first-version constant, gone in later collectors (§1.9 legacy dashboard)"},
	{"sglang-pr1853-review-partial.prom", "sglang:max_running_requests", "absent", "first-version constant, gone in later collectors (§1.9 legacy dashboard)"},
	// vLLM V1 docs sample: model_name only.
	{"vllm-docs-design-metrics-example_output.prom", "*", "labels +engine", "the docs sample has no engine label; V1 loggers add engine per DP rank (§3.2)"},
	// Not simulated.
	{"vllm-docs-usage-metrics.prom", "vllm:iteration_tokens_total", "absent", "not simulated: the load model has no per-step token histogram"},
	{"vllm-v0-aibrix-docs-runtime_rst-passthrough.prom", "vllm:iteration_tokens_total", "absent", "not simulated: the load model has no per-step token histogram"},
	{"vllm-v0-aibrix-docs-runtime_rst-passthrough.prom", "vllm:lora_requests_info", "absent", "not simulated: no LoRA adapters"},
	{"triton-core-tensorrtllm_backend-README-base_metrics.prom", "*", "absent", "Triton core nv_inference_* families are not simulated; they carry no KV signal (§6.1)"},
}

// pairs maps each fixture to the simulated engine it is compared with,
// and the engine's version when not its default.
var pairs = []struct{ fixture, engine, version string }{
	{"sglang-docs-production_metrics.prom", EngineSGLang, ""},
	{"sglang-pr4412-description-partial.prom", EngineSGLang, ""},
	{"sglang-pr1853-review-partial.prom", EngineSGLangLegacy, ""},
	{"vllm-docs-design-metrics-example_output.prom", EngineVLLM, ""},
	{"vllm-docs-usage-metrics.prom", EngineVLLM, ""},
	{"vllm-v0-aibrix-docs-runtime_rst-passthrough.prom", EngineVLLMV0, ""},
	{"llamacpp-real-load.prom", EngineLlamaCpp, ""},
	{"llamacpp-real-idle.prom", EngineLlamaCpp, ""},
	{"llamacpp-real-load-queued.prom", EngineLlamaCpp, ""},
	{"llamacpp-real-b5440-load.prom", EngineLlamaCpp, VersionLlamaCppBefore},
	{"llamacpp-real-b5440-idle.prom", EngineLlamaCpp, VersionLlamaCppBefore},
	{"llamacpp-real-b5440-load-queued.prom", EngineLlamaCpp, VersionLlamaCppBefore},
	{"triton-trtllm-tensorrtllm_backend-README-inflight_batcher.prom", EngineTriton, ""},
	{"triton-core-tensorrtllm_backend-README-base_metrics.prom", EngineTriton, ""},
}

func labelNames(f *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if n := l.GetName(); n != "le" && n != "quantile" && n != "pid" {
				set[n] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestFidelity(t *testing.T) {
	pages := map[string]map[string]*dto.MetricFamily{} // by engine and version
	c := newMixed(t)
	for _, s := range c.servers {
		if s.spec.MetricPrefix == "sglang_" {
			continue
		}
		for _, v := range versionsOrNone(s.spec.Engine) {
			if _, done := pages[s.spec.Engine+" "+v]; done {
				continue
			}
			if v != "" {
				if err := c.SetVersion(s.spec.Name, v); err != nil {
					t.Fatal(err)
				}
			}
			pages[s.spec.Engine+" "+v] = parse(t, s.snap.Load().metrics())
		}
	}
	var diffs []string
	for _, p := range pairs {
		raw, err := os.ReadFile(filepath.Join(fixtures, p.fixture))
		if err != nil {
			t.Fatalf("fixture: %v", err)
		}
		var keep []string
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.TrimSpace(l) != "..." { // the documents' own elisions
				keep = append(keep, l)
			}
		}
		real := parse(t, []byte(strings.Join(keep, "\n")))
		version := p.version
		if version == "" {
			version = versionsOrNone(p.engine)[0]
		}
		sim := pages[p.engine+" "+version]
		for name, rf := range real {
			sf := sim[name]
			if sf == nil {
				diffs = append(diffs, p.fixture+"|"+name+"|absent")
				continue
			}
			if rf.GetType() != sf.GetType() {
				diffs = append(diffs, p.fixture+"|"+name+"|type "+rf.GetType().String()+" → "+sf.GetType().String())
			}
			rl, sl := labelNames(rf), labelNames(sf)
			var d []string
			for _, n := range sl {
				if !slices.Contains(rl, n) {
					d = append(d, "+"+n)
				}
			}
			for _, n := range rl {
				if !slices.Contains(sl, n) {
					d = append(d, "-"+n)
				}
			}
			if len(d) > 0 {
				diffs = append(diffs, p.fixture+"|"+name+"|labels "+strings.Join(d, " "))
			}
		}
	}
	used := make([]bool, len(explained))
	for _, d := range diffs {
		f := strings.SplitN(d, "|", 3)
		ok := false
		for i, e := range explained {
			if e.fixture == f[0] && (e.family == "*" || e.family == f[1]) && e.diff == f[2] {
				ok, used[i] = true, true
				break
			}
		}
		if !ok {
			t.Errorf("%s: %s: %s, and the reference does not explain it; fix the simulator or add the reason to explained", f[0], f[1], f[2])
		}
	}
	for i, e := range explained {
		if !used[i] {
			t.Errorf("explained entry %s %s %q matches no difference any more; remove it", e.fixture, e.family, e.diff)
		}
	}
}

func newMixed(t *testing.T) *Cluster {
	t.Helper()
	sc, err := BuiltinScenario("mixed")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 1, ManualClock: true, Epoch: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	return c
}

// versionsOrNone lists engine's versions, or "" for an engine with one.
func versionsOrNone(engine string) []string {
	if v := Versions(engine); len(v) > 0 {
		return v
	}
	return []string{""}
}
