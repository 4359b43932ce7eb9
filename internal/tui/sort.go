package tui

import (
	"sort"
	"strings"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

// sortRows sorts rows by col; unknown values go last in either direction,
// ties are broken by name.
func sortRows(rows []report.Server, col column, desc bool, now time.Time) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if col <= colEngine {
			x, y := textOf(a, col), textOf(b, col)
			if x != y {
				return (x < y) != desc
			}
			return a.Name < b.Name
		}
		x, y := numberOf(a, col, now), numberOf(b, col, now)
		switch {
		case x.OK() != y.OK():
			return x.OK()
		case x.OK() && x.V != y.V:
			return (x.V < y.V) != desc
		}
		return a.Name < b.Name
	})
}

func textOf(s report.Server, col column) string {
	switch col {
	case colRole:
		return string(s.Role)
	case colEngine:
		if s.Server != nil {
			return s.Server.Engine
		}
		return ""
	}
	return strings.ToLower(s.Name)
}

// numberOf is the value a numeric column sorts by.
func numberOf(s report.Server, col column, now time.Time) kv.Value {
	if col == colAge {
		if s.ScrapedAt.IsZero() || now.IsZero() {
			return kv.Value{}
		}
		return kv.DerivedOf(now.Sub(s.ScrapedAt).Seconds())
	}
	if s.Server == nil {
		return kv.Value{}
	}
	sv := s.Server
	switch col {
	case colKV:
		return sv.UsageRatio
	case colUsed:
		return sv.Used
	case colHeadroom:
		if len(s.Headroom) > 0 {
			return s.Headroom[0].Requests
		}
	case colRunning:
		return sv.Running
	case colQueued:
		return sv.Queued.QueuedTotal()
	case colHit:
		return s.PrefixHit().Ratio
	}
	if s.Rates == nil {
		return kv.Value{}
	}
	switch col {
	case colPreempt:
		return s.Rates.PreemptionsPerSec
	case colTokens:
		return tokensPerSec(s.Rates)
	}
	return kv.Value{}
}

// tokensPerSec is prompt plus generation tokens per second; unknown when
// either part is (a partial sum would look like less traffic).
func tokensPerSec(r *kv.Rates) kv.Value {
	p, g := r.PromptTokensPS, r.GenTokensPS
	if !p.OK() || !g.OK() {
		return kv.Value{}
	}
	return kv.DerivedOf(p.V + g.V)
}
