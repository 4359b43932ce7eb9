package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/pipeline"
)

// DefaultOnceTimeout is how long Once waits for service discovery.
const DefaultOnceTimeout = 10 * time.Second

// onceQuiet is how long an entry must stay quiet after its last update
// before Once takes what it has: a Kubernetes discoverer sends the
// objects it synced one at a time.
const onceQuiet = 300 * time.Millisecond

// Once runs p's SD entries once (for status and top) and returns p with
// the targets they find. It waits until every entry has answered (a
// Kubernetes entry has synced, or its API server lists nothing it
// selects) and stayed quiet for a moment, at most timeout (0:
// DefaultOnceTimeout); an entry that has not answered by then is logged,
// with the reason when one is known, and what was found is used. engines
// checks engine labels (nil: any). It fails only when an entry cannot
// have a client.
func Once(ctx context.Context, p *pipeline.Pipeline, log *slog.Logger, engines func(string) error, timeout time.Duration) (*pipeline.Pipeline, error) {
	if len(entries(p.Config)) == 0 {
		return p, nil
	}
	if timeout <= 0 {
		timeout = DefaultOnceTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r, err := New(Options{Registry: prometheus.NewRegistry(), Logger: log, Engines: engines,
		UpdateInterval: onceQuiet / 3, CheckInterval: time.Second}, p.Config)
	if err != nil {
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	tick := time.NewTicker(onceQuiet / 3)
	defer tick.Stop()
	w := waitOnce(ctx, ran, tick.C, func() bool { return len(r.pending()) == 0 && r.settled() })
	if w.err != nil {
		return nil, w.err
	}
	if parent.Err() != nil {
		return nil, parent.Err()
	}
	out := r.Discovered(p)
	if w.timedOut {
		for _, e := range r.pending() {
			log.Warn(fmt.Sprintf("service discovery: %s did not answer within %s; showing the targets found so far", e, timeout))
		}
	}
	cancel()
	if !w.returned {
		if err := <-ran; err != nil {
			return nil, err
		}
	}
	return out, nil
}

// onceWait is how Once's wait ended: at the timeout, with the runner's
// result (returned: it was taken from ran, which then holds nothing), or
// when every entry had answered and settled.
type onceWait struct {
	timedOut, returned bool
	err                error
}

// waitOnce waits for ctx to end, the runner to return on ran, or ready to
// hold at a tick. Run returns when ctx ends, so both may be ready at
// once and either be taken: the caller receives from ran afterwards only
// when returned is false.
func waitOnce(ctx context.Context, ran <-chan error, tick <-chan time.Time, ready func() bool) onceWait {
	for {
		select {
		case <-ctx.Done():
			return onceWait{timedOut: true}
		case err := <-ran:
			return onceWait{timedOut: ctx.Err() != nil, returned: true, err: err}
		case <-tick:
			if ready() {
				return onceWait{}
			}
		}
	}
}

// pending lists the entries that have not answered yet, each with why
// when its check knows: a discoverer that sent, or a Kubernetes entry
// whose API server lists nothing it selects, has answered.
func (r *Runner) pending() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.es {
		res, checked := r.api[e.set]
		switch {
		case !r.seen.at(e.set).IsZero():
		case e.kube != nil && checked && res.err == nil && res.empty:
		case e.kube != nil && checked && res.err != nil:
			out = append(out, e.set+" ("+res.err.Error()+")")
		default:
			out = append(out, e.set)
		}
	}
	return out
}

// settled reports whether no entry has sent for onceQuiet and the
// discovery manager has handed over the last update.
func (r *Runner) settled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := time.Time{}
	for _, e := range r.es {
		if at := r.seen.at(e.set); at.After(last) {
			last = at
		}
	}
	return time.Since(last) >= onceQuiet && !r.lastSync.Before(last)
}
