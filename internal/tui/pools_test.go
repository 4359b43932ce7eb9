package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

func TestPoolLines(t *testing.T) {
	m := New(Options{})
	s := report.Server{Name: "d", OK: true, Server: &kv.Server{CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(4000000), Used: kv.Of(2200953), UsageRatio: kv.DerivedOf(0.55), HitTokens: kv.Of(513144)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs\x1b]0;x", Unit: kv.UnitBytes, Used: kv.Of(3 << 30)},
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Note: "vLLM exports no fill", LoadBytes: kv.Of(4e8), StoreBytes: kv.Of(1.2e9)},
	}}}
	got := strings.Join(m.cachePoolLines(s, 100), "\n")
	for _, want := range []string{"POOL / TIER", "host tier", "55.0%", "lmcache-l2 tier fs??0?x", "3.0 GiB", "fill unavailable: vLLM exports no fill",
		"loaded 381.5 MiB, stored 1.1 GiB"} { // 4e8 / 2^20, 1.2e9 / 2^30
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

// TestCacheServerRow: a cache server (LMCache) shows its tiers in the KV
// column, is not counted among the KV servers up, and its drill-down says
// it holds no KV pool of its own instead of a KV line of dashes.
func TestCacheServerRow(t *testing.T) {
	vllm := &kv.Server{Engine: "vllm", Role: kv.RoleUnified, Signals: kv.Signals{Capacity: kv.Of(65536), Used: kv.Of(32768), UsageRatio: kv.Of(0.5)}}
	lm := &kv.Server{Engine: "lmcache", Generation: "mp", Role: kv.RoleCache, CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes, Used: kv.Of(40 << 30), Capacity: kv.DerivedOf(100 << 30), UsageRatio: kv.Of(0.4)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs", Unit: kv.UnitBytes, Used: kv.Of(2 << 30)},
	}}
	rep := report.Report{Servers: []report.Server{
		{Name: "vllm", OK: true, Role: kv.RoleUnified, Server: vllm},
		{Name: "lmcache", OK: true, Role: kv.RoleCache, Server: lm},
	}}
	rep.Summarize(nil)
	m := drive(New(Options{Title: "2 targets"}), tea.WindowSizeMsg{Width: 160, Height: 30}, ReportMsg{Report: rep, At: stepTime(0)})
	view := m.View()
	var row string
	for _, l := range strings.Split(view, "\n") {
		if strings.Contains(l, "lmcache ") {
			row = l
		}
	}
	if !strings.Contains(row, "lmcache-l1 40.0%,") { // the column cuts the rest (the drill-down has all)
		t.Errorf("the cache server's row lacks its tiers:\n%s", view)
	}
	if !strings.Contains(view, "1 up") {
		t.Errorf("the fleet line counts the cache server among the KV servers up:\n%s", view)
	}
	m.drill = "lmcache"
	drill := strings.Join(m.drillView(120), "\n")
	if !strings.Contains(drill, "a cache server") || strings.Contains(drill, "KV ····") || !strings.Contains(drill, "lmcache-l1") {
		t.Errorf("drill-down of the cache server:\n%s", drill)
	}
}
