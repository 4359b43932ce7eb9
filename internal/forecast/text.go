package forecast

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// Report is the plan of every pool of a store: the JSON of `kvwatch plan
// -o json` and what its text shows.
type Report struct {
	Store string    `json:"store"`
	At    time.Time `json:"at"`
	// Window, Period, Horizon and Resolution are durations as Prometheus
	// writes them ("14d", "10m").
	Window     string  `json:"window"`
	Period     string  `json:"period"`
	Horizon    string  `json:"horizon"`
	Resolution string  `json:"resolution"`
	Warning    float64 `json:"warning_ratio"`
	// ActionNeeded is true when some pool needs servers within the
	// horizon (ServersToAdd > 0); NeedServers lists them.
	ActionNeeded bool     `json:"action_needed"`
	NeedServers  []string `json:"need_servers"`
	// Unplanned lists the pools without a plan (State other than Planned).
	Unplanned []string   `json:"unplanned"`
	Pools     []PoolPlan `json:"pools"`
}

// NewReport plans every pool of histories.
func NewReport(store string, r Request, histories []History, o Options) *Report {
	rep := &Report{Store: store, At: o.At.UTC(), Window: FormatDuration(r.Window), Period: FormatDuration(r.Period), Horizon: FormatDuration(o.Horizon),
		Resolution: FormatDuration(r.Resolution), Warning: o.Warning,
		NeedServers: []string{}, Unplanned: []string{}}
	for _, h := range histories {
		p := Plan(h, o)
		switch {
		case p.State != Planned:
			rep.Unplanned = append(rep.Unplanned, p.Name)
		case *p.ServersToAdd > 0:
			rep.ActionNeeded = true
			rep.NeedServers = append(rep.NeedServers, p.Name)
		}
		rep.Pools = append(rep.Pools, p)
	}
	return rep
}

// FormatDuration writes a duration as Prometheus does, whole days in days
// ("14d", not "2w": as the flags are written).
func FormatDuration(d time.Duration) string {
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return model.Duration(d).String()
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText writes the report as a table an operator pastes into a
// ticket: one row per pool, then the notes and reasons, then the answer.
func (rep *Report) WriteText(w io.Writer) error {
	horizonEnd := rep.At
	if d, err := model.ParseDuration(rep.Horizon); err == nil {
		horizonEnd = rep.At.Add(time.Duration(d))
	}
	fmt.Fprintf(w, "kvwatch plan of %s at %s: %s peaks over %s, horizon %s (%s), warning at %s\n\n",
		rep.Store, rep.At.Format("2006-01-02 15:04 MST"), peakName(rep.Period), rep.Window, rep.Horizon, day0(horizonEnd),
		textfmt.PercentOf(rep.Warning))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "POOL\tSERVERS\tPEAK NOW\tGROWTH/DAY\tN−1 UNSAFE\tWARNING %s\tFULL\tADD\n", textfmt.PercentOf(rep.Warning))
	for _, p := range rep.Pools {
		if p.State != Planned {
			fmt.Fprintf(tw, "%s\t%s\t--\t--\t--\t--\t--\t? %s\n", p.Name, serversCell(p), strings.ReplaceAll(string(p.State), "_", " "))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\n", p.Name, serversCell(p),
			textfmt.PercentOf(*p.PeakNowRatio), count(*p.PeakNowTokens), growthCell(p),
			crossCell(p.NMinusOne, rep.Horizon), crossCell(p.Warning, rep.Horizon), crossCell(p.Full, rep.Horizon), addCell(p))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	first := true
	for _, p := range rep.Pools {
		lines := p.Notes
		if p.Reason != "" {
			lines = append([]string{p.Reason}, lines...)
		}
		for _, l := range lines {
			if first {
				fmt.Fprintln(w)
				first = false
			}
			fmt.Fprintf(w, "%s: %s\n", p.Name, l)
		}
	}
	fmt.Fprintln(w)
	switch {
	case rep.ActionNeeded:
		var adds []string
		for _, p := range rep.Pools {
			if p.State == Planned && *p.ServersToAdd > 0 {
				adds = append(adds, fmt.Sprintf("%s +%d", p.Name, *p.ServersToAdd))
			}
		}
		fmt.Fprintf(w, "Action needed: add servers within %s to keep N−1 under the warning threshold: %s.\n", rep.Horizon, strings.Join(adds, ", "))
	case len(rep.Unplanned) == 0:
		fmt.Fprintf(w, "Nothing needed within %s.\n", rep.Horizon)
	default:
		fmt.Fprintf(w, "Nothing needed within %s for the planned pools.\n", rep.Horizon)
	}
	if len(rep.Unplanned) > 0 {
		fmt.Fprintf(w, "Data missing: %s not planned: %s (see above).\n", plural(len(rep.Unplanned), "pool"), strings.Join(rep.Unplanned, ", "))
	}
	return nil
}

// peakName is "daily" for a 1d period, "weekly" for 7d, else "per-12h".
func peakName(period string) string {
	switch period {
	case "1d":
		return "daily"
	case "1w", "7d":
		return "weekly"
	}
	return "per-" + period
}

// serversCell is "4 × 1.05M": the servers and their (median) size.
func serversCell(p PoolPlan) string {
	if p.Servers == 0 {
		return "--"
	}
	return fmt.Sprintf("%d × %s", p.Servers, count(p.ServerTokens))
}

// growthCell is the slope as a share of the capacity per day, with its
// bounds: "+1.20% (+0.95…+1.46%)", "flat (−0.10…+0.20%)".
func growthCell(p PoolPlan) string {
	g, c := p.Growth, p.CapacityTokens
	s := p.Trend
	if p.Trend == Growing {
		s = signedPercent(g.RatioPerDay)
	}
	lo, hi := signedPercent(g.LowTokensPerDay/c), signedPercent(g.HighTokensPerDay/c)
	if lo == hi {
		return s
	}
	return fmt.Sprintf("%s (%s…%s)", s, lo, hi)
}

func signedPercent(r float64) string {
	s := fmt.Sprintf("%.2f%%", math.Abs(r)*100)
	switch {
	case r > 0:
		return "+" + s
	case r < 0:
		return "−" + s
	}
	return s
}

// crossCell is "2026-03-31 (03-29…04-03)", "now", "after 90d", "no growth".
func crossCell(c *Crossing, horizon string) string {
	switch c.State {
	case CrossNow:
		return "now"
	case CrossNoGrowth:
		return "no growth"
	case CrossBeyond:
		if c.Earliest != nil {
			return fmt.Sprintf("after %s (earliest %s)", horizon, day0(*c.Earliest))
		}
		return "after " + horizon
	}
	short := func(t *time.Time) string {
		if t == nil {
			return ">" + horizon
		}
		return t.UTC().Format("01-02")
	}
	lo, hi := short(c.Earliest), short(c.Latest)
	if d := short(c.Date); lo == d && hi == d {
		return day0(*c.Date)
	}
	return fmt.Sprintf("%s (%s…%s)", day0(*c.Date), lo, hi)
}

// addCell is "+3 (≤4)": the servers to add, and at the slope's upper
// bound when more.
func addCell(p PoolPlan) string {
	n, high := *p.ServersToAdd, *p.ServersToAddHigh
	s := "0"
	if n > 0 {
		s = fmt.Sprintf("+%d", n)
	}
	if high > n {
		s += fmt.Sprintf(" (≤%d)", high)
	}
	return s
}
