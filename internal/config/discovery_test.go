package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/kubernetes"
)

// The SD entries decode as Prometheus' decoder does (its defaults) plus
// kvwatch's keys (theirs), worked out by hand; relative files are from
// the config file's directory.
func TestParseDiscovery(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(f, []byte(`
kubernetes_sd_configs:
  - role: pod
    kubeconfig_file: kubeconfig
    namespaces: {names: [inference]}
    selectors: [{role: pod, label: llm-d.ai/role}]
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_label_llm_d_ai_role]
        target_label: role
    target_limit: 10
dns_sd_configs:
  - names: [_metrics._tcp.vllm.inference.svc]
http_sd_configs:
  - url: http://127.0.0.1:9000/targets
    refresh_interval: 15s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	k := c.KubernetesSD[0]
	if k.Config.Role != kubernetes.RolePod || k.Config.KubeConfig != filepath.Join(dir, "kubeconfig") ||
		!cmp.Equal(k.Config.NamespaceDiscovery.Names, []string{"inference"}) ||
		len(k.Config.Selectors) != 1 || k.Config.Selectors[0].Label != "llm-d.ai/role" {
		t.Errorf("kubernetes_sd_configs[0] = %+v", k.Config)
	}
	if k.TargetLimit != 10 || len(k.RelabelConfigs) != 1 || k.RelabelConfigs[0].TargetLabel != "role" ||
		k.RelabelConfigs[0].Action != "replace" || k.RelabelConfigs[0].Regex.String() != "(.*)" || k.RelabelConfigs[0].Replacement != "$1" {
		t.Errorf("kubernetes_sd_configs[0]: target_limit %d, relabel_configs %+v", k.TargetLimit, k.RelabelConfigs)
	}
	// Prometheus' defaults: SRV every 30s; every 60s; kvwatch's target_limit 5000.
	d := c.DNSSD[0]
	if d.Config.Type != "SRV" || d.Config.RefreshInterval != model.Duration(30*time.Second) || d.TargetLimit != 5000 {
		t.Errorf("dns_sd_configs[0] = %+v", d)
	}
	h := c.HTTPSD[0]
	if h.Config.URL != "http://127.0.0.1:9000/targets" || h.Config.RefreshInterval != model.Duration(15*time.Second) || h.TargetLimit != 5000 {
		t.Errorf("http_sd_configs[0] = %+v", h)
	}
	if !c.HasDiscovery() || Default().HasDiscovery() {
		t.Errorf("HasDiscovery: %v for a config with entries, %v for the default", c.HasDiscovery(), Default().HasDiscovery())
	}
}

// Every problem of the SD entries at once, each with its line: Prometheus'
// own checks, the roles kvwatch takes, files, relabel rules and limits.
func TestParseDiscoveryErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"kubernetes", `
kubernetes_sd_configs:
  - namespces: {names: [x]}
    relabel_configs:
      - action: frob
  - role: node
    target_limit: 0
  - role: pod
    api_server: http://127.0.0.1:6443
    kubeconfig_file: /nonexistent/kubeconfig
  - role: pod
    relabel_configs:
      - source_labels: [a]
        target_label: pool
      - action: replace
`, `kvwatch.yml: 8 problems:
  line 3: kubernetes_sd_configs[0].namespces: unknown key "namespces"; did you mean "namespaces"?
  line 3: kubernetes_sd_configs[0]: role is missing; write one of pod, endpoints, endpointslice, service
  line 5: kubernetes_sd_configs[0].relabel_configs[0]: unknown relabel action "frob"
  line 7: kubernetes_sd_configs[1].target_limit: 0 must be positive; raise it to allow more targets
  line 6: kubernetes_sd_configs[1].role: kvwatch discovers engines by role pod, endpoints, endpointslice, service, not node
  line 8: kubernetes_sd_configs[2]: cannot use 'kubeconfig_file' and 'api_server' simultaneously
  line 10: kubernetes_sd_configs[2].kubeconfig_file: cannot read /nonexistent/kubeconfig: no such file or directory; fix the path (relative paths are from the config file's directory), or leave it out to use the pod's service account
  line 15: kubernetes_sd_configs[3].relabel_configs[1]: relabel configuration for replace action requires 'target_label' value`},
		{"dns and http", `
dns_sd_configs:
  - type: A
    names: [x]
  - names: [y]
    refresh_interval: 5x
http_sd_configs:
  - url: ftp://127.0.0.1/
  - url: http://127.0.0.1/
    bearer_token: t
    bearer_token_file: f
  - url: http://127.0.0.1/
    tls_config: {ca_file: ca.pem}
`, `kvwatch.yml: 6 problems:
  line 6: dns_sd_configs[1].refresh_interval: "5x" is not a duration; write e.g. 5s or 2m
  line 3: dns_sd_configs[0]: a port is required in DNS-SD configs for all record types except SRV
  line 8: http_sd_configs[0]: URL scheme must be 'http' or 'https'
  line 9: http_sd_configs[1]: at most one of bearer_token & bearer_token_file must be configured
  line 11: http_sd_configs[1].bearer_token_file: cannot read f: no such file or directory; create it or fix the path (relative paths are from the config file's directory)
  line 13: http_sd_configs[2].tls_config.ca_file: cannot read ca.pem: no such file or directory; create it or fix the path (relative paths are from the config file's directory)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in), "kvwatch.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
