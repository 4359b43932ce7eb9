package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// RemoteWrite is one store `kvwatch serve` pushes its kvwatch_* series to
// with the Prometheus remote-write protocol (1.0, prometheus.WriteRequest),
// as a `remote_write:` list entry of the config file or a --remote-write.url
// flag. The keys follow Prometheus' remote_write where they mean the same.
type RemoteWrite struct {
	// URL is the store's write endpoint, e.g.
	// http://victoria-metrics:8428/api/v1/write or a Prometheus
	// --web.enable-remote-write-receiver's /api/v1/write.
	URL string `yaml:"url"`
	// Name tells remote writes apart in kvwatch's own metrics (the remote
	// label) and logs; default the URL's host and path.
	Name string `yaml:"name"`
	// RemoteTimeout bounds one request. Default 30s.
	RemoteTimeout model.Duration `yaml:"remote_timeout"`
	// Headers are added to every request (e.g. a tenant header). They must
	// not set the headers of the protocol or of the auth settings.
	Headers map[string]string `yaml:"headers"`
	// ExternalLabels are added to every series that does not carry the
	// label already (like Prometheus' global.external_labels), e.g. the
	// region or the serve replica.
	ExternalLabels map[string]string `yaml:"external_labels"`
	// SendInterval is how often the latest values are sampled and queued.
	// Default the config's global.scrape_interval.
	SendInterval model.Duration `yaml:"send_interval"`
	// QueueConfig bounds the buffer and sets retries.
	QueueConfig RemoteWriteQueue `yaml:"queue_config"`
	// HTTPClientConfig holds auth and TLS: basic_auth, authorization,
	// oauth2, bearer_token_file, tls_config, proxy_url... (the Prometheus
	// keys, as for targets).
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:",inline"`
}

// RemoteWriteQueue is a remote write's buffer and retry policy.
type RemoteWriteQueue struct {
	// Capacity is how many samples wait while the store is slow or down;
	// past it the oldest are dropped (and counted). Default 2,000,000:
	// about 140 s of 2,000 SGLang endpoints every 5 s (~36 series each), held
	// compressed at ~14 bytes a sample (~28 MB).
	Capacity int `yaml:"capacity"`
	// MaxSamplesPerSend is the most samples in one request. Default 2,000.
	MaxSamplesPerSend int `yaml:"max_samples_per_send"`
	// MinBackoff and MaxBackoff bound the exponential wait between retries
	// of a failed request. Defaults 30ms and 5s.
	MinBackoff model.Duration `yaml:"min_backoff"`
	MaxBackoff model.Duration `yaml:"max_backoff"`
	// RetryOnRateLimit retries requests answered 429 (default true); false
	// drops them, as Prometheus' retry_on_http_429: false does.
	RetryOnRateLimit *bool `yaml:"retry_on_http_429"`
	// FlushDeadline bounds the sending of what is queued when serve stops.
	// Default 10s.
	FlushDeadline model.Duration `yaml:"flush_deadline"`
}

// Remote-write defaults.
const (
	DefaultRemoteWriteCapacity      = 2_000_000
	DefaultRemoteWriteSamplesPerReq = 2000
	DefaultRemoteWriteTimeout       = 30 * time.Second
	DefaultRemoteWriteMinBackoff    = 30 * time.Millisecond
	DefaultRemoteWriteMaxBackoff    = 5 * time.Second
	DefaultRemoteWriteFlushDeadline = 10 * time.Second
)

// SetDefaults fills the zero fields; a zero SendInterval takes
// scrapeInterval.
func (r *RemoteWrite) SetDefaults(scrapeInterval model.Duration) {
	if r.Name == "" {
		if u, err := url.Parse(r.URL); err == nil && u.Host != "" {
			r.Name = u.Host + strings.TrimSuffix(u.Path, "/")
		}
	}
	if r.RemoteTimeout == 0 {
		r.RemoteTimeout = model.Duration(DefaultRemoteWriteTimeout)
	}
	if r.SendInterval == 0 {
		r.SendInterval = scrapeInterval
	}
	q := &r.QueueConfig
	if q.Capacity == 0 {
		q.Capacity = DefaultRemoteWriteCapacity
	}
	if q.MaxSamplesPerSend == 0 {
		q.MaxSamplesPerSend = DefaultRemoteWriteSamplesPerReq
	}
	if q.MinBackoff == 0 {
		q.MinBackoff = model.Duration(DefaultRemoteWriteMinBackoff)
	}
	if q.MaxBackoff == 0 {
		q.MaxBackoff = model.Duration(DefaultRemoteWriteMaxBackoff)
	}
	if q.RetryOnRateLimit == nil {
		t := true
		q.RetryOnRateLimit = &t
	}
	if q.FlushDeadline == 0 {
		q.FlushDeadline = model.Duration(DefaultRemoteWriteFlushDeadline)
	}
}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// reservedHeaders are set by the protocol or by the auth settings.
var reservedHeaders = []string{"authorization", "content-encoding", "content-type", "content-length",
	"user-agent", "x-prometheus-remote-write-version", "retry-attempt", "host"}

// Validate returns every problem, each starting with its key (relative to
// the entry, e.g. "url: ...").
func (r *RemoteWrite) Validate() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if r.URL == "" {
		add("url is missing; write e.g. url: http://127.0.0.1:8428/api/v1/write")
	} else if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("url %q: want an absolute http(s) URL such as http://127.0.0.1:8428/api/v1/write", redactURL(r.URL))
	} else if u.User != nil {
		add("url %s: credentials in the URL would show in logs; use basic_auth or authorization instead", redactURL(r.URL))
	}
	if r.RemoteTimeout < 0 {
		add("remote_timeout must be positive")
	}
	if r.SendInterval < 0 || (r.SendInterval > 0 && time.Duration(r.SendInterval) < 100*time.Millisecond) {
		add("send_interval %s: want at least 100ms", r.SendInterval)
	}
	for _, k := range sortedKeys(r.Headers) {
		for _, h := range reservedHeaders {
			if strings.EqualFold(k, h) {
				add("headers.%s is set by kvwatch (the protocol or the auth settings); remove it", k)
			}
		}
	}
	for _, k := range sortedKeys(r.ExternalLabels) {
		if !labelNameRE.MatchString(k) || strings.HasPrefix(k, "__") {
			add("external_labels.%s: not a label name (letters, digits and _, not starting with a digit or __)", k)
		} else if r.ExternalLabels[k] == "" {
			add("external_labels.%s: the value is empty; an empty label is no label", k)
		}
	}
	q := r.QueueConfig
	if q.Capacity < 0 {
		add("queue_config.capacity %d must be positive", q.Capacity)
	}
	if q.MaxSamplesPerSend < 0 {
		add("queue_config.max_samples_per_send %d must be positive", q.MaxSamplesPerSend)
	}
	if q.Capacity > 0 && q.MaxSamplesPerSend > q.Capacity {
		add("queue_config.max_samples_per_send %d is above capacity %d; lower it", q.MaxSamplesPerSend, q.Capacity)
	}
	if q.MinBackoff < 0 || q.MaxBackoff < 0 || (q.MaxBackoff > 0 && q.MinBackoff > q.MaxBackoff) {
		add("queue_config: min_backoff %s and max_backoff %s: want 0 < min_backoff ≤ max_backoff", q.MinBackoff, q.MaxBackoff)
	}
	if q.FlushDeadline < 0 {
		add("queue_config.flush_deadline must be positive")
	}
	if err := r.HTTPClientConfig.Validate(); err != nil {
		add("%v", err)
	}
	return out
}

// redactURL hides a URL's password for messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckRemoteWrites validates remote writes built in code (from flags) or
// read from a config, with their files resolved, and refuses weak TLS keys
// in their files; name prefixes each problem (e.g. "--remote-write.url").
func CheckRemoteWrites(rws []RemoteWrite, name string) error {
	e := &Error{File: name}
	names := map[string]bool{}
	for i := range rws {
		for _, p := range rws[i].Validate() {
			e.Problems = append(e.Problems, fmt.Sprintf("remote_write[%d].%s", i, p))
		}
		if n := rws[i].Name; n != "" {
			if names[n] {
				e.Problems = append(e.Problems, fmt.Sprintf("remote_write[%d].name %q is used twice; names must be unique", i, n))
			}
			names[n] = true
		}
	}
	// Their files are resolved already: serve joins them with the config
	// file's directory, the flags' with the working directory.
	v := &validator{}
	for i := range rws {
		checkTLSKeys(v, []any{"remote_write", i}, &rws[i].HTTPClientConfig, "")
	}
	e.Problems = append(e.Problems, v.problems...)
	if len(e.Problems) > 0 {
		return e
	}
	return nil
}

// UnmarshalYAML decodes one remote_write entry and validates it, reporting
// problems with the entry's line. Unknown keys are found, with their path
// and the nearest known key, by the walk over the whole file (keys.go).
func (r *RemoteWrite) UnmarshalYAML(n *yaml.Node) error {
	type plain RemoteWrite
	var p plain
	if err := n.Decode(&p); err != nil {
		msgs := []string{err.Error()}
		if te := (*yaml.TypeError)(nil); errors.As(err, &te) {
			msgs = te.Errors
		}
		for i, m := range msgs {
			msgs[i] = fmt.Sprintf("line %d: remote_write: %s", n.Line, stripLine(yamlProblem(n, m)))
		}
		return &yaml.TypeError{Errors: msgs}
	}
	*r = RemoteWrite(p)
	if probs := r.Validate(); len(probs) > 0 {
		for i, m := range probs {
			probs[i] = fmt.Sprintf("line %d: remote_write.%s", n.Line, m)
		}
		return &yaml.TypeError{Errors: probs}
	}
	return nil
}

var lineRE = regexp.MustCompile(`^line \d+: `)

func stripLine(s string) string { return lineRE.ReplaceAllString(s, "") }
