// Package report builds what every face shows from scrape results: one
// entry per server (its normalized signals, headroom for the configured
// request sizes, rates since the previous scrape, or the reason it failed)
// and one capacity-weighted line per pool (the servers of one role and,
// when set, one cluster/pool label: prefill and decode are never summed),
// with the most constrained pool named as the fleet's limit. Its JSON form is the stable schema of
// `kvwatch status --output json` and of serve's /api/kvwatch/v1/report.
// Each row's and pool's values also come as text (text.go, written by
// package textfmt as status and top write them) for the web UI, which
// cannot run that code; laying them out is each face's. It does no I/O.
package report

import (
	"cmp"
	"net/url"
	"slices"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// SchemaVersion is bumped on any incompatible change of the JSON form.
// 2: "fleet" is a summary naming the limiting pool, the KV sums are per
// pool in "pools"; demand_tokens and demand_ratio; provenance "partial" and
// "implausible"; per-server "warnings".
const SchemaVersion = 2

// Report is the state of the fleet at one moment.
type Report struct {
	Schema  int       `json:"schema_version"`
	Time    time.Time `json:"time"`
	Servers []Server  `json:"servers"`
	// Pools are the KV sums per pool, in role order (prefill, decode,
	// unified), then by cluster and pool label.
	Pools []Pool `json:"pools"`
	Fleet Fleet  `json:"fleet"`
	// Planning is the capacity-planning view per pool (planning.go).
	Planning []kv.PoolPlan `json:"planning,omitempty"`
}

// Fleet is the one-line answer over the pools.
type Fleet struct {
	// Servers is the number of targets that are neither routers nor
	// cache servers, failed ones included; Failed how many of those
	// failed.
	Servers int `json:"servers"`
	Failed  int `json:"failed"`
	// Routers is the number of router targets; CacheServers of cache
	// servers (kv.RoleCache), which hold tiers and no KV pool.
	Routers      int `json:"routers"`
	CacheServers int `json:"cache_servers"`
	// Limit is the name of the most constrained pool (highest usage
	// ratio), "" when no pool reports a usage ratio; LimitIndex its index
	// in Pools, -1 then.
	Limit      string `json:"limit"`
	LimitIndex int    `json:"limit_index"`
}

// Summarize computes the pools and the fleet summary from r.Servers, with
// pool headroom for each of sizes (tokens), and each row's and pool's
// totals and text (text.go).
func (r *Report) Summarize(sizes []int) {
	members := make([]kv.Member, 0, len(r.Servers))
	r.Fleet = Fleet{LimitIndex: -1}
	for i := range r.Servers {
		row := &r.Servers[i]
		switch row.Role {
		case kv.RoleRouter:
			r.Fleet.Routers++
			continue
		case kv.RoleCache:
			r.Fleet.CacheServers++
			continue
		}
		r.Fleet.Servers++
		if !row.OK {
			r.Fleet.Failed++
		}
		members = append(members, kv.Member{Key: PoolKeyOf(row), Server: row.Server})
	}
	pools := kv.PoolsOf(members, sizes)
	if i := kv.Limit(pools); i >= 0 {
		r.Fleet.Limit, r.Fleet.LimitIndex = pools[i].Name, i
	}
	r.Pools = make([]Pool, len(pools))
	for i, p := range pools {
		r.Pools[i].Pool = p
	}
	r.describe()
}

// PoolKeyOf is the pool a row belongs to: its role and its cluster and pool
// labels.
func PoolKeyOf(row *Server) kv.PoolKey {
	return kv.PoolKey{Role: row.Role, Cluster: row.Labels[config.TargetLabelCluster], Pool: row.Labels[config.TargetLabelPool]}
}

// Server is one target's row.
type Server struct {
	// Name is the target's name (default host:port).
	Name string `json:"name"`
	// URL is the metrics URL scraped.
	URL string `json:"url"`
	// Labels are cluster, pool, model from the config.
	Labels map[string]string `json:"labels,omitempty"`
	// OK is true when the last scrape worked.
	OK bool `json:"ok"`
	// Error says why the scrape failed and how to fix it; Reason is its class.
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
	// ScrapedAt is when the scrape started; ScrapeSeconds how long it took.
	ScrapedAt     time.Time `json:"scraped_at"`
	ScrapeSeconds float64   `json:"scrape_seconds"`
	BodyBytes     int64     `json:"body_bytes"`
	// Role is the configured role, else the engine's.
	Role kv.Role `json:"role"`
	// Server is the normalized server; nil when the scrape failed.
	Server *kv.Server `json:"server,omitempty"`
	// Headroom is how many more requests of each size fit.
	Headroom []Headroom `json:"headroom,omitempty"`
	// QueuedTotal is every queue of the server summed
	// (kv.Queues.QueuedTotal); set by Summarize, unavailable for a failed
	// row.
	QueuedTotal kv.Value `json:"queued_total"`
	// Rates since the previous scrape of this target; nil on the first.
	Rates *kv.Rates `json:"rates,omitempty"`
	// Late is true when the target's scrape was still running when the
	// report was made (top): the row is its previous scrape.
	Late bool `json:"late,omitempty"`
	// Plan is the server's capacity-planning view (planning.go).
	Plan *kv.ServerPlan `json:"plan,omitempty"`
	// Text is the row's values as status and top write them (text.go);
	// set by Summarize, nil for a failed row.
	Text *ServerText `json:"text,omitempty"`
}

// Address is the row's address, the host:port of its URL, where its name
// is another (a config name, NAME=URL); "" where the name is the address
// (a target without a name) or the URL has no host. The faces show it
// beside the name where there is room.
func (s *Server) Address() string {
	u, err := url.Parse(s.URL)
	if err != nil || u.Host == "" || u.Host == s.Name {
		return ""
	}
	return u.Host
}

// PrefixHit is a row's prefix-cache hit ratio as every face shows it:
// over the window since the target's previous scrape when that window saw
// prefix-cache traffic, else since the engine started (SinceStart: no
// previous scrape yet, or no traffic since), else unavailable (no
// prefix-cache counters, or no traffic ever).
type PrefixHit struct {
	Ratio kv.Value
	// WindowSeconds is the window of a windowed ratio.
	WindowSeconds float64
	SinceStart    bool
}

// PrefixHit is the row's prefix-cache hit ratio; unavailable for a failed
// row.
func (s *Server) PrefixHit() PrefixHit {
	if s.Server == nil {
		return PrefixHit{}
	}
	if s.Rates != nil && s.Rates.PrefixHitRatio.OK() {
		return PrefixHit{Ratio: s.Rates.PrefixHitRatio, WindowSeconds: s.Rates.WindowSeconds}
	}
	c := s.Server.Counters
	// A counter pair that says more hits than lookups is no ratio.
	if r := c.PrefixHitTokens.Div(c.PrefixQueryTokens); r.OK() && r.V <= 1 {
		return PrefixHit{Ratio: r, SinceStart: true}
	}
	return PrefixHit{}
}

// FirstHeadroom is the headroom the faces show first: the smallest
// configured request size's (the context length's only when the server
// has no other); false when the row has none.
func (s *Server) FirstHeadroom() (Headroom, bool) {
	for _, h := range s.Headroom {
		if !h.Context {
			return h, true
		}
	}
	if len(s.Headroom) > 0 {
		return s.Headroom[0], true
	}
	return Headroom{}, false
}

// Headroom is how many more requests of Tokens tokens fit.
type Headroom struct {
	Tokens int `json:"request_tokens"`
	// Context is true for the server's own maximum context length.
	Context  bool     `json:"context_length,omitempty"`
	Requests kv.Value `json:"requests"`
}

// Tracker builds reports and remembers each target's previous successful
// scrape to compute rates. It is not safe for concurrent use.
type Tracker struct {
	headroom []int
	prev     map[string]scrape.Result
	plan     PlanOptions
}

// NewTracker returns a tracker computing headroom for the request sizes
// given (in tokens); the server's context length is added when known.
func NewTracker(headroomTokens []int) *Tracker {
	return &Tracker{headroom: headroomTokens, prev: map[string]scrape.Result{}}
}

// Update builds the report for results (one per target) at now.
func (t *Tracker) Update(now time.Time, results []scrape.Result) Report {
	r := Report{Schema: SchemaVersion, Time: now, Servers: make([]Server, 0, len(results))}
	for i := range results {
		r.Servers = append(r.Servers, t.row(&results[i]))
	}
	r.Summarize(t.headroom)
	r.PlanPools(t.plan)
	return r
}

// Row builds the row of one target's result, exactly as Update does for
// each of its results (and remembers the result for the target's next
// rates), without the fleet summary, the pool plans and the row's totals
// and text: a caller that keeps one row per target (serve, per scrape)
// summarizes the rows it holds when it reports them, in a copy of them.
func (t *Tracker) Row(res *scrape.Result) Server { return t.row(res) }

// row builds one server's entry and updates the target's previous scrape.
func (t *Tracker) row(res *scrape.Result) Server {
	url := res.URL
	if url == "" {
		url = safetext.URL(res.Target.URL, res.Target.SecretParams...)
	}
	s := Server{Name: res.Target.Name, URL: url, Labels: res.Target.Labels,
		OK: res.OK(), Reason: res.Reason, ScrapedAt: res.Time,
		ScrapeSeconds: res.Duration.Seconds(), BodyBytes: res.BodyBytes, Role: res.Target.Role}
	if res.Err != nil {
		s.Error = res.Err.Error()
	}
	if !res.OK() {
		return s // role: the configured one, or "" (unknown)
	}
	s.Server = res.Server
	s.Role = res.Server.Role
	s.Headroom = Headrooms(res.Server, t.headroom)
	// Rates between pages of two engines compare unrelated counters:
	// none until the engine's second page.
	if p, ok := t.prev[res.Target.Name]; ok && res.Time.After(p.Time) && p.Server.Engine == res.Server.Engine {
		rates := kv.RatesBetween(p.Server.Counters, res.Server.Counters, res.Time.Sub(p.Time))
		s.Rates = &rates
	}
	s.Plan = t.planServer(res, s.Rates)
	t.prev[res.Target.Name] = *res
	return s
}

// Headrooms computes headroom for each size in tokens, plus the server's
// context length when it reports one; sizes sorted, duplicates dropped.
func Headrooms(s *kv.Server, tokens []int) []Headroom {
	if !s.Role.HoldsKV() {
		return nil
	}
	// One array, filled, sorted and cut down to one entry per size (a
	// map and a key slice per scrape were the most of what a row
	// allocated).
	out := make([]Headroom, 0, len(tokens)+1)
	for _, n := range tokens {
		if n > 0 {
			out = append(out, Headroom{Tokens: n})
		}
	}
	// An implausible context length (negative, beyond 2^53) is no size:
	// int() of it would overflow.
	if s.ContextLength.Trusted() && s.ContextLength.V >= 1 && s.ContextLength.V <= kv.MaxExact {
		out = append(out, Headroom{Tokens: int(s.ContextLength.V), Context: true})
	}
	slices.SortFunc(out, func(a, b Headroom) int { return cmp.Compare(a.Tokens, b.Tokens) })
	// One entry per size; a configured size equal to the context length
	// is the context's.
	j := 0
	for _, h := range out {
		if j > 0 && out[j-1].Tokens == h.Tokens {
			out[j-1].Context = out[j-1].Context || h.Context
			continue
		}
		out[j] = h
		j++
	}
	out = out[:j]
	for i := range out {
		out[i].Requests = s.Headroom(out[i].Tokens)
	}
	return out
}
