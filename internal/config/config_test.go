package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`
global:
  labels: {cluster: us-east}
targets:
  - url: http://127.0.0.1:30000
  - url: 127.0.0.1:30002/custom/metrics
    role: decode
    labels: {pool: p1}
    scrape_interval: 10s
`), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.Duration(c.Global.ScrapeInterval), 5*time.Second; got != want {
		t.Errorf("scrape_interval = %v, want %v", got, want)
	}
	if c.Global.BodySizeLimitBytes != 32<<20 {
		t.Errorf("body limit = %d, want 32MiB", c.Global.BodySizeLimitBytes)
	}
	if diff := cmp.Diff([]int{8192}, c.Global.HeadroomTokens); diff != "" {
		t.Errorf("headroom (-want +got): %s", diff)
	}
	t0, t1 := c.Targets[0], c.Targets[1]
	if t0.Name != "127.0.0.1:30000" || t1.Name != "127.0.0.1:30002/custom/metrics" {
		t.Errorf("default names = %q, %q", t0.Name, t1.Name)
	}
	if diff := cmp.Diff(map[string]string{"cluster": "us-east", "pool": "p1"}, t1.Labels); diff != "" {
		t.Errorf("labels (-want +got): %s", diff)
	}
	if time.Duration(t1.ScrapeTimeout) != 4*time.Second || time.Duration(t1.ScrapeInterval) != 10*time.Second {
		t.Errorf("target timing = %v/%v", t1.ScrapeTimeout, t1.ScrapeInterval)
	}
	if c.Alerts.KVUsageWarning != 0.90 || c.Alerts.KVUsageCritical != 0.97 {
		t.Errorf("alert defaults = %+v", c.Alerts)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unknown keys, all at once", `
global:
  scrape_intervl: 5s
targets:
  - url: http://a:1
    rol: decode
`, []string{
			"kvwatch.yml: 2 problems:",
			"line 3: field scrape_intervl not found in Global",
			"line 6: field rol not found in Target",
		}},
		{"validation, all at once with lines", `
global:
  scrape_interval: 5s
  scrape_timeout: 6s
  body_size_limit: lots
  headroom_tokens: [8192, -1]
targets:
  - url: ftp://a:1
  - url: http://b:2
    role: wizard
    labels: {team: x}
  - name: dup
    url: http://c:3
  - name: dup
    url: http://d:4
  - role: decode
probe:
  allow: ["10.0.0.0/33"]
alerts:
  kv_usage_warning: 0.99
  kv_usage_critical: 1.5
`, []string{
			"line 4: global.scrape_timeout: 6s is longer than scrape_interval 5s; lower it",
			`line 5: global.body_size_limit: "lots" is not a size; write e.g. 32MiB`,
			"line 6: global.headroom_tokens[1]: -1 must be a positive number of tokens",
			`line 8: targets[0].url: bad URL "ftp://a:1": scheme must be http or https`,
			`line 10: targets[1].role: unknown role "wizard"; want one of prefill, decode, unified, router`,
			`line 11: targets[1].labels.team: unknown label "team"; kvwatch carries cluster, pool, model`,
			`line 14: targets[3].name: "dup" is also the name of targets[2]; names must be unique`,
			"line 16: targets[4]: url is missing; write e.g. url: http://127.0.0.1:30000",
			`line 18: probe.allow[0]: "10.0.0.0/33" is not a CIDR; write e.g. 10.0.0.0/8`,
			"line 21: alerts.kv_usage_critical: 1.5 is not a ratio; use a number in (0, 1], e.g. 0.9 for 90%",
		}},
		{"file_sd scheme and auth", `
file_sd_configs:
  - files: [a.json]
    scheme: ftp
  - files: [b.json]
    basic_auth: {username: u, password: p}
    bearer_token: t
`, []string{
			`line 4: file_sd_configs[0].scheme: "ftp": want http or https`,
			"line 5: file_sd_configs[1]: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured",
		}},
		{"file_sd unknown TLS key", `
file_sd_configs:
  - files: [c.json]
    tls_config: {ca_fil: x}
`, []string{"line 4: field ca_fil not found"}},
		{"not YAML", "targets: [", []string{"kvwatch.yml: line 1: did not find expected node content"}},
		{"wrong type", "targets: 3", []string{"line 1: cannot unmarshal !!int `3` into []config.Target"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in), "kvwatch.yml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCheckWithoutFile(t *testing.T) {
	c := Default()
	c.Targets = []Target{{URL: "http://127.0.0.1:1", Role: "nope"}}
	err := c.Check("command line")
	if err == nil || !strings.Contains(err.Error(), `command line: targets[0].role: unknown role "nope"`) {
		t.Errorf("Check = %v", err)
	}
}

func TestEmptyFileIsValid(t *testing.T) {
	c, err := Parse(nil, "empty.yml")
	if err != nil || len(c.Targets) != 0 || c.Global.ScrapeInterval == 0 {
		t.Errorf("Parse(empty) = %+v, %v", c, err)
	}
}
