package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// statusOptions are the flags of `kvwatch status`.
type statusOptions struct {
	targets targetFlags
	output  string
	ranks   bool
	watch   time.Duration
	trend   time.Duration
}

// trendMin is the shortest --trend: three samples a few seconds apart.
const trendMin = 10 * time.Second

// trendStep is the time between the scrapes of --trend d: 5 s, or a sixth
// of a shorter d.
func trendStep(d time.Duration) time.Duration { return min(5*time.Second, d/6) }

// trendClock is the clock of status --trend: the wall clock, or the
// simulator's in tests (trend rounds are stamped with its time).
type trendClock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends; false when ctx ended.
	Sleep(ctx context.Context, d time.Duration) bool
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// statusTrendClock is replaced by tests only.
var statusTrendClock trendClock = wallClock{}

func addStatus(app *kingpin.Application, r registry) {
	o := &statusOptions{}
	cmd := app.Command("status", "Print one line per server (KV used / capacity, headroom, running, queued, prefix-cache hit) and a capacity-weighted fleet line. Exit code 1 if a target failed, 2 on usage errors.")
	o.targets.register(cmd)
	cmd.Flag("output", "Output format: text, wide (all signals) or json (stable schema, see docs/status.md; with --watch one JSON document per line).").Short('o').Default("text").EnumVar(&o.output, "text", "wide", "json")
	cmd.Flag("ranks", "Also print one row per TP/DP/PP rank, with the usage spread across DP ranks.").BoolVar(&o.ranks)
	cmd.Flag("watch", "Refresh every DURATION until interrupted; rates (prefix-cache hit ratio, preemptions/s, tokens/s) come from counter deltas between refreshes.").PlaceHolder("DURATION").DurationVar(&o.watch)
	cmd.Flag("trend", "Scrape at the start and every 5s (a sixth of a shorter DURATION) for DURATION (at least 10s), then print each pool's demand-aware time to full from the fill trend over that time (full in 12m, full now (queue), not filling; docs/planning.md). Without it status has no history and says nothing about the time to full.").PlaceHolder("DURATION").DurationVar(&o.trend)
	r.add(cmd, o.run)
}

func (o *statusOptions) run(ctx context.Context, e *env) int {
	p, err := o.targets.load(ctx, e.Logger)
	if err != nil {
		return exitCode(e, err)
	}
	if o.watch < 0 {
		return exitCode(e, usageError{fmt.Errorf("--watch must be positive")})
	}
	if o.trend != 0 && o.trend < trendMin {
		return exitCode(e, usageError{fmt.Errorf("--trend %s is too short for a trend: give at least %s (three scrapes a few seconds apart)", o.trend, trendMin)})
	}
	if o.trend > 0 && o.watch > 0 {
		return exitCode(e, usageError{fmt.Errorf("--trend and --watch cannot be combined: use --trend for one answer with the time to full, or kvwatch top, which shows it live")})
	}
	targets, s, tr := p.Targets, p.Scraper(), p.NewTracker()
	code := exitOK
	if o.trend > 0 {
		return o.runTrend(ctx, e, s, tr, targets)
	}
	for {
		results := s.ScrapeAll(ctx, targets, scrape.DefaultConcurrency)
		if ctx.Err() != nil {
			return code
		}
		rep := tr.Update(time.Now(), results)
		code = exitOK
		for _, srv := range rep.Servers {
			if !srv.OK {
				code = exitFailed
			}
		}
		if o.watch > 0 && o.output != "json" && e.Interactive {
			fmt.Fprint(e.Stdout, "\033[H\033[2J")
		}
		if err := o.print(e.Stdout, &rep); err != nil {
			return exitCode(e, err)
		}
		if o.watch == 0 {
			return code
		}
		select {
		case <-ctx.Done():
			return code
		case <-time.After(o.watch):
		}
		if o.output != "json" && !e.Interactive {
			fmt.Fprintln(e.Stdout)
		}
	}
}

// runTrend is status --trend: rounds of scrapes trendStep apart for
// o.trend, each round stamped with the clock's time at its start, the
// used tokens kept per target; the last round is printed with each pool's
// time to full over the rounds (kv.PoolFill).
func (o *statusOptions) runTrend(ctx context.Context, e *env, s *scrape.Scraper, tr *report.Tracker, targets []*scrape.Target) int {
	clock := statusTrendClock
	trend := kv.NewUsedTrend(kv.FillWindow, int(o.trend/trendStep(o.trend))+2)
	if e.Interactive {
		fmt.Fprintf(e.Stderr, "measuring the fill trend: a scrape every %s for %s...\n", trendStep(o.trend), o.trend)
	}
	start := clock.Now()
	var rep report.Report
	for {
		at := clock.Now()
		results := s.ScrapeAll(ctx, targets, scrape.DefaultConcurrency)
		if ctx.Err() != nil {
			return exitOK
		}
		for i := range results {
			results[i].Time = at
		}
		rep = tr.Update(at, results)
		rep.ApplyTrend(trend, o.trendMin())
		left := o.trend - at.Sub(start)
		if left <= 0 {
			break
		}
		if !clock.Sleep(ctx, min(trendStep(o.trend), left)) {
			return exitOK
		}
	}
	code := exitOK
	for _, srv := range rep.Servers {
		if !srv.OK {
			code = exitFailed
		}
	}
	if err := o.print(e.Stdout, &rep); err != nil {
		return exitCode(e, err)
	}
	return code
}

// trendMin is what a pool's trend needs under --trend: 3 samples over half
// the duration (a target that failed for a while still gives one).
func (o *statusOptions) trendMin() kv.FillTrend {
	return kv.FillTrend{MinSamples: 3, MinSpan: o.trend / 2}
}

func (o *statusOptions) print(w io.Writer, rep *report.Report) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		if o.watch == 0 {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(rep)
	default:
		renderStatus(w, rep, o.output == "wide", o.ranks, o.watch > 0, o.trendMin())
		return nil
	}
}

// renderStatus writes the text table: a line per server, rank rows when
// asked, errors with their reason, and the fleet line.
func renderStatus(w io.Writer, rep *report.Report, wide, ranks, watching bool, trend kv.FillTrend) {
	tw := tabwriter.NewWriter(&trimWriter{w: w}, 0, 0, 2, ' ', 0)
	lifetime := false
	// The demand column is there when any server reports demand (SGLang PD
	// decode), so that the columns stay aligned. A reservation (TGI) is
	// marked in its ratios and explained under the table.
	demandCol, reserved := false, false
	for _, row := range rep.Servers {
		if row.Server != nil && row.Server.DemandRatio.OK() {
			demandCol = true
		}
		if row.Server != nil && (row.Server.UsageRatio.Prov == kv.Reserved || row.Server.ReservedRatio.Prov == kv.Reserved) {
			reserved = true
		}
	}
	if watching {
		fmt.Fprintf(w, "kvwatch status at %s\n", rep.Time.UTC().Format(time.RFC3339))
	}
	// Failed targets and warnings come after the table: lines with fewer
	// cells in the middle would break its columns.
	var notes []string
	for i := range rep.Servers {
		row := &rep.Servers[i]
		if !row.OK {
			notes = append(notes, fmt.Sprintf("%s\t%s\tFAILED\t%s", orDash(string(row.Role)), row.Name, row.Error))
			continue
		}
		s := row.Server
		if s.Role == kv.RoleRouter {
			line := fmt.Sprintf("%s\t%s\t%s\tworkers %s/%s healthy", s.Role, row.Name, s.Engine,
				textfmt.Count(s.Router.WorkersHealthy), textfmt.Count(s.Router.WorkersTotal))
			if wide {
				line += fmt.Sprintf("\trun=%s", textfmt.Count(s.Running))
			}
			fmt.Fprintln(tw, line)
			continue
		}
		ph := row.PrefixHit()
		hit := textfmt.Hit(ph.Ratio, ph.SinceStart)
		lifetime = lifetime || ph.SinceStart
		if s.Role == kv.RoleCache {
			// Tiers only, no KV pool: its tiers, then as any server's.
			cols := []string{string(s.Role), row.Name, s.Engine, "tiers " + textfmt.Tiers(s), "", "", "", "hit " + hit}
			if demandCol {
				cols = append(cols, "")
			}
			if wide { // model and names under those of the KV servers
				cols = append(cols, "", "", "", "", "", "", "", "model="+orDash(s.Model), "names="+s.Generation, fmt.Sprintf("scrape=%.0fms", row.ScrapeSeconds*1000))
			}
			fmt.Fprintln(tw, strings.Join(cols, "\t"))
			if ranks || wide {
				renderCachePools(tw, s, len(cols)-1)
			}
			for _, x := range s.Warnings {
				notes = append(notes, fmt.Sprintf("warning\t%s\t%s: %s", row.Name, x.Reason, x.Detail))
			}
			continue
		}
		cols := []string{string(s.Role), row.Name, s.Engine,
			"KV " + kvCell(s.Used, s.Capacity, s.UsageRatio),
			"headroom " + headroomCell(row, wide),
			"run=" + textfmt.Count(s.Running),
			"queued=" + queueCell(s.Queued),
			"hit " + hit}
		if demandCol {
			cols = append(cols, "demand "+textfmt.Times(s.DemandRatio))
		}
		if wide {
			cols = append(cols,
				"evictable="+textfmt.Count(s.Evictable),
				"reserved="+textfmt.Percent(s.ReservedRatio),
				"demand_tokens="+textfmt.Count(s.Demand),
				"preempt="+rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.PreemptionsPerSec }, s.Counters.Preemptions),
				"prompt="+rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.PromptTokensPS }, s.Counters.PromptTokens),
				"gentok="+rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.GenTokensPS }, s.Counters.GenerationTokens),
				"spread="+textfmt.Percent(s.Spread),
				"model="+orDash(s.Model),
				"names="+s.Generation,
				fmt.Sprintf("scrape=%.0fms", row.ScrapeSeconds*1000))
			if row.Rates != nil && row.Rates.Reset {
				cols = append(cols, "counter-reset")
			}
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		if ranks {
			renderRanks(tw, s, len(cols)-1)
		}
		if ranks || wide {
			renderCachePools(tw, s, len(cols)-1)
		}
		for _, x := range s.Warnings {
			notes = append(notes, fmt.Sprintf("warning\t%s\t%s: %s", row.Name, x.Reason, x.Detail))
		}
	}
	renderPools(tw, rep)
	tw.Flush()
	renderPlanning(w, rep, wide, trend)
	if len(notes) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, n := range notes {
			fmt.Fprintln(tw, n)
		}
		tw.Flush()
	}
	if reserved {
		fmt.Fprintln(w, textfmt.ReservedMark+" "+textfmt.ReservedNote)
	}
	if lifetime {
		note := " hit ratio " + textfmt.SinceStart + "; use --watch for the ratio over each refresh"
		if watching {
			note = " hit ratio " + textfmt.SinceStart + " (no prefix-cache traffic since the last refresh)"
		}
		fmt.Fprintln(w, textfmt.SinceStartMark+note)
	}
}

// renderPools writes one line per pool when there is more than one (prefill
// and decode are never summed together) and the fleet line: the single
// pool's totals, or the most constrained pool, named, and the others.
func renderPools(w io.Writer, rep *report.Report) {
	f := rep.Fleet
	failed := ""
	if f.Failed > 0 {
		failed = fmt.Sprintf("\t%d failed", f.Failed)
	}
	if f.CacheServers > 0 {
		// Counted apart: they hold tiers, not a KV pool to sum.
		failed += fmt.Sprintf("\t+%s (tiers only)", plural(f.CacheServers, "cache server"))
	}
	if len(rep.Pools) <= 1 {
		var p report.Pool
		if len(rep.Pools) == 1 {
			p = rep.Pools[0]
		}
		line := fmt.Sprintf("fleet\t%s\t\tKV %s", plural(p.Servers, "server"), kvCell(p.Used, p.Capacity, p.UsageRatio))
		if p.UsageRatio.OK() {
			line = strings.TrimSuffix(line, ")") + ", capacity-weighted)"
		}
		if p.Counted < p.Servers {
			line += fmt.Sprintf("\t%d of %d report KV tokens", p.Counted, p.Servers)
		}
		if p.DemandRatio.OK() {
			line += "\tdemand " + textfmt.Times(p.DemandRatio) + " capacity"
		}
		fmt.Fprintln(w, line+failed)
		return
	}
	for _, p := range rep.Pools {
		line := fmt.Sprintf("pool\t%s\t%s\tKV %s\theadroom %s\trun=%s\tqueued=%s", p.Name, plural(p.Servers, "server"),
			kvCell(p.Used, p.Capacity, p.UsageRatio), poolHeadroom(&p), textfmt.Count(p.Running), textfmt.Count(p.Queued))
		if p.Counted < p.Servers {
			line += fmt.Sprintf("\t%d of %d report KV tokens", p.Counted, p.Servers)
		}
		if p.DemandRatio.OK() {
			line += "\tdemand " + textfmt.Times(p.DemandRatio) + " capacity"
		}
		fmt.Fprintln(w, line)
	}
	line := fmt.Sprintf("fleet\t%s\t\t", plural(len(rep.Pools), "pool"))
	if f.LimitIndex < 0 {
		line += "no pool reports KV usage"
	} else {
		p := rep.Pools[f.LimitIndex]
		line += fmt.Sprintf("%s pool is the limit: %s (%s), headroom %s", p.Name, textfmt.Percent(p.UsageRatio),
			textfmt.UsedOf(p.Used, p.Capacity), poolHeadroom(&p))
		var others []string
		for i, o := range rep.Pools {
			if i != f.LimitIndex {
				others = append(others, o.Name+" "+textfmt.Percent(o.UsageRatio))
			}
		}
		line += "; " + strings.Join(others, ", ")
	}
	fmt.Fprintln(w, line+failed)
}

// poolHeadroom is "0×8k" for the smallest configured size, -- if unknown.
func poolHeadroom(p *report.Pool) string {
	if h, ok := p.FirstHeadroom(); ok && h.Requests.OK() {
		return textfmt.Headroom(h.Requests, h.Tokens)
	}
	return textfmt.NA
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// renderRanks writes one row per rank and the DP spread. cells is the
// number of tab-terminated cells of the server's own row: every line under
// it carries as many, so that tabwriter keeps one column block and the next
// server row stays aligned with this one (the line writer trims the
// padding of the empty cells at the end).
func renderRanks(w io.Writer, s *kv.Server, cells int) {
	if len(s.Ranks) < 2 {
		return
	}
	line := func(c ...string) {
		for len(c) < cells+1 {
			c = append(c, "")
		}
		fmt.Fprintln(w, strings.Join(c, "\t"))
	}
	for _, r := range s.Ranks {
		line("", "  "+rankName(r.RankID), "", "KV "+kvCell(r.Used, r.Capacity, r.UsageRatio), "",
			"run="+textfmt.Count(r.Running), "queued="+queueCell(r.Queued))
	}
	// Short enough for the KV column: a longer text there would widen it
	// for the whole table. docs/status.md says what the spread is.
	if !s.MultiDP() {
		line("", "  imbalance", "", "none: one DP rank")
		return
	}
	line("", "  imbalance", "", "DP usage spread "+textfmt.Percent(s.Spread))
}

// trimWriter drops the spaces at the end of each line: tabwriter pads the
// empty cells that keep its column blocks whole.
type trimWriter struct {
	w    io.Writer
	line []byte
}

func (t *trimWriter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b != '\n' {
			t.line = append(t.line, b)
			continue
		}
		t.line = append(bytes.TrimRight(t.line, " "), '\n')
		if _, err := t.w.Write(t.line); err != nil {
			return 0, err
		}
		t.line = t.line[:0]
	}
	return len(p), nil
}

func rankName(id kv.RankID) string {
	var parts []string
	for _, p := range []struct{ k, v string }{{"dp", id.DP}, {"tp", id.TP}, {"pp", id.PP}} {
		if p.v != "" {
			parts = append(parts, p.k+p.v)
		}
	}
	if len(parts) == 0 {
		return "rank"
	}
	return strings.Join(parts, " ")
}

// kvCell is "310k / 2.58M tok (12.0%)", with -- for what is unknown.
func kvCell(used, capacity, ratio kv.Value) string {
	return textfmt.UsedOf(used, capacity) + " (" + textfmt.Percent(ratio) + ")"
}

// headroomCell is "277×8k" for the smallest configured size, plus the
// context-length fit; with all, every size ("554×4k 277×8k 69×32k 4×512k").
func headroomCell(row *report.Server, all bool) string {
	first, _ := row.FirstHeadroom()
	var parts []string
	for _, h := range row.Headroom {
		if !h.Requests.OK() {
			continue
		}
		if all || h == first || h.Context {
			parts = append(parts, textfmt.Headroom(h.Requests, h.Tokens))
		}
	}
	if len(parts) == 0 {
		return textfmt.NA
	}
	return strings.Join(parts, " ")
}

// queueCell is every queue of the server summed, the one definition of
// "queued" in status, top and the web UI, with the queues that hold
// requests named when they are PD queues: "3 (prealloc=2 transfer=1)".
func queueCell(q kv.Queues) string {
	total := textfmt.Count(q.QueuedTotal())
	var parts []string
	pd := false
	for _, p := range []struct {
		name string
		v    kv.Value
	}{{"waiting", q.Waiting}, {"prealloc", q.Prealloc}, {"bootstrap", q.Bootstrap}, {"transfer", q.Transfer}, {"inflight", q.Inflight}} {
		if p.v.OK() && p.v.V != 0 {
			parts = append(parts, fmt.Sprintf("%s=%s", p.name, textfmt.Count(p.v)))
			pd = pd || p.name != "waiting"
		}
	}
	if !pd {
		return total
	}
	return total + " (" + strings.Join(parts, " ") + ")"
}

// rateOrTotal shows a per-second rate when known, else the counter total.
func rateOrTotal(row *report.Server, pick func(*kv.Rates) kv.Value, total kv.Value) string {
	if row.Rates != nil {
		if v := pick(row.Rates); v.OK() {
			return textfmt.Rate(v) + "/s"
		}
	}
	if total.OK() {
		return textfmt.Count(total) + " total"
	}
	return textfmt.NA
}

func orDash(s string) string {
	if s == "" {
		return textfmt.NA
	}
	return s
}
