package querycheck

import (
	"context"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/expo"
)

// TestTextIsSafeForTerminals: label values from a page (and expressions
// from a file) with control characters never reach the output raw.
func TestTextIsSafeForTerminals(t *testing.T) {
	page, err := expo.Parse([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"\x1b[2Jevil\",engine=\"0\"} 1\n"), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &Pages{}
	st.AddPage("http://127.0.0.1:1/metrics", page)
	in := &Inputs{Queries: []Query{{File: "f", Where: "w\x07", Expr: "vllm:num_requests_running{engine=\"1\"}\t# \x1b]0;title\x07"}}}
	rep, err := (&Checker{Store: st}).Check(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteText(&b, true)
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\t") {
		t.Errorf("output holds control characters: %q", out)
	}
	if !strings.Contains(out, `engine="1": no series of vllm:num_requests_running has this value; it has "0"`) {
		t.Errorf("output lacks the value finding:\n%s", out)
	}
}

func TestCaretLine(t *testing.T) {
	for _, tc := range []struct {
		expr string
		pos  int
		line string
		col  int
	}{
		{"rate(x[5m])", 5, "rate(x[5m])", 5},
		{"sum(\n  rate(y[5m])\n)", 12, "  rate(y[5m])", 7}, // y: byte 12, after "sum(\n" and 6 characters
		{"ä + x", 5, "ä + x", 4},
	} {
		line, col := caretLine(tc.expr, tc.pos)
		if line != tc.line || col != tc.col {
			t.Errorf("caretLine(%q, %d) = %q, %d; want %q, %d", tc.expr, tc.pos, line, col, tc.line, tc.col)
		}
	}
}
