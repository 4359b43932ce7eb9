// Command kvwatch shows how full the KV cache of LLM inference servers is and
// how much more fits: a status line, a live terminal view, an exporter of
// normalized metrics with embedded history and alerts, a simulator, and a
// generated Prometheus + Alertmanager + Grafana stack.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvwatch/kvwatch/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Streams{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
