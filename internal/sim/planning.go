package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load schedules and the capacity-planning ground truth (docs/planning.md).

// LoadStep is one point of a load schedule: from At on, the arrival rate is
// Factor × rate, reached linearly from the previous step (a ramp).
type LoadStep struct {
	At     time.Duration `yaml:"at"`
	Factor float64       `yaml:"factor"`
}

// scheduleFactor is the schedule's rate multiplier at now: 1 before the
// first step, linear between steps, the last factor after the last.
func (l *LoadSpec) scheduleFactor(now time.Duration) float64 {
	ss := l.Schedule
	if len(ss) == 0 || now < ss[0].At {
		return 1
	}
	for i := 1; i < len(ss); i++ {
		if now < ss[i].At {
			a, b := ss[i-1], ss[i]
			frac := float64(now-a.At) / float64(b.At-a.At)
			return a.Factor + (b.Factor-a.Factor)*frac
		}
	}
	return ss[len(ss)-1].Factor
}

// validateSchedule checks a load schedule: factors ≥ 0, times increasing.
func (l *LoadSpec) validateSchedule(path string, add func(path, format string, args ...any)) {
	for i, s := range l.Schedule {
		p := fmt.Sprintf("%s.schedule[%d]", path, i)
		if s.Factor < 0 || math.IsNaN(s.Factor) {
			add(p+".factor", "must be 0 or more, got %g", s.Factor)
		}
		if s.At < 0 {
			add(p+".at", "must not be negative, got %s", s.At)
		}
		if i > 0 && s.At <= l.Schedule[i-1].At {
			add(p+".at", "%s is not after the previous step's %s; list the steps in time order", s.At, l.Schedule[i-1].At)
		}
	}
}

// GrowthSpec is load that grows over days, with time compressed: every
// simulated Day the arrival rate rises by PerDay of the scenario's rate,
// linearly (after d days it is rate × (1 + PerDay·d)), so the daily peak is
// the straight line `kvwatch plan` fits (docs/planning.md). With the
// schedule and bursts it multiplies.
type GrowthSpec struct {
	// PerDay is the rise a day as a share of the rate: 0.05 or "5%";
	// negative shrinks the load, to nothing at most.
	PerDay Share `yaml:"per_day"`
	// Day is the simulated time one day takes, e.g. 1m.
	Day time.Duration `yaml:"day"`
}

// Share is a fraction written as a number (0.05) or a percentage ("5%").
type Share float64

// UnmarshalYAML reads 0.05 or 5%.
func (s *Share) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "%")), 64)
	if n.Kind != yaml.ScalarNode || err != nil {
		return fmt.Errorf("line %d: %q is no share: write a number (0.05) or a percentage (5%%)", n.Line, n.Value)
	}
	if pct {
		f /= 100
	}
	*s = Share(f)
	return nil
}

// growthFactor is the growth's rate multiplier at now: 1 without growth,
// never below 0.
func (l *LoadSpec) growthFactor(now time.Duration) float64 {
	g := l.Growth
	if g == nil || g.Day <= 0 {
		return 1
	}
	return max(0, 1+float64(g.PerDay)*float64(now)/float64(g.Day))
}

// validateGrowth checks a growth: a positive day, a finite share of at
// least −100 %.
func (l *LoadSpec) validateGrowth(path string, add func(path, format string, args ...any)) {
	g := l.Growth
	if g == nil {
		return
	}
	if g.Day <= 0 {
		add(path+".growth.day", "must be a positive duration, the simulated time of one day (e.g. 1m), got %s", g.Day)
	}
	if p := float64(g.PerDay); math.IsNaN(p) || math.IsInf(p, 0) || p < -1 {
		add(path+".growth.per_day", "must be a share of the rate of -100%% or more (e.g. 5%% or 0.05), got %g", p)
	}
}

// Limiting factors of PlanTruth, as kvwatch names them.
const (
	FactorKV    = "kv"
	FactorState = "state"
	FactorBatch = "batch"
	FactorQueue = "queue"
	FactorNone  = "none"
)

// PlanTruth is what kvwatch's capacity-planning view of one server must
// say at one instant, computed from the simulator's own state with
// kvwatch's documented rules (docs/planning.md), in kvwatch's terms: free
// KV is capacity − used (prefix cache counts as free, the engine reclaims
// it). Preemption rates need two instants and are not part of it.
type PlanTruth struct {
	// KVPerRequest is used / running over the server, tokens; PerRequestOK
	// is false when nothing runs.
	KVPerRequest float64
	PerRequestOK bool
	// WorkloadHeadroom is Σ over DP ranks of floor((capacity − used) /
	// (used / running) of the rank, or the server's when the rank is idle);
	// HeadroomOK is false when the server is idle.
	WorkloadHeadroom int64
	HeadroomOK       bool
	// FinishedMean is the mean prompt + generation tokens of the requests
	// finished since start, and FinishedHeadroom Σ over DP ranks of
	// floor((capacity − used) / FinishedMean); FinishedOK is false before
	// the first request finished.
	FinishedMean     float64
	FinishedHeadroom int64
	FinishedOK       bool
	// MaxRunning is the running-request limit, summed over DP ranks.
	MaxRunning int
	// Limit is kv, state, batch, queue or none.
	Limit string
}

// Planning returns the server's PlanTruth for the usage warning threshold.
func (t *Truth) Planning(warning float64) PlanTruth {
	p := PlanTruth{MaxRunning: t.MaxRunningRequests * max(t.DP, 1)}
	if t.Running > 0 && t.UsedTokens > 0 {
		p.KVPerRequest, p.PerRequestOK = float64(t.UsedTokens)/float64(t.Running), true
	}
	if p.PerRequestOK {
		p.HeadroomOK = true
		for _, r := range t.Ranks {
			size := p.KVPerRequest
			if r.Running > 0 && r.UsedTokens > 0 {
				size = float64(r.UsedTokens) / float64(r.Running)
			}
			p.WorkloadHeadroom += int64(math.Floor(float64(r.CapacityTokens-r.UsedTokens) / size))
		}
	}
	if c := t.Counters; c.RequestsFinished > 0 {
		p.FinishedOK = true
		p.FinishedMean = float64(c.FinishedPromptTokens+c.FinishedGenerationTokens) / float64(c.RequestsFinished)
		for _, r := range t.Ranks {
			p.FinishedHeadroom += int64(math.Floor(float64(r.CapacityTokens-r.UsedTokens) / p.FinishedMean))
		}
	}
	usage := float64(t.UsedTokens) / float64(t.CapacityTokens)
	waiting := t.Queued + t.DecodePrealloc + t.PrefillBootstrap
	switch st, ok := t.stateUsage(); {
	case ok && st >= warning && !(usage >= warning && usage > st):
		p.Limit = FactorState
	case usage >= warning:
		p.Limit = FactorKV
	case t.PendingPreallocTokens > t.CapacityTokens-t.UsedTokens:
		p.Limit = FactorKV
	case t.Running >= p.MaxRunning:
		p.Limit = FactorBatch
	case waiting > 0:
		p.Limit = FactorQueue
	default:
		p.Limit = FactorNone
	}
	return p
}

// DrainTruth is the N−1 answer for a pool of servers: drain the largest
// (by capacity; the first of equals) and move the pool's used KV plus its
// queued demand onto the rest.
type DrainTruth struct {
	Server       string
	Load         int64 // Σ used + Σ pending pre-allocation tokens
	RestCapacity int64
	MarginTokens float64 // warning × rest − load
	Safe         bool    // more than one server and a margin ≥ 0
}

// PoolDrain returns the DrainTruth of the servers of one pool.
func PoolDrain(pool []Truth, warning float64) DrainTruth {
	var d DrainTruth
	var total int64
	largest := -1
	for i, t := range pool {
		total += t.CapacityTokens
		d.Load += t.UsedTokens + t.PendingPreallocTokens
		if largest < 0 || t.CapacityTokens > pool[largest].CapacityTokens {
			largest = i
		}
	}
	if largest < 0 {
		return d
	}
	d.Server = pool[largest].Name
	d.RestCapacity = total - pool[largest].CapacityTokens
	d.MarginTokens = warning*float64(d.RestCapacity) - float64(d.Load)
	d.Safe = len(pool) > 1 && d.MarginTokens >= 0
	return d
}
