package stack

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/config"
)

// goldenConfig has a target of each kind the engine scrape jobs treat
// apart: roles (one unset), a path, none (trtllm-serve's own), https and a
// query, TLS settings or a proxy (not scraped directly), and file_sd files with and
// without them.
const goldenConfig = `global:
  labels: {cluster: c0, model: llama}
targets:
  - name: decode-0
    url: http://127.0.0.1:30002
    role: decode
    labels: {cluster: c1, pool: p1}
  - name: prefill-0
    url: http://127.0.0.1:30001
    role: prefill
    labels: {cluster: c1, pool: p1}
  - url: https://127.0.0.1:30000/metrics?format=text
  - name: trtllm-0
    url: http://127.0.0.1:8000
    engine: trtllm-serve
    role: unified
  - name: selfsigned-0
    url: https://127.0.0.1:30003
    role: decode
    tls_config: {insecure_skip_verify: true}
file_sd_configs:
  - files: [engines/*.json]
  - files: [proxied/*.json]
    proxy_url: http://127.0.0.1:3128
autoscaling:
  workloads:
    - {role: prefill, cluster: c1, pool: p1, namespace: inference, name: prefill-p1, max_servers: 8}
    - {role: decode, cluster: c1, pool: p1, namespace: inference, name: decode-p1, kind: LeaderWorkerSet,
       api_version: leaderworkerset.x-k8s.io/v1, min_servers: 2, max_servers: 16}
`

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenOptions is the stack the golden files hold: defaults, plus every
// optional part switched on so each artifact is covered.
func goldenOptions() Options {
	cfg, err := config.Parse([]byte(goldenConfig), "golden.yml")
	if err != nil {
		panic(err)
	}
	return Options{
		Config:               cfg,
		ConfigFile:           []byte(goldenConfig),
		GrafanaAdminPassword: "golden-not-a-secret",
		HA:                   true,
		Probe:                true,
		RemoteWriteURL:       "http://127.0.0.1:9009/api/v1/push",
		Receivers: Receivers{
			WebhookURLs:     []string{"http://127.0.0.1:5001/alerts"},
			EmailTo:         "oncall@example.com",
			EmailFrom:       "kvwatch@example.com",
			EmailSmarthost:  "127.0.0.1:25",
			SlackWebhookURL: "https://hooks.slack.example/services/T000/B000/XXXX",
			SlackChannel:    "#inference",
			WatchdogURL:     "http://127.0.0.1:5002/heartbeat",
		},
	}
}

func TestGolden(t *testing.T) {
	files, err := Generate(goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("testdata", "golden")
	if *update {
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if err := files.Write(root); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Path] = true
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%s: %v (run go test ./internal/stack -run TestGolden -update)", f.Path, err)
			continue
		}
		if d := cmp.Diff(string(want), string(f.Data)); d != "" {
			t.Errorf("%s differs from its golden file (-want +got):\n%s", f.Path, d)
		}
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !seen[filepath.ToSlash(rel)] {
			t.Errorf("golden file %s is no longer generated; rerun with -update", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
