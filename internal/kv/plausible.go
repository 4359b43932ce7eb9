package kv

import (
	"math"
	"strconv"
)

// MaxExact is 2^53: beyond it float64 no longer holds every integer, and no
// engine has that many KV slots, requests or tokens in a gauge.
const MaxExact = 1 << 53

// ratioSlack is how far above 1 a usage or reserved ratio may be, and used
// above capacity (relative), before it is implausible: rounding, not more.
const ratioSlack = 1e-6

// fieldNames are the names of fieldsOf's values, in the same order.
var fieldNames = [nFields]string{"capacity", "used", "evictable", "usage ratio", "reserved ratio",
	"demand", "demand ratio", "running", "waiting queue", "prealloc queue", "bootstrap queue",
	"transfer queue", "inflight queue", "prefix hit tokens", "prefix query tokens",
	"preemptions", "prompt tokens", "generation tokens"}

// Check flags the values of s that cannot be true and warns for each:
// negative values, values beyond 2^53, used above capacity (or a usage or
// reserved ratio above 1) by more than rounding. A flagged value keeps its
// number for inspection but becomes Implausible, and so does everything
// computed from it (usage ratio, server totals built from a flagged rank);
// headroom and available are then unknown. Call it once the adapter is
// done (the scraper does).
func (s *Server) Check() {
	for i := range s.Ranks {
		r := &s.Ranks[i]
		bad := s.checkSignals(&r.Signals, r.RankID)
		// A server total summed from a flagged rank is flagged too.
		own := fieldsOf(&s.Signals)
		for j := range bad {
			if bad[j] && own[j].OK() {
				own[j].Prov = Implausible
			}
		}
	}
	s.checkSignals(&s.Signals, RankID{})
	s.checkOne(&s.ContextLength, "context length", RankID{})
	if s.Router != nil {
		s.checkOne(&s.Router.WorkersHealthy, "healthy workers", RankID{})
		s.checkOne(&s.Router.WorkersTotal, "workers", RankID{})
	}
	if s.Used.Prov == Implausible || s.Capacity.Prov == Implausible {
		s.Spread = Value{}
	}
}

// checkSignals flags one set of signals, of rank id (RankID{}: the
// server's); bad[j] is true for fieldsOf's j-th value when it is
// implausible. The rank's words in a warning (rankWhere) are written only
// when there is a warning: a plausible page allocates nothing here.
func (s *Server) checkSignals(g *Signals, id RankID) [nFields]bool {
	f := fieldsOf(g)
	var bad [nFields]bool
	for j, v := range f {
		switch j {
		case 1: // used: beyond capacity by more than rounding
			if v.OK() && v.Prov != Implausible && v.V >= 0 && g.Capacity.OK() && g.Capacity.V >= 0 &&
				g.Capacity.Prov != Implausible && v.V > g.Capacity.V*(1+ratioSlack)+1 {
				s.Warn(WarnOverCapacity, "used %s tokens above a capacity of %s%s",
					num(v.V), num(g.Capacity.V), rankWhere(id))
				v.Prov = Implausible
			}
		case 3, 4, 6: // ratios: computed from a flagged capacity (or used), flagged with it
			if g.Capacity.Prov == Implausible || (j == 3 && g.Used.Prov == Implausible) {
				flag(v)
				bad[j] = v.OK()
				continue
			}
			if j != 6 && v.OK() && v.Prov != Implausible && v.V > 1+ratioSlack {
				s.Warn(WarnOverCapacity, "%s %s above 1%s", fieldNames[j], num(v.V), rankWhere(id))
				v.Prov = Implausible
			}
		}
		bad[j] = s.checkOne(v, fieldNames[j], id)
	}
	return bad
}

// checkOne flags a negative value or one beyond 2^53 of rank id (RankID{}:
// the server's); it reports whether v is implausible.
func (s *Server) checkOne(v *Value, name string, id RankID) bool {
	if !v.OK() || v.Prov == Implausible {
		return v.Prov == Implausible
	}
	switch {
	case v.V < 0:
		s.Warn(WarnNegative, "%s is %s%s", name, num(v.V), rankWhere(id))
		v.Prov = Implausible
	case math.Abs(v.V) > MaxExact:
		s.Warn(WarnTooLarge, "%s is %s, beyond 2^53%s", name, num(v.V), rankWhere(id))
		v.Prov = Implausible
	}
	return v.Prov == Implausible
}

func flag(v *Value) {
	if v.OK() {
		v.Prov = Implausible
	}
}

// rankWhere is where a rank's warning is, e.g. " on dp0 tp3"; "" for the
// server's own values (RankID{}).
func rankWhere(id RankID) string {
	out := ""
	for _, p := range []struct{ k, v string }{{"dp", id.DP}, {"tp", id.TP}, {"pp", id.PP}} {
		if p.v != "" {
			out += " " + p.k + p.v
		}
	}
	if out == "" {
		return ""
	}
	return " on" + out
}

// num writes a value for a warning: whole numbers up to 2^53 as integers,
// anything else with 6 significant digits (never through an int overflow).
func num(v float64) string {
	if math.Abs(v) <= MaxExact && v == math.Trunc(v) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
