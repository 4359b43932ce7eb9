package sim

import (
	"sync"
	"time"
)

// Truth is the ground truth of one simulated server at one instant: what its
// /metrics page shows, in the normalized units kvwatch reports. Token values
// are tokens, request values are requests; server values are sums over DP
// ranks (TP ranks repeat the same values, they are not summed).
//
// KV accounting follows SGLang: UsedTokens are held by admitted requests
// (running, pre-allocated, in transfer, or leaked) and cannot be reclaimed;
// EvictableTokens hold reusable prefix cache and are reclaimed when space is
// needed; AvailableTokens = CapacityTokens − UsedTokens − EvictableTokens.
// Engines that do not export evictable tokens (vLLM, Triton) count them as
// free in their usage ratio, exactly as Truth's UsedTokens does. TGI's
// UsedTokens are a reservation (input + max_new_tokens at admission;
// Reserved is true). llama.cpp's UsedTokens are the tokens every slot holds,
// idle slots included (Σ n_prompt_tokens of /slots); it has no evictable.
type Truth struct {
	Name   string
	Engine string
	// Version is the engine's dialect the page is written in (the
	// scenario's servers[].version, or one set since: Cluster.SetVersion);
	// "" for an engine with one.
	Version string `json:",omitempty"`
	Role    string
	// At is the simulated time of the instant since the cluster started.
	At time.Duration
	// Restarts counts restarts (FaultRestart); counters reset at each one.
	Restarts int
	// Fault is the active fault.
	Fault Fault
	// Reserved is true when UsedTokens is a reservation, not written KV (TGI).
	Reserved bool

	TP, DP                int
	PageSize              int64 // tokens per page/block
	ContextLength         int64 // tokens
	MaxRunningRequests    int   // per DP rank
	CapacityTokens        int64
	UsedTokens            int64
	EvictableTokens       int64
	AvailableTokens       int64
	PendingPreallocTokens int64 // PD decode: prompt tokens waiting in the prealloc queue

	Running int // requests in the running batch (prefill compute on a PD prefill server)
	Queued  int // requests in the engine's waiting queue (not the PD queues)
	// PD queues (requests).
	PrefillBootstrap, PrefillInflight, DecodePrealloc, DecodeTransfer int

	Counters Counters

	Ranks []RankTruth
	Slots []SlotTruth // llama.cpp only (of DP rank 0)

	// Router only.
	Workers     []WorkerTruth
	Routed      int64 // requests the router received
	RouteErrors int64 // requests it could not place (no healthy worker)

	// Host is the HiCache host tier, summed over DP ranks (nil without one).
	Host *HostTruth
	// SWA is the sliding-window pool, summed over DP ranks (nil for a dense model).
	SWA *SWATruth
	// Mamba is the Mamba state pool, summed over DP ranks (nil without one; hybrid.go).
	Mamba *MambaTruth
	// Disk is the tier below the host (KVBM's G3 disk, LMCache's L2),
	// summed over DP ranks (nil without one).
	Disk *HostTruth
	// KVBM is a Dynamo KVBM listener's window and transfer counters
	// (dynamo-kvbm only; kvbm.go).
	KVBM *KVBMTruth
	// Dynamo is what a Dynamo worker's page shows besides the KV (dynamo
	// only; dynamo.go).
	Dynamo *DynamoTruth
	// DynamoFrontend is what a Dynamo frontend's page shows (dynamo-frontend
	// only; dynamo.go).
	DynamoFrontend *DynamoFrontendTruth
	// LMCache is what an LMCache server's page shows (lmcache only).
	LMCache *LMCacheTruth

	// Frozen holds the gauge values the page keeps showing under FaultFreeze.
	Frozen *Truth
}

// Counters are cumulative since start or the last restart.
type Counters struct {
	PromptTokens        int64 // prompt tokens of requests whose prefill finished (cached + computed)
	ComputedTokens      int64 // prompt tokens computed (not served from the prefix cache)
	GenerationTokens    int64 // output tokens generated
	PrefixQueriedTokens int64 // prompt tokens looked up in the prefix cache (once per request)
	PrefixHitTokens     int64 // of those, found in the cache
	Preemptions         int64 // SGLang retractions, vLLM preemptions
	RetractedInput      int64 // prompt tokens of retracted requests
	RetractedOutput     int64 // output tokens of retracted requests
	RequestsFinished    int64 // requests completed (PD prefill: hand-offs completed)
	FinishedLength      int64 // of those, stopped by max_new_tokens (the rest stopped on their own)
	EvictedTokens       int64 // prefix-cache tokens evicted to make room
	DecodeSteps         int64 // load-model steps in which the rank generated tokens
	PromptSeconds       float64
	GenerationSeconds   float64
	MaxSeqLen           int64 // longest finished sequence (prompt + output), tokens
	// FinishedPromptTokens and FinishedGenerationTokens are the prompt and
	// output tokens of the RequestsFinished (the sums of the engines'
	// per-request prompt and generation histograms).
	FinishedPromptTokens, FinishedGenerationTokens int64
	// FinishedHitTokens is the prefix-cache hit (device) of the finished
	// requests; ReusedBlocks and MissedBlocks count prompt blocks found and
	// not found in the device cache at admission (trtllm-serve's counters).
	FinishedHitTokens, ReusedBlocks, MissedBlocks int64
}

func (c *Counters) add(o counters) {
	c.PromptTokens += o.promptTokens
	c.ComputedTokens += o.computedTokens
	c.GenerationTokens += o.generationTokens
	c.PrefixQueriedTokens += o.prefixQueried
	c.PrefixHitTokens += o.prefixHit
	c.Preemptions += o.retractions
	c.RetractedInput += o.retractedInput
	c.RetractedOutput += o.retractedOutput
	c.RequestsFinished += o.finished
	c.FinishedLength += o.finishedLength
	c.EvictedTokens += o.evicted
	c.DecodeSteps += o.decodeSteps
	c.PromptSeconds += o.promptSeconds
	c.GenerationSeconds += o.generationSeconds
	c.MaxSeqLen = max(c.MaxSeqLen, o.maxSeqLen)
	c.FinishedPromptTokens += o.finishedPrompt
	c.FinishedGenerationTokens += o.finishedGen
	c.FinishedHitTokens += o.finishedHit
	c.ReusedBlocks += o.reusedBlocks
	c.MissedBlocks += o.missedBlocks
}

// RankTruth is one DP rank's share of Truth.
type RankTruth struct {
	DPRank                                                            int
	CapacityTokens                                                    int64
	UsedTokens                                                        int64
	EvictableTokens                                                   int64
	AvailableTokens                                                   int64
	PendingPreallocTokens                                             int64
	Running, Queued                                                   int
	PrefillBootstrap, PrefillInflight, DecodePrealloc, DecodeTransfer int
	// GenThroughput is tokens/s generated over the last step.
	GenThroughput float64
	// LastBatchHitRate is SGLang's cache_hit_rate gauge: hit/(hit+computed) of the last prefill batch.
	LastBatchHitRate float64
	// RetractedLastStep is SGLang's num_retracted_reqs gauge.
	RetractedLastStep int64
	// DecodeSumSeqLens is the sum of running sequence lengths, tokens.
	DecodeSumSeqLens int64
	// IterReuseRate is the device's block reuse rate of the last step that
	// looked blocks up (trtllm-serve's kv_cache_iter_reuse_rate).
	IterReuseRate float64
	Counters      Counters
	// Host is the HiCache host tier (nil without one; tiers.go).
	Host *HostTruth
	// SWA is the sliding-window pool of a hybrid model (nil for a dense one; tiers.go).
	SWA *SWATruth
	// Mamba is the Mamba state pool of a hybrid model (nil without one; hybrid.go).
	Mamba *MambaTruth
	// Disk is the tier below the host (nil without one; tiers.go).
	Disk *HostTruth
}

// SlotTruth is one llama.cpp slot as /slots shows it.
type SlotTruth struct {
	ID         int
	Task       int64 // -1 before the slot had a task
	Tokens     int64 // n_prompt_tokens: prompt + generated tokens held
	Cache      int64 // n_prompt_tokens_cache
	Processed  int64 // n_prompt_tokens_processed
	Decoded    int64
	Remain     int64
	Processing bool
	HasNext    bool
}

// WorkerTruth is a router's view of one worker.
type WorkerTruth struct {
	Name      string
	URL       string
	Role      string
	Healthy   bool
	Active    int64 // requests in flight through the router
	Selected  int64 // times chosen
	Processed int64 // requests finished
}

func (s *server) truthLocked() Truth {
	c := s.cl
	t := Truth{Name: s.spec.Name, Engine: s.spec.Engine, Version: s.version, Role: s.spec.Role, At: c.now, Restarts: s.restarts, Fault: s.fault,
		Reserved: s.reserveAll, TP: s.spec.TP, DP: s.spec.DP, PageSize: s.spec.PageSize, ContextLength: s.spec.ContextLength,
		MaxRunningRequests: s.spec.MaxRunningRequests}
	sec := c.sc.Step.Seconds()
	for _, k := range s.ranks {
		rt := RankTruth{DPRank: k.dp, CapacityTokens: k.capacity, UsedTokens: k.used(), EvictableTokens: k.evictable(),
			Running: len(k.running), Queued: len(k.waiting), PrefillBootstrap: len(k.bootstrap), PrefillInflight: len(k.inflight),
			DecodePrealloc: len(k.prealloc), DecodeTransfer: len(k.transfer),
			GenThroughput: float64(k.genThisStep) / sec, LastBatchHitRate: k.lastHitRate, RetractedLastStep: k.lastRetract,
			IterReuseRate: k.iterReuse}
		rt.AvailableTokens = rt.CapacityTokens - rt.UsedTokens - rt.EvictableTokens
		for _, r := range k.prealloc {
			rt.PendingPreallocTokens += r.prompt
		}
		for _, r := range k.running {
			rt.DecodeSumSeqLens += r.kvLen()
		}
		rt.Counters.add(k.c)
		t.CapacityTokens += rt.CapacityTokens
		t.UsedTokens += rt.UsedTokens
		t.EvictableTokens += rt.EvictableTokens
		t.AvailableTokens += rt.AvailableTokens
		t.PendingPreallocTokens += rt.PendingPreallocTokens
		t.Running += rt.Running
		t.Queued += rt.Queued
		t.PrefillBootstrap += rt.PrefillBootstrap
		t.PrefillInflight += rt.PrefillInflight
		t.DecodePrealloc += rt.DecodePrealloc
		t.DecodeTransfer += rt.DecodeTransfer
		t.Counters.add(k.c)
		t.Ranks = append(t.Ranks, rt)
	}
	if len(s.ranks) > 0 && s.ranks[0].slots != nil {
		for i, sl := range s.ranks[0].slots {
			st := SlotTruth{ID: i, Task: -1, Processing: sl.processing}
			if sl.everUsed {
				st.Task, st.Tokens, st.Cache, st.Processed = sl.task, sl.tokens, sl.cache, sl.processed
				if r := sl.req; r != nil {
					st.Decoded = r.generated
					st.Remain = r.maxNew - r.generated
					st.HasNext = r.generated > 0
				}
			}
			t.Slots = append(t.Slots, st)
		}
	}
	for i, w := range s.workers {
		t.Workers = append(t.Workers, WorkerTruth{Name: w.spec.Name, URL: w.url, Role: w.spec.Role, Healthy: w.healthy(),
			Active: s.active[i], Selected: s.selected[i], Processed: s.processed[i]})
	}
	t.Routed, t.RouteErrors = s.routed, s.routeErrors
	s.hostTruth(&t)
	return t
}

// hists are a rank's latency and length histograms.
type hists struct {
	ttft, e2e, itl, queueTime, prompt, gen *histogram
}

func newHists() hists {
	return hists{newHistogram(ttftBuckets), newHistogram(e2eBuckets), newHistogram(itlBuckets),
		newHistogram(e2eBuckets), newHistogram(tokenBuckets), newHistogram(tokenBuckets)}
}

func (h hists) clone() hists {
	return hists{h.ttft.clone(), h.e2e.clone(), h.itl.clone(), h.queueTime.clone(), h.prompt.clone(), h.gen.clone()}
}

// merge adds o's observations into h (same bounds).
func (h hists) merge(o hists) {
	for i, a := range []*histogram{h.ttft, h.e2e, h.itl, h.queueTime, h.prompt, h.gen} {
		b := []*histogram{o.ttft, o.e2e, o.itl, o.queueTime, o.prompt, o.gen}[i]
		for j := range a.counts {
			a.counts[j] += b.counts[j]
		}
		a.sum += b.sum
		a.count += b.count
	}
}

// histSnapshot copies every rank's histograms (index = DP rank).
func (s *server) histSnapshot() []hists {
	out := make([]hists, len(s.ranks))
	for i, k := range s.ranks {
		out[i] = k.h.clone()
	}
	return out
}

// serverHists sums the ranks' histograms (tokenizer-level families).
func (p *snapshot) serverHists() hists {
	h := newHists()
	for _, r := range p.hists {
		h.merge(r)
	}
	return h
}

// snapshot is what a server's pages show between two steps. The page body
// is rendered on the first request, then served as is.
type snapshot struct {
	srv     *server
	truth   Truth
	frozen  *Truth
	hists   []hists
	created time.Time // when the server (re)started: _created series
	started time.Time // when its process started: a restart or a new version (SetVersion)
	wall    time.Time // the instant's wall-clock time (Epoch + At)

	once sync.Once
	body []byte
	// answers are body as each negotiated answer has it (openmetrics.go).
	mu      sync.Mutex
	answers map[answer][]byte
}

// gauges returns the Truth whose gauges the page shows (frozen or live).
func (p *snapshot) gauges() *Truth {
	if p.frozen != nil {
		return p.frozen
	}
	return &p.truth
}

func (p *snapshot) metrics() []byte {
	p.once.Do(func() { p.body = render(p) })
	return p.body
}

// answer returns the page as a gets it.
func (p *snapshot) answer(a answer) []byte {
	body := p.metrics()
	p.mu.Lock()
	defer p.mu.Unlock()
	if b, ok := p.answers[a]; ok {
		return b
	}
	if p.answers == nil {
		p.answers = map[answer][]byte{}
	}
	b := a.rewrite(body)
	p.answers[a] = b
	return b
}
