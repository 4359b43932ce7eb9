package discovery

import (
	"context"
	"log/slog"

	"k8s.io/klog/v2"
)

// LogKubernetesClient sends the logs of the Kubernetes client Prometheus'
// discovery uses (klog: an informer's every failed list and watch, the
// API server's warnings) to log at debug level, instead of to stderr in
// klog's own format. kvwatch logs what they mean itself, once, with how
// to fix it (the Kubernetes checks). klog is process-wide: the command
// that owns the process (package cli) calls this once.
func LogKubernetesClient(log *slog.Logger) {
	klog.SetSlogLogger(slog.New(debugHandler{log.Handler()}))
}

// debugHandler hands every record to h at debug level.
type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r.Clone())
}

func (d debugHandler) WithAttrs(as []slog.Attr) slog.Handler { return debugHandler{d.h.WithAttrs(as)} }
func (d debugHandler) WithGroup(n string) slog.Handler       { return debugHandler{d.h.WithGroup(n)} }
