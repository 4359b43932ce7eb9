package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// status and top read targets through the pipeline of the config in
// effect: the body limit and the planning threshold of --config.file
// reach both (top used to scrape with no body limit and plan with 0.9
// whatever the file said).
func TestStatusAndTopReadTheConfigInEffect(t *testing.T) {
	decode := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-decode-tp2.prom"))
	target := "  - {name: decode-0, url: " + decode.URL + "}\n"

	// A body limit below the page's size fails the target on both faces.
	small := writeConfig(t, "global: {body_size_limit: 200B}\ntargets:\n"+target)
	code, out, _ := run(t, "status", "-o", "json", "--config.file", small)
	if code != exitFailed {
		t.Errorf("status with a 200 B body limit: exit %d, want %d", code, exitFailed)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	if len(rep.Servers) != 1 || rep.Servers[0].OK || rep.Servers[0].Reason != "too_large" {
		t.Errorf("status with a 200 B body limit: %+v, want decode-0 failed for the limit", rep.Servers)
	}
	code, out, _ = run(t, "top", "--once", "--width", "200", "--config.file", small)
	if code != exitFailed || !strings.Contains(out, "DOWN too_large") {
		t.Errorf("top with a 200 B body limit: exit %d, want %d and decode-0 DOWN for the limit:\n%s", code, exitFailed, out)
	}

	// The planning threshold: with 0.004 (the page holds 0.47 %) the KV cache is what limits the
	// server; with the default 0.90 it is not.
	for _, c := range []struct {
		yml  string
		want bool
	}{{"", false}, {"alerts: {kv_usage_warning: 0.004}\n", true}} {
		f := writeConfig(t, c.yml+"targets:\n"+target)
		code, out, _ := run(t, "status", "-o", "json", "--config.file", f)
		if code != exitOK {
			t.Fatalf("status: exit %d", code)
		}
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if got := rep.Servers[0].Plan != nil && rep.Servers[0].Plan.Limit == kv.FactorKV; got != c.want {
			t.Errorf("status with %q: KV limits = %v, want %v (%+v)", c.yml, got, c.want, rep.Servers[0].Plan)
		}
		code, out, _ = run(t, "top", "--once", "--width", "200", "--config.file", f)
		if code != exitOK {
			t.Fatalf("top: exit %d", code)
		}
		var row []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "decode-0" {
				row = f
			}
		}
		if row == nil {
			t.Fatalf("top: no decode-0 row:\n%s", out)
		}
		if got := slices.Contains(row, string(kv.FactorKV)); got != c.want {
			t.Errorf("top with %q: LIMIT kv = %v, want %v:\n%s", c.yml, got, c.want, out)
		}
	}
}
