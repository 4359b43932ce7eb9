package sim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseScenarioErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"unknown engine and role", `
servers:
  - name: a
    engine: sglang
  - name: b
    engine: vlm
    role: worker
`, "scenario.yaml:6: servers[1].engine: unknown engine \"vlm\"; want one of sglang, sglang-legacy, vllm, vllm-v0, llamacpp, tgi, triton, sglang-router, sglang-router-legacy, trtllm-serve, lmcache, dynamo-kvbm, dynamo, dynamo-frontend\n" +
			"scenario.yaml:7: servers[1].role: unknown role \"worker\"; want one of prefill, decode, unified, router, cache"},
		{"unknown key", `
servers:
  - name: a
    engine: sglang
    capacity: 5
`, `scenario.yaml:5: unknown key "capacity"; see docs/simulator.md for the scenario keys`},
		{"everything at once", `
step: 250ms
servers:
  - name: a
    engine: sglang
    tp: 0
    dp: -1
    capacity_tokens: 100
    page_size: 16
    port: 30000
  - name: a
    engine: vllm
    role: prefill
    port: 30000
    load:
      rate: -1
      prefix_share: 2
    fault:
      kind: melt
`, "scenario.yaml:7: servers[0].dp: must be 1-64, got -1\n" +
			"scenario.yaml:8: servers[0].capacity_tokens: must be a positive multiple of page_size 16, got 100\n" +
			"scenario.yaml:11: servers[1].name: duplicate name \"a\" (also servers[0])\n" +
			"scenario.yaml:13: servers[1].role: role prefill is simulated for the SGLang engines only, got vllm; use role unified\n" +
			"scenario.yaml:13: servers[1].role: a prefill server needs a router that lists it in workers together with its decode server\n" +
			"scenario.yaml:14: servers[1].port: port 30000 is also used by servers[0]\n" +
			"scenario.yaml:16: servers[1].load.rate: must not be negative, got -1\n" +
			"scenario.yaml:17: servers[1].load.prefix_share: must be a fraction 0-1, got 2\n" +
			"scenario.yaml:19: servers[1].fault.kind: unknown fault \"melt\"; want one of none, leak, slow, error, drop, restart, freeze, metrics-off"},
		{"router", `
servers:
  - name: r
    engine: sglang-router
    workers: [p, nope]
  - name: p
    engine: sglang
    role: prefill
`, "scenario.yaml:5: servers[0].workers[1]: unknown server \"nope\"\n" +
			"scenario.yaml:5: servers[0].workers: a PD router needs prefill and decode workers only, at least one of each; got 1 prefill, 0 decode of 2"},
		{"restart at start", "servers:\n  - {name: a, engine: tgi, fault: {kind: restart}}\n",
			`scenario.yaml:2: servers[0].fault.kind: restart is an event, not a state; trigger it at run time with POST /-/sim/fault?kind=restart`},
		{"versions", `
servers:
  - {name: a, engine: sglang, version: "0.5.9"}
  - {name: b, engine: vllm, version: before-24341}
  - {name: c, engine: tgi, version: current}
  - {name: d, engine: sglang, version: before-24341}
  - {name: e, engine: llamacpp, version: b5440}
  - {name: f, engine: trtllm-serve, version: legacy}
  - {name: g, engine: llamacpp, version: before-13660}
  - {name: h, engine: trtllm-serve, version: before-050f80de}
`, "scenario.yaml:3: servers[0].version: unknown version \"0.5.9\" of engine sglang; want current, 0.5.16 or before-24341\n" +
			"scenario.yaml:4: servers[1].version: unknown version \"before-24341\" of engine vllm; want current, before-48860 or before-38435\n" +
			"scenario.yaml:5: servers[2].version: engine tgi has one dialect and no versions; remove version\n" +
			"scenario.yaml:7: servers[4].version: unknown version \"b5440\" of engine llamacpp; want current or before-13660\n" +
			"scenario.yaml:8: servers[5].version: unknown version \"legacy\" of engine trtllm-serve; want current or before-050f80de"},
		{"dynamo worker", `
servers:
  - name: w
    engine: dynamo
    version: kvstats
    role: decode
    metric_prefix: dynamo_
    cpu_offload_tokens: 16384
    disk_offload_tokens: 16384
    page_size: 16
  - {name: x, engine: dynamo, role: cache}
`, "scenario.yaml:5: servers[0].version: unknown version \"kvstats\" of engine dynamo; want current or before-5704\n" +
			"scenario.yaml:6: servers[0].role: role decode is simulated for the SGLang engines only, got dynamo; use role unified\n" +
			"scenario.yaml:6: servers[0].role: a decode server needs a router that lists it in workers together with its prefill server\n" +
			"scenario.yaml:7: servers[0].metric_prefix: only the SGLang engines have a metric prefix choice; remove it\n" +
			"scenario.yaml:8: servers[0].cpu_offload_tokens: KV offloading is simulated for engines vllm, trtllm-serve and dynamo-kvbm only, got dynamo\n" +
			"scenario.yaml:9: servers[0].disk_offload_tokens: a disk tier is simulated for engine dynamo-kvbm only, got dynamo\n" +
			"scenario.yaml:11: servers[1].role: role cache is for the cache servers (engines lmcache, dynamo-kvbm), got dynamo"},
		{"dynamo frontend", `
servers:
  - {name: fe, engine: dynamo-frontend, workers: [v, nope]}
  - {name: fe2, engine: dynamo-frontend, role: unified, workers: [w]}
  - {name: v, engine: vllm}
  - {name: w, engine: dynamo}
`, "scenario.yaml:3: servers[0].workers[0]: \"v\" is a vllm server; a Dynamo frontend routes to Dynamo workers (engine dynamo)\n" +
			"scenario.yaml:3: servers[0].workers[1]: unknown server \"nope\"\n" +
			"scenario.yaml:4: servers[1].role: engine dynamo-frontend is a router; use role router\n" +
			"scenario.yaml:4: servers[1].workers: only a router (or an lmcache server) has workers"},
		{"kv_unified", `
servers:
  - {name: a, engine: vllm, kv_unified: true}
  - {name: b, engine: llamacpp, version: before-13660, kv_unified: true}
  - {name: c, engine: llamacpp, kv_unified: true}
`, "scenario.yaml:3: servers[0].kv_unified: only a llama.cpp server has slots to share a KV cache; vllm has none\n" +
			"scenario.yaml:4: servers[1].kv_unified: llama.cpp before-13660 (b5440) predates unified KV caches (#14363); leave kv_unified out"},
		{"empty", ``, `scenario.yaml: empty scenario; want at least a servers: list`},
		{"syntax", "servers: [\n", `scenario.yaml:1: did not find expected node content`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario("scenario.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("ParseScenario = nil error, want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("ParseScenario error =\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

func TestParseScenarioDefaults(t *testing.T) {
	sc, err := ParseScenario("s.yaml", []byte("servers:\n  - {name: v, engine: vllm}\n  - {name: l, engine: llamacpp}\n  - {name: g, engine: tgi}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, l := sc.Servers[0], sc.Servers[1]
	// An engine with versions defaults to current; one without has none.
	if g := sc.Servers[2]; l.Version != VersionCurrent || g.Version != "" {
		t.Errorf("llamacpp version %q, tgi version %q; want %q and none", l.Version, g.Version, VersionCurrent)
	}
	if sc.Step != 250*time.Millisecond || v.Role != RoleUnified || v.Version != VersionCurrent || v.TP != 1 || v.DP != 1 || v.PageSize != 16 ||
		v.CapacityTokens != 524288 || v.ContextLength != 131072 || v.MaxRunningRequests != 256 || !*v.PrefixCaching ||
		v.Load.PromptMean != 2000 || v.Load.PromptMax != 16000 || v.Load.OutputMax != 2000 || v.Load.PrefixTokens != 1024 {
		t.Errorf("vllm defaults = %+v", v)
	}
	if l.CapacityTokens != 4096 || l.MaxRunningRequests != 4 || l.Load.OutputMax != 192 || l.Load.PromptMax != 832 {
		t.Errorf("llamacpp defaults = %+v", l)
	}
}

func TestExampleScenarios(t *testing.T) {
	files, _ := filepath.Glob("../../examples/scenarios/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples/scenarios/*.yaml")
	}
	for _, f := range files {
		if _, err := LoadScenario(f); err != nil {
			t.Errorf("%v", err)
		}
	}
	for _, n := range BuiltinNames() {
		if _, err := BuiltinScenario(n); err != nil {
			t.Errorf("%v", err)
		}
	}
	if _, err := os.Stat("../../examples/scenarios"); err != nil {
		t.Fatal(err)
	}
}

// TestTierScenarioErrors: the tier keys of the trtllm-serve, KVBM and
// LMCache servers are checked, every problem with its path.
func TestTierScenarioErrors(t *testing.T) {
	src := `
servers:
  - name: v
    engine: vllm
    lmcache_l1_tokens: 1000
    cpu_offload_tokens: 1600
  - name: l
    engine: lmcache
    workers: [t]
    load: {rate: 1}
  - name: t
    engine: trtllm-serve
    disk_offload_tokens: 64
  - name: k
    engine: dynamo-kvbm
`
	_, err := ParseScenario("s.yaml", []byte(src))
	if err == nil {
		t.Fatal("ParseScenario accepted the scenario")
	}
	want := "s.yaml:5: servers[0].lmcache_l1_tokens: must be a multiple of page_size 16, got 1000\n" +
		"s.yaml:5: servers[0].lmcache_l1_tokens: a server has one host tier; set lmcache_l1_tokens or cpu_offload_tokens\n" +
		"s.yaml:9: servers[1].workers[0]: \"t\" must be a vllm server with lmcache_l1_tokens set\n" +
		"s.yaml:10: servers[1].load.rate: an lmcache server takes no requests of its own (its vLLM server does); remove the rate\n" +
		"s.yaml:13: servers[2].disk_offload_tokens: a disk tier is simulated for engine dynamo-kvbm only, got trtllm-serve\n" +
		"s.yaml:14: servers[3].cpu_offload_tokens: a dynamo-kvbm server needs its host tier (G2); set cpu_offload_tokens"
	if err.Error() != want {
		t.Errorf("ParseScenario error =\n%v\nwant\n%s", err, want)
	}
	if _, err := GeneratedScenario(2, EngineLMCache, 1); err == nil {
		t.Error("GeneratedScenario made a fleet of lmcache servers")
	}
	if sc, err := GeneratedScenario(2, EngineKVBM, 1); err != nil || sc.Servers[0].CPUOffloadTokens == 0 {
		t.Errorf("GeneratedScenario(dynamo-kvbm) = %v, %v; want servers with a host tier", sc, err)
	}
}
