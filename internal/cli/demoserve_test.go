package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// runDemoServe starts serve over c with cfg as kvwatch demo runs it
// (history and the built-in rules on), until ctx ends or the test does;
// the test fails if serve returns an error. With ready it returns once
// serve has scraped every target.
func runDemoServe(ctx context.Context, t *testing.T, c *sim.Cluster, cfg *config.Config, stdout io.Writer, ready bool) (*serve.Daemon, *embedded) {
	t.Helper()
	e := &env{Streams: Streams{Stdout: stdout, Stderr: os.Stderr}, Logger: slog.New(slog.DiscardHandler)}
	d, emb, err := demoDaemon(e, c, cfg, "127.0.0.1:0", embeddedFlags{history: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	for i := 0; ready && !d.Ready(); i++ {
		if i > 600 {
			t.Fatal("serve did not scrape every target within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d, emb
}
