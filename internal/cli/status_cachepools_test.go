package cli

import (
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

func TestRenderCachePools(t *testing.T) {
	s := &kv.Server{CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(8000), Used: kv.Of(4000), UsageRatio: kv.DerivedOf(0.5), HitTokens: kv.Of(1200)},
		{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: kv.Of(0.9)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs\x1b[2J", Unit: kv.UnitBytes, Used: kv.Of(3 << 30)},
		{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitRate: kv.Of(0.18)},
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitTokens: kv.Of(100), Note: "not exported",
			LoadBytes: kv.Of(256 << 20), StoreBytes: kv.Of(3 << 30)},
	}}
	var b strings.Builder
	g := newGrid(colWide)
	cachePoolRows(g, s)
	g.write(&b, 0)
	// Written by hand: the name and KV columns, 2 spaces between, the
	// hits and notes after the row.
	want := strings.Join([]string{
		"  host tier               KV 4,000 / 8,000 tok (50.0%)  hits 1,200 tok",
		"  swa pool                KV -- / -- tok (90.0%)",
		// The escape sequence from the page never reaches the terminal.
		"  lmcache-l2 tier fs??2J  KV 3.0 GiB / -- (--)",
		"  disk tier               KV -- / -- tok (--)  hit rate 18.0%",
		"  host tier               KV -- / -- tok (--)  hits 100 tok  loaded 256.0 MiB, stored 3.0 GiB  fill unavailable: not exported",
	}, "\n") + "\n"
	if got := b.String(); got != want {
		t.Errorf("renderCachePools:\n%q\nwant\n%q", got, want)
	}
}

// TestStatusCachePoolsAligned: a server's pool rows keep the table's
// columns, so that the next server row lines up with the first.
func TestStatusCachePoolsAligned(t *testing.T) {
	// Cells of different widths on the two rows (run=3 and run=162), so
	// that a broken column block shows.
	srv := func(used, running, queued float64, pools []kv.CachePool) *kv.Server {
		s := &kv.Server{Engine: "sglang", Role: kv.RoleUnified, CachePools: pools}
		s.Capacity, s.Used, s.UsageRatio = kv.Of(100000), kv.Of(used), kv.DerivedOf(used/100000)
		s.Running, s.Queued.Waiting = kv.Of(running), kv.Of(queued)
		return s
	}
	rep := &report.Report{Servers: []report.Server{
		{Name: "hicache-0", OK: true, Role: kv.RoleUnified, Server: srv(1234, 3, 0, []kv.CachePool{
			{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(4000000), Used: kv.Of(2200953), UsageRatio: kv.DerivedOf(0.55), HitTokens: kv.Of(513144)}})},
		{Name: "plain-1", OK: true, Role: kv.RoleUnified, Server: srv(99999, 162, 2826, nil)},
	}}
	for _, wide := range []bool{false, true} {
		var b strings.Builder
		renderStatus(&b, rep, statusLayout{wide: wide, ranks: !wide}, kv.FillTrend{})
		var rows []string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "unified  ") {
				rows = append(rows, l)
			}
		}
		if len(rows) != 2 {
			t.Fatalf("want two server rows in:\n%s", b.String())
		}
		for _, cell := range []string{"sglang", "KV ", "headroom ", "run=", "queued=", "hit "} {
			if a, c := strings.Index(rows[0], cell), strings.Index(rows[1], cell); a < 0 || a != c {
				t.Errorf("wide=%v: %q at byte %d on the first row, %d on the second:\n%s", wide, cell, a, c, b.String())
			}
		}
	}
}
