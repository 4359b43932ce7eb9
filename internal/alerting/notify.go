package alerting

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Notifier sends a batch of alerts somewhere. The manager fills the batch
// (end times, links); a notifier only puts it in its receiver's form and
// sends it.
type Notifier interface {
	Notify(ctx context.Context, b Batch) error
}

// Batch is what one evaluation sends to every notifier.
type Batch struct {
	Alerts []Notification
	// ExternalURL is kvwatch's UI; empty when unknown.
	ExternalURL string
}

// Notification is one alert as sent.
type Notification struct {
	Alert
	// EndsAt is the resolve time of a resolved alert; for a firing one, a
	// time far enough ahead that a receiver keeps it firing until the next
	// resend: 4 × max(resend delay, evaluation interval) from now, as
	// Prometheus computes it.
	EndsAt time.Time
	// GeneratorURL links to kvwatch's alerts page; empty without an
	// external URL.
	GeneratorURL string
}

// batch fills the notifications of the alerts due.
func (m *Manager) batch(due []Alert) Batch {
	b := Batch{Alerts: make([]Notification, 0, len(due))}
	var gen string
	if m.ext != nil {
		b.ExternalURL = m.ext.String()
		gen = m.ext.JoinPath("alerts").String()
	}
	now := m.opts.Now()
	m.mu.RLock()
	interval := m.opts.Interval
	m.mu.RUnlock()
	for _, a := range due {
		n := Notification{Alert: a, GeneratorURL: gen, EndsAt: a.ResolvedAt}
		if a.State != StateInactive {
			n.EndsAt = now.Add(4 * max(m.opts.ResendDelay, interval))
		}
		b.Alerts = append(b.Alerts, n)
	}
	return b
}

// notify sends the alerts due to every notifier, logging failures.
func (m *Manager) notify(ctx context.Context, due []Alert) {
	b := m.batch(due)
	m.mu.RLock()
	notifiers := m.opts.Notifiers
	m.mu.RUnlock()
	for _, n := range notifiers {
		if err := n.Notify(ctx, b); err != nil {
			m.opts.Logger.Error("send alerts", "err", err)
		}
	}
}

// postableAlert is Alertmanager's v2 API alert.
type postableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Alertmanager posts alerts to an Alertmanager's v2 API
// (POST <URL>/api/v2/alerts).
type Alertmanager struct {
	// URL is the Alertmanager's base URL, e.g. http://127.0.0.1:9093.
	URL    *url.URL
	Client *http.Client
}

// NewAlertmanager returns a notifier for the Alertmanager at base (its
// v2 API).
func NewAlertmanager(base string, client *http.Client) (*Alertmanager, error) {
	u, err := parseHTTPURL(base)
	if err != nil {
		return nil, fmt.Errorf("alertmanager URL %q: %w", base, err)
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Alertmanager{URL: u, Client: client}, nil
}

// Notify implements Notifier.
func (a *Alertmanager) Notify(ctx context.Context, b Batch) error {
	out := make([]postableAlert, 0, len(b.Alerts))
	for _, al := range b.Alerts {
		out = append(out, postableAlert{Labels: al.Labels.Map(), Annotations: al.Annotations.Map(),
			StartsAt: al.ActiveAt, EndsAt: al.EndsAt, GeneratorURL: al.GeneratorURL})
	}
	u := a.URL.JoinPath("api", "v2", "alerts")
	return postJSON(ctx, a.Client, u.String(), out)
}

// Webhook posts alerts in Alertmanager's webhook JSON (version 4) to a URL,
// one message per batch.
type Webhook struct {
	URL    *url.URL
	Client *http.Client
}

// NewWebhook returns a notifier posting to rawURL.
func NewWebhook(rawURL string, client *http.Client) (*Webhook, error) {
	u, err := parseHTTPURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("webhook URL %q: %w", rawURL, err)
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Webhook{URL: u, Client: client}, nil
}

// WebhookMessage is the body of a webhook notification, the same form
// Alertmanager's webhook receiver sends.
type WebhookMessage struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []WebhookAlert    `json:"alerts"`
}

// WebhookAlert is one alert of a WebhookMessage.
type WebhookAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Notify implements Notifier.
// Like Alertmanager's webhook, it gives a firing alert no end time.
func (w *Webhook) Notify(ctx context.Context, b Batch) error {
	msg := WebhookMessage{Version: "4", Receiver: "kvwatch", Status: "resolved",
		GroupLabels: map[string]string{}, GroupKey: "{}:{}", ExternalURL: b.ExternalURL}
	var common, commonAnn map[string]string
	for i, al := range b.Alerts {
		wa := WebhookAlert{Status: "firing", Labels: al.Labels.Map(), Annotations: al.Annotations.Map(),
			StartsAt: al.ActiveAt, GeneratorURL: al.GeneratorURL, Fingerprint: fmt.Sprintf("%016x", al.Labels.Hash())}
		if al.State == StateInactive {
			wa.Status, wa.EndsAt = "resolved", al.EndsAt
		} else {
			msg.Status = "firing"
		}
		msg.Alerts = append(msg.Alerts, wa)
		if i == 0 {
			common, commonAnn = wa.Labels, wa.Annotations
		} else {
			common, commonAnn = intersect(common, wa.Labels), intersect(commonAnn, wa.Annotations)
		}
	}
	msg.CommonLabels, msg.CommonAnnotations = common, commonAnn
	return postJSON(ctx, w.Client, w.URL.String(), msg)
}

func intersect(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if b[k] == v {
			out[k] = v
		}
	}
	return out
}

func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("want an http:// or https:// URL with a host")
	}
	return u, nil
}

func postJSON(ctx context.Context, c *http.Client, u string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("post alerts to %s: %w", redact(u), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post alerts to %s: %s: %s", redact(u), resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}
