package tui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// fixedSource returns the same report every time.
type fixedSource struct{ r report.Report }

func (f fixedSource) Fetch(context.Context) (report.Report, error) { return f.r, nil }

func names(rows []report.Server) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Name
	}
	return out
}

func TestSortOrder(t *testing.T) {
	m := loaded(Options{})
	cases := []struct {
		keys []string
		want []string
	}{
		{nil, []string{"decode-0", "decode-1", "llama-0", "prefill-0", "router", "tgi-0", "vllm-0"}},
		// KV fullest first; llama-0 (down) and the router know no usage: last.
		{[]string{"4"}, []string{"decode-1", "vllm-0", "decode-0", "tgi-0", "prefill-0", "llama-0", "router"}},
		// Reversed: unknown still last.
		{[]string{"4", "S"}, []string{"prefill-0", "tgi-0", "decode-0", "vllm-0", "decode-1", "llama-0", "router"}},
		{[]string{"4", "4"}, []string{"prefill-0", "tgi-0", "decode-0", "vllm-0", "decode-1", "llama-0", "router"}},
		// Queued: 31, 7, 5, 3, 0; router and llama-0 unknown.
		{[]string{"8"}, []string{"decode-1", "vllm-0", "decode-0", "prefill-0", "tgi-0", "llama-0", "router"}},
		// s from the server column: role, ascending.
		{[]string{"s"}, []string{"decode-0", "decode-1", "prefill-0", "router", "llama-0", "tgi-0", "vllm-0"}},
	}
	for _, c := range cases {
		var msgs []tea.Msg
		for _, k := range c.keys {
			msgs = append(msgs, key(k))
		}
		if diff := cmp.Diff(c.want, names(drive(m, msgs...).rows())); diff != "" {
			t.Errorf("keys %v: order (-want +got):\n%s", c.keys, diff)
		}
	}
}

func TestFilterKeys(t *testing.T) {
	m := loaded(Options{})
	msgs := append([]tea.Msg{key("/")}, typed("refused")...) // the failure reason
	m = drive(m, msgs...)
	if diff := cmp.Diff([]string{"llama-0"}, names(m.rows())); diff != "" {
		t.Errorf("filter refused (-want +got):\n%s", diff)
	}
	// While typing, q is text, not quit.
	next, cmd := m.Update(key("q"))
	if cmd != nil || next.(Model).filter != "refusedq" {
		t.Errorf("q while filtering: filter %q, cmd %v; want the q typed", next.(Model).filter, cmd)
	}
	m = drive(m, key("backspace"), key("backspace"), key("backspace"), key("backspace"), key("backspace"), key("backspace"), key("backspace"))
	m = drive(m, typed("DECODE")...)
	m = drive(m, key("enter"))
	if diff := cmp.Diff([]string{"decode-0", "decode-1"}, names(m.rows())); diff != "" {
		t.Errorf("filter DECODE (case-insensitive) (-want +got):\n%s", diff)
	}
	if m = drive(m, key("esc")); m.filter != "" {
		t.Errorf("esc left filter %q", m.filter)
	}
}

func TestQuit(t *testing.T) {
	m := loaded(Options{})
	for _, c := range []struct {
		name string
		msgs []tea.Msg
	}{
		{"q", []tea.Msg{key("q")}},
		{"ctrl+c", []tea.Msg{key("ctrl+c")}},
		{"ctrl+c while filtering", []tea.Msg{key("/"), key("x"), key("ctrl+c")}},
		{"q in help", []tea.Msg{key("?"), key("q")}},
	} {
		mm := drive(m, c.msgs[:len(c.msgs)-1]...)
		_, cmd := mm.Update(c.msgs[len(c.msgs)-1])
		if cmd == nil {
			t.Errorf("%s: no command, want tea.Quit", c.name)
			continue
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s: command does not quit", c.name)
		}
	}
}

func TestFetchOnTick(t *testing.T) {
	r := reports(1)[0]
	m := New(Options{Source: fixedSource{r}})
	if !m.fetching {
		t.Fatal("New: the first fetch is not under way")
	}
	// The fetch command reads the source.
	msg := m.fetch()()
	rm, ok := msg.(ReportMsg)
	if !ok || rm.Err != nil || len(rm.Report.Servers) != len(r.Servers) {
		t.Fatalf("fetch() = %#v, want the source's report", msg)
	}
	// A tick while a fetch is under way starts no second one.
	m = drive(m, TickMsg{At: t0})
	m = drive(m, rm)
	if m.fetching || !m.have {
		t.Fatalf("after the report: fetching %v, have %v; want false, true", m.fetching, m.have)
	}
	if m = drive(m, TickMsg{At: t0}); !m.fetching {
		t.Error("tick after a report: no fetch started")
	}
	m = drive(m, rm, key("p"), TickMsg{At: t0})
	if m.fetching || !m.paused {
		t.Errorf("tick while paused: fetching %v, paused %v; want false, true", m.fetching, m.paused)
	}
	if _, cmd := m.Update(key("p")); cmd == nil {
		t.Error("resume: no fetch command")
	}
}

func TestModelIsAValue(t *testing.T) {
	rs := reports(3)
	m1 := drive(New(Options{}), ReportMsg{Report: rs[0], At: t0}, ReportMsg{Report: rs[1], At: t0})
	m2 := drive(m1, ReportMsg{Report: rs[2], At: t0}, key("4"), key("enter"))
	if got := len(m1.hist["decode-0"]); got != 2 {
		t.Errorf("m1 history after updating m2: %d points, want 2", got)
	}
	if got := len(m2.hist["decode-0"]); got != 3 {
		t.Errorf("m2 history: %d points, want 3", got)
	}
	if m1.drill != "" || m1.sortCol != colName {
		t.Errorf("m1 changed by m2's keys: drill %q, sort %v", m1.drill, m1.sortCol)
	}
	// History is capped.
	m := New(Options{})
	for range historyLen + 5 {
		m = drive(m, ReportMsg{Report: rs[0], At: t0})
	}
	if got := len(m.hist["decode-0"]); got != historyLen {
		t.Errorf("history after %d reports: %d points, want %d", historyLen+5, got, historyLen)
	}
	// Ranks have their own history: decode-0 has 4.
	if got := len(m2.rankHist); got != 4 {
		t.Errorf("rank histories: %d, want 4 (decode-0, DP 2 × TP 2)", got)
	}
}

func TestSpark(t *testing.T) {
	nan := func() float64 { var z float64; return z / z }()
	if got, want := spark([]float64{0, 0.5, 1, nan, 2}, 4), "▅█ █"; got != want {
		t.Errorf("spark = %q, want %q (last 4; unknown blank; above 1 clamped)", got, want)
	}
}

func TestRemoteSource(t *testing.T) {
	want := reports(3)[2]
	mux := http.NewServeMux()
	mux.HandleFunc(ReportPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(want)
	})
	mux.HandleFunc("/old"+ReportPath, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"schema_version": 1, "servers": []}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	src, err := NewRemoteSource(srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Fetch(context.Background())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	// Window is not in the JSON form (WindowSeconds is): the view reads WindowSeconds.
	ignoreWindow := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Window" }, cmp.Ignore())
	if diff := cmp.Diff(want, got, ignoreWindow); diff != "" {
		t.Errorf("report through JSON (-want +got):\n%s", diff)
	}

	for _, c := range []struct {
		base, want string
	}{
		{srv.URL + "/old", "report schema 1, this kvwatch reads schema 2; run the same kvwatch version for serve and top"},
		{srv.URL + "/nothing", "404 Not Found"},
	} {
		src, err := NewRemoteSource(c.base, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Fetch(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Fetch(%s) error = %v, want it to contain %q", c.base, err, c.want)
		}
	}
	for _, bad := range []string{"127.0.0.1:9477", "ftp://x", ""} {
		if _, err := NewRemoteSource(bad, nil); err == nil {
			t.Errorf("NewRemoteSource(%q): no error", bad)
		}
	}
}

// TestScrapeSource scrapes the simulator's PD SGLang cluster twice.
func TestScrapeSource(t *testing.T) {
	c := testenv.Builtin(t, "pd-sglang", sim.Options{Seed: 1, ManualClock: true})
	ctx := t.Context()
	c.Advance(time.Minute)
	cfg := config.Default()
	for _, ep := range c.Endpoints() {
		cfg.Targets = append(cfg.Targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, KVUnified: ep.KVUnified})
	}
	cfg.Global.HeadroomTokens = []int{8192}
	p, err := pipeline.Load(config.Sources{Config: cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewScrapeSource(p)
	if _, err := src.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Second)
	r, err := src.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]report.Server{}
	for _, s := range r.Servers {
		if !s.OK {
			t.Errorf("%s: %s", s.Name, s.Error)
		}
		got[s.Name] = s
	}
	// capacity_tokens of the pd-sglang scenario; roles as the engines report them.
	d := got["decode"]
	if d.Server == nil || d.Server.Capacity.V != 2581504 || d.Role != "decode" || d.Rates == nil {
		t.Errorf("decode = %+v; want capacity 2581504, role decode, rates", d)
	}
	if p := got["prefill"]; p.Server == nil || p.Server.Capacity.V != 1048576 || p.Role != "prefill" {
		t.Errorf("prefill = %+v; want capacity 1048576, role prefill", p)
	}
	if rt := got["router"]; rt.Role != "router" {
		t.Errorf("router role = %q, want router", rt.Role)
	}
}

// TestSlowTargetDoesNotStall: once every target answered once, a fetch
// waits at most Budget; a target still scraping keeps its previous row,
// marked late, and the others are fresh.
func TestSlowTargetDoesNotStall(t *testing.T) {
	page := "sglang:max_total_num_tokens 1000\nsglang:kv_used_tokens 10\nsglang:num_running_reqs 1\n"
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) }))
	defer fast.Close()
	var n atomic.Int32
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			<-release // from the second scrape on: hangs until released
		}
		io.WriteString(w, page)
	}))
	defer slow.Close()
	defer close(release)
	cfg := config.Default()
	cfg.Global.ScrapeInterval = model.Duration(10 * time.Second)
	cfg.Global.ScrapeTimeout = model.Duration(10 * time.Second)
	for _, u := range []string{fast.URL, slow.URL} {
		cfg.Targets = append(cfg.Targets, config.Target{URL: u + "/metrics"})
	}
	cfg.Global.HeadroomTokens = []int{8}
	p, err := pipeline.Load(config.Sources{Config: cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := NewScrapeSource(p)
	src.Budget = 200 * time.Millisecond
	r1, err := src.Fetch(context.Background())
	if err != nil || len(r1.Servers) != 2 || !r1.Servers[0].OK || !r1.Servers[1].OK {
		t.Fatalf("first fetch: %+v %v", r1.Servers, err)
	}
	start := time.Now()
	r2, _ := src.Fetch(context.Background())
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second fetch took %v: the slow target stalled it", d)
	}
	if r2.Servers[0].Late || !r2.Servers[0].ScrapedAt.After(r1.Servers[0].ScrapedAt) {
		t.Errorf("fast target: late %v, scraped %v after %v; want fresh", r2.Servers[0].Late, r2.Servers[0].ScrapedAt, r1.Servers[0].ScrapedAt)
	}
	if !r2.Servers[1].Late || !r2.Servers[1].OK || !r2.Servers[1].ScrapedAt.Equal(r1.Servers[1].ScrapedAt) {
		t.Errorf("slow target: late %v ok %v scraped %v; want its previous row, marked late", r2.Servers[1].Late, r2.Servers[1].OK, r2.Servers[1].ScrapedAt)
	}
	m := drive(New(Options{Title: "t"}), tea.WindowSizeMsg{Width: 160, Height: 20}, ReportMsg{Report: r2, At: time.Now()})
	if !regexp.MustCompile(`\d+s…`).MatchString(m.View()) {
		t.Errorf("the late row is not marked:\n%s", m.View())
	}
}
