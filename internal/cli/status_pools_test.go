package cli

import (
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestRenderCachePools(t *testing.T) {
	s := &kv.Server{CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(8000), Used: kv.Of(4000), UsageRatio: kv.DerivedOf(0.5), HitTokens: kv.Of(1200)},
		{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: kv.Of(0.9)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs\x1b[2J", Unit: kv.UnitBytes, Used: kv.Of(3 << 30)},
		{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitRate: kv.Of(0.18)},
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitTokens: kv.Of(100), Note: "not exported"},
	}}
	var b strings.Builder
	renderCachePools(&b, s)
	want := strings.Join([]string{
		"\t  host tier\t\tKV 4,000 / 8,000 tok (50.0%)\t\thits 1,200 tok",
		"\t  swa pool\t\tKV -- / -- tok (90.0%)\t\t",
		// The escape sequence from the page never reaches the terminal.
		"\t  lmcache-l2 tier fs??2J\t\tKV 3.0 GiB / -- (--)\t\t",
		"\t  disk tier\t\tKV -- / -- tok (--)\t\thit rate 18.0%",
		"\t  host tier\t\tKV -- / -- tok (--)\t\thits 100 tok\tfill unavailable: not exported",
	}, "\n") + "\n"
	if got := b.String(); got != want {
		t.Errorf("renderCachePools:\n%q\nwant\n%q", got, want)
	}
}
