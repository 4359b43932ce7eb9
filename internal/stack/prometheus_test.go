package stack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v3"
)

// TestEngineScrapeJobs: each target of the config in its role's engine
// job, labelled as kvwatch labels its series, with its path, scheme and
// query; targets that need more than their URL are left out and named.
func TestEngineScrapeJobs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		want   []promScrapeConfig
		warn   string
	}{
		{name: "roles, paths and labels",
			config: `global: {labels: {cluster: east, model: m}}
targets:
  - {name: d0, url: "http://10.0.0.1:30000/metrics", role: decode, labels: {pool: a}}
  - {name: d1, url: "http://10.0.0.2:30000", role: decode, labels: {cluster: west}}
  - {name: t0, url: "http://10.0.0.3:8000", engine: trtllm-serve}
  - {url: "https://10.0.0.4:8443/custom/metrics?key=v"}
`,
			want: []promScrapeConfig{
				{JobName: "engines", HonorLabels: true, StaticConfigs: []promStaticConfig{
					{Targets: []string{"10.0.0.3:8000"}, Labels: map[string]string{"__metrics_path__": "/prometheus/metrics", "server": "t0", "kv_cluster": "east"}},
					{Targets: []string{"10.0.0.4:8443"}, Labels: map[string]string{"__metrics_path__": "/custom/metrics", "__scheme__": "https",
						"__param_key": "v", "server": "10.0.0.4:8443/custom/metrics", "kv_cluster": "east"}}, // kvwatch's name for it
				}},
				{JobName: "engines-decode", HonorLabels: true, StaticConfigs: []promStaticConfig{
					{Targets: []string{"10.0.0.1:30000"}, Labels: map[string]string{"__metrics_path__": "/metrics", "server": "d0", "role": "decode", "kv_cluster": "east", "pool": "a"}},
					{Targets: []string{"10.0.0.2:30000"}, Labels: map[string]string{"__metrics_path__": "/metrics", "server": "d1", "role": "decode", "kv_cluster": "west"}},
				}},
			}},
		{name: "credentials, TLS settings, proxies",
			config: `targets:
  - {name: ok, url: "http://10.0.0.1:30000", role: prefill}
  - {name: pw, url: "http://u:secret@10.0.0.2:30000", role: prefill}
  - {name: tls, url: "https://10.0.0.3:30000", role: prefill, tls_config: {insecure_skip_verify: true}}
file_sd_configs:
  - files: [a.json]
  - files: [b.json]
    scheme: https
  - files: [c.json]
    proxy_url: http://127.0.0.1:3128
`,
			want: []promScrapeConfig{
				{JobName: "engines-prefill", HonorLabels: true, StaticConfigs: []promStaticConfig{
					{Targets: []string{"10.0.0.1:30000"}, Labels: map[string]string{"__metrics_path__": "/metrics", "server": "ok", "role": "prefill"}},
				}},
				{JobName: "engines-file-sd", HonorLabels: true, FileSDConfigs: []promFileSD{{Files: []string{"a.json"}, RefreshInterval: dur("1m")}},
					RelabelConfigs: []promRelabel{{SourceLabels: []string{"__address__"}, TargetLabel: "server"}, {Action: "labeldrop", Regex: "engine|model"},
						{SourceLabels: []string{"cluster"}, Regex: "(.+)", TargetLabel: "kv_cluster"}, {Action: "labeldrop", Regex: "cluster"}}},
				{JobName: "engines-file-sd-2", Scheme: "https", HonorLabels: true, FileSDConfigs: []promFileSD{{Files: []string{"b.json"}, RefreshInterval: dur("1m")}},
					RelabelConfigs: []promRelabel{{SourceLabels: []string{"__address__"}, TargetLabel: "server"}, {Action: "labeldrop", Regex: "engine|model"},
						{SourceLabels: []string{"cluster"}, Regex: "(.+)", TargetLabel: "kv_cluster"}, {Action: "labeldrop", Regex: "cluster"}}},
			},
			warn: "note: prometheus.yml scrapes these engines only through kvwatch, not directly: target pw, target tls, file_sd_configs[2] (they need credentials, " +
				"TLS settings or a proxy, which the stack's Prometheus does not have); add a scrape job with them to see their own series beside kvwatch's (docs/stack.md, \"Files\").\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Config: mustParseConfig(t, tc.config)}
			if diff := cmp.Diff(tc.want, engineScrapeConfigs(o)); diff != "" {
				t.Errorf("engine jobs (-want +got):\n%s", diff)
			}
			if got := EngineScrapeWarning(o); got != tc.warn {
				t.Errorf("EngineScrapeWarning = %q, want %q", got, tc.warn)
			}
		})
	}
}

// TestEngineFileSDRelabel runs the file_sd engine job's relabel_configs,
// as written to prometheus.yml, through Prometheus' relabel package: a
// group's cluster arrives as kv_cluster (the name of kvwatch's series), the
// config's global cluster fills groups without one, engine and model go.
func TestEngineFileSDRelabel(t *testing.T) {
	o := Options{Config: mustParseConfig(t, "global: {labels: {cluster: east, pool: p0}}\nfile_sd_configs: [{files: [a.json]}]\n")}
	var job *promScrapeConfig
	for _, j := range engineScrapeConfigs(o) {
		if j.JobName == EngineJobPrefix+"-file-sd" {
			job = &j
		}
	}
	if job == nil {
		t.Fatal("no engines-file-sd job")
	}
	b, err := yaml.Marshal(job.RelabelConfigs)
	if err != nil {
		t.Fatal(err)
	}
	var rcs []*relabel.Config
	if err := yaml.Unmarshal(b, &rcs); err != nil {
		t.Fatalf("Prometheus refuses the relabel_configs: %v\n%s", err, b)
	}
	for _, rc := range rcs {
		if err := rc.Validate(model.UTF8Validation); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		group map[string]string
		want  map[string]string
	}{
		{map[string]string{"__address__": "10.0.0.1:30000", "cluster": "west", "pool": "a", "engine": "sglang", "model": "m"},
			map[string]string{"__address__": "10.0.0.1:30000", "server": "10.0.0.1:30000", "kv_cluster": "west", "pool": "a"}},
		{map[string]string{"__address__": "10.0.0.2:30000"},
			map[string]string{"__address__": "10.0.0.2:30000", "server": "10.0.0.2:30000", "kv_cluster": "east", "pool": "p0"}},
	} {
		lb := labels.NewBuilder(labels.FromMap(tc.group))
		if !relabel.ProcessBuilder(lb, rcs...) {
			t.Fatalf("%v dropped", tc.group)
		}
		if diff := cmp.Diff(tc.want, lb.Labels().Map()); diff != "" {
			t.Errorf("%v relabelled (-want +got):\n%s", tc.group, diff)
		}
	}
}
