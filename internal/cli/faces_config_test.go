package cli

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

// status (text and JSON), top and serve's report (what the web UI shows)
// name the targets of one config alike: a config name, a target without
// one by its host:port, a NAME=URL argument and a ROLE=URL argument (by
// its host:port) on the command line of status and top.
func TestFacesNameTargetsAlike(t *testing.T) {
	page := filepath.Join("testdata", "sglang-current-decode-tp2.prom")
	named, unnamed := testenv.EngineFileServer(t, "/metrics", page), testenv.EngineFileServer(t, "/metrics", page)
	arg, roleArg := testenv.EngineFileServer(t, "/metrics", page), testenv.EngineFileServer(t, "/metrics", page)
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	cfg := writeConfig(t, "targets:\n  - {name: decode-0, url: "+named.URL+"}\n  - {url: "+unnamed.URL+"}\n")
	args := []string{"--config.file", cfg, "d1=" + arg.URL, "decode=" + roleArg.URL}
	want := []string{"decode-0", host(unnamed.URL), "d1", host(roleArg.URL)}

	t.Setenv("COLUMNS", "400")
	_, out, errs := run(t, append([]string{"status", "-o", "json"}, args...)...)
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status -o json: %v: %s", err, errs)
	}
	var jsonNames []string
	for _, s := range rep.Servers {
		jsonNames = append(jsonNames, s.Name)
	}
	if !slices.Equal(jsonNames, want) {
		t.Errorf("status -o json names %q, want %q", jsonNames, want)
	}
	_, out, _ = run(t, append([]string{"status"}, args...)...)
	_, top, _ := run(t, append([]string{"top", "--once", "--width", "200"}, args...)...)
	for _, name := range want {
		if !regexp.MustCompile(`(?m)^decode +` + regexp.QuoteMeta(name) + ` `).MatchString(out) {
			t.Errorf("status has no row named %s:\n%s", name, out)
		}
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +(127\.0\.0\.1:\d+ +)?decode `).MatchString(top) {
			t.Errorf("top has no row named %s:\n%s", name, top)
		}
	}

	// serve with the config and the named targets of the command line in
	// it (serve takes no target arguments): its report names them alike.
	cfg = writeConfig(t, "global: {scrape_interval: 1s, scrape_timeout: 1s}\ntargets:\n  - {name: decode-0, url: "+named.URL+"}\n  - {url: "+unnamed.URL+"}\n"+
		"  - {name: d1, url: "+arg.URL+"}\n  - {role: decode, url: "+roleArg.URL+"}\n")
	addr := testenv.FreeAddr(t)
	runBackground(t, "serve", "--config.file", cfg, "--web.listen-address", addr, "--history", "0")
	var serveNames []string
	for deadline := time.Now().Add(30 * time.Second); len(serveNames) < len(want); {
		if time.Now().After(deadline) {
			t.Fatalf("serve's report names %q after 30s, want %q", serveNames, want)
		}
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get("http://" + addr + "/api/kvwatch/v1/report")
		if err != nil {
			continue
		}
		var r report.Report
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil {
			continue
		}
		serveNames = serveNames[:0]
		for _, s := range r.Servers {
			serveNames = append(serveNames, s.Name)
		}
	}
	slices.Sort(serveNames)
	slices.Sort(want)
	if !slices.Equal(serveNames, want) {
		t.Errorf("serve's report names %q, want %q as status and top", serveNames, want)
	}
}
