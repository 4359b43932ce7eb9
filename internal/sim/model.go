package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// request is one simulated inference request on one server rank.
type request struct {
	id        int64
	prompt    int64 // prompt tokens
	output    int64 // tokens the request will generate before it stops
	maxNew    int64 // max_new_tokens (TGI reserves prompt+maxNew at admission)
	group     int   // shared prefix group, -1 for none
	hit       int64 // prompt tokens served from the prefix cache at the last admission
	shared    int64 // tokens held through a prefix group (locked while running)
	alloc     int64 // private KV tokens allocated, page-aligned
	computed  int64 // prompt tokens computed so far
	generated int64 // output tokens so far
	genFrac   float64
	counted   bool // prefix query and hit already counted (not again after a retraction)
	arrived   time.Duration
	firstTok  time.Duration
	link      *pdLink
	router    *server
	worker    int
}

func (r *request) kvLen() int64 { return r.prompt + r.generated }

// pdLink ties the prefill-side and decode-side halves of one PD request.
type pdLink struct {
	decodeReady bool // decode pre-allocated KV: bootstrap done
	transferred bool // prefill finished sending KV
	firstTok    time.Duration
	lost        bool // one side restarted: the other side drops its half
}

// group is a shared prompt prefix held in the prefix cache.
type group struct {
	tokens  int64 // 0 when not cached
	refs    int   // running requests holding it: locked (used) while > 0
	lastUse int64 // step of last use, for LRU eviction
}

// slot is a llama.cpp server slot; it keeps its tokens when idle.
type slot struct {
	task       int64
	tokens     int64 // n_prompt_tokens: prompt plus generated tokens held in KV
	cache      int64 // n_prompt_tokens_cache of the current task
	processed  int64 // n_prompt_tokens_processed
	group      int
	req        *request
	everUsed   bool
	processing bool
}

// counters are cumulative per rank; they reset only on restart.
type counters struct {
	promptTokens      int64 // prompt tokens of requests whose prefill finished (cached + computed)
	computedTokens    int64 // prompt tokens actually computed (prompt − cache hits)
	generationTokens  int64 // output tokens generated
	prefixQueried     int64 // prompt tokens looked up in the prefix cache
	prefixHit         int64 // of those, found in the cache
	retractions       int64 // SGLang retractions / vLLM preemptions
	retractedInput    int64
	retractedOutput   int64
	finished          int64 // requests completed
	finishedLength    int64 // of those, stopped by max_new_tokens
	evicted           int64 // tokens evicted from the prefix cache
	decodeSteps       int64 // steps with at least one request decoding
	promptSeconds     float64
	generationSeconds float64
	maxSeqLen         int64
	// finishedPrompt and finishedGen are the prompt and output tokens of
	// finished requests (the request_*_tokens histograms' sums).
	finishedPrompt, finishedGen int64
	// finishedHit is the prefix-cache hit of finished requests (their last
	// admission's); reusedBlocks and missedBlocks count prompt blocks found
	// and not found in the device cache at admission (trtllm-serve).
	finishedHit, reusedBlocks, missedBlocks int64
}

// rank is one DP rank (SGLang dp_rank, vLLM engine) of a server: its own KV
// pool, queues and counters.
type rank struct {
	srv        *server
	dp         int
	capacity   int64
	page       int64
	maxRunning int

	waiting, running                        []*request
	bootstrap, inflight, prealloc, transfer []*request

	groups  []group
	tail    int64 // evictable cached tokens not shared by a group (LRU tail)
	leaked  int64
	private int64

	slots []slot    // llama.cpp only
	host  *hostTier // SGLang HiCache only (tiers.go)

	c           counters
	h           hists
	genThisStep int64
	lastHitRate float64 // last prefill batch: hit / (hit + computed)
	lastRetract int64   // retractions in the last step
	// iterReuse is the block reuse rate of the last step that looked blocks
	// up (trtllm-serve's kv_cache_iter_reuse_rate); lastQueried and lastHit
	// are the prefix counters at the end of the previous step.
	iterReuse            float64
	lastQueried, lastHit int64
}

func (k *rank) lockedGroups() (locked, unlocked int64) {
	for _, g := range k.groups {
		if g.refs > 0 {
			locked += g.tokens
		} else {
			unlocked += g.tokens
		}
	}
	return
}

// used is KV held by requests and not reclaimable (SGLang: total − available − evictable).
func (k *rank) used() int64 {
	if k.slots != nil {
		var n int64
		for _, s := range k.slots {
			n += s.tokens
		}
		return n
	}
	l, _ := k.lockedGroups()
	return k.private + l + k.leaked
}

// evictable is cached KV that can be reclaimed when space is needed.
func (k *rank) evictable() int64 {
	if k.slots != nil {
		return 0
	}
	_, u := k.lockedGroups()
	return k.tail + u
}

func (k *rank) available() int64 { return k.capacity - k.used() - k.evictable() }

func (k *rank) pageAlign(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n + k.page - 1) / k.page * k.page
}

// evict frees at least n evictable tokens if it can: the LRU tail first,
// then unreferenced prefix groups, least recently used first.
func (k *rank) evict(n int64) {
	take := min(n, k.tail)
	k.tail -= take
	k.c.evicted += take
	n -= take
	for n > 0 {
		best := -1
		for i, g := range k.groups {
			if g.refs == 0 && g.tokens > 0 && (best < 0 || g.lastUse < k.groups[best].lastUse) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		n -= k.groups[best].tokens
		k.c.evicted += k.groups[best].tokens
		k.groups[best].tokens = 0
	}
}

// alloc takes n private tokens, evicting cache if needed.
func (k *rank) alloc(n int64) bool {
	if n <= 0 {
		return true
	}
	if a := k.available(); a < n {
		if a+k.evictable() < n {
			return false
		}
		k.evict(n - a)
	}
	k.private += n
	return true
}

// release returns a request's KV: to the prefix cache (evictable) when
// caching is on, else to the free pool; under FaultLeak it is kept as used.
func (k *rank) release(r *request, finished bool) {
	s := k.srv
	if finished && s.fault.Kind == FaultLeak {
		// The request's own KV is never returned; its shared prefix stays
		// locked too.
		k.private -= r.alloc
		k.leaked += r.alloc
		r.alloc, r.shared = 0, 0
		return
	}
	k.private -= r.alloc
	if s.cacheOn && s.spec.Role != RoleDecode {
		k.tail += r.alloc
	}
	r.alloc = 0
	if r.shared > 0 {
		k.groups[r.group].refs--
		k.groups[r.group].lastUse = s.cl.step
		r.shared = 0
	}
}

func (k *rank) load() int {
	return len(k.waiting) + len(k.running) + len(k.bootstrap) + len(k.prealloc) + len(k.transfer) + len(k.inflight)
}

// admit tries to allocate KV for r's prompt (and, for TGI, its whole
// max_new_tokens budget). It reports false, changing nothing, if r does not fit.
func (k *rank) admit(r *request, reserve int64) bool {
	s := k.srv
	step := s.cl.step
	var hit, shared, newGroup int64
	if s.cacheOn && r.group >= 0 {
		g := &k.groups[r.group]
		if g.tokens > 0 {
			hit, shared = g.tokens, g.tokens
		} else {
			newGroup = k.pageAlign(s.spec.Load.PrefixTokens)
			shared = newGroup
		}
	}
	need := k.pageAlign(r.kvLen() - shared)
	if s.reserveAll {
		need = k.pageAlign(r.prompt + r.maxNew - shared)
	}
	// The prefix being reused must not be evicted to make room for r.
	if hit > 0 {
		k.groups[r.group].refs++
	}
	if k.available()+k.evictable()-need-newGroup < reserve || !k.alloc(need+newGroup) {
		if hit > 0 {
			k.groups[r.group].refs--
		}
		return false
	}
	if newGroup > 0 {
		k.private -= newGroup
		k.groups[r.group] = group{tokens: newGroup, refs: 1, lastUse: step}
	}
	if r.group >= 0 && shared > 0 {
		k.groups[r.group].lastUse = step
	}
	r.alloc, r.shared, r.hit = need, shared, hit
	k.h.queueTime.observe((s.cl.now - r.arrived).Seconds())
	if s.spec.Role == RoleDecode {
		// The decode side receives the prompt's KV; it computes nothing.
		r.computed = r.prompt
		return true
	}
	r.computed = hit
	if !r.counted {
		r.counted = true
		k.c.prefixQueried += r.prompt
		k.c.prefixHit += hit
	}
	return true
}

// retract takes a running request out of the batch, frees its KV and puts it
// back at the head of its queue (SGLang retraction, vLLM preemption).
func (k *rank) retract(i int) {
	r := k.running[i]
	k.running = append(k.running[:i], k.running[i+1:]...)
	k.c.retractions++
	k.lastRetract++
	k.c.retractedInput += r.prompt
	k.c.retractedOutput += r.generated
	k.release(r, false)
	r.computed, r.hit = 0, 0
	if k.srv.spec.Role == RoleDecode {
		r.link.transferred = true
		k.prealloc = append([]*request{r}, k.prealloc...)
	} else {
		k.waiting = append([]*request{r}, k.waiting...)
	}
}

// stepRank advances one rank by dt.
func (k *rank) step(now, dt time.Duration) {
	s := k.srv
	sec := dt.Seconds()
	k.genThisStep, k.lastRetract = 0, 0
	if k.slots != nil {
		k.stepSlots(now, sec)
		return
	}
	// PD decode: pre-allocate KV for waiting hand-offs, then take over
	// transferred requests.
	if s.spec.Role == RoleDecode {
		for len(k.prealloc) > 0 && len(k.running)+len(k.transfer) < k.maxRunning {
			r := k.prealloc[0]
			if !k.admit(r, 0) {
				break
			}
			k.prealloc = k.prealloc[1:]
			r.link.decodeReady = true
			k.transfer = append(k.transfer, r)
		}
		keep := k.transfer[:0]
		for _, r := range k.transfer {
			if r.link.transferred {
				r.firstTok = r.link.firstTok
				if r.generated == 0 {
					r.generated = 1
					k.c.promptTokens += r.prompt
				}
				k.running = append(k.running, r)
			} else {
				keep = append(keep, r)
			}
		}
		clear(k.transfer[len(keep):])
		k.transfer = keep
	}
	// PD prefill: bootstrap finishes once the decode side has pre-allocated.
	if s.spec.Role == RolePrefill {
		keep := k.bootstrap[:0]
		for _, r := range k.bootstrap {
			if r.link.decodeReady {
				k.waiting = append(k.waiting, r)
			} else {
				keep = append(keep, r)
			}
		}
		clear(k.bootstrap[len(keep):])
		k.bootstrap = keep
		// KV sent during the previous step: free it on the prefill side.
		for _, r := range k.inflight {
			r.link.transferred = true
			k.release(r, true)
			k.c.finished++
			if r.router != nil && r.router.active[r.worker] > 0 {
				r.router.active[r.worker]--
				r.router.processed[r.worker]++
			}
		}
		clear(k.inflight)
		k.inflight = k.inflight[:0]
	}
	// Admission: the decode reservation (SGLang new_token_ratio) keeps room
	// for running requests to grow.
	var reserve int64
	if !s.reserveAll {
		for _, r := range k.running {
			reserve += (r.output - r.generated) * 3 / 10
		}
	}
	for len(k.waiting) > 0 && len(k.running) < k.maxRunning {
		r := k.waiting[0]
		if !k.admit(r, reserve) {
			break
		}
		k.waiting = k.waiting[1:]
		k.running = append(k.running, r)
	}
	// Prefill compute, then decode.
	budget := int64(s.spec.Load.PrefillRate * sec)
	var batchHit, batchComputed int64
	prefilledAny := false
	for i := 0; i < len(k.running); i++ {
		r := k.running[i]
		if r.computed < r.prompt {
			take := min(budget, r.prompt-r.computed)
			budget -= take
			r.computed += take
			k.c.computedTokens += take
			k.c.promptSeconds += float64(take) / s.spec.Load.PrefillRate
			if r.computed < r.prompt {
				continue
			}
			prefilledAny = true
			batchHit += r.hit
			batchComputed += r.prompt - r.hit
			k.c.promptTokens += r.prompt
			if r.generated == 0 {
				r.generated = 1
				r.firstTok = now
				k.c.generationTokens++
				k.genThisStep++
				k.h.ttft.observe((now - r.arrived).Seconds())
			}
			if s.spec.Role == RolePrefill {
				r.link.firstTok = now
				k.running = append(k.running[:i], k.running[i+1:]...)
				k.inflight = append(k.inflight, r)
				i--
			}
			continue
		}
		// Decode: grow by the per-request rate, allocating whole pages.
		r.genFrac += s.spec.Load.DecodeRate * sec
		n := int64(r.genFrac)
		r.genFrac -= float64(n)
		n = min(n, r.output-r.generated)
		if n > 0 && !s.reserveAll {
			need := k.pageAlign(r.kvLen()+n-r.shared) - r.alloc
			for need > 0 && !k.alloc(need) {
				if !s.preempts {
					n = 0
					break
				}
				// Retract the newest request (SGLang retracts by length; the
				// newest is the simplest stand-in).
				v := len(k.running) - 1
				k.retract(v)
				if v == i {
					n = -1
					break
				}
			}
			if n < 0 {
				i--
				continue
			}
			if n > 0 {
				r.alloc += need
			}
		}
		if n > 0 {
			r.generated += n
			k.c.generationTokens += n
			k.genThisStep += n
			k.c.generationSeconds += sec
		}
		if r.generated >= r.output {
			k.finish(i, now)
			i--
		}
	}
	if prefilledAny {
		k.lastHitRate = float64(batchHit) / float64(batchHit+batchComputed)
	}
	if k.genThisStep > 0 {
		k.c.decodeSteps++
	}
}

func (k *rank) finish(i int, now time.Duration) {
	r := k.running[i]
	k.running = append(k.running[:i], k.running[i+1:]...)
	k.release(r, true)
	k.c.finished++
	k.c.maxSeqLen = max(k.c.maxSeqLen, r.kvLen())
	s := k.srv
	if r.generated >= r.maxNew {
		k.c.finishedLength++
	}
	k.h.e2e.observe((now - r.arrived).Seconds())
	k.h.prompt.observe(float64(r.prompt))
	k.h.gen.observe(float64(r.generated))
	k.c.finishedPrompt += r.prompt
	k.c.finishedHit += r.hit
	k.c.finishedGen += r.generated
	k.h.itl.observe(1 / s.spec.Load.DecodeRate)
	if r.router != nil && r.router.active[r.worker] > 0 {
		r.router.active[r.worker]--
		r.router.processed[r.worker]++
	}
}

// stepSlots is the llama.cpp model: fixed slots of n_ctx tokens each, one
// request per slot, idle slots keep their tokens until reused.
func (k *rank) stepSlots(now time.Duration, sec float64) {
	s := k.srv
	for len(k.waiting) > 0 {
		best := -1
		for i, sl := range k.slots {
			if sl.processing {
				continue
			}
			if best < 0 || (sl.group == k.waiting[0].group && sl.group >= 0 && k.slots[best].group != sl.group) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		r := k.waiting[0]
		k.waiting = k.waiting[1:]
		sl := &k.slots[best]
		var cache int64
		if s.cacheOn && sl.everUsed && r.group >= 0 && sl.group == r.group {
			cache = s.spec.Load.PrefixTokens
		}
		s.nextTask++
		*sl = slot{task: s.nextTask, tokens: r.prompt, cache: cache, group: r.group, req: r, everUsed: true, processing: true}
		r.computed = cache
		r.hit = cache
		k.c.prefixQueried += r.prompt
		k.c.prefixHit += cache
		k.running = append(k.running, r)
	}
	budget := int64(s.spec.Load.PrefillRate * sec)
	for i := range k.slots {
		sl := &k.slots[i]
		if !sl.processing {
			continue
		}
		r := sl.req
		if r.computed < r.prompt {
			take := min(budget, r.prompt-r.computed)
			budget -= take
			r.computed += take
			k.c.promptSeconds += float64(take) / s.spec.Load.PrefillRate
			if r.computed < r.prompt {
				continue
			}
			sl.processed = r.prompt - r.hit
			k.c.computedTokens += r.prompt - r.hit
			k.c.promptTokens += r.prompt
			r.generated = 1
			r.firstTok = now
			k.c.generationTokens++
			k.genThisStep++
			k.h.ttft.observe((now - r.arrived).Seconds())
		} else {
			r.genFrac += s.spec.Load.DecodeRate * sec
			n := min(int64(r.genFrac), r.output-r.generated)
			r.genFrac -= float64(int64(r.genFrac))
			r.generated += n
			k.c.generationTokens += n
			k.genThisStep += n
			k.c.generationSeconds += sec
		}
		sl.tokens = r.kvLen()
		if r.generated >= r.output {
			sl.processing = false
			sl.req = nil
			for j, q := range k.running {
				if q == r {
					k.finish(j, now)
					break
				}
			}
		}
	}
	if k.genThisStep > 0 {
		k.c.decodeSteps++
	}
}

// poisson draws a Poisson-distributed count with mean lambda.
func poisson(rng *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 30 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// newRequest draws a request from a load spec.
func newRequest(rng *rand.Rand, l *LoadSpec, id int64, now time.Duration) *request {
	r := &request{id: id, group: -1, arrived: now, maxNew: l.OutputMax}
	r.prompt = min(l.PromptMax, max(16, int64(rng.ExpFloat64()*float64(l.PromptMean))))
	if l.PrefixTokens > 0 && rng.Float64() < l.PrefixShare {
		r.group = rng.IntN(l.PrefixGroups)
		r.prompt = min(l.PromptMax, max(r.prompt, l.PrefixTokens+16))
	}
	r.output = min(l.OutputMax, max(1, int64(rng.ExpFloat64()*float64(l.OutputMean))))
	return r
}

// histogram is a cumulative histogram with fixed bounds.
type histogram struct {
	bounds []float64
	counts []int64 // per bucket, not cumulative; len(bounds)+1 (last is +Inf)
	sum    float64
	count  int64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.count++
}

func (h *histogram) clone() *histogram {
	c := *h
	c.counts = append([]int64(nil), h.counts...)
	return &c
}
