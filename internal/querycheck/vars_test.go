package querycheck

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

func TestSubstitute(t *testing.T) {
	vars := map[string]Variable{
		"model":    {Name: "model", Type: "query", Value: "llama"},
		"top":      {Name: "top", Type: "custom", Value: "5"},
		"interval": {Name: "interval", Type: "interval", Value: "2m"},
		"metric":   {Name: "metric", Type: "custom", Value: "up"},
	}
	for _, tc := range []struct {
		in, want string
	}{
		{`rate(x[$__rate_interval])`, `rate(x[4m])`},
		{`rate(x[${__rate_interval}])`, `rate(x[4m])`},
		{`rate(x[$__interval]) * $__range_s`, `rate(x[1m]) * 3600`},
		{`increase(x[$__range])`, `increase(x[1h])`},
		{`x{model_name="$model"}`, `x{model_name="__kvwatch_var_model__"}`},
		{`x{model_name=~"${model:regex}"}`, `x{model_name=~"__kvwatch_var_model__"}`},
		{`x{model_name="[[model]]"}`, `x{model_name="__kvwatch_var_model__"}`},
		{`topk($top, x)`, `topk(5, x)`},
		{`rate(x[$interval])`, `rate(x[2m])`},
		{`rate(x[$model])`, `rate(x[5m])`},
		{`x offset $interval`, `x offset 2m`},
		{`max_over_time(x[1h:$interval])`, `max_over_time(x[1h:2m])`},
		{`${metric}_total`, `__kvwatch_var_metric___total`},
		{`label_replace(x, "a", "$1", "b", "(.*)")`, `label_replace(x, "a", "$1", "b", "(.*)")`},
		{`x{a="$"}`, `x{a="$"}`},
		{`x{a="\"$model"}`, `x{a="\"__kvwatch_var_model__"}`},
	} {
		got := Substitute(tc.in, vars, false)
		if got.Text != tc.want {
			t.Errorf("Substitute(%q) = %q, want %q", tc.in, got.Text, tc.want)
		}
	}
}

func TestSubstituteUndefinedAndPositions(t *testing.T) {
	in := `sum(rate(vllm:x{m="$nope"}[$__rate_interval])) / y`
	s := Substitute(in, map[string]Variable{}, false)
	if len(s.Undefined) != 1 || s.Undefined[0] != "nope" {
		t.Errorf("Undefined = %q, want [nope]", s.Undefined)
	}
	// "y" is the last byte in both texts.
	if got := s.Orig(len(s.Text) - 1); got != len(in)-1 {
		t.Errorf("Orig(end) = %d, want %d", got, len(in)-1)
	}
	// A position inside the placeholder maps to the '$' of $nope (offset 20).
	p := strings.Index(s.Text, placeholderPrefix) + 3
	if got := s.Orig(p); got != strings.Index(in, "$nope") {
		t.Errorf("Orig(inside placeholder) = %d, want %d", got, strings.Index(in, "$nope"))
	}
}

// FuzzSubstitute: no panic; offsets map inside the original; text outside
// substitutions maps to the same bytes; the mapping never goes backwards.
func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{`rate(x[$__rate_interval])`, `x{a="$v",b=~"${w:pipe}"}`, `[[v]] + $__range_ms`, `"$`, "`$a`", `$$$`, `${`, `[[a:`, `x offset $v`} {
		f.Add(s)
	}
	vars := map[string]Variable{"v": {Name: "v", Value: "5m"}, "w": {Name: "w", Value: "a"}, "a": {Name: "a", Value: "1"}}
	f.Fuzz(func(t *testing.T, in string) {
		for _, numeric := range []bool{false, true} {
			s := Substitute(in, vars, numeric)
			prev := 0
			for p := 0; p <= len(s.Text); p++ {
				o := s.Orig(p)
				if o < 0 || o > len(in) {
					t.Fatalf("Orig(%d) = %d outside [0, %d] for %q", p, o, len(in), in)
				}
				if o < prev {
					t.Fatalf("Orig(%d) = %d < Orig(%d) = %d for %q", p, o, p-1, prev, in)
				}
				prev = o
				if p < len(s.Text) && !s.inSpan(p) && s.Text[p] != in[o] {
					t.Fatalf("byte %d (%q) maps to %d (%q) for %q", p, s.Text[p], o, in[o], in)
				}
			}
		}
	})
}

// FuzzCheckExpr drives the parser glue: any expression, checked offline,
// gives findings whose positions and selectors are exact slices of it.
func FuzzCheckExpr(f *testing.F) {
	for _, s := range []string{
		`histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds[$__rate_interval])))`,
		`rate(vllm:num_preemptions[5m]) / rate(vllm:gpu_prefix_cache_queries_total[5m])`,
		`sglang_token_usage{model_name="$model", x="y"}`, `topk($n, llamacpp_requests_processing)`, `{__name__="vllm:x"}`,
		"sum(\n  rate(tgi_request_count_total[5m])\n)", `label_values(vllm:num_requests_running, model_name)`,
	} {
		f.Add(s, true)
	}
	ch := &Checker{}
	f.Fuzz(func(t *testing.T, expr string, grafana bool) {
		in := &Inputs{Queries: []Query{{File: "f", Where: "w", Expr: expr, Grafana: grafana, Vars: map[string]Variable{"model": {Name: "model"}}}}}
		rep, err := ch.Check(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range rep.Findings {
			if fd.Pos < 0 || fd.Pos > len(expr) {
				t.Fatalf("Pos %d outside %q", fd.Pos, expr)
			}
			if !strings.HasPrefix(expr[fd.Pos:], fd.Selector) {
				t.Fatalf("Selector %q is not at %d of %q", fd.Selector, fd.Pos, expr)
			}
		}
		if grafana {
			// What the checker parsed must be what Substitute made.
			if _, err := parser.NewParser(parser.Options{EnableExperimentalFunctions: true}).ParseExpr(Substitute(expr, nil, false).Text); err == nil {
				for _, fd := range rep.Findings {
					if fd.Kind == KindParse {
						t.Fatalf("parse error reported for %q, which parses after substitution", expr)
					}
				}
			}
		}
	})
}
