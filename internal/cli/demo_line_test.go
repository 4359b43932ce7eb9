package cli

import (
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

// The status line (the demo's, status -o line's) has a part per pool: a
// pool of one server is that server, by name; a larger pool is the pool,
// with each server that needs an operator (leak, stuck, full, pressure)
// named with its state, and nothing said of ok or idle ones.
func TestStatusLine(t *testing.T) {
	row := func(name string, role kv.Role, st kv.State) report.Server {
		s := &kv.Server{Engine: "sglang", Role: role, Ranks: []kv.Rank{{Signals: kv.Signals{
			Capacity: kv.Of(2581504), Used: kv.Of(2579000), Running: kv.Of(0), Queued: kv.Queues{Prealloc: kv.Of(20312)}}}}}
		s.Rollup()
		return report.Server{Name: name, OK: true, Role: role, Server: s, Plan: &kv.ServerPlan{State: st},
			Headroom: report.Headrooms(s, []int{8192})}
	}
	down := report.Server{Name: "decode-2", Role: kv.RoleDecode, Reason: "refused"}
	at := time.Date(2026, 12, 4, 18, 0, 0, 0, time.Local)
	for _, tt := range []struct {
		name    string
		servers []report.Server
		want    string
	}{
		// Worked out by hand: 2,579,000 of 2,581,504 tokens is 99.9 %;
		// 2,504 free tokens fit no request of 8,192; two servers sum to
		// 5.16M tokens and 40.6k queued.
		{"a pool of two", []report.Server{row("decode-0", kv.RoleDecode, kv.StateLeak), row("decode-1", kv.RoleDecode, kv.StateOK)},
			"18:00:00  decode pool (2 servers) KV 99.9% 5.16M tok, run=0 queue=40.6k, fits 0×8k, decode-0 LEAK SUSPECTED | limit: decode pool KV 99.9%"},
		{"pools of one", []report.Server{row("prefill", kv.RolePrefill, kv.StateIdle), row("decode-0", kv.RoleDecode, kv.StateStuck)},
			"18:00:00  prefill KV 99.9% 2.58M tok, run=0 queue=20.3k, fits 0×8k | decode-0 (decode) KV 99.9% 2.58M tok, run=0 queue=20.3k, fits 0×8k, STUCK | limit: prefill pool KV 99.9%"},
		{"a server down", []report.Server{row("decode-0", kv.RoleDecode, kv.StateOK), down},
			"18:00:00  decode pool (2 servers) KV ~99.9%? ~2.58M? tok, run=~0? queue=~20.3k?, fits ~0?×8k, decode-2 DOWN: refused | limit: decode pool KV ~99.9%?"},
		{"alone and down", []report.Server{down},
			"18:00:00  decode-2 (decode) DOWN: refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := report.Report{Time: at, Servers: tt.servers}
			rep.Summarize([]int{8192})
			if got := statusLine(rep, nil); got != tt.want {
				t.Errorf("status line:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
