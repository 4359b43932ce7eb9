package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/dns"
	"github.com/prometheus/prometheus/discovery/http"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v3"
)

// Service discovery: kubernetes_sd_configs, dns_sd_configs and
// http_sd_configs entries are Prometheus' own SD configs, decoded by
// Prometheus' code (its defaults and checks), with the keys kvwatch adds
// (SDTargets). Package discovery runs them; file_sd_configs stays
// kvwatch's own (targets.go).

// KubernetesSD is one kubernetes_sd_configs entry.
type KubernetesSD struct {
	// Config is Prometheus' kubernetes_sd_config: role, api_server or
	// kubeconfig_file (neither: in-cluster), namespaces, selectors,
	// attach_metadata and the API server's HTTP client keys.
	Config    kubernetes.SDConfig `yaml:",inline"`
	SDTargets `yaml:",inline"`
}

// DNSSD is one dns_sd_configs entry.
type DNSSD struct {
	// Config is Prometheus' dns_sd_config: names, type, port,
	// refresh_interval.
	Config    dns.SDConfig `yaml:",inline"`
	SDTargets `yaml:",inline"`
}

// HTTPSD is one http_sd_configs entry.
type HTTPSD struct {
	// Config is Prometheus' http_sd_config: url, refresh_interval and the
	// HTTP client keys of the request for the target list.
	Config    http.SDConfig `yaml:",inline"`
	SDTargets `yaml:",inline"`
}

// SDTargets are the keys every service discovery entry adds to
// Prometheus' own: how the targets it finds become kvwatch's.
type SDTargets struct {
	// RelabelConfigs rewrite each discovered target's labels, as a
	// Prometheus scrape_config's relabel_configs do, before kvwatch reads
	// __address__, __scheme__, __metrics_path__ and its target labels
	// (role, engine, cluster, pool, model, name) from them.
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs"`
	// TargetLimit bounds the targets the entry may add after relabeling;
	// a set over it is refused whole and the entry keeps the targets it
	// had (a selector that matches every pod of a cluster is a mistake,
	// not a fleet). Default DefaultSDTargetLimit.
	TargetLimit int `yaml:"target_limit"`

	// problems are what decoding the entry said (Prometheus' checks of
	// its SD config among them); validate reports them with their lines.
	problems []sdProblem
}

// sdProblem is a problem found while decoding an SD entry, at path under
// the entry (nil: the entry itself).
type sdProblem struct {
	path []any
	err  error
}

// DefaultSDTargetLimit is target_limit's default: serve is measured with
// 5,000 discovered targets (docs/benchmarks.md).
const DefaultSDTargetLimit = 5000

// SDRoles are the kubernetes_sd_configs roles kvwatch takes: those whose
// targets are engine pods (node and ingress roles list machines and
// routes, not engines).
var SDRoles = []kubernetes.Role{kubernetes.RolePod, kubernetes.RoleEndpoint, kubernetes.RoleEndpointSlice, kubernetes.RoleService}

// defaultSDTargets is what every SD entry starts from.
func defaultSDTargets() SDTargets { return SDTargets{TargetLimit: DefaultSDTargetLimit} }

func defaultKubernetesSD() KubernetesSD {
	return KubernetesSD{Config: kubernetes.DefaultSDConfig, SDTargets: defaultSDTargets()}
}

func defaultDNSSD() DNSSD { return DNSSD{Config: dns.DefaultSDConfig, SDTargets: defaultSDTargets()} }

func defaultHTTPSD() HTTPSD {
	return HTTPSD{Config: http.DefaultSDConfig, SDTargets: defaultSDTargets()}
}

// UnmarshalYAML decodes the entry's Prometheus keys with Prometheus' code
// and the rest onto SDTargets. It fails only on what is not a mapping;
// Prometheus' verdict waits in decodeErr for validate, so that every
// problem of the file is reported at once, each with its line.
func (k *KubernetesSD) UnmarshalYAML(n *yaml.Node) error {
	rest, err := k.SDTargets.split(n)
	if err != nil {
		return err
	}
	noRole := nodeAt(rest, []any{"role"}) == nil
	if noRole {
		// Prometheus stops at a missing role, and its text lists roles
		// kvwatch does not take: check the rest with a role, and say so.
		rest.Content = append(rest.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "role"},
			&yaml.Node{Kind: yaml.ScalarNode, Value: string(kubernetes.RolePod)})
	}
	if noRole { // first: the rules' problems are already in
		k.problems = slices.Insert(k.problems, 0, sdProblem{err: fmt.Errorf("role is missing; write one of %s", sdRoleList())})
	}
	k.decodeSD(rest, &k.Config)
	if noRole {
		k.Config.Role = ""
	}
	return nil
}

// UnmarshalYAML: see KubernetesSD.UnmarshalYAML.
func (d *DNSSD) UnmarshalYAML(n *yaml.Node) error { return d.SDTargets.decode(n, &d.Config) }

// UnmarshalYAML: see KubernetesSD.UnmarshalYAML.
func (h *HTTPSD) UnmarshalYAML(n *yaml.Node) error { return h.SDTargets.decode(n, &h.Config) }

// decode decodes n's SDTargets keys onto s and the rest into sd (a
// Prometheus SD config, whose own decoder sets its defaults and checks
// it).
func (s *SDTargets) decode(n *yaml.Node, sd any) error {
	rest, err := s.split(n)
	if err != nil {
		return err
	}
	s.decodeSD(rest, sd)
	return nil
}

// decodeSD decodes rest into sd with sd's own decoder. A bad duration is
// left to unknownKeys, which says where it is.
func (s *SDTargets) decodeSD(rest *yaml.Node, sd any) {
	err := rest.Decode(sd)
	if err == nil || unknownKeys(rest, reflect.TypeOf(sd).Elem()).badDurations {
		return
	}
	s.problems = append(s.problems, sdProblem{err: yamlError(err)})
}

// split decodes the SDTargets keys of the mapping n onto s (their
// problems into decodeErr) and returns the mapping of the other keys.
func (s *SDTargets) split(n *yaml.Node) (*yaml.Node, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of keys", n.Line)
	}
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "target_limit":
			if err := val.Decode(&s.TargetLimit); err != nil {
				s.problems = append(s.problems, sdProblem{[]any{k}, yamlError(err)})
			}
		case "relabel_configs":
			s.decodeRules(val)
		default:
			rest.Content = append(rest.Content, n.Content[i], val)
		}
	}
	return rest, nil
}

// decodeRules decodes relabel_configs rule by rule, so that a problem is
// reported at its rule.
func (s *SDTargets) decodeRules(n *yaml.Node) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.SequenceNode {
		s.problems = append(s.problems, sdProblem{[]any{"relabel_configs"}, errors.New("want a list of rules, as in a Prometheus scrape_config")})
		return
	}
	s.RelabelConfigs = make([]*relabel.Config, len(n.Content))
	for j, r := range n.Content {
		rc := &relabel.Config{}
		if err := r.Decode(rc); err != nil {
			s.problems = append(s.problems, sdProblem{[]any{"relabel_configs", j}, yamlError(err)})
			continue
		}
		s.RelabelConfigs[j] = rc
	}
}

// yamlError drops the "yaml: " of a decoding error and keeps its lines.
func yamlError(err error) error {
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

func sdRoleList() string {
	names := make([]string, len(SDRoles))
	for i, r := range SDRoles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// validateDiscovery checks the SD entries: Prometheus' verdict, the roles
// kvwatch takes, the files they name, their HTTP client settings, their
// relabel_configs and target limits.
func (c *Config) validateDiscovery(v *validator) {
	for i := range c.KubernetesSD {
		k := &c.KubernetesSD[i]
		at := []any{"kubernetes_sd_configs", i}
		k.SDTargets.validate(v, at)
		if r := k.Config.Role; r != "" && !slices.Contains(SDRoles, r) {
			v.addf(append(at, "role"), "kvwatch discovers engines by role %s, not %s", sdRoleList(), r)
		}
		if f := k.Config.KubeConfig; f != "" && !v.skipFiles {
			if _, err := os.Stat(f); err != nil {
				v.addf(append(at, "kubeconfig_file"), "cannot read %s: %v; fix the path (relative paths are from the config file's directory), or leave it out to use the pod's service account", f, errors.Unwrap(err))
			}
		}
		checkHTTPFiles(v, at, &k.Config.HTTPClientConfig) // Prometheus' decoder validated the rest
	}
	for i := range c.DNSSD {
		c.DNSSD[i].SDTargets.validate(v, []any{"dns_sd_configs", i})
	}
	for i := range c.HTTPSD {
		h := &c.HTTPSD[i]
		at := []any{"http_sd_configs", i}
		h.SDTargets.validate(v, at)
		checkHTTPFiles(v, at, &h.Config.HTTPClientConfig) // Prometheus' decoder validated the rest
	}
}

// RelabelScheme is how relabel_configs check label names: Prometheus 3's
// default.
const RelabelScheme = model.UTF8Validation

func (s *SDTargets) validate(v *validator, at []any) {
	for _, p := range s.problems {
		v.addf(append(slices.Clone(at), p.path...), "%v", p.err)
	}
	for j, rc := range s.RelabelConfigs {
		if rc == nil {
			continue // not decoded: a problem above
		}
		if err := rc.Validate(RelabelScheme); err != nil {
			v.addf(append(at, "relabel_configs", j), "%v", err)
		}
	}
	if s.TargetLimit <= 0 {
		v.addf(append(at, "target_limit"), "%d must be positive; raise it to allow more targets", s.TargetLimit)
	}
}

// resolveDiscoveryPaths makes the files the SD entries name relative to dir.
func (c *Config) resolveDiscoveryPaths(dir string) {
	for i := range c.KubernetesSD {
		c.KubernetesSD[i].Config.SetDirectory(dir)
	}
	for i := range c.HTTPSD {
		c.HTTPSD[i].Config.SetDirectory(dir)
	}
}

// HasDiscovery reports whether c has service discovery entries
// (kubernetes, dns or http; file_sd is read by LoadTargets).
func (c *Config) HasDiscovery() bool {
	return len(c.KubernetesSD)+len(c.DNSSD)+len(c.HTTPSD) > 0
}
