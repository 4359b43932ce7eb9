package discovery

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/kvwatch/kvwatch/internal/config"
)

// The labels kvwatch reads from a discovered target after relabeling,
// beside Prometheus' __address__, __scheme__ and __metrics_path__. Every
// other label, and every __meta_ label, is dropped.
const (
	LabelRole   = "role"   // prefill, decode, unified, router or cache; "": the engine's
	LabelEngine = "engine" // forces an adapter; "": detected
	LabelName   = "name"   // the server's name; "": host:port
)

// Reasons a discovered target is not scraped (the reason label of
// kvwatch_discovery_dropped_targets).
const (
	ReasonRelabeled = "relabeled"  // relabel_configs dropped it: what they are for
	ReasonInvalid   = "invalid"    // an address, scheme, role or engine kvwatch cannot use
	ReasonDuplicate = "duplicate"  // another target has its name
	ReasonOverLimit = "over_limit" // its entry's update had more than target_limit targets
)

// dropReasons are the reasons, in the order they are reported.
var dropReasons = []string{ReasonRelabeled, ReasonInvalid, ReasonDuplicate, ReasonOverLimit}

// Set is what one SD entry yields from its target groups.
type Set struct {
	// Name is the entry, as config problems name it:
	// kubernetes_sd_configs[0].
	Name string
	// Targets are the targets to scrape, by name.
	Targets []config.Target
	// Dropped counts the targets not scraped, by reason.
	Dropped map[string]int
	// Invalid says, for a few targets dropped as invalid, why.
	Invalid []string
}

// maxExamples bounds the invalid targets a Set explains.
const maxExamples = 5

// relabelTargets turns one entry's target groups into kvwatch targets,
// as a Prometheus scrape_config does: each target's labels with its
// group's under them, __scheme__ http unless set, relabel_configs, then
// __address__, __scheme__, __metrics_path__ and kvwatch's target labels
// read from what is left. Targets take the global interval, timeout,
// limits and labels (a discovered cluster, pool or model wins); engines
// checks an engine name (nil accepts any).
func relabelTargets(set string, sd *config.SDTargets, g *config.Global, groups []*targetgroup.Group, engines func(string) error) Set {
	out := Set{Name: set, Dropped: map[string]int{}}
	lb := labels.NewBuilder(labels.EmptyLabels())
	for _, tg := range groups {
		for _, tl := range tg.Targets {
			lb.Reset(labels.EmptyLabels())
			for k, v := range tg.Labels {
				lb.Set(string(k), string(v))
			}
			for k, v := range tl {
				lb.Set(string(k), string(v))
			}
			if lb.Get(model.SchemeLabel) == "" {
				lb.Set(model.SchemeLabel, "http")
			}
			if !relabel.ProcessBuilder(lb, sd.RelabelConfigs...) {
				out.Dropped[ReasonRelabeled]++
				continue
			}
			t, err := target(lb, g, engines)
			if err != nil {
				out.Dropped[ReasonInvalid]++
				if len(out.Invalid) < maxExamples {
					out.Invalid = append(out.Invalid, err.Error())
				}
				continue
			}
			out.Targets = append(out.Targets, t)
		}
	}
	slices.SortFunc(out.Targets, func(a, b config.Target) int { return strings.Compare(a.Name, b.Name) })
	// The same target twice (a pod's ports all relabeled to one address)
	// is one target, as in Prometheus.
	out.Targets = slices.CompactFunc(out.Targets, func(a, b config.Target) bool { return reflect.DeepEqual(a, b) })
	return out
}

// target makes a kvwatch target of a discovered target's labels after
// relabeling.
func target(lb *labels.Builder, g *config.Global, engines func(string) error) (config.Target, error) {
	addr := lb.Get(model.AddressLabel)
	if addr == "" {
		return config.Target{}, fmt.Errorf("a target has no %s after relabeling; relabel_configs must keep or set it", model.AddressLabel)
	}
	scheme := lb.Get(model.SchemeLabel)
	if scheme != "http" && scheme != "https" {
		return config.Target{}, fmt.Errorf("%s: %s %q: want http or https", addr, model.SchemeLabel, scheme)
	}
	if strings.ContainsAny(addr, "/?#@") {
		return config.Target{}, fmt.Errorf("%s %q: want host:port (set the path with %s)", model.AddressLabel, addr, model.MetricsPathLabel)
	}
	path := lb.Get(model.MetricsPathLabel)
	if path != "" && !strings.HasPrefix(path, "/") {
		return config.Target{}, fmt.Errorf("%s: %s %q: want a path starting with /", addr, model.MetricsPathLabel, path)
	}
	raw := scheme + "://" + addr + path
	u, err := config.ParseTargetURL(raw)
	if err != nil {
		return config.Target{}, fmt.Errorf("%s: %w", addr, err)
	}
	role := lb.Get(LabelRole)
	if role != "" && !slices.Contains(config.Roles, role) {
		return config.Target{}, fmt.Errorf("%s: role %q: want one of %s (map the platform's roles with relabel_configs)", addr, role, strings.Join(config.Roles, ", "))
	}
	eng := lb.Get(LabelEngine)
	if eng != "" && engines != nil {
		if err := engines(eng); err != nil {
			return config.Target{}, fmt.Errorf("%s: %w", addr, err)
		}
	}
	kvUnified, err := config.ParseKVUnified(lb.Get(config.LabelKVUnified))
	if err != nil {
		return config.Target{}, fmt.Errorf("%s: %w", addr, err)
	}
	name := lb.Get(LabelName)
	if name == "" {
		name = u.Host
	}
	t := config.Target{Name: name, URL: raw, Role: role, Engine: eng, KVUnified: kvUnified, Labels: maps.Clone(g.Labels),
		ScrapeInterval: g.ScrapeInterval, ScrapeTimeout: g.ScrapeTimeout}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	for _, k := range config.TargetLabels {
		if v := lb.Get(k); v != "" {
			t.Labels[k] = v
		}
	}
	return t, nil
}
