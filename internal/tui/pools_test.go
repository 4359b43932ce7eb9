package tui

import (
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

func TestPoolLines(t *testing.T) {
	m := New(Options{})
	s := report.Server{Name: "d", OK: true, Server: &kv.Server{CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(4000000), Used: kv.Of(2200953), UsageRatio: kv.DerivedOf(0.55), HitTokens: kv.Of(513144)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs\x1b]0;x", Unit: kv.UnitBytes, Used: kv.Of(3 << 30)},
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Note: "vLLM exports no fill"},
	}}}
	got := strings.Join(m.cachePoolLines(s, 100), "\n")
	for _, want := range []string{"POOL / TIER", "host tier", "55.0%", "lmcache-l2 fs??0?x", "3.0 GiB", "fill unavailable: vLLM exports no fill"} {
		if !strings.Contains(got, want) {
			t.Errorf("cachePoolLines lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b]") {
		t.Errorf("cachePoolLines passes the page's escape sequence through:\n%q", got)
	}
	if lines := m.cachePoolLines(report.Server{Server: &kv.Server{}}, 100); lines != nil {
		t.Errorf("no pools: %q, want nothing", lines)
	}
}
