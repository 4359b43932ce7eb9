package expo

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
)

func wantNames(names ...string) Want {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return func(n string) bool { return m[n] }
}

// values returns name's sample values in page order.
func values(p *Page, name string) []float64 {
	var out []float64
	for _, s := range p.Samples(name) {
		out = append(out, s.Value)
	}
	return out
}

// testColon are the colon prefixes of the engine registry, written out
// (engine.Registry.ColonPrefixes derives them; expo knows no engine).
var testColon = []string{"llamacpp", "lmdeploy", "sglang", "vllm"}

// testParser folds testColon; parse reads with a fresh one, sharing nothing
// between calls.
var testParser = NewParser(testColon...)

func parse(body []byte, contentType string, want Want) (*Page, error) {
	return NewParser(testColon...).Parse(body, contentType, want)
}

func TestCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sglang_token_usage", "sglang:token_usage"},
		{"sglang:token_usage", "sglang:token_usage"},
		{"vllm_num_requests_running", "vllm:num_requests_running"},
		{"lmdeploy_gpu_cache_usage_perc", "lmdeploy:gpu_cache_usage_perc"},
		{"llamacpp_requests_processing", "llamacpp:requests_processing"},
		{"sglang", "sglang"},
		{"sglangx_foo", "sglangx_foo"},
		{"tgi_queue_size", "tgi_queue_size"},
		{"smg_worker_health", "smg_worker_health"},
	}
	for _, tt := range tests {
		if got := testParser.Canonical(tt.in); got != tt.want {
			t.Errorf("Canonical(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, body, contentType string
		want                    Want
		// name → values expected.
		wantValues   map[string][]float64
		wantFamilies int
		wantExample  []string
	}{
		{
			name: "filter keeps only wanted families; underscore prefix folded",
			body: `# HELP sglang_num_running_reqs running
# TYPE sglang_num_running_reqs gauge
sglang_num_running_reqs{tp_rank="0"} 3
sglang_num_running_reqs{tp_rank="1"} 3
# TYPE sglang_time_to_first_token_seconds histogram
sglang_time_to_first_token_seconds_bucket{le="0.1"} 1
sglang_time_to_first_token_seconds_bucket{le="+Inf"} 2
sglang_time_to_first_token_seconds_sum 0.3
sglang_time_to_first_token_seconds_count 2
`,
			want:         wantNames("sglang:num_running_reqs"),
			wantValues:   map[string][]float64{"sglang:num_running_reqs": {3, 3}, "sglang:time_to_first_token_seconds_bucket": nil},
			wantFamilies: 2,
			wantExample:  []string{"sglang_num_running_reqs", "sglang_time_to_first_token_seconds"},
		},
		{
			name:         "nil want keeps everything",
			body:         "a 1\nb{x=\"y\"} 2\n",
			wantValues:   map[string][]float64{"a": {1}, "b": {2}},
			wantFamilies: 2, wantExample: []string{"a", "b"},
		},
		{
			name:         "openmetrics with _total and _created; EOF kept",
			body:         "# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total 5\nvllm:prompt_tokens_created 1.7e9\n# TYPE other gauge\nother 1\n# EOF\n",
			contentType:  "application/openmetrics-text; version=1.0.0; charset=utf-8",
			want:         wantNames("vllm:prompt_tokens_total"),
			wantValues:   map[string][]float64{"vllm:prompt_tokens_total": {5}, "vllm:prompt_tokens_created": nil, "other": nil},
			wantFamilies: 2, wantExample: []string{"vllm:prompt_tokens", "other"},
		},
		{
			name:       "UTF-8 quoted names are left to the parser",
			body:       "{\"sglang:num_queue_reqs\",tp_rank=\"0\"} 7\n{\"utf8.name\"} 1\n",
			want:       wantNames("sglang:num_queue_reqs"),
			wantValues: map[string][]float64{"sglang:num_queue_reqs": {7}, "utf8.name": nil},
		},
		{
			name: "lines without a trailing newline",
			body: "tgi_queue_size 4",
			want: wantNames("tgi_queue_size"), wantValues: map[string][]float64{"tgi_queue_size": {4}},
			wantFamilies: 1, wantExample: []string{"tgi_queue_size"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parse([]byte(tt.body), tt.contentType, tt.want)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for name, want := range tt.wantValues {
				if diff := cmp.Diff(want, values(p, name)); diff != "" {
					t.Errorf("Samples(%q) (-want +got):\n%s", name, diff)
				}
			}
			if tt.wantExample != nil {
				if p.Families != tt.wantFamilies {
					t.Errorf("Families = %d, want %d", p.Families, tt.wantFamilies)
				}
				if diff := cmp.Diff(tt.wantExample, p.Example); diff != "" {
					t.Errorf("Example (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestParseKeepsTypesAndLabels(t *testing.T) {
	p, err := parse([]byte("# TYPE sglang_kv_used_tokens gauge\nsglang_kv_used_tokens{dp_rank=\"1\",tp_rank=\"3\"} 42\n"), "", wantNames("sglang:kv_used_tokens"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Type("sglang:kv_used_tokens"); got != model.MetricTypeGauge {
		t.Errorf("Type = %v, want gauge", got)
	}
	s := p.Samples("sglang:kv_used_tokens")
	if len(s) != 1 || s[0].Labels.Get("dp_rank") != "1" || s[0].Labels.Get("tp_rank") != "3" || s[0].Name != "sglang:kv_used_tokens" {
		t.Errorf("Samples = %+v, want one sample with dp_rank 1, tp_rank 3", s)
	}
	if !p.Has("sglang:kv_used_tokens") || p.Has("sglang_kv_used_tokens") {
		t.Errorf("Has: the canonical name only, got names %v", p.Names())
	}
}

func TestParseNaN(t *testing.T) {
	p, err := parse([]byte("a NaN\nb +Inf\nc -Inf\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		s := p.Samples(n)
		if len(s) != 1 || Finite(s[0].Value) {
			t.Errorf("Samples(%s) = %+v, want one non-finite sample (adapters decide)", n, s)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, body, contentType string
		notMetrics              bool
		want                    string
	}{
		{"HTML", "<!DOCTYPE html>\n<html><body>Not Found</body></html>", "", true, "the body is HTML; is the URL the engine's metrics endpoint?"},
		{"JSON", `{"iter": 1, "kvCacheStats": {"maxNumBlocks": 10}}`, "", true, "the body is JSON; point kvwatch at the Prometheus endpoint (trtllm-serve: /prometheus/metrics)"},
		{"JSON array", `[{"id":0,"n_ctx":1024}]`, "", true, "the body is JSON"},
		{"garbage", "\x00\x01\x02 binary\n", "", true, `line 1: "\x00\x01\x02 binary" is not a metric line`},
		{"garbage after a good line", "ok 1\n%%% 2\n", "", true, `line 2: "%%% 2" is not a metric line`},
		{"a name alone at the end of the body", "ok 1\nsglang:num_running_reqs", "", true, `line 2: "sglang:num_running_reqs" is not a metric line`},
		{"a repeated name without a value", "ok 1\nok x\n", "", true, `line 2: "ok x" is not a metric line`},
		{"truncated openmetrics", "# TYPE a gauge\na 1\n", "application/openmetrics-text; version=1.0.0", false, "openmetrics page ends without '# EOF': the body was cut short"},
		{"truncated text format mid-labels", "sglang:num_running_reqs{tp_rank=\"0", "", false, "parse metrics:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.body), tt.contentType, wantNames("a", "ok", "sglang:num_running_reqs"))
			if err == nil {
				t.Fatalf("parse(%q) succeeded, want an error containing %q", tt.body, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parse(%q) = %q, want it to contain %q", tt.body, err, tt.want)
			}
			if got := errors.Is(err, ErrNotMetrics); got != tt.notMetrics {
				t.Errorf("errors.Is(err, ErrNotMetrics) = %v, want %v", got, tt.notMetrics)
			}
		})
	}
}

// expo knows no engine: without colon prefixes, names are kept as written.
func TestNoColonPrefixesKeepsNames(t *testing.T) {
	body := []byte("sglang_token_usage 0.5\n")
	for _, p := range []*Parser{nil, NewParser()} {
		page, err := p.Parse(body, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !page.Has("sglang_token_usage") || page.Has("sglang:token_usage") {
			t.Errorf("parser %v: names %v, want sglang_token_usage as written", p, page.Names())
		}
	}
}
