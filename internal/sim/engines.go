package sim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// engine is what the simulator knows of one engine beyond the load model
// every server shares: its page and where it serves it, its endpoints
// besides, the defaults and limits of its servers and its own parts of the
// ground truth. Each engine's file (sglang.go, vllm.go, ...) holds its name,
// its engine and its renderer; engines lists them. Adding an engine to the
// simulator is that file and a line in engines.
type engine struct {
	// name is the engine's name in a scenario's servers[].engine.
	name string
	// render writes a server's Prometheus page from a snapshot.
	render func(p *snapshot) []byte
	// metricsPath is where the page is served (default /metrics).
	metricsPath string
	// role is the role of a server that sets none, and the only role its
	// servers take when it is RoleRouter or RoleCache; empty: RoleUnified.
	role string
	// pd: the engine's servers may be prefill and decode servers behind a
	// PD router.
	pd bool
	// dp: data parallelism is simulated (dp above 1).
	dp bool
	// metricPrefixes are the metric_prefix choices, the default first
	// (none: the engine has no choice).
	metricPrefixes []string
	// slots: the KV cache is the context (capacity_tokens defaults to
	// context_length), split into max_running_requests slots of one request
	// each that keep their tokens when idle (llama.cpp); no preemption.
	slots bool
	// reserves: admission reserves a request's prompt and max_new_tokens,
	// and the page's used tokens are that reservation (TGI); no preemption.
	reserves bool
	// tierOf: the server is the cache tier of the one server it lists in
	// workers and holds no KV of its own (the lmcache server).
	tierOf bool
	// defaults are the engine's defaults where they differ from every
	// engine's (applyDefaults).
	defaults serverDefaults
	// tiers are the cache-tier keys the engine's servers take (tiers.go).
	tiers tierKeys
	// versions are the dialects a scenario's servers[].version chooses
	// among, the newest (the default) first; none: the engine has one.
	versions []string
	// client is the prometheus_client a version serves its page with,
	// which negotiates the format (openmetrics.go); nil: the text format
	// whatever the scraper asks.
	client func(version string) pyClient
	// hitWindow is the number of lookups the host tier's hit rates are
	// taken over (KVBM's sliding window); 0: the page shows no hit rates.
	hitWindow int

	// validate adds the engine's own problems with server s, after the tier
	// keys' (nil: none); servers and names are the scenario's.
	validate func(s ServerSpec, servers []ServerSpec, names map[string]int, add func(key, format string, args ...any))
	// fleet adapts a server of a generated fleet (GeneratedScenario); an
	// error refuses the fleet (nil: the servers as they are).
	fleet func(s *ServerSpec) error
	// routes adds the engine's endpoints besides its page (nil: none).
	routes func(s *server, mux *http.ServeMux)
	// header sets the page's headers (nil: the text format, charset utf-8).
	header func(h http.Header, p *snapshot)
	// metricsOff answers the page's path while metrics are off (nil: 404
	// Not Found).
	metricsOff func(w http.ResponseWriter)
	// truth adds the engine's own parts of a server's truth (nil: none).
	truth func(s *server, t *Truth)
}

// serverDefaults are an engine's defaults where they differ from every
// engine's; a zero field leaves the common default.
type serverDefaults struct {
	pageSize, contextLength           int64
	maxRunning                        int
	promptMean, outputMean, outputMax int64
	decodeRate, prefillRate           float64
	prefixCachingOff                  bool
}

// engines are the engines the simulator serves, in the order errors list
// them: one line per engine.
var engines = []*engine{
	&sglangEngine,
	&sglangLegacyEngine,
	&vllmEngine,
	&vllmV0Engine,
	&llamaCppEngine,
	&tgiEngine,
	&tritonEngine,
	&routerEngine,
	&routerLegacyEngine,
	&trtllmServeEngine,
	&lmcacheEngine,
	&kvbmEngine,
	&dynamoEngine,
	&dynamoFrontendEngine,
}

// Engines lists every engine the simulator serves, in the order errors list them.
var Engines = engineNames(func(*engine) bool { return true })

// Versions lists the versions of engine a scenario's servers[].version
// takes, the default first; nil for an engine with one dialect.
func Versions(engine string) []string {
	e, _ := engineOf(engine)
	return slices.Clone(e.versions)
}

// noEngine is the engine of a server whose engine is unknown: it has
// nothing, and validate reports the name.
var noEngine engine

// engineOf returns the engine called name, or noEngine and false.
func engineOf(name string) (*engine, bool) {
	for _, e := range engines {
		if e.name == name {
			return e, true
		}
	}
	return &noEngine, false
}

// path is where the engine serves its Prometheus page.
func (e *engine) path() string {
	if e.metricsPath != "" {
		return e.metricsPath
	}
	return "/metrics"
}

// engineNames lists the names of the engines that have, in engines' order.
func engineNames(has func(e *engine) bool) []string {
	var out []string
	for _, e := range engines {
		if has(e) {
			out = append(out, e.name)
		}
	}
	return out
}

// checkVersion says what is wrong with version for e, nil when e has it.
func (e *engine) checkVersion(version string) error {
	switch {
	case len(e.versions) == 0:
		return fmt.Errorf("engine %s has one dialect and no versions; remove version", e.name)
	case !slices.Contains(e.versions, version):
		return fmt.Errorf("unknown version %q of engine %s; want %s", version, e.name, listOf(e.versions, "or"))
	}
	return nil
}

func isRouter(e *engine) bool { return e.role == RoleRouter }
func isCache(e *engine) bool  { return e.role == RoleCache }

// enginesWith names the engines that have, for error messages: "engine a",
// "engines a, b and c".
func enginesWith(has func(e *engine) bool) string {
	names := engineNames(has)
	if len(names) == 1 {
		return "engine " + names[0]
	}
	return "engines " + listOf(names, "and")
}

// listOf joins names as prose: "a", "a or b", "a, b and c".
func listOf(names []string, conj string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// fastAPINotFound is what the Python servers (SGLang, vLLM) answer on
// /metrics with metrics off: FastAPI's 404.
func fastAPINotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"detail":"Not Found"}`))
}
