package discovery

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// LogKubernetesClient sends the logs of the Kubernetes client Prometheus'
// discovery uses (klog: an informer's every failed list and watch, the
// API server's warnings) to log at debug level, instead of to stderr in
// klog's own format. kvwatch logs what they mean itself, once, with how
// to fix it (the Kubernetes checks). The command that owns the process
// (package cli) calls it.
//
// klog's logger is process-wide and may not change while anything logs
// through it, so it is set once, to a handler that forwards to the
// logger of the last call: later calls (tests run many commands in one
// process, with informers of earlier ones still stopping) only swap that.
func LogKubernetesClient(log *slog.Logger) {
	h := log.Handler()
	klogTarget.h.Store(&h)
	klogTarget.once.Do(func() { klog.SetSlogLogger(slog.New(debugHandler{})) })
}

// klogTarget is where klog's records go: process-wide, as klog is.
var klogTarget struct {
	once sync.Once
	h    atomic.Pointer[slog.Handler]
}

// debugHandler hands every record to the handler of klogTarget (with the
// attributes and groups added on the way) at debug level.
type debugHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (d debugHandler) handler() slog.Handler {
	h := *klogTarget.h.Load()
	for _, w := range d.with {
		h = w(h)
	}
	return h
}

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.handler().Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.handler().Handle(ctx, r.Clone())
}

func (d debugHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return debugHandler{append(d.with[:len(d.with):len(d.with)], func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })}
}

func (d debugHandler) WithGroup(n string) slog.Handler {
	return debugHandler{append(d.with[:len(d.with):len(d.with)], func(h slog.Handler) slog.Handler { return h.WithGroup(n) })}
}
