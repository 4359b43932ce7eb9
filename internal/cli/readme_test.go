package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readmePorts are the ports the README's example shows, by endpoint name:
// those of `kvwatch simulate --base-port 30000` with the default scenario.
var readmePorts = map[string]string{"router": "30000", "prefill": "30001", "decode": "30002"}

// TestReadmeExample: the README's example is what `kvwatch status` prints
// against the simulator's default scenario (seed 1, one simulated minute
// in), with the ports of `kvwatch simulate --base-port 30000`. Rewrite it
// with go test ./internal/cli -run TestReadmeExample -update.
func TestReadmeExample(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "pd-sglang", 1)
	defer c.Close()
	c.Advance(time.Minute)
	args := []string{"status"}
	var cmdline []string
	replace := []string{}
	for _, name := range []string{"prefill", "decode", "router"} {
		for _, ep := range c.Endpoints() {
			if ep.Name != name {
				continue
			}
			host := strings.TrimPrefix(ep.URL, "http://")
			want := "127.0.0.1:" + readmePorts[name]
			if len(host) != len(want) {
				t.Skipf("port of %s has %d digits: the columns would differ from the README's", host, len(host)-10)
			}
			args = append(args, ep.Role+"="+ep.URL)
			cmdline = append(cmdline, ep.Role+"=http://"+want)
			replace = append(replace, host, want)
		}
	}
	code, out, errs := run(t, args...)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	block := "```\n$ kvwatch status " + strings.Join(cmdline, " ") + "\n" + strings.NewReplacer(replace...).Replace(out) + "```\n"

	path := filepath.Join("..", "..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "```\n$ kvwatch status ")
	if start < 0 {
		t.Fatalf("README.md has no status example block")
	}
	end := strings.Index(readme[start+3:], "```\n")
	if end < 0 {
		t.Fatalf("README.md: the status example block does not end")
	}
	end += start + 3 + len("```\n")
	if *update {
		readme = readme[:start] + block + readme[end:]
		if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(readme[start:end], block); diff != "" {
		t.Errorf("README.md's example is not what status prints against the default scenario; run go test ./internal/cli -run TestReadmeExample -update (-README +status):\n%s", diff)
	}
}
