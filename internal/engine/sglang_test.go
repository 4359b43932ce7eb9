package engine

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestSGLangMaxRunning(t *testing.T) {
	fixture, err := os.ReadFile("testdata/fixtures/sglang-pr1853-review-partial.prom")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body string
		want kv.Value
	}{
		// The first generation's gauge, label "name": 2231 as printed.
		{"first generation", string(fixture), dir(2231)},
		// Newest: one series per scheduler with cap_source; TP ranks of a DP
		// rank repeat it, DP ranks each have their share: 40 + 40 + 40.
		{"per DP rank", `# TYPE sglang:max_running_requests gauge
sglang:max_running_requests{cap_source="requested",dp_rank="0",tp_rank="0",pp_rank="0",model_name="m"} 40
sglang:max_running_requests{cap_source="requested",dp_rank="0",tp_rank="1",pp_rank="0",model_name="m"} 40
sglang:max_running_requests{cap_source="requested",dp_rank="1",tp_rank="0",pp_rank="0",model_name="m"} 40
sglang:max_running_requests{cap_source="requested",dp_rank="2",tp_rank="0",pp_rank="0",model_name="m"} 40
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",tp_rank="0",pp_rank="0",model_name="m"} 12
`, der(120)},
		{"absent", "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 3\n", na},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "text/plain", nil)
			if !cmp.Equal(s.MaxRunning, tt.want, valueCmp) {
				t.Errorf("MaxRunning = %+v, want %+v", s.MaxRunning, tt.want)
			}
		})
	}
}
