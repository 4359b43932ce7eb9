package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
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
	if got, want := time.Duration(c.Global.EvaluationInterval), 15*time.Second; got != want {
		t.Errorf("evaluation_interval = %v, want %v (the default, not the scrape interval)", got, want)
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
		want     string // the whole error text
	}{
		{"unknown keys with their paths and the nearest key, with validation in the same pass", `
global:
  scrape_intervl: 5s
targets:
  - url: http://a:1
    rol: decode
    role: wizard
  - url: http://b:2
    tls_config: {ca_fil: x}
`, `kvwatch.yml: 4 problems:
  line 3: global.scrape_intervl: unknown key "scrape_intervl"; did you mean "scrape_interval"?
  line 6: targets[0].rol: unknown key "rol"; did you mean "role"?
  line 9: targets[1].tls_config.ca_fil: unknown key "ca_fil"; did you mean "ca_file"?
  line 7: targets[0].role: unknown role "wizard"; want one of prefill, decode, unified, router, cache`},
		{"tier_full_usage must be below 1 (above 1 is never reached)", "alerts:\n  tier_full_usage: 1\n",
			`kvwatch.yml: line 2: alerts.tier_full_usage: 1 is not a ratio below 1; use a number in [0, 1), e.g. 0.9 for 90%`},
		{"an unknown key far from any known one gets no suggestion", "history:\n  keep_forever: true\n",
			`kvwatch.yml: line 2: history.keep_forever: unknown key "keep_forever"`},
		{"series limits are counts, 0 for none", "history:\n  max_series: -1\n  max_series_per_target: -10\n",
			`kvwatch.yml: 2 problems:
  line 2: history.max_series: -1 is negative; write 0 for no limit
  line 3: history.max_series_per_target: -10 is negative; write 0 for no limit`},
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
`, `kvwatch.yml: 10 problems:
  line 4: global.scrape_timeout: 6s is longer than scrape_interval 5s; lower it
  line 5: global.body_size_limit: "lots" is not a size; write e.g. 32MiB
  line 6: global.headroom_tokens[1]: -1 must be a positive number of tokens
  line 8: targets[0].url: bad URL "ftp://a:1": scheme must be http or https
  line 10: targets[1].role: unknown role "wizard"; want one of prefill, decode, unified, router, cache
  line 11: targets[1].labels.team: unknown label "team"; kvwatch carries cluster, pool, model
  line 14: targets[3].name: "dup" is also the name of targets[2]; names must be unique
  line 16: targets[4]: url is missing; write e.g. url: http://127.0.0.1:30000
  line 18: probe.allow[0]: "10.0.0.0/33" is not a CIDR; write e.g. 10.0.0.0/8
  line 21: alerts.kv_usage_critical: 1.5 is not a ratio; use a number in (0, 1], e.g. 0.9 for 90%`},
		{"file_sd scheme and auth", `
file_sd_configs:
  - files: [a.json]
    scheme: ftp
  - files: [b.json]
    basic_auth: {username: u, password: p}
    bearer_token: t
`, `kvwatch.yml: 2 problems:
  line 4: file_sd_configs[0].scheme: "ftp": want http or https
  line 5: file_sd_configs[1]: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured`},
		{"a global label problem is reported once, not once per target", `
global:
  labels: {team: x}
targets:
  - url: http://a:1
  - url: http://b:2
`, `kvwatch.yml: line 3: global.labels.team: unknown label "team"; kvwatch carries cluster, pool, model`},
		{"explicit zeros are range-checked, not replaced by defaults", `
global:
  scrape_timeout: 0s
  evaluation_interval: 0s
targets:
  - url: http://a:1
    scrape_interval: 0s
file_sd_configs:
  - files: [a.json]
    refresh_interval: 0s
alerts:
  kv_usage_warning: 0
  kv_full_within: 0s
  stale_after: 0s
  queue_length: -1
  preemptions_per_second: .nan
history:
  snapshot_interval: 0s
`, `kvwatch.yml: 11 problems:
  line 3: global.scrape_timeout: must be positive
  line 4: global.evaluation_interval: must be positive
  line 7: targets[0].scrape_interval: must be positive
  line 6: targets[0].scrape_timeout: must be positive
  line 10: file_sd_configs[0].refresh_interval: must be positive
  line 12: alerts.kv_usage_warning: 0 is not a ratio; use a number in (0, 1], e.g. 0.9 for 90%
  line 15: alerts.queue_length: -1 must be a finite number, 0 or more
  line 16: alerts.preemptions_per_second: NaN must be a finite number, 0 or more
  line 13: alerts.kv_full_within: must be positive
  line 14: alerts.stale_after: must be positive
  line 18: history.snapshot_interval: must be positive`},
		{"a written max_running_requests of 0 is an error, not the engine's own", "targets:\n  - url: http://a:1\n    max_running_requests: 0\n",
			"kvwatch.yml: line 3: targets[0].max_running_requests: 0 must be a positive number of requests (or leave it out to use the engine's)"},
		// Before, zero meant "use the default" here: these became 30s,
		// the scrape interval, 2,000,000, 2,000, 30ms and 5s.
		{"remote_write: explicit zeros are range-checked, not replaced by defaults", `
remote_write:
  - url: http://127.0.0.1:8428/api/v1/write
    remote_timeout: 0s
    send_interval: 0s
    queue_config:
      capacity: 0
      max_samples_per_send: 0
      min_backoff: 0s
      max_backoff: 0s
`, `kvwatch.yml: 6 problems:
  line 4: remote_write[0].remote_timeout: must be positive
  line 5: remote_write[0].send_interval: 0s: want at least 100ms
  line 7: remote_write[0].queue_config.capacity: 0 must be a positive number of samples
  line 8: remote_write[0].queue_config.max_samples_per_send: 0 must be a positive number of samples
  line 9: remote_write[0].queue_config.min_backoff: must be positive
  line 10: remote_write[0].queue_config.max_backoff: must be positive`},
		{"remote_write: an unknown key with its path", "remote_write:\n  - url: http://127.0.0.1:8428/api/v1/write\n    queue_size: 3\n",
			`kvwatch.yml: line 3: remote_write[0].queue_size: unknown key "queue_size"`},
		// An entry with a problem of type stays at its index: the later
		// entries' problems name their own index and line.
		{"remote_write: every problem at its key, entries at their index", `
remote_write:
  - url: http://127.0.0.1:1/
    queue_config: {capacity: lots}
  - name: a
  - url: http://u:p@127.0.0.1:8428/api/v1/write
    name: a
    headers: {Authorization: x}
    external_labels: {__x: y, region: ""}
  - url: ftp://127.0.0.1:8428/
    queue_config: {capacity: 10, max_samples_per_send: 20, min_backoff: 2s, max_backoff: 1s}
    basic_auth: {username: u, password: p}
    bearer_token: t
`, `kvwatch.yml: 11 problems:
  line 4: remote_write[0].queue_config.capacity: "lots" is a string; want a whole number
  line 5: remote_write[1]: url is missing; write e.g. url: http://127.0.0.1:8428/api/v1/write
  line 6: remote_write[2].url: http://u:xxxxx@127.0.0.1:8428/api/v1/write: credentials in the URL would show in logs; use basic_auth or authorization instead
  line 7: remote_write[2].name: "a" is also the name of remote_write[1]; names must be unique
  line 8: remote_write[2].headers.Authorization: set by kvwatch (the protocol or the auth settings); remove it
  line 9: remote_write[2].external_labels.__x: not a label name (letters, digits and _, not starting with a digit or __)
  line 9: remote_write[2].external_labels.region: the value is empty; an empty label is no label
  line 10: remote_write[3].url: "ftp://127.0.0.1:8428/": want an absolute http(s) URL such as http://127.0.0.1:8428/api/v1/write
  line 11: remote_write[3].queue_config.max_samples_per_send: 20 is above capacity 10; lower it
  line 11: remote_write[3].queue_config.min_backoff: 2s is above max_backoff 1s; lower it
  line 10: remote_write[3]: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured`},
		{"autoscaling", `autoscaling:
  target_kv_usage: 1.5
  prometheus_url: prometheus:9090
  workloads:
    - {role: router, namespace: Inference, name: Decode_A}
    - {role: decode, namespace: inference, name: decode-a, kind: LeaderWorkerSet, min_servers: 0, max_servers: 4}
    - {role: decode, namespace: inference, name: decode-a, min_servers: 5, max_servers: 4}
`, `kvwatch.yml: 11 problems:
  line 2: autoscaling.target_kv_usage: 1.5: want a usage ratio above 0 and at most 1, e.g. 0.8
  line 3: autoscaling.prometheus_url: "prometheus:9090": want an absolute http(s) URL, e.g. http://prometheus-operated.monitoring.svc:9090
  line 5: autoscaling.workloads[0].role: "router": want prefill, decode or unified (the roles that hold KV)
  line 5: autoscaling.workloads[0].name: "Decode_A" is not a Kubernetes object name (lower-case letters, digits, - and .)
  line 5: autoscaling.workloads[0].namespace: "Inference" is not a Kubernetes namespace (lower-case letters, digits and -)
  line 5: autoscaling.workloads[0].max_servers: missing: the most servers the autoscaler may run
  line 6: autoscaling.workloads[1].api_version: missing for kind LeaderWorkerSet: write the workload's apiVersion, e.g. leaderworkerset.x-k8s.io/v1
  line 6: autoscaling.workloads[1].min_servers: 0: want at least 1 (the signal never asks for fewer)
  line 7: autoscaling.workloads[2].max_servers: 4 is below min_servers 5
  line 7: autoscaling.workloads[2]: the pool of workloads[1] again: one workload per pool
  line 7: autoscaling.workloads[2].name: inference/decode-a is also workloads[1]: two autoscalers would fight over one workload`},
		{"the fast KV window: below the critical threshold, shorter than two scrapes", `
global:
  scrape_interval: 30s
alerts:
  kv_usage_exhausted: 0.95
  kv_usage_exhausted_window: 45s
`, `kvwatch.yml: 2 problems:
  line 5: alerts.kv_usage_exhausted: 0.95 is below kv_usage_critical 0.97; the fast window takes the higher threshold, e.g. 0.99
  line 6: alerts.kv_usage_exhausted_window: 45s is shorter than two scrape intervals (global.scrape_interval 30s); write at least 1m`},
		{"the fast KV window: not a ratio, not positive", "alerts:\n  kv_usage_exhausted: 1.5\n  kv_usage_exhausted_window: 0s\n", `kvwatch.yml: 2 problems:
  line 2: alerts.kv_usage_exhausted: 1.5 is not a ratio; use a number in (0, 1], e.g. 0.9 for 90%
  line 3: alerts.kv_usage_exhausted_window: must be positive`},
		{"history shorter than a scrape", "history: {retention: 1s}\n",
			"kvwatch.yml: line 1: history.retention: 1s is shorter than one scrape interval; write 0s to turn history off"},
		{"a bad duration says where it is", "global:\n  scrape_interval: 5x\n",
			`kvwatch.yml: line 2: global.scrape_interval: "5x" is not a duration; write e.g. 5s or 2m`},
		{"not YAML", "targets: [", "kvwatch.yml: line 1: did not find expected node content"},
		{"wrong type, without Go type names", "targets: 3", `kvwatch.yml: line 1: targets: "3" is a number; want a list`},
		{"wrong types, all at once", "global:\n  scrape_interval: [5s]\n  labels: {cluster: [a]}\ntargets:\n  - url: http://a:1\n    follow_redirects: maybe\n", `kvwatch.yml: 3 problems:
  line 2: global.scrape_interval: want a duration such as 5s
  line 3: global.labels.cluster: got a list; want a string
  line 6: targets[0].follow_redirects: "maybe" is a string; want true or false`},
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

// Explicit values, 0 included, survive decoding: before, zero meant "use
// the default", so these became 50, 0.1 and 1h.
func TestExplicitZerosSurvive(t *testing.T) {
	c, err := Parse([]byte(`
alerts:
  queue_length: 0
  preemptions_per_second: 0
  prefix_hit_min_query_tokens_per_second: 0
  kv_usage_warning_for: 0s
  tier_full_usage: 0
history:
  retention: 0s
  max_series: 0
  max_series_per_target: 0
`), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default().Alerts
	want.QueueLength, want.PreemptionsPerSecond, want.PrefixHitMinTokensPS, want.KVUsageWarningFor = 0, 0, 0, 0
	want.TierFullUsage = 0
	if diff := cmp.Diff(want, c.Alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	if c.History.Retention != 0 || c.History.MaxSeries != 0 || c.History.MaxSeriesPerTarget != 0 {
		t.Errorf("history = %+v, want retention 0 (history off) and no series limits", c.History)
	}
}

// A remote_write entry's explicit 0 and false survive where they mean
// something: before, flush_deadline 0s became 10s, and follow_redirects
// and enable_http2 were false whether written or not.
func TestRemoteWriteExplicitValuesSurvive(t *testing.T) {
	c, err := Parse([]byte(`
remote_write:
  - url: http://127.0.0.1:8428/api/v1/write
    queue_config: {flush_deadline: 0s, retry_on_http_429: false}
    follow_redirects: false
    enable_http2: false
`), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	rw := c.RemoteWrite[0]
	if rw.QueueConfig.FlushDeadline != 0 || rw.QueueConfig.RetryOnRateLimit || rw.HTTPClientConfig.FollowRedirects || rw.HTTPClientConfig.EnableHTTP2 {
		t.Errorf("flush_deadline %v, retry_on_http_429 %v, follow_redirects %v, enable_http2 %v; want 0s and false, as written",
			rw.QueueConfig.FlushDeadline, rw.QueueConfig.RetryOnRateLimit, rw.HTTPClientConfig.FollowRedirects, rw.HTTPClientConfig.EnableHTTP2)
	}
}

// What a file does not say keeps the defaults, worked out by hand here
// (not read from Default()).
func TestDefaultsByHand(t *testing.T) {
	d := Default()
	min := func(n int) model.Duration { return model.Duration(time.Duration(n) * time.Minute) }
	want := Alerts{KVUsageWarning: 0.90, KVUsageWarningFor: min(10), KVUsageCritical: 0.97, KVUsageCriticalFor: min(5),
		KVFullWithin: min(30), QueueLength: 50, QueueFor: min(5), PreemptionsPerSecond: 0.1, PreemptionsFor: min(10),
		PrefixHitRatioLow: 0.10, PrefixHitMinTokensPS: 1000, PrefixHitFor: min(15), LeakUsage: 0.50, LeakFor: min(15),
		RankSpread: 0.30, RankSpreadFor: min(15), TierFullUsage: 0.90, TargetDownFor: min(2), StaleAfter: min(2)}
	want.KVUsageExhausted, want.KVUsageExhaustedWindow = 0.99, model.Duration(45*time.Second)
	if diff := cmp.Diff(want, d.Alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	if d.History.Retention != min(60) || d.History.SnapshotInterval != min(5) ||
		d.History.MaxSeries != 500000 || d.History.MaxSeriesPerTarget != 5000 {
		t.Errorf("history = %+v", d.History)
	}
	if d.Global.ScrapeInterval != model.Duration(5*time.Second) || d.Global.ScrapeTimeout != model.Duration(4*time.Second) {
		t.Errorf("global timing = %v/%v", d.Global.ScrapeInterval, d.Global.ScrapeTimeout)
	}
	// A short interval pulls the default timeout down with it; a target's
	// own short interval does too, and a target inherits the rest.
	c, err := Parse([]byte("global: {scrape_interval: 2s}\ntargets:\n  - url: http://a:1\n  - url: http://b:1\n    scrape_interval: 1s\nfile_sd_configs:\n  - files: [x.json]\n"), "k.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := func(n int) model.Duration { return model.Duration(time.Duration(n) * time.Second) }
	if c.Global.ScrapeTimeout != s(2) || c.Targets[0].ScrapeInterval != s(2) || c.Targets[0].ScrapeTimeout != s(2) ||
		c.Targets[1].ScrapeInterval != s(1) || c.Targets[1].ScrapeTimeout != s(1) {
		t.Errorf("timing: global %v, targets %+v", c.Global.ScrapeTimeout, c.Targets)
	}
	if c.FileSD[0].RefreshInterval != min(1) {
		t.Errorf("file_sd refresh_interval = %v, want 1m", c.FileSD[0].RefreshInterval)
	}
	// Autoscaling: a target of 80 %, kube-prometheus' Prometheus; a
	// workload is a Deployment (apps/v1) of at least one server unless it
	// says otherwise; a StatefulSet is apps/v1 too, other kinds say theirs.
	if d.Autoscaling.TargetKVUsage != 0.8 || d.Autoscaling.PrometheusURL != "http://prometheus-operated.monitoring.svc:9090" {
		t.Errorf("autoscaling = %+v", d.Autoscaling)
	}
	c, err = Parse([]byte(`autoscaling:
  workloads:
    - {role: decode, namespace: a, name: d, max_servers: 4}
    - {role: prefill, namespace: a, name: p, kind: StatefulSet, min_servers: 2, max_servers: 4}
    - {role: unified, namespace: a, name: u, kind: LeaderWorkerSet, api_version: leaderworkerset.x-k8s.io/v1, max_servers: 4}
`), "k.yml")
	if err != nil {
		t.Fatal(err)
	}
	wantW := []ScaledWorkload{
		{Role: "decode", Namespace: "a", Name: "d", Kind: "Deployment", APIVersion: "apps/v1", MinServers: 1, MaxServers: 4},
		{Role: "prefill", Namespace: "a", Name: "p", Kind: "StatefulSet", APIVersion: "apps/v1", MinServers: 2, MaxServers: 4},
		{Role: "unified", Namespace: "a", Name: "u", Kind: "LeaderWorkerSet", APIVersion: "leaderworkerset.x-k8s.io/v1", MinServers: 1, MaxServers: 4},
	}
	if diff := cmp.Diff(wantW, c.Autoscaling.Workloads); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
}

// A remote_write entry that writes only its URL gets the defaults of
// docs/configuration.md, worked out by hand; its send_interval is the
// global scrape_interval.
func TestRemoteWriteDefaultsByHand(t *testing.T) {
	c, err := Parse([]byte("global: {scrape_interval: 10s}\nremote_write:\n  - url: http://127.0.0.1:8428/api/v1/write/\n"), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n int) model.Duration { return model.Duration(time.Duration(n) * time.Millisecond) }
	got := c.RemoteWrite[0]
	want := RemoteWrite{URL: "http://127.0.0.1:8428/api/v1/write/", Name: "127.0.0.1:8428/api/v1/write",
		RemoteTimeout: ms(30000), SendInterval: ms(10000),
		QueueConfig: RemoteWriteQueue{Capacity: 2000000, MaxSamplesPerSend: 2000, MinBackoff: ms(30), MaxBackoff: ms(5000),
			RetryOnRateLimit: true, FlushDeadline: ms(10000)}}
	want.HTTPClientConfig.FollowRedirects, want.HTTPClientConfig.EnableHTTP2 = true, true
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(promcfg.ProxyConfig{})); diff != "" {
		t.Errorf("remote_write[0] (-want +got):\n%s", diff)
	}
}

// Remote writes built in code (the --remote-write.* flags) start from
// DefaultRemoteWrite and are checked like the file's, an explicit 0
// included.
func TestCheckRemoteWrites(t *testing.T) {
	ok := DefaultRemoteWrite()
	ok.URL = "http://127.0.0.1:8428/api/v1/write"
	zero := ok
	zero.QueueConfig.Capacity = 0
	for _, tc := range []struct {
		name string
		rws  []RemoteWrite
		want string // the whole error text; "" for none
	}{
		{"defaults", []RemoteWrite{ok}, ""},
		{"capacity 0 from --remote-write.queue-capacity 0", []RemoteWrite{ok, zero},
			`remote write: 2 problems:
  remote_write[1].name: "127.0.0.1:8428/api/v1/write" is also the name of remote_write[0]; names must be unique
  remote_write[1].queue_config.capacity: 0 must be a positive number of samples`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rws := slices.Clone(tc.rws)
			err := CheckRemoteWrites(rws, model.Duration(7*time.Second), "remote write")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("CheckRemoteWrites error:\n%s\nwant:\n%s", got, tc.want)
			}
			if tc.want == "" && (rws[0].SendInterval != model.Duration(7*time.Second) || rws[0].Name != "127.0.0.1:8428/api/v1/write") {
				t.Errorf("send_interval %v, name %q; want the scrape interval 7s and the URL's host and path", rws[0].SendInterval, rws[0].Name)
			}
		})
	}
}

// A secret or TLS file the config names but that does not exist is an
// error with its line (before, check config said OK and every scrape
// failed).
func TestMissingSecretFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(path, []byte(`targets:
  - url: http://a:1
    bearer_token_file: token
  - url: http://b:1
    basic_auth: {username: u, password_file: nopass}
    tls_config: {ca_file: /nonexistent/ca.pem}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := path + ": 2 problems:\n" +
		"  line 6: targets[1].tls_config.ca_file: cannot read /nonexistent/ca.pem: no such file or directory; create it or fix the path (relative paths are from the config file's directory)\n" +
		"  line 5: targets[1].basic_auth.password_file: cannot read " + filepath.Join(dir, "nopass") + ": no such file or directory; create it or fix the path (relative paths are from the config file's directory)"
	if err == nil || err.Error() != want {
		t.Errorf("Load error:\n%v\nwant:\n%s", err, want)
	}
	// A config copied into a stack for elsewhere needs no secrets here.
	if c, err := LoadWithoutFiles(path); err != nil || len(c.Targets) != 2 {
		t.Errorf("LoadWithoutFiles = %v, %v; want the 2 targets", c, err)
	}
}

func TestCheckWithoutFile(t *testing.T) {
	c := Default()
	c.Targets = []Target{{URL: "http://127.0.0.1:1", Role: "nope"}}
	err := c.Check("command line")
	want := `command line: targets[0].role: unknown role "nope"; want one of prefill, decode, unified, router, cache`
	if err == nil || err.Error() != want {
		t.Errorf("Check = %v, want %s", err, want)
	}
}

func TestEmptyFileIsValid(t *testing.T) {
	c, err := Parse(nil, "empty.yml")
	if err != nil || len(c.Targets) != 0 || c.Global.ScrapeInterval == 0 {
		t.Errorf("Parse(empty) = %+v, %v", c, err)
	}
}

func modelSeconds(n int) model.Duration { return model.Duration(time.Duration(n) * time.Second) }

// Decoder messages never reach the user with Go type names in them.
func TestYAMLProblemWithoutGoTypes(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("targets:\n  - url: http://a:1\n    tls_config: {ca_fil: x}\n"), &root); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"line 3: field ca_fil not found in type config.plain":    `line 3: targets[0].tls_config.ca_fil: unknown key "ca_fil"`,
		"line 2: cannot unmarshal !!seq into config.Target":      "line 2: targets[0].url: got a list; want a map of keys to values",
		"line 9: cannot unmarshal !!str `x` into model.Duration": `line 9: "x" is a string; want a duration such as 5s`,
		"yaml: did not find expected key":                        "did not find expected key",
	} {
		if got := yamlProblem(&root, in); got != want {
			t.Errorf("yamlProblem(%q) = %q, want %q", in, got, want)
		}
	}
}

// history.snapshot_file: not written is the default (nil), written "" is
// off, and a relative file is the config file's directory's.
func TestSnapshotFileWrittenOrNot(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yml string
		want      *string
	}{
		{"not written: the default", "history: {retention: 1h}\n", nil},
		{"written null: the default", "history: {snapshot_file: }\n", nil},
		{"written empty: off", "history: {snapshot_file: \"\"}\n", ptr("")},
		{"relative: from the config's directory", "history: {snapshot_file: data/h.snap}\n", ptr(filepath.Join(dir, "data", "h.snap"))},
		{"absolute", "history: {snapshot_file: /var/lib/kvwatch/h.snap}\n", ptr("/var/lib/kvwatch/h.snap")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "kvwatch.yml")
			if err := os.WriteFile(path, []byte(tc.yml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.History.SnapshotFile); diff != "" {
				t.Errorf("snapshot_file (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestDefaultSnapshotFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // the file, or the error
	}{
		{"systemd's STATE_DIRECTORY", map[string]string{"STATE_DIRECTORY": "/var/lib/kvwatch", "XDG_STATE_HOME": "/x", "HOME": "/home/u"},
			"/var/lib/kvwatch/history.snapshot"},
		{"the first of several", map[string]string{"STATE_DIRECTORY": "/var/lib/kvwatch:/var/lib/other"}, "/var/lib/kvwatch/history.snapshot"},
		{"XDG_STATE_HOME", map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/home/u"}, "/x/kvwatch/history.snapshot"},
		{"HOME", map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/kvwatch/history.snapshot"},
		{"relative directories are ignored", map[string]string{"STATE_DIRECTORY": "state", "XDG_STATE_HOME": "x", "HOME": "/home/u"},
			"/home/u/.local/state/kvwatch/history.snapshot"},
		{"none", map[string]string{"HOME": "home"}, `no state directory for the history snapshot: none of STATE_DIRECTORY, XDG_STATE_HOME and HOME is set to an absolute path; ` +
			`set history.snapshot_file (or --history.snapshot-file), or write history.snapshot_file: "" to keep the history in memory only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DefaultSnapshotFile(func(k string) string { return tc.env[k] })
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("DefaultSnapshotFile = %s, want %s", got, tc.want)
			}
		})
	}
}
