package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
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
	reg := engine.NewRegistry()
	cfg, targets, err := o.targets.load(reg)
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
	s := scrape.New(reg, cfg.Global.BodySizeLimitBytes)
	tr := report.NewTracker(cfg.Global.HeadroomTokens)
	tr.SetPlanning(report.PlanOptionsOf(cfg))
	code := exitOK
	if o.trend > 0 {
		return o.runTrend(ctx, e, s, tr, targets, cfg.Global.HeadroomTokens)
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
		if err := o.print(e.Stdout, &rep, cfg.Global.HeadroomTokens); err != nil {
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
func (o *statusOptions) runTrend(ctx context.Context, e *env, s *scrape.Scraper, tr *report.Tracker, targets []*scrape.Target, sizes []int) int {
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
	if err := o.print(e.Stdout, &rep, sizes); err != nil {
		return exitCode(e, err)
	}
	return code
}

// trendMin is what a pool's trend needs under --trend: 3 samples over half
// the duration (a target that failed for a while still gives one).
func (o *statusOptions) trendMin() kv.FillTrend {
	return kv.FillTrend{MinSamples: 3, MinSpan: o.trend / 2}
}

func (o *statusOptions) print(w io.Writer, rep *report.Report, sizes []int) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		if o.watch == 0 {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(rep)
	default:
		renderStatus(w, rep, sizes, o.output == "wide", o.ranks, o.watch > 0, o.trendMin())
		return nil
	}
}

// renderStatus writes the text table: a line per server, rank rows when
// asked, errors with their reason, and the fleet line.
func renderStatus(w io.Writer, rep *report.Report, sizes []int, wide, ranks, watching bool, trend kv.FillTrend) {
	tw := tabwriter.NewWriter(&trimWriter{w: w}, 0, 0, 2, ' ', 0)
	lifetime := false
	// The demand column is there when any server reports demand (SGLang PD
	// decode), so that the columns stay aligned.
	demandCol := false
	for _, row := range rep.Servers {
		if row.Server != nil && row.Server.DemandRatio.OK() {
			demandCol = true
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
				count(s.Router.WorkersHealthy), count(s.Router.WorkersTotal))
			if wide {
				line += fmt.Sprintf("\trun=%s", count(s.Running))
			}
			fmt.Fprintln(tw, line)
			continue
		}
		hit, life := hitRatio(row)
		lifetime = lifetime || life
		if s.Role == kv.RoleCache {
			// Tiers only, no KV pool: its tiers, then as any server's.
			cols := []string{string(s.Role), row.Name, s.Engine, cacheServerCell(s), "", "", "", "hit " + hit}
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
			"headroom " + headroomCell(row.Headroom, sizes, wide),
			"run=" + count(s.Running),
			"queued=" + queueCell(s.Queued),
			"hit " + hit}
		if demandCol {
			cols = append(cols, "demand "+times(s.DemandRatio))
		}
		if wide {
			cols = append(cols,
				"evictable="+count(s.Evictable),
				"reserved="+percent(s.ReservedRatio),
				"demand_tokens="+count(s.Demand),
				"preempt="+rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.PreemptionsPerSec }, s.Counters.Preemptions),
				"prompt="+rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.PromptTokensPS }, s.Counters.PromptTokens),
				"gentok="+rateOrTotal(row, func(r *kv.Rates) kv.Value { return r.GenTokensPS }, s.Counters.GenerationTokens),
				"spread="+percent(s.Spread),
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
	renderPools(tw, rep, sizes)
	tw.Flush()
	renderPlanning(w, rep, wide, trend)
	if len(notes) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, n := range notes {
			fmt.Fprintln(tw, n)
		}
		tw.Flush()
	}
	if lifetime {
		note := "* hit ratio since engine start; use --watch for the ratio over each refresh"
		if watching {
			note = "* hit ratio since engine start (no prefix-cache traffic since the last refresh)"
		}
		fmt.Fprintln(w, note)
	}
}

// renderPools writes one line per pool when there is more than one (prefill
// and decode are never summed together) and the fleet line: the single
// pool's totals, or the most constrained pool, named, and the others.
func renderPools(w io.Writer, rep *report.Report, sizes []int) {
	f := rep.Fleet
	first := 0
	if len(sizes) > 0 {
		first = sizes[0]
	}
	failed := ""
	if f.Failed > 0 {
		failed = fmt.Sprintf("\t%d failed", f.Failed)
	}
	if f.CacheServers > 0 {
		// Counted apart: they hold tiers, not a KV pool to sum.
		failed += fmt.Sprintf("\t+%s (tiers only)", plural(f.CacheServers, "cache server"))
	}
	if len(rep.Pools) <= 1 {
		var p kv.Pool
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
			line += "\tdemand " + times(p.DemandRatio) + " capacity"
		}
		fmt.Fprintln(w, line+failed)
		return
	}
	for _, p := range rep.Pools {
		line := fmt.Sprintf("pool\t%s\t%s\tKV %s\theadroom %s\trun=%s\tqueued=%s", p.Name, plural(p.Servers, "server"),
			kvCell(p.Used, p.Capacity, p.UsageRatio), poolHeadroom(p, first), count(p.Running), count(p.Queued))
		if p.Counted < p.Servers {
			line += fmt.Sprintf("\t%d of %d report KV tokens", p.Counted, p.Servers)
		}
		if p.DemandRatio.OK() {
			line += "\tdemand " + times(p.DemandRatio) + " capacity"
		}
		fmt.Fprintln(w, line)
	}
	line := fmt.Sprintf("fleet\t%s\t\t", plural(len(rep.Pools), "pool"))
	if f.LimitIndex < 0 {
		line += "no pool reports KV usage"
	} else {
		p := rep.Pools[f.LimitIndex]
		line += fmt.Sprintf("%s pool is the limit: %s (%s / %s tok), headroom %s", p.Name, percent(p.UsageRatio),
			count(p.Used), count(p.Capacity), poolHeadroom(p, first))
		var others []string
		for i, o := range rep.Pools {
			if i != f.LimitIndex {
				others = append(others, o.Name+" "+percent(o.UsageRatio))
			}
		}
		line += "; " + strings.Join(others, ", ")
	}
	fmt.Fprintln(w, line+failed)
}

// poolHeadroom is "0×8k" for the first configured size, -- if unknown.
func poolHeadroom(p kv.Pool, first int) string {
	for _, h := range p.Headroom {
		if h.Tokens == first && h.Requests.OK() {
			return count(h.Requests) + "×" + tokens(h.Tokens)
		}
	}
	return "--"
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
			"run="+count(r.Running), "queued="+queueCell(r.Queued))
	}
	// Short enough for the KV column: a longer text there would widen it
	// for the whole table. docs/status.md says what the spread is.
	if !s.MultiDP() {
		line("", "  imbalance", "", "none: one DP rank")
		return
	}
	line("", "  imbalance", "", "DP usage spread "+percent(s.Spread))
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

// kvCell is "310,112 / 2,581,504 tok (12.0%)", with -- for what is unknown.
func kvCell(used, capacity, ratio kv.Value) string {
	out := fmt.Sprintf("%s / %s tok (%s)", count(used), count(capacity), percent(ratio))
	if used.Prov == kv.Reserved {
		out += " reserved"
	}
	return out
}

// headroomCell is "277×8k" for the first size, plus the context-length
// fit; with all, every size ("554×4k 277×8k 69×32k 4×512k").
func headroomCell(hs []report.Headroom, sizes []int, all bool) string {
	var parts []string
	first := 0
	if len(sizes) > 0 {
		first = sizes[0]
	}
	for _, h := range hs {
		if !h.Requests.OK() {
			continue
		}
		if all || h.Tokens == first || h.Context {
			parts = append(parts, fmt.Sprintf("%s×%s", count(h.Requests), tokens(h.Tokens)))
		}
	}
	if len(parts) == 0 {
		return "--"
	}
	return strings.Join(parts, " ")
}

// queueCell is every queue of the server summed, the one definition of
// "queued" in status, top and the web UI, with the queues that hold
// requests named when they are PD queues: "3 (prealloc=2 transfer=1)".
func queueCell(q kv.Queues) string {
	total := count(q.QueuedTotal())
	var parts []string
	pd := false
	for _, p := range []struct {
		name string
		v    kv.Value
	}{{"waiting", q.Waiting}, {"prealloc", q.Prealloc}, {"bootstrap", q.Bootstrap}, {"transfer", q.Transfer}, {"inflight", q.Inflight}} {
		if p.v.OK() && p.v.V != 0 {
			parts = append(parts, fmt.Sprintf("%s=%s", p.name, count(p.v)))
			pd = pd || p.name != "waiting"
		}
	}
	if !pd {
		return total
	}
	return total + " (" + strings.Join(parts, " ") + ")"
}

// hitRatio is the windowed hit ratio when rates exist, else the ratio since
// the engine started (second result true), else --.
func hitRatio(row *report.Server) (string, bool) {
	if row.Rates != nil && row.Rates.PrefixHitRatio.OK() {
		return percent(row.Rates.PrefixHitRatio), false
	}
	c := row.Server.Counters
	if r := c.PrefixHitTokens.Div(c.PrefixQueryTokens); r.OK() && r.V <= 1 {
		return percent(r) + "*", true
	}
	return "--", false
}

// rateOrTotal shows a per-second rate when known, else the counter total.
func rateOrTotal(row *report.Server, pick func(*kv.Rates) kv.Value, total kv.Value) string {
	if row.Rates != nil {
		if v := pick(row.Rates); v.OK() {
			return fmt.Sprintf("%.1f/s", v.V)
		}
	}
	if total.OK() {
		return count(total) + " total"
	}
	return "--"
}

// count formats a whole number with thousands separators, -- if unknown,
// ~900? if partial (a sum with missing parts), !-5,000 if implausible;
// beyond 2^53 in exponent form, never through an int64 overflow.
func count(v kv.Value) string {
	if !v.OK() {
		return "--"
	}
	var n string
	if math.Abs(v.V) > kv.MaxExact {
		n = strconv.FormatFloat(v.V, 'g', 3, 64)
	} else {
		n = thousands(int64(math.Round(v.V)))
	}
	return kv.Mark(v, n)
}

func thousands(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	s := fmt.Sprintf("%d", n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// percent formats a 0–1 ratio as "12.0%", -- if unknown, ~12.0%? if
// partial, "implausible" if implausible.
func percent(v kv.Value) string {
	if !v.OK() {
		return "--"
	}
	if v.Prov == kv.Implausible {
		return "implausible" // no plausible-looking percentage: see the warnings
	}
	if math.Abs(v.V) > 1e6 {
		return kv.Mark(v, strconv.FormatFloat(v.V*100, 'g', 3, 64)+"%")
	}
	return kv.Mark(v, fmt.Sprintf("%.1f%%", v.V*100))
}

// times formats a demand ratio (unbounded above) as "17.6×", -- if unknown.
func times(v kv.Value) string {
	if !v.OK() {
		return "--"
	}
	var s string
	switch a := math.Abs(v.V); {
	case a > 1e6:
		s = strconv.FormatFloat(v.V, 'g', 3, 64)
	case a >= 100:
		s = fmt.Sprintf("%.0f", v.V)
	case a >= 10:
		s = fmt.Sprintf("%.1f", v.V)
	default:
		s = fmt.Sprintf("%.2f", v.V)
	}
	return kv.Mark(v, s+"×")
}

// tokens formats a request size: 8192 → 8k, 524288 → 512k.
func tokens(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dk", n/1024)
	}
	return fmt.Sprintf("%d", n)
}

func orDash(s string) string {
	if s == "" {
		return "--"
	}
	return s
}
