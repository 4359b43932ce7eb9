package serve

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// The budget of failed logins per source address. exporter-toolkit checks
// a password with bcrypt, about 57 ms of CPU each, so unbounded guesses
// burn a core: a source may fail LoginFailureBurst logins at once, then one
// more every LoginFailureRefill; past that, a request of its with
// credentials is answered 429 before the password is checked.
const (
	LoginFailureBurst  = 10
	LoginFailureRefill = 10 * time.Second
	// loginSources bounds the sources tracked; while every one of them is
	// still paying for failures, new sources share one budget.
	loginSources = 4096
	// loginLogInterval: failed logins are logged at most once per
	// interval, the first at once, the rest summed up.
	loginLogInterval = time.Minute
	// loginLogSources: the sources a log line names at most.
	loginLogSources = 16
)

// loginGuard keeps the per-source budgets, counts failed logins and logs
// them, rate-limited.
type loginGuard struct {
	log    *slog.Logger
	failed prometheus.Counter

	mu      sync.Mutex
	buckets map[string]*loginBucket
	shared  loginBucket // new sources' while the table is full
	// The log: no line before next; tally is what the next line reports;
	// timer writes it when nothing else does.
	next   time.Time
	tally  loginTally
	timer  *time.Timer
	closed bool // serve stopped: write at once
}

// loginBucket is one source's budget: failures it may still make, as of at.
type loginBucket struct {
	tokens float64
	at     time.Time
}

type loginTally struct {
	failed, throttled int
	sources           map[string]int // at most loginLogSources
	others            int            // failures and refusals of sources beyond them
}

func newLoginGuard(log *slog.Logger) *loginGuard {
	return &loginGuard{log: log, buckets: map[string]*loginBucket{},
		shared: loginBucket{tokens: LoginFailureBurst, at: time.Now()},
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: signal.WebFailedLogins.Name, Help: signal.WebFailedLogins.Help})}
}

// refill adds the failures earned since b.at.
func (b *loginBucket) refill(now time.Time) {
	b.tokens = min(LoginFailureBurst, b.tokens+float64(now.Sub(b.at))/float64(LoginFailureRefill))
	b.at = now
}

// take reserves one failure of src's budget for a request with
// credentials; nil and how long until one is free when there is none.
// done gives it back unless the login failed.
func (g *loginGuard) take(src string) (*loginBucket, time.Duration) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buckets[src]
	if b == nil {
		if len(g.buckets) >= loginSources {
			for k, o := range g.buckets {
				if o.refill(now); o.tokens >= LoginFailureBurst {
					delete(g.buckets, k)
				}
			}
		}
		if len(g.buckets) < loginSources {
			b = &loginBucket{tokens: LoginFailureBurst, at: now}
			g.buckets[src] = b
		} else {
			b = &g.shared
		}
	}
	b.refill(now)
	if b.tokens < 1 {
		return nil, time.Duration((1 - b.tokens) * float64(LoginFailureRefill))
	}
	b.tokens--
	return b, 0
}

// done settles a reservation of take: a failed login keeps it spent, is
// counted and logged; any other answer gives it back.
func (g *loginGuard) done(b *loginBucket, src string, failed bool) {
	if !failed {
		g.mu.Lock()
		b.tokens = min(LoginFailureBurst, b.tokens+1)
		g.mu.Unlock()
		return
	}
	g.failed.Inc()
	g.note(src, false)
}

// note records a failed login (or, throttled, a refused one) of src for
// the log: the first line goes out at once, later ones at most once per
// loginLogInterval, with what happened since.
func (g *loginGuard) note(src string, throttled bool) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	t := &g.tally
	if throttled {
		t.throttled++
	} else {
		t.failed++
	}
	if _, ok := t.sources[src]; ok || len(t.sources) < loginLogSources {
		if t.sources == nil {
			t.sources = map[string]int{}
		}
		t.sources[src]++
	} else {
		t.others++
	}
	if now.Before(g.next) && !g.closed {
		if g.timer == nil {
			g.timer = time.AfterFunc(g.next.Sub(now), g.flush)
		}
		return
	}
	g.writeLocked(now)
}

// flush writes what the log has not reported yet.
func (g *loginGuard) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer = nil
	if g.tally.failed+g.tally.throttled > 0 {
		g.writeLocked(time.Now())
	}
}

// close stops the log's timer and writes what it holds.
func (g *loginGuard) close() {
	g.mu.Lock()
	g.closed = true
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	g.flush()
}

func (g *loginGuard) writeLocked(now time.Time) {
	t := g.tally
	g.tally = loginTally{}
	g.next = now.Add(loginLogInterval)
	srcs := make([]string, 0, len(t.sources))
	for s := range t.sources {
		srcs = append(srcs, s)
	}
	slices.SortFunc(srcs, func(a, b string) int { return cmp.Or(cmp.Compare(t.sources[b], t.sources[a]), strings.Compare(a, b)) })
	for i, s := range srcs {
		srcs[i] = fmt.Sprintf("%s (%d)", s, t.sources[s])
	}
	if t.others > 0 {
		srcs = append(srcs, fmt.Sprintf("%d more from other sources", t.others))
	}
	g.log.Warn(fmt.Sprintf("failed logins to kvwatch serve: wrong basic auth credentials (logged at most once per %s; counted in %s)", loginLogInterval, signal.WebFailedLogins.Name),
		"failed", t.failed, "throttled", t.throttled, "sources", strings.Join(srcs, ", "))
}

// sourceOf is the budget's key for a request's remote address: its IP
// address, or its /64 for IPv6 (one host usually holds a whole /64).
func sourceOf(remoteAddr string) string {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	a := ap.Addr().Unmap()
	if a.Is6() && !a.IsLoopback() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}
