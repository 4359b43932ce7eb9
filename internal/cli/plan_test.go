package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/forecast"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// The fleet of the accuracy test: 21 days of 5-minute samples with a daily
// cycle, ±2 % noise on every instant's load, a server restart, a collector
// outage of 30 hours and one of 6, a capacity change and a pool that
// started a day ago.
var (
	planGrow = synthPool{role: "decode", cluster: "grow", servers: 4, size: 1 << 20, base: 0.45, growth: 0.012, demand: true, restartAt: 8.55}
	// planPrefill is the same cluster's prefill pool, growing at another
	// rate: planned apart from its decode pool.
	planPrefill = synthPool{role: "prefill", cluster: "grow", servers: 2, size: 1 << 18, base: 0.40, growth: 0.012}
	planFlat    = synthPool{role: "decode", cluster: "flat", servers: 2, size: 1 << 19, base: 0.55}
	// planGrown gets a fourth server 12.4 days in.
	planGrown = synthPool{role: "decode", cluster: "grown", servers: 3, size: 1 << 20, base: 0.40, growth: 0.015, addAt: 12.4}
	planYoung = synthPool{role: "decode", cluster: "young", servers: 2, size: 1 << 19, base: 0.5, growth: 0.01, startAt: 19.8}

	planOutages = []outage{{4.3, 6.0}, {15.1, 15.35}}
)

const (
	planDays  = 21
	planNoise = 0.02
)

// planHistory is the accuracy fleet's history, ending at end, with a
// router's running requests (a router holds no KV: it is in no pool).
func planHistory(end time.Time) (start time.Time, series []*synthSeries) {
	start = end.Add(-planDays * histDay)
	series = synthHistory([]synthPool{planGrow, planPrefill, planFlat, planGrown, planYoung}, start, planDays, 5*time.Minute, planNoise, planOutages, 1)
	router := &synthSeries{name: signal.RequestsRunning.Name,
		labels: fmt.Sprintf(`{%s="router-0",%s="router",%s="grow"}`, signal.LabelServer, signal.LabelRole, signal.LabelCluster)}
	for t := start; !t.After(end); t = t.Add(5 * time.Minute) {
		router.samples = append(router.samples, synthSample{t.UnixMilli(), 40})
	}
	return start, append(series, router)
}

// planEnd is the end of the history: the last 17:55 UTC before now. A
// fixed time of day keeps the days' ends where they were when the
// accuracy was measured (docs/benchmarks.md), so the test's results do not
// depend on the hour it runs.
func planEnd() time.Time {
	now := time.Now().UTC()
	end := now.Truncate(histDay).Add(17*time.Hour + 55*time.Minute)
	if end.After(now.Add(-time.Minute)) {
		end = end.Add(-histDay)
	}
	return end
}

// planJSON runs kvwatch plan -o json and decodes its report.
func planJSON(t *testing.T, wantCode int, args ...string) *forecast.Report {
	t.Helper()
	code, out, errs := run(t, append([]string{"plan", "-o", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("kvwatch plan %q: exit %d, want %d; stderr:\n%s\nstdout:\n%.2000s", args, code, wantCode, errs, out)
	}
	var rep forecast.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("kvwatch plan %q: %v; stdout:\n%.2000s", args, err, out)
	}
	return &rep
}

func poolOf(t *testing.T, rep *forecast.Report, name string) forecast.PoolPlan {
	t.Helper()
	for _, p := range rep.Pools {
		if p.Name == name {
			return p
		}
	}
	var names []string
	for _, p := range rep.Pools {
		names = append(names, p.Name)
	}
	t.Fatalf("no pool %s in the plan; pools: %v", name, names)
	return forecast.PoolPlan{}
}

// dateError is how far date is from the truth, as a share of the time
// from at to the truth.
func dateError(date *time.Time, at time.Time, truthDays float64) float64 {
	if date == nil {
		return math.Inf(1)
	}
	got := date.Sub(at).Hours() / 24
	return math.Abs(got-truthDays) / truthDays
}

// truthServers is how many servers of p's size keep its noise-free peak
// at d days under 90 % with one drained: the least k with 0.9 × (capacity
// + k·size − size) ≥ peak, worked out from the closed form.
func truthServers(p synthPool, d float64) int {
	k := math.Ceil(p.peakAt(d)/(0.9*p.size) - p.capacityNow()/p.size + 1)
	return int(max(k, 0))
}

// TestPlanAccuracy writes the fleet's 21 days into Prometheus and
// VictoriaMetrics and checks kvwatch plan's dates against the truth: the
// warning (90 %) and full dates of the growing pools within 10 % of the
// time to them, planned at four times of day (the peak is placed in the
// middle of its day, so where the day ends moves the dates by up to half
// a day); no date for the flat pool; the capacity change found and the fit
// started after it; a pool with a day of history not planned.
func TestPlanAccuracy(t *testing.T) {
	end := planEnd()
	start, series := planHistory(end)
	stores := []struct {
		name string
		base func(t *testing.T) string
	}{
		{"prometheus", func(t *testing.T) string { return prometheusWithHistory(t, series, start, planDays, false) }},
		{"victoriametrics", func(t *testing.T) string {
			base := victoriaMetrics(t)
			importVictoriaMetrics(t, base, series)
			return base
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			base := st.base(t)
			for _, back := range []time.Duration{0, 6 * time.Hour, 12 * time.Hour, 18 * time.Hour} {
				at := end.Add(-back)
				rep := planJSON(t, exitFailed, "--against", base, "--at", at.Format(time.RFC3339), "--window", "21d")
				atDays := float64(at.Sub(start)) / float64(histDay)
				for _, c := range []struct {
					pool  synthPool
					name  string
					ratio float64
					cross func(forecast.PoolPlan) *forecast.Crossing
				}{
					{planGrow, planGrow.name(), 0.9, func(p forecast.PoolPlan) *forecast.Crossing { return p.Warning }},
					{planGrow, planGrow.name(), 1, func(p forecast.PoolPlan) *forecast.Crossing { return p.Full }},
					{planPrefill, planPrefill.name(), 0.9, func(p forecast.PoolPlan) *forecast.Crossing { return p.Warning }},
					{planPrefill, planPrefill.name(), 1, func(p forecast.PoolPlan) *forecast.Crossing { return p.Full }},
					{planGrown, planGrown.name(), 0.9, func(p forecast.PoolPlan) *forecast.Crossing { return p.Warning }},
				} {
					p := poolOf(t, rep, c.name)
					truth := c.pool.truthDay(c.ratio) - atDays
					cr := c.cross(p)
					e := dateError(cr.Date, at, truth)
					t.Logf("at end−%s: %s reaches %.0f%%: truth %.2f days, plan %v (%.1f%% off)", back, c.name, c.ratio*100, truth, cr.Date, e*100)
					if p.State != forecast.Planned || p.Trend != forecast.Growing || e > 0.10 {
						t.Errorf("at end−%s: %s: state %s, trend %s, reaches %.0f%% on %v: %.1f%% off the truth (%.2f days); want planned, growing, within 10%%",
							back, c.name, p.State, p.Trend, c.ratio*100, cr.Date, e*100, truth)
					}
				}

				grow := poolOf(t, rep, planGrow.name())
				if want := truthServers(planGrow, atDays+90); grow.ServersToAdd == nil || *grow.ServersToAdd < want || *grow.ServersToAdd > want+1 {
					t.Errorf("at end−%s: %s: %v servers to add, want %d (the truth; +1 for the noise's peaks)", back, grow.Name, grow.ServersToAdd, want)
				}
				if !grow.DemandCounted {
					t.Errorf("at end−%s: %s: demand not counted; its servers report it", back, grow.Name)
				}
				notes := strings.Join(grow.Notes, "\n")
				// The 30-hour outage: which periods it leaves without data
				// or partial depends on where the days end and on the
				// store (VictoriaMetrics carries a sample further).
				for _, want := range []string{"left out: ", "servers were missing for part of 1 fitted day"} {
					if !strings.Contains(notes, want) {
						t.Errorf("at end−%s: %s: notes %q do not say %q", back, grow.Name, notes, want)
					}
				}

				flat := poolOf(t, rep, planFlat.name())
				if flat.State != forecast.Planned || flat.Warning.Date != nil || flat.Full.Date != nil {
					t.Errorf("at end−%s: %s: state %s, trend %s, warning %+v, full %+v; want planned without dates",
						back, flat.Name, flat.State, flat.Trend, flat.Warning, flat.Full)
				}

				grown := poolOf(t, rep, planGrown.name())
				if c := grown.Change; c == nil || c.FromTokens != 3<<20 || c.ToTokens != 4<<20 || grown.Fitted > 9 {
					t.Errorf("at end−%s: %s: change %+v, %d periods fitted; want 3Mi → 4Mi tokens and at most the 9 days since", back, grown.Name, c, grown.Fitted)
				}

				for _, p := range rep.Pools {
					if p.Role == "router" {
						t.Errorf("at end−%s: a pool of routers, %s: routers hold no KV", back, p.Name)
					}
				}

				young := poolOf(t, rep, planYoung.name())
				if young.State != forecast.TooShort || !strings.Contains(young.Reason, "a trend needs 5") {
					t.Errorf("at end−%s: %s: state %s, reason %q; want too_short: a trend needs 5", back, young.Name, young.State, young.Reason)
				}
			}

			// A day of history: nothing to plan, data missing.
			rep := planJSON(t, exitDataMissing, "--against", base, "--at", start.Add(histDay+time.Hour).Format(time.RFC3339))
			for _, p := range rep.Pools {
				if p.State != forecast.TooShort || !strings.Contains(p.Reason, "a trend needs 5") {
					t.Errorf("a day in: %s: state %s, reason %q; want too_short", p.Name, p.State, p.Reason)
				}
			}

			// The text: one row per pool, the answer last.
			code, out, errs := run(t, "plan", "--against", base, "--at", end.Format(time.RFC3339), "--window", "21d")
			if code != exitFailed || errs != "" {
				t.Fatalf("plan: exit %d, stderr %q; want 1 and nothing", code, errs)
			}
			t.Logf("plan's text:\n%s", out)
			for _, want := range []string{planGrow.name() + " ", planPrefill.name() + " ", planYoung.name() + "  ", "? too short",
				"Action needed: add servers within 90d", "Data missing: 1 pool not planned: " + planYoung.name()} {
				if !strings.Contains(out, want) {
					t.Errorf("plan's text has no %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestPlanBadInput: each a clear answer saying what is missing, with the
// exit code scripts read, never a date.
func TestPlanBadInput(t *testing.T) {
	vm := victoriaMetrics(t) // empty: no series
	// A store that accepts connections and never answers.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		var held []net.Conn // held open, unanswered, until the listener closes
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	httpConfig := writeConfig(t, "basic_auth:\n  username: kvwatch\n  password_file: /nonexistent/password\n  password: both\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"store without the series", []string{"--against", vm}, exitDataMissing,
			"holds no kvwatch_kv_used_tokens or kvwatch_kv_capacity_tokens series from "},
		{"store that times out", []string{"--against", "http://" + hang.Addr().String(), "--against.timeout", "1s"}, exitDataMissing,
			"the store did not answer in time: no answer within --against.timeout 1s; raise it, or shorten --window or coarsen --resolution"},
		{"store not reached", []string{"--against", "http://" + testenv.FreeAddr(t)}, exitDataMissing, "the store cannot be reached"},
		{"not an API", []string{"--against", vm + "/health"}, exitUsage, "not a Prometheus-compatible API; give the API's base URL"},
		{"window of one day", []string{"--against", vm, "--window", "1d"}, exitUsage,
			"kvwatch: plan: --window 1d holds 1 of --period 1d; a trend needs 5: give --window 5d or more\n"},
		{"resolution not dividing the period", []string{"--against", vm, "--resolution", "7m"}, exitUsage,
			"kvwatch: plan: --resolution 7m does not divide --period 1d: give e.g. --resolution 10m\n"},
		{"no store", nil, exitUsage, "kvwatch: plan: --against is required"},
		{"store not a URL", []string{"--against", "prometheus:9090"}, exitUsage, "want the http(s) base URL of a Prometheus-compatible API"},
		{"time not a time", []string{"--against", vm, "--at", "yesterday"}, exitUsage,
			"kvwatch: plan: --at \"yesterday\": want an RFC 3339 time (2026-03-15T12:00:00Z) or Unix seconds\n"},
		{"time in the future", []string{"--against", vm, "--at", "2999-01-01T00:00:00Z"}, exitUsage,
			"kvwatch: plan: --at 2999-01-01T00:00:00Z is in the future: the store has nothing there yet\n"},
		{"http config not valid", []string{"--against", vm, "--against.http-config", httpConfig}, exitUsage, "kvwatch: plan: --against.http-config: "},
		{"config file missing", []string{"--against", vm, "--config.file", filepath.Join(t.TempDir(), "kvwatch.yml")}, exitUsage, "kvwatch: plan: read config: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := run(t, append([]string{"plan"}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.want) || out != "" {
				t.Errorf("plan %q: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, stderr with %q", c.args, code, out, errs, c.code, c.want)
			}
		})
	}
}

// BenchmarkPlanPrometheus: kvwatch plan over 200 pools (2 servers each)
// with 14 days of 5-minute samples in Debian's Prometheus on this machine,
// the whole command (queries, plan, JSON) per iteration. Setting the store
// up (promtool, 4.8 million samples, then Prometheus compacting the blocks
// as it would have over the two weeks) takes a few minutes and is not
// timed.
//
//	go test ./internal/cli -run '^$' -bench BenchmarkPlanPrometheus -benchtime 5x
func BenchmarkPlanPrometheus(b *testing.B) {
	const pools, days = 200, 14
	end := planEnd()
	start := end.Add(-days * histDay)
	var fleet []synthPool
	for i := range pools {
		role := "decode"
		if i%4 == 0 {
			role = "prefill"
		}
		fleet = append(fleet, synthPool{role: role, cluster: fmt.Sprintf("c%03d", i), servers: 2, size: 1 << 20,
			base: 0.3 + 0.3*float64(i%7)/6, growth: 0.02 * float64(i%5) / 4})
	}
	series := synthHistory(fleet, start, days, 5*time.Minute, planNoise, nil, 2)
	base := prometheusWithHistory(b, series, start, days, true)
	args := []string{"plan", "-o", "json", "--against", base, "--at", end.Format(time.RFC3339)}
	var out, errb bytes.Buffer
	cpu := promCPU(b, base)
	b.ResetTimer()
	for b.Loop() {
		out.Reset()
		errb.Reset()
		code := Run(context.Background(), args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
		if code != exitFailed {
			b.Fatalf("plan: exit %d, want 1: %s", code, errb.String())
		}
	}
	// Prometheus' own CPU per plan: what the answer costs the store, less
	// dependent on what else the machine runs than the wall time.
	b.ReportMetric((promCPU(b, base)-cpu)/float64(b.N), "prometheus-cpu-s/op")
	var rep forecast.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Pools) != pools {
		b.Fatalf("plan: %d pools (%v), want %d", len(rep.Pools), err, pools)
	}
}

// promCPU is Prometheus' process_cpu_seconds_total.
func promCPU(b *testing.B, base string) float64 {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatal("Prometheus reports no process_cpu_seconds_total")
	return 0
}
