package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Source gives the view a fresh report of the fleet. Fetch is called from a
// command goroutine, never twice at once by one model.
type Source interface {
	Fetch(ctx context.Context) (report.Report, error)
}

// ScrapeSource scrapes the targets itself and computes rates between its
// own successive scrapes. Each target is scraped on its own: a fetch waits
// at most Budget for the targets, and one still running then (a slow or
// hung server) keeps its previous result, marked late, while its scrape
// goes on for the next fetch; one slow target never stalls the view. It is
// safe for concurrent use.
type ScrapeSource struct {
	scraper *scrape.Scraper
	targets []*scrape.Target
	now     func() time.Time
	// Budget is how long a fetch waits for targets that have a previous
	// result (default 1.5s, under the default refresh of 2s). The first
	// fetch waits for every target (up to its scrape timeout).
	Budget time.Duration

	mu       sync.Mutex
	tracker  *report.Tracker
	last     map[*scrape.Target]scrape.Result
	inflight map[*scrape.Target]chan struct{}
}

// NewScrapeSource returns a source that scrapes p's targets with p's
// scraper and builds its reports with p's tracker (headroom sizes,
// planning threshold).
func NewScrapeSource(p *pipeline.Pipeline) *ScrapeSource {
	return &ScrapeSource{scraper: p.Scraper(), targets: p.Targets, now: time.Now, tracker: p.NewTracker(),
		Budget: 1500 * time.Millisecond, last: map[*scrape.Target]scrape.Result{}, inflight: map[*scrape.Target]chan struct{}{}}
}

// Fetch scrapes every target once. A failed target is a row with its
// reason in the report, not an error.
func (s *ScrapeSource) Fetch(ctx context.Context) (report.Report, error) {
	s.mu.Lock()
	waits := make([]chan struct{}, 0, len(s.targets))
	first := false
	for _, t := range s.targets {
		ch, ok := s.inflight[t]
		if !ok {
			ch = make(chan struct{})
			s.inflight[t] = ch
			go s.scrapeOne(t, ch)
		}
		if _, had := s.last[t]; !had {
			first = true
		}
		waits = append(waits, ch)
	}
	s.mu.Unlock()
	var deadline <-chan time.Time
	if !first && s.Budget > 0 {
		tm := time.NewTimer(s.Budget)
		defer tm.Stop()
		deadline = tm.C
	}
wait:
	for _, ch := range waits {
		select {
		case <-ch:
		case <-deadline:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	results := make([]scrape.Result, 0, len(s.targets))
	var late []bool
	for _, t := range s.targets {
		r, ok := s.last[t]
		if !ok { // cancelled before the first answer
			r = scrape.Result{Target: t, Time: s.now(), Reason: "timeout",
				Err: fmt.Errorf("scrape %s: no answer yet; the server is slow or hung", t.URL.Redacted())}
		}
		_, running := s.inflight[t]
		results = append(results, r)
		late = append(late, running && ok)
	}
	rep := s.tracker.Update(s.now(), results)
	for i := range rep.Servers {
		rep.Servers[i].Late = late[i]
	}
	return rep, nil
}

// scrapeOne scrapes t (bounded by its own timeout) and keeps the result.
func (s *ScrapeSource) scrapeOne(t *scrape.Target, done chan struct{}) {
	r := s.scraper.Scrape(context.Background(), t)
	s.mu.Lock()
	s.last[t] = r
	delete(s.inflight, t)
	s.mu.Unlock()
	close(done)
}

// ReportPath is where `kvwatch serve` publishes the report.
const ReportPath = "/api/kvwatch/v1/report"

// maxReportBytes bounds a remote report body.
const maxReportBytes = 64 << 20

// RemoteSource reads the report a `kvwatch serve` daemon publishes, so a
// fleet scraped elsewhere can be watched through one daemon.
type RemoteSource struct {
	url    string
	client *http.Client
}

// NewRemoteSource returns a source reading the daemon at base, e.g.
// http://127.0.0.1:9477. client may be nil (then a client with timeout is used).
func NewRemoteSource(base string, client *http.Client) (*RemoteSource, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("serve URL %q: want http://HOST:PORT of a running kvwatch serve, e.g. http://127.0.0.1:9477", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + ReportPath
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &RemoteSource{url: u.String(), client: client}, nil
}

// URL is the report URL read.
func (s *RemoteSource) URL() string { return s.url }

// Fetch reads one report.
func (s *RemoteSource) Fetch(ctx context.Context) (report.Report, error) {
	var r report.Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return r, fmt.Errorf("read %s: %w", s.url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return r, fmt.Errorf("read %s: %w; is kvwatch serve running there?", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		msg := strings.TrimSpace(string(b))
		if msg != "" {
			msg = ": " + msg
		}
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = "; is this a kvwatch serve of the same version?"
		}
		return r, fmt.Errorf("read %s: %s%s%s", s.url, resp.Status, msg, hint)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReportBytes+1))
	if err != nil {
		return r, fmt.Errorf("read %s: %w", s.url, err)
	}
	if len(body) > maxReportBytes {
		return r, fmt.Errorf("read %s: report larger than %d bytes", s.url, maxReportBytes)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("read %s: not a kvwatch report: %w", s.url, err)
	}
	if r.Schema != report.SchemaVersion {
		return report.Report{}, fmt.Errorf("read %s: report schema %d, this kvwatch reads schema %d; run the same kvwatch version for serve and top", s.url, r.Schema, report.SchemaVersion)
	}
	return r, nil
}
