package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
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
	cmd.Flag("output", "Output format: text (fitted to the terminal's width, else $COLUMNS, else 100), wide (every column, whatever the width), line (the whole fleet in one line; with --watch one per refresh) or json (stable schema, see docs/status.md; with --watch one JSON document per line).").Short('o').Default("text").EnumVar(&o.output, "text", "wide", "line", "json")
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
		width := textWidth(e)
		switch {
		case o.watch > 0 && o.output == "line":
			// One line per refresh, rewritten in place on a terminal.
			writeLine(e, statusLine(rep, nil), width)
		case o.watch > 0 && o.output != "json" && e.Interactive:
			fmt.Fprint(e.Stdout, "\033[H\033[2J")
			fallthrough
		default:
			if err := o.print(e.Stdout, &rep, width); err != nil {
				return exitCode(e, err)
			}
		}
		if o.watch == 0 {
			return code
		}
		select {
		case <-ctx.Done():
			if o.output == "line" && e.Interactive {
				fmt.Fprintln(e.Stdout)
			}
			return code
		case <-time.After(o.watch):
		}
		if o.output != "json" && o.output != "line" && !e.Interactive {
			fmt.Fprintln(e.Stdout)
		}
	}
}

// writeLine writes a status line: on a terminal over the last one, cut to
// the width (a wrapped line could not be rewritten), else as a line of its
// own.
func writeLine(e *env, line string, width int) {
	if !e.Interactive {
		fmt.Fprintln(e.Stdout, line)
		return
	}
	if r := []rune(line); width > 1 && len(r) > width-1 {
		line = string(r[:width-2]) + "…"
	}
	fmt.Fprintf(e.Stdout, "\r\033[K%s", line)
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
	if err := o.print(e.Stdout, &rep, textWidth(e)); err != nil {
		return exitCode(e, err)
	}
	return code
}

// trendMin is what a pool's trend needs under --trend: 3 samples over half
// the duration (a target that failed for a while still gives one).
func (o *statusOptions) trendMin() kv.FillTrend {
	return kv.FillTrend{MinSamples: 3, MinSpan: o.trend / 2}
}

func (o *statusOptions) print(w io.Writer, rep *report.Report, width int) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		if o.watch == 0 {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(rep)
	case "line":
		_, err := fmt.Fprintln(w, statusLine(*rep, nil))
		return err
	}
	if o.output == "wide" {
		width = 0 // every column, whatever the width
	}
	renderStatus(w, rep, statusLayout{wide: o.output == "wide", ranks: o.ranks, watching: o.watch > 0, width: width}, o.trendMin())
	return nil
}

// statusLayout is how status writes its text: wide (-o wide: every column,
// no width limit), the rank rows, under --watch, and the width (0: no
// limit).
type statusLayout struct {
	wide, ranks, watching bool
	width                 int
}

// The columns of status's table, in order. Server, pool and fleet rows
// share them; -o wide adds its columns after state.
const (
	colRole = iota
	colName
	colAddr // the target's address, where its name is another
	colEngine
	colKV
	colHeadroom
	colRun
	colQueued
	colHit
	colDemand
	colState
	colWide
)

// wideCols are -o wide's columns after state.
const wideCols = 10

// statusFit is how status fits its table to a narrow terminal, step by
// step until it fits: it drops the address and the engine, shortens the
// queues to their total and the headroom to the smallest size, then drops
// the hit ratio, demand, running and the queues. Role, name, KV, headroom
// and state stay.
var statusFit = []fitStep{drop(colAddr), drop(colEngine), shorten(colQueued), shorten(colHeadroom), drop(colHit),
	drop(colDemand), drop(colRun), drop(colQueued)}

// renderStatus writes the text table: a line per server, rank rows when
// asked, the pools and the fleet line, the planning and state lines, then
// failed targets, warnings and the notes on the marks, fitted to the width
// (statusDrop, then wrapped).
func renderStatus(w io.Writer, rep *report.Report, l statusLayout, trend kv.FillTrend) {
	// The demand column is there when any server reports demand (SGLang PD
	// decode). A reservation (TGI) is marked in its ratios and explained
	// under the table.
	demandCol, reserved := false, false
	var hitWindows []string
	for _, row := range rep.Servers {
		if row.Server != nil && row.Server.DemandRatio.OK() {
			demandCol = true
		}
		if row.Server != nil && (row.Server.UsageRatio.Prov == kv.Reserved || row.Server.ReservedRatio.Prov == kv.Reserved) {
			reserved = true
		}
		if ph := row.PrefixHit(); ph.Ratio.OK() && row.Role != kv.RoleRouter {
			hitWindows = append(hitWindows, textfmt.HitWindow(ph.WindowSeconds, ph.SinceStart))
		}
	}
	if l.watching {
		fmt.Fprintf(w, "kvwatch status at %s\n", rep.Time.UTC().Format(time.RFC3339))
	}
	g := newGrid(colWide+wideCols, statusFit...)
	// Failed targets and warnings come after the table, in a grid of
	// their own: their long texts would widen its columns.
	notes := newGrid(4)
	for i := range rep.Servers {
		row := &rep.Servers[i]
		if !row.OK {
			notes.addProse(3, row.Error, orDash(string(row.Role)), row.Name, "FAILED")
			continue
		}
		s := row.Server
		for _, x := range s.Warnings {
			notes.addProse(2, x.Reason+": "+x.Detail, "warning", row.Name)
		}
		for _, x := range s.Unavailable {
			notes.addProse(2, x.Reason+": "+x.Detail, "unavailable", row.Name)
		}
		c := g.add(string(s.Role), row.Name, row.Address(), textfmt.Engine(s.Engine, s.EngineVersion))
		if row.Plan != nil && row.Plan.State != kv.StateUnknown {
			c.cells[colState] = textfmt.State(row.Plan.State)
		}
		if s.Role == kv.RoleRouter {
			var r kv.Router // a page without a router's worker view (a Dynamo frontend given role router): unknown
			if s.Router != nil {
				r = *s.Router
			}
			c.cells[colKV] = fmt.Sprintf("workers %s/%s healthy", textfmt.Count(r.WorkersHealthy), textfmt.Count(r.WorkersTotal))
			if l.wide {
				c.cells[colRun] = "run=" + textfmt.Count(s.Running)
			}
			continue
		}
		ph := row.PrefixHit()
		c.cells[colHit] = "hit " + textfmt.Hit(ph.Ratio, ph.SinceStart)
		if s.Role == kv.RoleCache {
			// Tiers only, no KV pool: its tiers, then as any server's.
			c.cells[colKV] = "tiers " + textfmt.Tiers(s)
			if l.wide { // model and names under those of the KV servers
				copy(c.cells[colWide+7:], []string{"model=" + orDash(s.Model), "names=" + s.Generation, fmt.Sprintf("scrape=%.0fms", row.ScrapeSeconds*1000)})
			}
			if l.ranks || l.wide {
				cachePoolRows(g, s)
			}
			continue
		}
		c.cells[colKV] = "KV " + kvCell(s.Used, s.Capacity, s.UsageRatio)
		c.cells[colHeadroom] = "headroom " + headroomCell(row, l.wide)
		if h, ok := row.FirstHeadroom(); ok && h.Requests.OK() {
			c.setShort(colHeadroom, "headroom "+textfmt.Headroom(h.Requests, h.Tokens))
		}
		c.cells[colRun] = "run=" + textfmt.Count(s.Running)
		c.cells[colQueued] = "queued=" + queueCell(s.Queued)
		c.setShort(colQueued, "queued="+textfmt.Count(s.Queued.QueuedTotal()))
		if demandCol {
			c.cells[colDemand] = "demand " + textfmt.Times(s.DemandRatio)
		}
		if l.wide {
			copy(c.cells[colWide:], []string{
				"evictable=" + textfmt.Count(s.Evictable),
				"reserved=" + textfmt.Percent(s.ReservedRatio),
				"demand_tokens=" + textfmt.Count(s.Demand),
				"preempt=" + rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.PreemptionsPerSec }, s.Counters.Preemptions),
				"prompt=" + rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.PromptTokensPS }, s.Counters.PromptTokens),
				"gentok=" + rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.GenTokensPS }, s.Counters.GenerationTokens),
				"spread=" + textfmt.Percent(s.Spread),
				"model=" + orDash(s.Model),
				"names=" + s.Generation,
				fmt.Sprintf("scrape=%.0fms", row.ScrapeSeconds*1000)})
			if row.Rates != nil && row.Rates.Reset {
				c.note = "counter-reset"
			}
		}
		if l.ranks {
			rankRows(g, s)
		}
		if l.ranks || l.wide {
			cachePoolRows(g, s)
		}
	}
	poolRows(g, rep)
	kept := g.write(w, l.width)
	renderPlanning(w, rep, l, trend)
	notes.write(w, l.width)
	var marks []string
	if reserved {
		marks = append(marks, textfmt.ReservedMark+" "+textfmt.ReservedNote)
	}
	if hit := textfmt.HitWindows(hitWindows); hit != "" && kept[colHit] {
		if slices.Contains(hitWindows, textfmt.SinceStart) {
			if l.watching {
				hit += " (no prefix-cache traffic since the last refresh)"
			} else {
				hit += "; use --watch for the ratio over each refresh"
			}
		}
		marks = append(marks, hit)
	}
	for _, m := range marks {
		for i, line := range wrapText(m, l.width-2) {
			if i > 0 {
				line = "  " + line
			}
			fmt.Fprintln(w, line)
		}
	}
}

// poolRows adds one row per pool when there is more than one (prefill and
// decode are never summed together) and the fleet row: the single pool's
// totals, or the most constrained pool, named, and the others.
func poolRows(g *grid, rep *report.Report) {
	f := rep.Fleet
	var more []string
	if f.Failed > 0 {
		more = append(more, fmt.Sprintf("%d failed", f.Failed))
	}
	if f.CacheServers > 0 {
		// Counted apart: they hold tiers, not a KV pool to sum.
		more = append(more, fmt.Sprintf("+%s (tiers only)", plural(f.CacheServers, "cache server")))
	}
	if len(rep.Pools) <= 1 {
		var p report.Pool
		if len(rep.Pools) == 1 {
			p = rep.Pools[0]
		}
		line := "KV " + kvCell(p.Used, p.Capacity, p.UsageRatio)
		if p.UsageRatio.OK() {
			line = strings.TrimSuffix(line, ")") + ", capacity-weighted)"
		}
		if p.Counted < p.Servers {
			more = append([]string{fmt.Sprintf("%d of %d report KV tokens", p.Counted, p.Servers)}, more...)
		}
		if p.DemandRatio.OK() {
			more = append([]string{"demand " + textfmt.Times(p.DemandRatio) + " capacity"}, more...)
		}
		g.addProse(colKV, strings.Join(append([]string{line}, more...), gap), "fleet", plural(p.Servers, "server"))
		return
	}
	for i := range rep.Pools {
		p := &rep.Pools[i]
		c := g.add("pool", p.Name, "", plural(p.Servers, "server"))
		c.cells[colKV] = "KV " + kvCell(p.Used, p.Capacity, p.UsageRatio)
		c.cells[colHeadroom] = "headroom " + poolHeadroom(p)
		c.cells[colRun] = "run=" + textfmt.Count(p.Running)
		c.cells[colQueued] = "queued=" + textfmt.Count(p.Queued)
		if p.DemandRatio.OK() {
			c.cells[colDemand] = "demand " + textfmt.Times(p.DemandRatio)
		}
		if p.Text != nil {
			c.cells[colState] = p.Text.State
		}
		if p.Counted < p.Servers {
			c.note = fmt.Sprintf("%d of %d report KV tokens", p.Counted, p.Servers)
		}
	}
	line := ""
	if f.LimitIndex < 0 {
		line = "no pool reports KV usage"
	} else {
		p := rep.Pools[f.LimitIndex]
		line = fmt.Sprintf("%s pool is the limit: %s (%s), headroom %s", p.Name, textfmt.Percent(p.UsageRatio),
			textfmt.UsedOf(p.Used, p.Capacity), poolHeadroom(&p))
		var others []string
		for i, o := range rep.Pools {
			if i != f.LimitIndex {
				others = append(others, o.Name+" "+textfmt.Percent(o.UsageRatio))
			}
		}
		line += "; " + strings.Join(others, ", ")
	}
	if len(more) > 0 {
		line += "; " + strings.Join(more, ", ")
	}
	g.addProse(colKV, line, "fleet", plural(len(rep.Pools), "pool"))
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

// rankRows adds one row per rank and the DP spread, under the server's
// row and in its columns.
func rankRows(g *grid, s *kv.Server) {
	if len(s.Ranks) < 2 {
		return
	}
	for _, r := range s.Ranks {
		c := g.add("", "  "+rankName(r.RankID))
		c.cells[colKV] = "KV " + kvCell(r.Used, r.Capacity, r.UsageRatio)
		c.cells[colRun] = "run=" + textfmt.Count(r.Running)
		c.cells[colQueued] = "queued=" + queueCell(r.Queued)
		c.setShort(colQueued, "queued="+textfmt.Count(r.Queued.QueuedTotal()))
	}
	// Short enough for the KV column: a longer text there would widen it
	// for the whole table. docs/status.md says what the spread is.
	c := g.add("", "  imbalance")
	c.cells[colKV] = "none: one DP rank"
	if s.MultiDP() {
		c.cells[colKV] = "DP usage spread " + textfmt.Percent(s.Spread)
	}
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
