package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestSimulateDefaultScenario(t *testing.T) {
	sim := runBackground(t, "simulate", "--speed=10", "--tick=50ms")
	out, errb := &sim.Stdout, &sim.Stderr
	var lines []string
	for range 500 {
		lines = strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) == 3 {
			break
		}
		if code, ok := sim.Exited(); ok {
			t.Fatalf("simulate exited early with %d; stderr: %s", code, errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(lines) != 3 {
		t.Fatalf("stdout = %q, want 3 endpoint lines", out.String())
	}
	wantRoles := []string{"router", "prefill", "decode"}
	wantFamily := []string{"smg_worker_health", "sglang:kv_used_tokens", "sglang:max_total_num_tokens"}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != wantRoles[i] || !strings.HasPrefix(f[2], "http://127.0.0.1:") || !strings.HasSuffix(f[2], "/metrics") {
			t.Fatalf("line %d = %q, want %q <engine> http://127.0.0.1:<port>/metrics", i, l, wantRoles[i])
		}
		resp, err := http.Get(f[2])
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "# TYPE "+wantFamily[i]+" ") {
			t.Errorf("GET %s = %d, body without %s:\n%.300s", f[2], resp.StatusCode, wantFamily[i], body)
		}
	}
	if !strings.Contains(lines[2], "sglang") {
		t.Errorf("decode line %q: want engine sglang", lines[2])
	}
}

func TestSimulateBadScenario(t *testing.T) {
	var out, errb testenv.Buffer
	code := Run(context.Background(), []string{"simulate", "--scenario", "no-such"}, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	if code != exitUsage {
		t.Errorf("exit code = %d, want %d", code, exitUsage)
	}
	want := `kvwatch: unknown scenario "no-such"; want a built-in (dynamo, dynamo-kvbm, mixed, pd-sglang, pd-sglang-dp, planning, sglang-hicache, sglang-hybrid, sglang-legacy, sglang-mamba, trtllm-serve, vllm-dp, vllm-lmcache, vllm-offload) or a YAML file`
	if got := strings.TrimSpace(errb.String()); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}
