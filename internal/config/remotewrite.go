package config

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
)

// RemoteWrite is one store `kvwatch serve` pushes its kvwatch_* series to
// with the Prometheus remote-write protocol (1.0, prometheus.WriteRequest),
// as a `remote_write:` list entry of the config file or a --remote-write.url
// flag. The keys follow Prometheus' remote_write where they mean the same.
// An entry of the file is decoded onto DefaultRemoteWrite, so what it writes
// (0 included) is range-checked; one built in code starts from it too.
type RemoteWrite struct {
	// URL is the store's write endpoint, e.g.
	// http://victoria-metrics:8428/api/v1/write or a Prometheus
	// --web.enable-remote-write-receiver's /api/v1/write.
	URL string `yaml:"url"`
	// Name tells remote writes apart in kvwatch's own metrics (the remote
	// label) and logs; empty: the URL's host and path.
	Name string `yaml:"name"`
	// RemoteTimeout bounds one request; positive.
	RemoteTimeout model.Duration `yaml:"remote_timeout"`
	// Headers are added to every request (e.g. a tenant header). They must
	// not set the headers of the protocol or of the auth settings.
	Headers map[string]string `yaml:"headers"`
	// ExternalLabels are added to every series that does not carry the
	// label already (like Prometheus' global.external_labels), e.g. the
	// region or the serve replica.
	ExternalLabels map[string]string `yaml:"external_labels"`
	// SendInterval is how often the latest values are sampled and queued,
	// at least 100ms. DefaultRemoteWrite leaves it unset: the config's
	// global.scrape_interval.
	SendInterval model.Duration `yaml:"send_interval"`
	// QueueConfig bounds the buffer and sets retries.
	QueueConfig RemoteWriteQueue `yaml:"queue_config"`
	// HTTPClientConfig holds auth and TLS: basic_auth, authorization,
	// oauth2, bearer_token_file, tls_config, proxy_url... (the Prometheus
	// keys, as for targets). Redirects are followed and HTTP/2 is used
	// unless follow_redirects or enable_http2 say false, as in Prometheus.
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:",inline"`
}

// RemoteWriteQueue is a remote write's buffer and retry policy.
type RemoteWriteQueue struct {
	// Capacity is how many samples wait while the store is slow or down;
	// past it the oldest are dropped (and counted). Positive.
	Capacity int `yaml:"capacity"`
	// MaxSamplesPerSend is the most samples in one request; positive, at
	// most Capacity.
	MaxSamplesPerSend int `yaml:"max_samples_per_send"`
	// MinBackoff and MaxBackoff bound the exponential wait between retries
	// of a failed request; 0 < MinBackoff ≤ MaxBackoff.
	MinBackoff model.Duration `yaml:"min_backoff"`
	MaxBackoff model.Duration `yaml:"max_backoff"`
	// RetryOnRateLimit retries requests answered 429; false drops them, as
	// Prometheus' retry_on_http_429: false does.
	RetryOnRateLimit bool `yaml:"retry_on_http_429"`
	// FlushDeadline bounds the sending of what is queued when serve stops;
	// 0 drops it at once.
	FlushDeadline model.Duration `yaml:"flush_deadline"`
}

// Remote-write defaults (DefaultRemoteWrite).
const (
	// DefaultRemoteWriteCapacity is about 140 s of 2,000 SGLang endpoints
	// every 5 s (~36 series each), held compressed at ~14 bytes a sample
	// (~28 MB).
	DefaultRemoteWriteCapacity      = 2_000_000
	DefaultRemoteWriteSamplesPerReq = 2000
	DefaultRemoteWriteTimeout       = 30 * time.Second
	DefaultRemoteWriteMinBackoff    = 30 * time.Millisecond
	DefaultRemoteWriteMaxBackoff    = 5 * time.Second
	DefaultRemoteWriteFlushDeadline = 10 * time.Second
)

// DefaultRemoteWrite is a remote_write entry before decoding: every
// default set, no URL, and the send interval unset (it takes the config's
// global.scrape_interval when the config is resolved, or in
// CheckRemoteWrites).
func DefaultRemoteWrite() RemoteWrite {
	return RemoteWrite{
		RemoteTimeout: model.Duration(DefaultRemoteWriteTimeout),
		SendInterval:  unset,
		QueueConfig: RemoteWriteQueue{
			Capacity:          DefaultRemoteWriteCapacity,
			MaxSamplesPerSend: DefaultRemoteWriteSamplesPerReq,
			MinBackoff:        model.Duration(DefaultRemoteWriteMinBackoff),
			MaxBackoff:        model.Duration(DefaultRemoteWriteMaxBackoff),
			RetryOnRateLimit:  true,
			FlushDeadline:     model.Duration(DefaultRemoteWriteFlushDeadline),
		},
		HTTPClientConfig: promcfg.DefaultHTTPClientConfig,
	}
}

// minSendInterval is the shortest send_interval.
const minSendInterval = 100 * time.Millisecond

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// reservedHeaders are set by the protocol or by the auth settings.
var reservedHeaders = []string{"authorization", "content-encoding", "content-type", "content-length",
	"user-agent", "x-prometheus-remote-write-version", "retry-attempt", "host"}

// resolveRemoteWrites gives an unset send_interval the global
// scrape_interval.
func (c *Config) resolveRemoteWrites() {
	for i := range c.RemoteWrite {
		if c.RemoteWrite[i].SendInterval == unset {
			c.RemoteWrite[i].SendInterval = c.Global.ScrapeInterval
		}
	}
}

// validateRemoteWrites range-checks every remote_write entry, each problem
// at its key, and names the entries that have no name.
func (c *Config) validateRemoteWrites(v *validator) {
	names := map[string]int{}
	for i := range c.RemoteWrite {
		r := &c.RemoteWrite[i]
		p := func(keys ...any) []any { return append([]any{"remote_write", i}, keys...) }
		if r.URL == "" {
			v.addf(p(), "url is missing; write e.g. url: http://127.0.0.1:8428/api/v1/write")
		} else if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.addf(p("url"), "%q: want an absolute http(s) URL such as http://127.0.0.1:8428/api/v1/write", redactURL(r.URL))
		} else if u.User != nil {
			v.addf(p("url"), "%s: credentials in the URL would show in logs; use basic_auth or authorization instead", redactURL(r.URL))
		} else if r.Name == "" {
			r.Name = u.Host + strings.TrimSuffix(u.Path, "/")
		}
		if r.Name != "" {
			if j, dup := names[r.Name]; dup {
				v.addf(p("name"), "%q is also the name of remote_write[%d]; names must be unique", r.Name, j)
			}
			names[r.Name] = i
		}
		if r.RemoteTimeout <= 0 {
			v.addf(p("remote_timeout"), "must be positive")
		}
		if time.Duration(r.SendInterval) < minSendInterval {
			v.addf(p("send_interval"), "%s: want at least %s", r.SendInterval, model.Duration(minSendInterval))
		}
		for _, k := range sortedKeys(r.Headers) {
			for _, h := range reservedHeaders {
				if strings.EqualFold(k, h) {
					v.addf(p("headers", k), "set by kvwatch (the protocol or the auth settings); remove it")
				}
			}
		}
		for _, k := range sortedKeys(r.ExternalLabels) {
			if !labelNameRE.MatchString(k) || strings.HasPrefix(k, "__") {
				v.addf(p("external_labels", k), "not a label name (letters, digits and _, not starting with a digit or __)")
			} else if r.ExternalLabels[k] == "" {
				v.addf(p("external_labels", k), "the value is empty; an empty label is no label")
			}
		}
		q := r.QueueConfig
		if q.Capacity <= 0 {
			v.addf(p("queue_config", "capacity"), "%d must be a positive number of samples", q.Capacity)
		}
		if q.MaxSamplesPerSend <= 0 {
			v.addf(p("queue_config", "max_samples_per_send"), "%d must be a positive number of samples", q.MaxSamplesPerSend)
		} else if q.Capacity > 0 && q.MaxSamplesPerSend > q.Capacity {
			v.addf(p("queue_config", "max_samples_per_send"), "%d is above capacity %d; lower it", q.MaxSamplesPerSend, q.Capacity)
		}
		if q.MinBackoff <= 0 {
			v.addf(p("queue_config", "min_backoff"), "must be positive")
		}
		if q.MaxBackoff <= 0 {
			v.addf(p("queue_config", "max_backoff"), "must be positive")
		} else if q.MinBackoff > q.MaxBackoff {
			v.addf(p("queue_config", "min_backoff"), "%s is above max_backoff %s; lower it", q.MinBackoff, q.MaxBackoff)
		}
		if q.FlushDeadline < 0 {
			v.addf(p("queue_config", "flush_deadline"), "must not be negative")
		}
		if err := r.HTTPClientConfig.Validate(); err != nil {
			v.addf(p(), "%v", err)
		}
	}
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

// CheckRemoteWrites resolves and validates remote writes built in code
// (from flags, and a config's entries beside them): an unset send_interval
// takes scrapeInterval, an empty name the URL's host and path; every other
// field is used as it is, so start from DefaultRemoteWrite. Weak TLS keys
// in their files are refused. name prefixes
// the error (e.g. "remote write"); problems name their keys, e.g.
// remote_write[0].queue_config.capacity.
func CheckRemoteWrites(rws []RemoteWrite, scrapeInterval model.Duration, name string) error {
	c := &Config{Global: Global{ScrapeInterval: scrapeInterval}, RemoteWrite: rws}
	c.resolveRemoteWrites()
	v := &validator{}
	c.validateRemoteWrites(v)
	// Their files are resolved already: serve joins them with the config
	// file's directory, the flags' with the working directory.
	for i := range rws {
		checkTLSKeys(v, []any{"remote_write", i}, &rws[i].HTTPClientConfig, "")
	}
	if len(v.problems) > 0 {
		return &Error{File: name, Problems: v.problems}
	}
	return nil
}
