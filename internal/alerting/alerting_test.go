package alerting

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// stackRules are the rule groups `kvwatch stack` generates with default
// thresholds: KVCacheUsageHigh above 0.90 for 10m.
func stackRules() []rulefmt.RuleGroup {
	return append(stack.RecordingRules(stack.Options{}).Groups, stack.AlertRules(stack.Options{}).Groups...)
}

// phase is a stretch of time with a constant KV usage of the decode server.
type phase struct {
	d     time.Duration
	ratio float64
}

// drive appends the decode server's usage every 15s through the phases
// (capacity 2,581,504 tokens, as the default simulated decode server) and
// evaluates the rules after each append. It returns the time of the last
// evaluation.
func drive(t *testing.T, st *history.Store, m *Manager, start time.Time, phases []phase, each func(time.Time)) time.Time {
	t.Helper()
	const capacity = 2581504
	id := []string{signal.LabelServer, "127.0.0.1:30002", signal.LabelRole, "decode"}
	ts := start
	for _, p := range phases {
		for end := ts.Add(p.d); ts.Before(end); ts = ts.Add(15 * time.Second) {
			ms := ts.UnixMilli()
			st.Append(labels.FromStrings(append([]string{model.MetricNameLabel, signal.KVUsageRatio.Name}, id...)...), ms, p.ratio)
			st.Append(labels.FromStrings(append([]string{model.MetricNameLabel, signal.KVUsedTokens.Name}, id...)...), ms, float64(int(p.ratio*capacity)))
			st.Append(labels.FromStrings(append([]string{model.MetricNameLabel, signal.KVCapacityTokens.Name}, id...)...), ms, capacity)
			m.EvalAt(context.Background(), ts)
			if each != nil {
				each(ts)
			}
		}
	}
	return ts
}

// webhookSink records webhook messages.
type webhookSink struct {
	mu   sync.Mutex
	msgs []WebhookMessage
}

func (s *webhookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m WebhookMessage
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
}

// statuses returns the status of every KVCacheUsageHigh alert received, in order.
func (s *webhookSink) statuses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		for _, a := range m.Alerts {
			if a.Labels["alertname"] == stack.AlertKVHigh {
				out = append(out, a.Status)
			}
		}
	}
	return out
}

func TestKVHighFiresAndResolves(t *testing.T) {
	sink := &webhookSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	hook, err := NewWebhook(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	st := history.New(history.Options{Retention: 2 * time.Hour})
	m, err := New(Options{Groups: stackRules(), Storage: st, Notifiers: []Notifier{hook},
		ExternalURL: "http://127.0.0.1:9477/", ResendDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var firstPending, firstFiring, resolved time.Time
	state := func(ts time.Time) {
		for _, a := range m.Alerts() {
			if a.Labels.Get("alertname") != stack.AlertKVHigh {
				continue
			}
			if a.State == StatePending && firstPending.IsZero() {
				firstPending = ts
			}
			if a.State == StateFiring && firstFiring.IsZero() {
				firstFiring = ts
			}
		}
		if !firstFiring.IsZero() && resolved.IsZero() && !slices.ContainsFunc(m.Alerts(), func(a Alert) bool {
			return a.Labels.Get("alertname") == stack.AlertKVHigh
		}) {
			resolved = ts
		}
	}
	drive(t, st, m, start, []phase{{5 * time.Minute, 0.5}, {12 * time.Minute, 0.95}, {2 * time.Minute, 0.4}}, state)

	// The usage crosses 0.90 at 5m: pending at once, firing 10m later
	// (for: 10m), resolved at 17m when it drops to 0.4.
	if want := start.Add(5 * time.Minute); !firstPending.Equal(want) {
		t.Errorf("pending at %v, want %v", firstPending, want)
	}
	if want := start.Add(15 * time.Minute); !firstFiring.Equal(want) {
		t.Errorf("firing at %v, want %v", firstFiring, want)
	}
	if want := start.Add(17 * time.Minute); !resolved.Equal(want) {
		t.Errorf("resolved at %v, want %v", resolved, want)
	}
	if got, want := sink.statuses(), []string{"firing", "resolved"}; !slices.Equal(got, want) {
		t.Errorf("webhook got %v, want %v", got, want)
	}
	var first WebhookAlert
	sink.mu.Lock()
	for _, msg := range sink.msgs {
		for _, a := range msg.Alerts {
			if a.Labels["alertname"] == stack.AlertKVHigh && first.Labels == nil {
				first = a
			}
		}
	}
	sink.mu.Unlock()
	if first.Labels["severity"] != "warning" || first.Labels["server"] != "127.0.0.1:30002" {
		t.Errorf("alert labels = %v, want severity=warning server=127.0.0.1:30002", first.Labels)
	}
	if d := first.Annotations["description"]; !strings.Contains(d, "is 95% full") {
		t.Errorf("description = %q, want the expanded value \"95%%\"", d)
	}
	if first.GeneratorURL != "http://127.0.0.1:9477/alerts" {
		t.Errorf("generatorURL = %q", first.GeneratorURL)
	}

	// The rule state for /api/v1/rules: the recording rules wrote their
	// series, the alert rule is inactive again.
	var found bool
	for _, g := range m.Groups() {
		for _, r := range g.Rules {
			if r.Health != "ok" {
				t.Errorf("rule %s health %s: %s", r.Name, r.Health, r.LastError)
			}
			if r.Name == stack.AlertKVHigh {
				found = true
				if r.State != StateInactive {
					t.Errorf("%s state = %s after resolve, want inactive", r.Name, r.State)
				}
			}
		}
	}
	if !found {
		t.Errorf("no rule %s in Groups()", stack.AlertKVHigh)
	}
	q, _ := st.Querier(0, start.Add(time.Hour).UnixMilli())
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, stack.RecUsageRatio("fleet")))
	if !ss.Next() {
		t.Errorf("recording rule %s wrote nothing into the history", stack.RecUsageRatio("fleet"))
	}
	ss = q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, "ALERTS"),
		labels.MustNewMatcher(labels.MatchEqual, "alertname", stack.AlertKVHigh))
	if !ss.Next() {
		t.Errorf("no ALERTS series for %s", stack.AlertKVHigh)
	}
}

func TestLoadFilesStackOutput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rec := write("rec.yml", stack.RecordingRules(stack.Options{}))
	al := write("alerts.yml", stack.AlertRules(stack.Options{}))
	groups, err := LoadFiles([]string{rec, al})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != len(stackRules()) {
		t.Errorf("loaded %d groups, want %d", len(groups), len(stackRules()))
	}
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("groups:\n- name: x\n  rules:\n  - alert: A\n    expr: sum(\n"), 0o600)
	_, err = LoadFiles([]string{bad})
	if err == nil || !strings.Contains(err.Error(), "bad.yml") || !strings.Contains(err.Error(), "promtool check rules") {
		t.Errorf("LoadFiles(bad) = %v, want an error naming the file and promtool", err)
	}
}

// TestRealAlertmanager sends to a real Alertmanager's v2 API and reads the
// alert back from it, then sees it resolved.
func TestRealAlertmanager(t *testing.T) {
	bin := testenv.Tool(t, "prometheus-alertmanager", "prometheus-alertmanager")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "am.yml")
	os.WriteFile(cfg, []byte("route:\n  receiver: none\nreceivers:\n- name: none\n"), 0o600)
	addr := testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.path="+dir,
		"--web.listen-address="+addr, "--cluster.listen-address=")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	base := "http://" + addr
	ready := false
	for range 100 {
		if r, err := http.Get(base + "/-/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				ready = true
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ready {
		t.Fatalf("alertmanager did not become ready:\n%s", out.String())
	}
	am, err := NewAlertmanager(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := history.New(history.Options{Retention: 2 * time.Hour})
	m, err := New(Options{Groups: stackRules(), Storage: st, Notifiers: []Notifier{am}})
	if err != nil {
		t.Fatal(err)
	}
	// Recent timestamps: Alertmanager judges resolution against its clock.
	start := time.Now().Add(-30 * time.Minute).Truncate(time.Second)
	active := func() []map[string]any {
		r, err := http.Get(base + "/api/v2/alerts?active=true&filter=" + "alertname%3D%22" + stack.AlertKVHigh + "%22")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var alerts []map[string]any
		json.NewDecoder(r.Body).Decode(&alerts)
		return alerts
	}
	end := drive(t, st, m, start, []phase{{5 * time.Minute, 0.5}, {11 * time.Minute, 0.95}}, nil)
	got := active()
	if len(got) != 1 || fmt.Sprint(got[0]["labels"].(map[string]any)["severity"]) != "warning" {
		t.Fatalf("alertmanager holds %v, want one firing %s with severity warning", got, stack.AlertKVHigh)
	}
	drive(t, st, m, end, []phase{{time.Minute, 0.3}}, nil)
	if got := active(); len(got) != 0 {
		t.Errorf("after resolve alertmanager still holds active %v", got)
	}
}

// recorder is a notifier of its own, as a user's would be.
type recorder struct{ batches []Batch }

func (r *recorder) Notify(_ context.Context, b Batch) error {
	r.batches = append(r.batches, b)
	return nil
}

// Any notifier gets the batch filled by the manager: end times and links
// (before, a type switch gave them to the two built-in notifiers only, and
// one of those fell back to a hard-coded 4 minutes).
func TestNotifiersGetTheFilledBatch(t *testing.T) {
	rec := &recorder{}
	st := history.New(history.Options{Retention: 2 * time.Hour})
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m, err := New(Options{Groups: stackRules(), Storage: st, Notifiers: []Notifier{rec},
		ExternalURL: "http://127.0.0.1:9477/", ResendDelay: 2 * time.Minute, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	drive(t, st, m, start, []phase{{5 * time.Minute, 0.5}, {12 * time.Minute, 0.95}, {2 * time.Minute, 0.4}}, nil)
	var firing, resolved *Notification
	for _, b := range rec.batches {
		if b.ExternalURL != "http://127.0.0.1:9477/" {
			t.Errorf("batch external URL = %q", b.ExternalURL)
		}
		for i, n := range b.Alerts {
			if n.Labels.Get("alertname") != stack.AlertKVHigh {
				continue
			}
			if n.State == StateFiring && firing == nil {
				firing = &b.Alerts[i]
			}
			if n.State == StateInactive {
				resolved = &b.Alerts[i]
			}
		}
	}
	if firing == nil || resolved == nil {
		t.Fatalf("notifications: firing %v, resolved %v; want both", firing, resolved)
	}
	// 4 × max(resend delay 2m, interval 15s) after the manager's clock.
	if want := clock.Add(8 * time.Minute); !firing.EndsAt.Equal(want) {
		t.Errorf("firing endsAt = %v, want %v", firing.EndsAt, want)
	}
	if want := start.Add(17 * time.Minute); !resolved.EndsAt.Equal(want) {
		t.Errorf("resolved endsAt = %v, want %v (when usage dropped)", resolved.EndsAt, want)
	}
	if firing.GeneratorURL != "http://127.0.0.1:9477/alerts" || resolved.GeneratorURL != firing.GeneratorURL {
		t.Errorf("generator URLs = %q, %q; want http://127.0.0.1:9477/alerts", firing.GeneratorURL, resolved.GeneratorURL)
	}
}
