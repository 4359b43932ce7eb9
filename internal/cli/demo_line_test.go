package cli

import (
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

// The demo's status line names a server's state when it needs an
// operator (leak, stuck, full, pressure), and says nothing of ok or idle.
func TestDemoLineNamesTheState(t *testing.T) {
	row := func(name string, st kv.State) report.Server {
		s := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, Ranks: []kv.Rank{{Signals: kv.Signals{
			Capacity: kv.Of(2581504), Used: kv.Of(2579000), Running: kv.Of(0), Queued: kv.Queues{Prealloc: kv.Of(20312)}}}}}
		s.Rollup()
		return report.Server{Name: name, OK: true, Role: kv.RoleDecode, Server: s, Plan: &kv.ServerPlan{State: st}}
	}
	line := statusLine(report.Report{Fleet: report.Fleet{LimitIndex: -1},
		Servers: []report.Server{row("decode-0", kv.StateLeak), row("decode-1", kv.StateOK)}}, nil)
	for _, want := range []string{"decode-0 (decode) KV 99.9% 2.58M tok, run=0 queue=20.3k, LEAK SUSPECTED", "decode-1 (decode) KV 99.9% 2.58M tok, run=0 queue=20.3k |"} {
		if !strings.Contains(line+" |", want) {
			t.Errorf("demo line lacks %q:\n%s", want, line)
		}
	}
}
