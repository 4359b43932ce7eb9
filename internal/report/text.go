package report

import (
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// Pool is one pool of the report: kv.Pool's sums (in JSON, its fields as
// they are) and their text.
type Pool struct {
	kv.Pool
	// Text is the pool's values as status and top write them; set by
	// Summarize.
	Text *PoolText `json:"text,omitempty"`
}

// FirstHeadroom is the pool's headroom for the smallest configured
// request size, the one the faces show; false when there is none.
func (p *Pool) FirstHeadroom() (kv.PoolHeadroom, bool) {
	best := -1
	for i, h := range p.Headroom {
		if best < 0 || h.Tokens < p.Headroom[best].Tokens {
			best = i
		}
	}
	if best < 0 {
		return kv.PoolHeadroom{}, false
	}
	return p.Headroom[best], true
}

// ServerText is a row's values as status and top write them (package
// textfmt), for the faces that do not run Go: the web UI shows them as
// they are, so that the three faces agree. Each field is named for the
// value it writes; an unavailable value is "--".
type ServerText struct {
	// UsageRatio is "12.0%"; "25.6%*" for a reservation (TGI),
	// "implausible" for a value that cannot be true.
	UsageRatio string `json:"usage_ratio"`
	Used       string `json:"used_tokens"`
	Capacity   string `json:"capacity_tokens"`
	// Headroom is the requests of the smallest configured size that fit:
	// "276×8k".
	Headroom    string `json:"headroom"`
	Running     string `json:"running"`
	QueuedTotal string `json:"queued_total"`
	DemandRatio string `json:"demand_ratio"`
	// PrefixHitRatio is Server.PrefixHit's ratio, "41.3%", marked † when
	// it is since the engine started; PrefixHitWindow what it is over:
	// "over the last 5s", "since engine start", "" when unavailable.
	PrefixHitRatio  string `json:"prefix_hit_ratio"`
	PrefixHitWindow string `json:"prefix_hit_window,omitempty"`
	// Workers is a router's healthy over total workers: "2/2".
	Workers string `json:"workers,omitempty"`
	// Tiers is a cache server's tiers, each with its fill:
	// "lmcache-l1 41.0%, lmcache-l2 fs 2.0 GiB".
	Tiers string `json:"tiers,omitempty"`
	// State is the server's diagnosis in words (textfmt.State): "leak
	// suspected", "ok", ...; its evidence is Plan.Evidence.
	State string `json:"state,omitempty"`
	// Engine is the engine with its version where it says it
	// (textfmt.Engine): "vllm 0.26.0".
	Engine string `json:"engine"`
	// Binding and StatePool are a hybrid model's (a plan with a state
	// pool): what caps its concurrency, "concurrency 96, bound by state
	// slots (mamba)" (textfmt.Binding), and its state pool,
	// "state slots (mamba) 56 / 96 (58.3%), 40 more requests".
	Binding   string `json:"binding,omitempty"`
	StatePool string `json:"state_pool,omitempty"`
}

// PoolText is a pool's values as status and top write them.
type PoolText struct {
	UsageRatio string `json:"usage_ratio"`
	Used       string `json:"used_tokens"`
	Capacity   string `json:"capacity_tokens"`
	// Headroom is the requests of the smallest configured size that fit:
	// "276×8k".
	Headroom    string `json:"headroom"`
	Running     string `json:"running"`
	Queued      string `json:"queued"`
	DemandRatio string `json:"demand_ratio"`
	// State is the pool's diagnosis in words (its most severe server's)
	// and StateEvidence that server's evidence, under its name; set with
	// the pools' plans (PlanPools).
	State         string `json:"state,omitempty"`
	StateEvidence string `json:"state_evidence,omitempty"`
}

// describe sets the totals and the text of every row and pool.
func (r *Report) describe() {
	for i := range r.Servers {
		row := &r.Servers[i]
		if row.Server == nil {
			continue
		}
		row.QueuedTotal = row.Server.Queued.QueuedTotal()
		row.Text = row.text()
	}
	for i := range r.Pools {
		p := &r.Pools[i]
		headroom := textfmt.NA
		if h, ok := p.FirstHeadroom(); ok {
			headroom = textfmt.Headroom(h.Requests, h.Tokens)
		}
		p.Text = &PoolText{UsageRatio: textfmt.Percent(p.UsageRatio), Used: textfmt.Count(p.Used),
			Capacity: textfmt.Count(p.Capacity), Headroom: headroom, Running: textfmt.Count(p.Running),
			Queued: textfmt.Count(p.Queued), DemandRatio: textfmt.Times(p.DemandRatio)}
	}
}

// text is the text of a row whose scrape worked.
func (s *Server) text() *ServerText {
	sv := s.Server
	t := &ServerText{UsageRatio: textfmt.Percent(sv.UsageRatio), Used: textfmt.Count(sv.Used),
		Capacity: textfmt.Count(sv.Capacity), Headroom: textfmt.NA, Running: textfmt.Count(sv.Running),
		QueuedTotal: textfmt.Count(s.QueuedTotal), DemandRatio: textfmt.Times(sv.DemandRatio),
		Engine: textfmt.Engine(sv.Engine, sv.EngineVersion)}
	if h, ok := s.FirstHeadroom(); ok {
		t.Headroom = textfmt.Headroom(h.Requests, h.Tokens)
	}
	hit := s.PrefixHit()
	t.PrefixHitRatio = textfmt.Hit(hit.Ratio, hit.SinceStart)
	if hit.Ratio.OK() {
		t.PrefixHitWindow = textfmt.HitWindow(hit.WindowSeconds, hit.SinceStart)
	}
	if r := sv.Router; r != nil {
		t.Workers = textfmt.Count(r.WorkersHealthy) + "/" + textfmt.Count(r.WorkersTotal)
	}
	if s.Role == kv.RoleCache {
		t.Tiers = textfmt.Tiers(sv)
	}
	if s.Plan != nil {
		t.State = textfmt.State(s.Plan.State)
		if st := s.Plan.StatePool; st != nil {
			t.Binding, t.StatePool = textfmt.Binding(s.Plan), textfmt.StatePool(st)
		}
	}
	return t
}
