package sim

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Engine names accepted in a scenario's servers[].engine are in the engines'
// files (EngineSGLang in sglang.go, ...), listed in Engines (engines.go).

// Roles a server can have.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
	RoleUnified = "unified"
	RoleRouter  = "router"
	// RoleCache is a cache server's: the lmcache and dynamo-kvbm engines,
	// whose pages hold cache tiers and no KV pool.
	RoleCache = "cache"
)

// Scenario is a simulated deployment: servers, their engines and sizes, the
// load that arrives and the faults switched on at start. Build one with
// LoadScenario, ParseScenario, BuiltinScenario or GeneratedScenario; the
// zero value is not valid.
type Scenario struct {
	// Name is the file name or built-in name, used in error messages.
	Name string `yaml:"-"`
	// Step is the simulated time the load model advances per step (default 250ms).
	Step time.Duration `yaml:"step"`
	// ModelName is the default served model name for every server.
	ModelName string `yaml:"model_name"`
	// Servers are the simulated endpoints, each on its own port.
	Servers []ServerSpec `yaml:"servers"`
}

// ServerSpec describes one simulated endpoint. Token sizes are per DP rank.
type ServerSpec struct {
	Name   string `yaml:"name"`
	Engine string `yaml:"engine"`
	// Role is prefill, decode, unified (default) or router (router engines).
	Role string `yaml:"role"`
	// Port to listen on; 0 means BasePort+index, or a free port when BasePort is 0.
	Port      int    `yaml:"port"`
	ModelName string `yaml:"model_name"`
	// MetricPrefix is "sglang:" (default) or "sglang_" for the SGLang engines.
	MetricPrefix string `yaml:"metric_prefix"`
	// Version is the engine's dialect (sglang, vllm, llamacpp,
	// trtllm-serve: current, the default, or one before a change;
	// docs/simulator.md); POST
	// /-/sim/version changes it while the cluster runs.
	Version string `yaml:"version"`
	// TP is the tensor-parallel size; every TP rank emits its own series
	// (SGLang --enable-metrics-for-all-schedulers) with identical KV values.
	TP int `yaml:"tp"`
	// DP is the number of data-parallel ranks (SGLang dp_rank, vLLM engine).
	DP int `yaml:"dp"`
	// CapacityTokens is the KV capacity per DP rank, in tokens.
	CapacityTokens int64 `yaml:"capacity_tokens"`
	// PageSize is the KV allocation granularity in tokens (SGLang page, vLLM
	// block, Triton tokens per block, TGI block).
	PageSize int64 `yaml:"page_size"`
	// ContextLength is the model's maximum context, in tokens.
	ContextLength int64 `yaml:"context_length"`
	// MaxRunningRequests caps the running batch per DP rank (llama.cpp: slots).
	MaxRunningRequests int `yaml:"max_running_requests"`
	// KVUnified makes a llama.cpp server's slots share one KV cache, as
	// llama-server without -np does (--kv-unified): every slot reports the
	// whole capacity as its n_ctx. false: each slot holds its share
	// (--parallel N), as every build before llama.cpp #14363 did. The load
	// is the same either way (a request fits one slot's share).
	KVUnified bool `yaml:"kv_unified"`
	// HiCacheTokens is SGLang HiCache's host pool per DP rank, in tokens (0: off).
	HiCacheTokens int64 `yaml:"hicache_tokens"`
	// SWAWindow makes an SGLang model hybrid: its sliding-window layers keep
	// the last swa_window tokens of each request (0: a dense model).
	SWAWindow int64 `yaml:"swa_window"`
	// MambaSlots makes an SGLang model hybrid with Mamba layers: its state
	// pool has mamba_slots slots per DP rank, one per running request, so
	// a rank runs at most that many at once (0: no Mamba layers; hybrid.go).
	MambaSlots int64 `yaml:"mamba_slots"`
	// CPUOffloadTokens is the host tier per DP rank, in tokens (0: off):
	// vLLM's native KV offloading to CPU, trtllm-serve's host cache
	// (host_cache_size), Dynamo KVBM's G2 (DYN_KVBM_CPU_CACHE_GB).
	CPUOffloadTokens int64 `yaml:"cpu_offload_tokens"`
	// DiskOffloadTokens is Dynamo KVBM's disk tier (G3) below the host, in tokens (0: off).
	DiskOffloadTokens int64 `yaml:"disk_offload_tokens"`
	// LMCacheL1Tokens and LMCacheL2Tokens make a vLLM server use an LMCache
	// server (multi-process mode): its L1 (host memory) and L2 (the "fs"
	// adapter), in tokens. An lmcache server lists it in workers.
	LMCacheL1Tokens int64 `yaml:"lmcache_l1_tokens"`
	LMCacheL2Tokens int64 `yaml:"lmcache_l2_tokens"`
	// PrefixCaching turns the prefix (radix) cache on; default true except TGI.
	PrefixCaching *bool `yaml:"prefix_caching"`
	// Workers are the servers a router spreads requests over.
	Workers []string `yaml:"workers"`
	// Load is the traffic arriving at this server (routers pass theirs on).
	Load LoadSpec `yaml:"load"`
	// Fault is switched on at start.
	Fault FaultSpec `yaml:"fault"`
}

// LoadSpec is the request arrival process and the request shapes. Rates are
// requests per simulated second; token sizes are tokens.
type LoadSpec struct {
	Rate          float64       `yaml:"rate"`           // mean Poisson arrival rate
	BurstFactor   float64       `yaml:"burst_factor"`   // rate multiplier during a burst (default 1: no bursts)
	BurstEvery    time.Duration `yaml:"burst_every"`    // period of bursts (default 60s)
	BurstDuration time.Duration `yaml:"burst_duration"` // length of a burst (default 10s)
	PromptMean    int64         `yaml:"prompt_mean"`    // mean prompt length (exponential, default 2000)
	PromptMax     int64         `yaml:"prompt_max"`     // prompt length cap (default 16000, at most context_length/2)
	OutputMean    int64         `yaml:"output_mean"`    // mean output length (default 300)
	OutputMax     int64         `yaml:"output_max"`     // max_new_tokens of every request (default 2000)
	PrefixGroups  int           `yaml:"prefix_groups"`  // number of shared prompt prefixes (default 8)
	PrefixTokens  int64         `yaml:"prefix_tokens"`  // length of a shared prefix (default 1024)
	PrefixShare   float64       `yaml:"prefix_share"`   // fraction of requests that start with a shared prefix (default 0.6)
	DecodeRate    float64       `yaml:"decode_rate"`    // tokens/s generated per running request (default 40)
	PrefillRate   float64       `yaml:"prefill_rate"`   // prompt tokens/s computed per DP rank (default 20000)
	// Schedule varies the rate over time: ramps, steady fills, drains (planning.go).
	Schedule []LoadStep `yaml:"schedule"`
	// Growth raises the rate day by day, with time compressed (planning.go).
	Growth *GrowthSpec `yaml:"growth"`
}

// FaultSpec is a fault switched on at start; see Fault.
type FaultSpec struct {
	Kind  string        `yaml:"kind"`
	Delay time.Duration `yaml:"delay"`
}

// LoadScenario reads and validates a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return ParseScenario(path, data)
}

// ParseScenario parses and validates scenario YAML. name prefixes error
// messages. All problems are reported at once, one per line, each with its
// line number.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(name, err)
	}
	sc := &Scenario{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(sc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty scenario; want at least a servers: list", name)
		}
		return nil, yamlError(name, err)
	}
	sc.Name = name
	sc.applyDefaults()
	if errs := sc.validate(); len(errs) > 0 {
		return nil, &ScenarioError{File: name, Problems: locate(&root, errs)}
	}
	return sc, nil
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
var unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// yamlError turns yaml.v3 errors into "file:line: message" lines.
func yamlError(name string, err error) error {
	var te *yaml.TypeError
	var msgs []string
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	se := &ScenarioError{File: name}
	for _, m := range msgs {
		line := 0
		if s := lineRE.FindStringSubmatch(m); s != nil {
			line, _ = strconv.Atoi(s[1])
			m = s[2]
		}
		if s := unknownFieldRE.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("unknown key %q; see docs/simulator.md for the scenario keys", s[1])
		}
		se.Problems = append(se.Problems, Problem{Line: line, Msg: m})
	}
	return se
}

// Problem is one scenario error at a line (0 when unknown).
type Problem struct {
	Line int
	Path string // e.g. servers[1].engine; empty for syntax errors
	Msg  string
}

// ScenarioError lists every problem found in a scenario.
type ScenarioError struct {
	File     string
	Problems []Problem
}

func (e *ScenarioError) Error() string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		s := e.File
		if p.Line > 0 {
			s += ":" + strconv.Itoa(p.Line)
		}
		s += ": "
		if p.Path != "" {
			s += p.Path + ": "
		}
		lines = append(lines, s+p.Msg)
	}
	return strings.Join(lines, "\n")
}

// problem is a validation error at a YAML path like servers[1].engine.
type problem struct {
	path string
	msg  string
}

// locate finds each problem's line by walking the YAML tree along its path;
// the line of the deepest node that exists is used.
func locate(root *yaml.Node, ps []problem) []Problem {
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, Problem{Line: lineOf(root, p.path), Path: p.path, Msg: p.msg})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

var pathPartRE = regexp.MustCompile(`([a-z0-9_]+)(?:\[(\d+)\])?`)

func lineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, part := range strings.Split(path, ".") {
		m := pathPartRE.FindStringSubmatch(part)
		if m == nil || n.Kind != yaml.MappingNode {
			return line
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == m[1] {
				next = n.Content[i+1]
				line = n.Content[i].Line
				break
			}
		}
		if next == nil {
			return line
		}
		n = next
		if m[2] != "" {
			idx, _ := strconv.Atoi(m[2])
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		} else if n.Kind == yaml.ScalarNode {
			line = n.Line
		}
	}
	return line
}

// applyDefaults fills every unset key; see docs/simulator.md for the values.
func (sc *Scenario) applyDefaults() {
	if sc.Step == 0 {
		sc.Step = 250 * time.Millisecond
	}
	if sc.ModelName == "" {
		sc.ModelName = "meta-llama/Llama-3.1-8B-Instruct"
	}
	for i := range sc.Servers {
		s := &sc.Servers[i]
		eng, _ := engineOf(s.Engine) // an unknown engine has no defaults of its own; validate reports it
		d := eng.defaults
		if s.Role == "" {
			s.Role = cmp.Or(eng.role, RoleUnified)
		}
		if s.ModelName == "" {
			s.ModelName = sc.ModelName
		}
		if s.MetricPrefix == "" && len(eng.metricPrefixes) > 0 {
			s.MetricPrefix = eng.metricPrefixes[0]
		}
		if s.Version == "" && len(eng.versions) > 0 {
			s.Version = eng.versions[0]
		}
		if s.TP == 0 {
			s.TP = 1
		}
		if s.DP == 0 {
			s.DP = 1
		}
		if s.PageSize == 0 {
			s.PageSize = cmp.Or(d.pageSize, 1)
		}
		if s.ContextLength == 0 {
			s.ContextLength = cmp.Or(d.contextLength, 131072)
		}
		if s.CapacityTokens == 0 {
			s.CapacityTokens = 524288
			if eng.slots {
				s.CapacityTokens = s.ContextLength
			}
		}
		if s.MaxRunningRequests == 0 {
			s.MaxRunningRequests = cmp.Or(d.maxRunning, 256)
		}
		if s.PrefixCaching == nil {
			on := !d.prefixCachingOff
			s.PrefixCaching = &on
		}
		l := &s.Load
		if l.BurstFactor == 0 {
			l.BurstFactor = 1
		}
		if l.BurstEvery == 0 {
			l.BurstEvery = 60 * time.Second
		}
		if l.BurstDuration == 0 {
			l.BurstDuration = 10 * time.Second
		}
		if l.PromptMean == 0 {
			l.PromptMean = cmp.Or(d.promptMean, 2000)
		}
		if l.OutputMax == 0 {
			l.OutputMax = d.outputMax // the common default follows prompt_max's
		}
		if l.PromptMax == 0 {
			l.PromptMax = min(16000, s.ContextLength/2)
			if eng.slots && s.MaxRunningRequests > 0 {
				l.PromptMax = s.CapacityTokens/int64(s.MaxRunningRequests) - l.OutputMax
			}
		}
		if l.OutputMean == 0 {
			l.OutputMean = cmp.Or(d.outputMean, 300)
		}
		if l.OutputMax == 0 {
			l.OutputMax = min(2000, s.ContextLength/4)
		}
		if l.PrefixGroups == 0 {
			l.PrefixGroups = 8
		}
		if l.PrefixTokens == 0 {
			l.PrefixTokens = min(1024, l.PromptMax/2)
		}
		if l.PrefixShare == 0 {
			l.PrefixShare = 0.6
		}
		if l.DecodeRate == 0 {
			l.DecodeRate = cmp.Or(d.decodeRate, 40)
		}
		if l.PrefillRate == 0 {
			l.PrefillRate = cmp.Or(d.prefillRate, 20000)
		}
	}
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

func (sc *Scenario) validate() []problem {
	var ps []problem
	add := func(path, format string, args ...any) {
		ps = append(ps, problem{path, fmt.Sprintf(format, args...)})
	}
	if sc.Step < time.Millisecond {
		add("step", "must be at least 1ms, got %s", sc.Step)
	}
	if len(sc.Servers) == 0 {
		add("servers", "no servers; want at least one entry with name and engine")
	}
	names := map[string]int{}
	ports := map[int]int{}
	for i, s := range sc.Servers {
		if s.Name != "" {
			if j, dup := names[s.Name]; dup {
				add(fmt.Sprintf("servers[%d].name", i), "duplicate name %q (also servers[%d])", s.Name, j)
			} else {
				names[s.Name] = i
			}
		}
	}
	for i, s := range sc.Servers {
		p := fmt.Sprintf("servers[%d]", i)
		if s.Name == "" {
			add(p+".name", "missing; every server needs a unique name")
		} else if !nameRE.MatchString(s.Name) {
			add(p+".name", "%q is not a valid name; use lower-case letters, digits, '.', '_' and '-'", s.Name)
		}
		eng, known := engineOf(s.Engine)
		if s.Engine == "" {
			add(p+".engine", "missing; want one of %s", strings.Join(Engines, ", "))
		} else if !known {
			add(p+".engine", "unknown engine %q; want one of %s", s.Engine, strings.Join(Engines, ", "))
		}
		switch s.Role {
		case RoleRouter:
			if known && eng.role != RoleRouter {
				add(p+".role", "role router needs engine %s, got %s", listOf(engineNames(isRouter), "or"), s.Engine)
			}
		case RolePrefill, RoleDecode:
			if known && !eng.pd {
				add(p+".role", "role %s is simulated for the SGLang engines only, got %s; use role unified", s.Role, s.Engine)
			}
		case RoleUnified:
			if eng.role == RoleRouter {
				add(p+".role", "engine %s is a router; use role router", s.Engine)
			}
		case RoleCache:
			if known && eng.role != RoleCache {
				add(p+".role", "role cache is for the cache servers (engines %s), got %s", strings.Join(engineNames(isCache), ", "), s.Engine)
			}
		default:
			add(p+".role", "unknown role %q; want one of prefill, decode, unified, router, cache", s.Role)
		}
		if eng.role == RoleCache && s.Role != RoleCache {
			add(p+".role", "engine %s is a cache server (its page holds tiers, no KV pool); use role cache", s.Engine)
		}
		if s.Port < 0 || s.Port > 65535 {
			add(p+".port", "%d is out of range 0-65535", s.Port)
		} else if s.Port != 0 {
			if j, dup := ports[s.Port]; dup {
				add(p+".port", "port %d is also used by servers[%d]", s.Port, j)
			}
			ports[s.Port] = i
		}
		if known && s.Version != "" {
			if err := eng.checkVersion(s.Version); err != nil {
				add(p+".version", "%v", err)
			}
		}
		if s.MetricPrefix != "" && !slices.Contains(eng.metricPrefixes, s.MetricPrefix) {
			if len(eng.metricPrefixes) > 0 {
				quoted := make([]string, len(eng.metricPrefixes))
				for i, m := range eng.metricPrefixes {
					quoted[i] = strconv.Quote(m)
				}
				add(p+".metric_prefix", "unknown prefix %q; want %s", s.MetricPrefix, listOf(quoted, "or"))
			} else {
				add(p+".metric_prefix", "only the SGLang engines have a metric prefix choice; remove it")
			}
		}
		if s.TP < 1 || s.TP > 64 {
			add(p+".tp", "must be 1-64, got %d", s.TP)
		}
		if s.DP < 1 || s.DP > 64 {
			add(p+".dp", "must be 1-64, got %d", s.DP)
		}
		if s.DP > 1 && !eng.dp {
			add(p+".dp", "data parallelism is simulated for %s only, got dp %d for %s", listOf(engineNames(func(e *engine) bool { return e.dp }), "and"), s.DP, s.Engine)
		}
		if s.PageSize < 1 {
			add(p+".page_size", "must be at least 1 token, got %d", s.PageSize)
		}
		if s.CapacityTokens < s.PageSize || s.CapacityTokens%max(s.PageSize, 1) != 0 {
			add(p+".capacity_tokens", "must be a positive multiple of page_size %d, got %d", s.PageSize, s.CapacityTokens)
		}
		if s.ContextLength < 64 {
			add(p+".context_length", "must be at least 64 tokens, got %d", s.ContextLength)
		}
		if s.MaxRunningRequests < 1 {
			add(p+".max_running_requests", "must be at least 1, got %d", s.MaxRunningRequests)
		}
		ps = append(ps, validateTiers(p, s, eng, sc.Servers, names)...)
		switch {
		case s.KVUnified && !eng.slots:
			add(p+".kv_unified", "only a llama.cpp server has slots to share a KV cache; %s has none", s.Engine)
		case s.KVUnified && s.Version == VersionLlamaCppBefore:
			add(p+".kv_unified", "llama.cpp %s (b5440) predates unified KV caches (#14363); leave kv_unified out", VersionLlamaCppBefore)
		}
		if eng.slots && s.CapacityTokens/int64(max(s.MaxRunningRequests, 1)) < 64 {
			add(p+".capacity_tokens", "llama.cpp splits capacity over %d slots; need at least 64 tokens per slot", s.MaxRunningRequests)
		}
		if len(s.Workers) > 0 && s.Role != RoleRouter && !eng.tierOf {
			add(p+".workers", "only a router (or an lmcache server) has workers")
		}
		if s.Role == RoleRouter {
			if len(s.Workers) == 0 {
				add(p+".workers", "a router needs at least one worker (names of other servers)")
			}
			np, nd := 0, 0
			for j, w := range s.Workers {
				k, ok := names[w]
				switch {
				case !ok:
					add(fmt.Sprintf("%s.workers[%d]", p, j), "unknown server %q", w)
				case sc.Servers[k].Role == RoleRouter:
					add(fmt.Sprintf("%s.workers[%d]", p, j), "%q is a router; a router's workers must be engine servers", w)
				case sc.Servers[k].Role == RolePrefill:
					np++
				case sc.Servers[k].Role == RoleDecode:
					nd++
				}
			}
			if (np > 0) != (nd > 0) || (np > 0 && np+nd != len(s.Workers)) {
				add(p+".workers", "a PD router needs prefill and decode workers only, at least one of each; got %d prefill, %d decode of %d", np, nd, len(s.Workers))
			}
		}
		l := s.Load
		lp := p + ".load"
		if l.Rate < 0 {
			add(lp+".rate", "must not be negative, got %g", l.Rate)
		}
		if l.BurstFactor < 1 {
			add(lp+".burst_factor", "must be at least 1, got %g", l.BurstFactor)
		}
		if l.BurstDuration > l.BurstEvery {
			add(lp+".burst_duration", "%s is longer than burst_every %s", l.BurstDuration, l.BurstEvery)
		}
		if l.PromptMean < 1 || l.PromptMean > l.PromptMax {
			add(lp+".prompt_mean", "must be 1..prompt_max (%d), got %d", l.PromptMax, l.PromptMean)
		}
		if l.OutputMean < 1 || l.OutputMean > l.OutputMax {
			add(lp+".output_mean", "must be 1..output_max (%d), got %d", l.OutputMax, l.OutputMean)
		}
		if l.PromptMax+l.OutputMax > s.ContextLength {
			add(lp+".prompt_max", "prompt_max %d + output_max %d exceeds context_length %d", l.PromptMax, l.OutputMax, s.ContextLength)
		}
		if eng.slots && s.MaxRunningRequests > 0 && l.PromptMax+l.OutputMax > s.CapacityTokens/int64(s.MaxRunningRequests) {
			add(lp+".prompt_max", "prompt_max %d + output_max %d exceeds the llama.cpp slot size %d (capacity_tokens / max_running_requests)", l.PromptMax, l.OutputMax, s.CapacityTokens/int64(s.MaxRunningRequests))
		}
		if l.PrefixTokens < 0 || l.PrefixTokens >= l.PromptMax {
			add(lp+".prefix_tokens", "must be 0..prompt_max-1 (%d), got %d", l.PromptMax-1, l.PrefixTokens)
		}
		if l.PrefixShare < 0 || l.PrefixShare > 1 {
			add(lp+".prefix_share", "must be a fraction 0-1, got %g", l.PrefixShare)
		}
		if l.PrefixGroups < 1 {
			add(lp+".prefix_groups", "must be at least 1, got %d", l.PrefixGroups)
		}
		if l.DecodeRate <= 0 {
			add(lp+".decode_rate", "must be positive tokens/s, got %g", l.DecodeRate)
		}
		l.validateSchedule(lp, add)
		l.validateGrowth(lp, add)
		if l.PrefillRate <= 0 {
			add(lp+".prefill_rate", "must be positive tokens/s, got %g", l.PrefillRate)
		}
		if s.Fault.Kind != "" {
			if k, err := ParseFaultKind(s.Fault.Kind); err != nil {
				add(p+".fault.kind", "%v", err)
			} else if k == FaultRestart {
				add(p+".fault.kind", "restart is an event, not a state; trigger it at run time with POST /-/sim/fault?kind=restart")
			}
		}
		if s.Fault.Delay < 0 {
			add(p+".fault.delay", "must not be negative, got %s", s.Fault.Delay)
		}
	}
	// A prefill or decode server must sit behind a PD router.
	behind := map[string]bool{}
	for _, s := range sc.Servers {
		if s.Role == RoleRouter {
			for _, w := range s.Workers {
				behind[w] = true
			}
		}
	}
	for i, s := range sc.Servers {
		if (s.Role == RolePrefill || s.Role == RoleDecode) && !behind[s.Name] {
			add(fmt.Sprintf("servers[%d].role", i), "a %s server needs a router that lists it in workers together with its %s", s.Role, map[string]string{RolePrefill: "decode server", RoleDecode: "prefill server"}[s.Role])
		}
	}
	return ps
}

// GeneratedScenario is a fleet of n unified servers of one engine, each with
// TP ranks, and moderate load: the shape used for scale tests.
func GeneratedScenario(n int, engine string, tp int) (*Scenario, error) {
	if n < 1 {
		return nil, fmt.Errorf("generated fleet: --servers must be at least 1, got %d", n)
	}
	eng, _ := engineOf(engine)
	sc := &Scenario{Name: fmt.Sprintf("generated %d×%s", n, engine)}
	for i := range n {
		spec := ServerSpec{
			Name: fmt.Sprintf("%s-%04d", strings.ReplaceAll(engine, "-", ""), i), Engine: engine, TP: tp,
			Load: LoadSpec{Rate: 0.5},
		}
		if eng.fleet != nil {
			if err := eng.fleet(&spec); err != nil {
				return nil, fmt.Errorf("generated fleet: %w", err)
			}
		}
		sc.Servers = append(sc.Servers, spec)
	}
	sc.applyDefaults()
	if errs := sc.validate(); len(errs) > 0 {
		var msgs []string
		for _, p := range errs {
			msgs = append(msgs, p.path+": "+p.msg)
		}
		return nil, fmt.Errorf("generated fleet: %s", strings.Join(msgs, "; "))
	}
	return sc, nil
}

// LoadScenarioOrBuiltin returns the built-in scenario called nameOrPath, or
// reads the file if it is not a built-in name.
func LoadScenarioOrBuiltin(nameOrPath string) (*Scenario, error) {
	if _, ok := builtins[nameOrPath]; ok {
		return BuiltinScenario(nameOrPath)
	}
	if filepath.Ext(nameOrPath) == "" {
		if _, err := os.Stat(nameOrPath); err != nil {
			return nil, fmt.Errorf("unknown scenario %q; want a built-in (%s) or a YAML file", nameOrPath, strings.Join(BuiltinNames(), ", "))
		}
	}
	return LoadScenario(nameOrPath)
}
