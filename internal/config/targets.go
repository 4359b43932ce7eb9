package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Sources says where the targets of one run of kvwatch come from. Every
// face (status, top, serve, check config) assembles its targets with
// LoadTargets, so they accept exactly the same files and list exactly the
// same targets.
type Sources struct {
	// File is the config file; empty: Config, else Default().
	File string
	// Config is a config built in code (e.g. by `kvwatch demo`), used when
	// File is empty. It is not modified.
	Config *Config
	// Extra are targets added after the file's (from the command line);
	// zero durations inherit the global ones.
	Extra []Target
	// Engines checks an engine name (engine: keys, --engine, file_sd engine
	// labels), returning an error that lists the known ones; nil accepts any.
	Engines func(name string) error

	// Engine, when set, forces this adapter on every target (--engine).
	Engine string
	// ScrapeTimeout, when set, replaces every target's (--scrape.timeout).
	ScrapeTimeout time.Duration
	// HeadroomTokens, when set, replaces global.headroom_tokens (--headroom).
	HeadroomTokens []int
}

// Setup is a validated configuration and every target to scrape.
type Setup struct {
	// Config is the config (defaults applied); its Targets are the config
	// file's and the extra ones, without file_sd targets.
	Config *Config
	// Targets are every target: the config file's, the extra ones, then
	// file_sd targets in file name order.
	Targets []Target
	// FileSDTargets is how many of Targets came from file_sd files.
	FileSDTargets int

	src     Sources
	name    string
	root    *yaml.Node
	sdFiles map[string]time.Time // each file_sd file read, with its modification time
}

// LoadTargets reads the config (file or code), adds the extra targets,
// applies the overrides, reads the file_sd files and validates everything,
// reporting every problem at once, each with its line.
func LoadTargets(src Sources) (*Setup, error) {
	s := &Setup{src: src, name: src.File}
	var f *file
	switch {
	case src.File != "":
		var err error
		if f, err = readFile(src.File); err != nil {
			return nil, err
		}
	case src.Config != nil:
		c := *src.Config
		c.Targets = slices.Clone(c.Targets)
		for i := range c.Targets {
			c.Targets[i].Labels = maps.Clone(c.Targets[i].Labels)
		}
		c.FileSD = slices.Clone(c.FileSD)
		c.KubernetesSD = slices.Clone(c.KubernetesSD)
		c.DNSSD = slices.Clone(c.DNSSD)
		c.HTTPSD = slices.Clone(c.HTTPSD)
		c.codeDefaults()
		f = &file{cfg: &c}
		s.name = "config"
	default:
		f = &file{cfg: Default()}
	}
	if len(src.Extra) > 0 && s.name == "" {
		s.name = "command line"
	}
	s.root = f.root
	v := &validator{root: f.root, problems: f.problems, dir: f.dir}
	if c := f.cfg; c != nil {
		extra := slices.Clone(src.Extra)
		for i := range extra {
			extra[i].Labels = maps.Clone(extra[i].Labels)
		}
		markUnset(extra)
		c.Targets = append(c.Targets, extra...)
		src.override(c)
		c.resolve()
		c.validate(v, src.Engines)
		if len(v.problems) == 0 {
			c.inheritLabels()
		}
		s.Config = c
		s.readFileSD(v) // in the same pass: every problem at once
	}
	if len(v.problems) > 0 {
		return nil, &Error{File: s.name, Problems: v.problems}
	}
	return s, nil
}

// override applies the command line's overrides to c.
func (src Sources) override(c *Config) {
	for i := range c.Targets {
		if src.Engine != "" {
			c.Targets[i].Engine = src.Engine
		}
	}
	if src.ScrapeTimeout > 0 {
		d := model.Duration(src.ScrapeTimeout)
		c.Global.ScrapeTimeout = d
		for i := range c.Targets {
			c.Targets[i].ScrapeTimeout = d
		}
	}
	if src.HeadroomTokens != nil {
		c.Global.HeadroomTokens = slices.Clone(src.HeadroomTokens)
	}
}

// Refresh re-reads the file_sd files with the same config and extra
// targets (the config file is not re-read: that is a reload).
func (s *Setup) Refresh() (*Setup, error) {
	n := &Setup{Config: s.Config, src: s.src, name: s.name, root: s.root}
	if n.name == "" {
		n.name = "config"
	}
	v := &validator{root: s.root}
	n.readFileSD(v)
	if len(v.problems) > 0 {
		return nil, &Error{File: n.name, Problems: v.problems}
	}
	return n, nil
}

// FileSDChanged reports whether the file_sd files matched now differ from
// those read into s (added, removed or modified).
func (s *Setup) FileSDChanged() bool {
	seen := map[string]bool{}
	for _, f := range s.Config.FileSD {
		for _, pat := range f.Files {
			matches, _ := filepath.Glob(pat)
			for _, m := range matches {
				st, err := os.Stat(m)
				old, ok := s.sdFiles[m]
				if err != nil || !ok || !st.ModTime().Equal(old) {
					return true
				}
				seen[m] = true
			}
		}
	}
	return len(seen) != len(s.sdFiles)
}

// file_sd labels kvwatch understands; other labels are ignored, so the same
// files can feed Prometheus.
const (
	sdMetricsPath = "__metrics_path__"
	sdScheme      = "__scheme__"
	sdRole        = "role"
	sdEngine      = "engine"
	sdKVUnified   = LabelKVUnified
)

// readFileSD reads every file matched by the config's file_sd patterns and
// sets s.Targets, recording problems in v.
func (s *Setup) readFileSD(v *validator) {
	cfg := s.Config
	s.Targets = slices.Clone(cfg.Targets)
	s.sdFiles = map[string]time.Time{}
	names := map[string]bool{}
	for _, t := range cfg.Targets {
		names[t.Name] = true
	}
	for i, f := range cfg.FileSD {
		for j, pat := range f.Files {
			matches, err := filepath.Glob(pat)
			if err != nil {
				v.addf([]any{"file_sd_configs", i, "files", j}, "bad pattern %q: %v", pat, err)
				continue
			}
			if len(matches) == 0 && !strings.ContainsAny(pat, "*?[") {
				v.addf([]any{"file_sd_configs", i, "files", j}, "%s does not exist; create it or use a glob pattern that may match nothing yet", pat)
				continue
			}
			sort.Strings(matches)
			for _, m := range matches {
				if _, seen := s.sdFiles[m]; seen {
					continue
				}
				st, err := os.Stat(m)
				if err != nil {
					v.problems = append(v.problems, fmt.Sprintf("%s: %v", m, err))
					continue
				}
				s.sdFiles[m] = st.ModTime()
				for _, t := range s.readSDFile(m, &cfg.FileSD[i], v) {
					if names[t.target.Name] {
						v.problems = append(v.problems, fmt.Sprintf("%s: line %d: target %s is already defined; each target must appear once", t.file, t.line, t.target.Name))
						continue
					}
					names[t.target.Name] = true
					s.Targets = append(s.Targets, t.target)
				}
			}
		}
	}
	s.FileSDTargets = len(s.Targets) - len(cfg.Targets)
}

// sdTarget is one target read from a file_sd file.
type sdTarget struct {
	file   string
	line   int
	target Target
}

// readSDFile reads one Prometheus file_sd file (JSON or YAML): a list of
// {targets: [host:port...], labels: {...}} groups, scraped with sd's
// scheme, auth and TLS. A file matched by several file_sd_configs entries
// is read once, with the first entry's.
func (s *Setup) readSDFile(path string, sd *FileSD, v *validator) []sdTarget {
	cfg := s.Config
	b, err := os.ReadFile(path)
	if err != nil {
		v.problems = append(v.problems, fmt.Sprintf("%s: %v", path, err))
		return nil
	}
	add := func(line int, format string, args ...any) {
		v.problems = append(v.problems, fmt.Sprintf("%s: line %d: %s", path, line, fmt.Sprintf(format, args...)))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		v.problems = append(v.problems, fmt.Sprintf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: ")))
		return nil
	}
	if len(doc.Content) == 0 {
		return nil // an empty file lists no targets
	}
	root := doc.Content[0]
	if root.Kind != yaml.SequenceNode {
		add(root.Line, "want a list of {targets: [...], labels: {...}} groups, as Prometheus file_sd reads")
		return nil
	}
	var out []sdTarget
	for _, g := range root.Content {
		if g.Kind != yaml.MappingNode {
			add(g.Line, "want a {targets: [...], labels: {...}} group")
			continue
		}
		var addrs []*yaml.Node
		labels := map[string]string{}
		labelLine := map[string]int{}
		for i := 0; i+1 < len(g.Content); i += 2 {
			k, val := g.Content[i], g.Content[i+1]
			switch k.Value {
			case "targets":
				if val.Kind != yaml.SequenceNode {
					add(val.Line, "targets: want a list of host:port")
					continue
				}
				addrs = val.Content
			case "labels":
				if val.Kind != yaml.MappingNode {
					add(val.Line, "labels: want a map of label names to values")
					continue
				}
				for j := 0; j+1 < len(val.Content); j += 2 {
					labels[val.Content[j].Value] = val.Content[j+1].Value
					labelLine[val.Content[j].Value] = val.Content[j].Line
				}
			default:
				add(k.Line, "unknown key %q; a group has targets and labels", k.Value)
			}
		}
		scheme := labels[sdScheme]
		if scheme == "" {
			scheme = sd.Scheme
		}
		if scheme != "http" && scheme != "https" {
			add(labelLine[sdScheme], "%s %q: want http or https", sdScheme, scheme)
			continue
		}
		if r := labels[sdRole]; r != "" && !slices.Contains(Roles, r) {
			add(labelLine[sdRole], "unknown role %q; want one of %s", r, strings.Join(Roles, ", "))
			continue
		}
		kvUnified, err := ParseKVUnified(labels[sdKVUnified])
		if err != nil {
			add(labelLine[sdKVUnified], "%v", err)
			continue
		}
		engine := labels[sdEngine]
		if s.src.Engine != "" {
			engine = s.src.Engine // --engine forces every target's adapter
		} else if engine != "" && s.src.Engines != nil {
			if err := s.src.Engines(engine); err != nil {
				add(labelLine[sdEngine], "%v", err)
				continue
			}
		}
		for _, a := range addrs {
			if a.Kind != yaml.ScalarNode || a.Value == "" || strings.Contains(a.Value, "/") {
				add(a.Line, "target %q: want host:port (set the path with the %s label)", a.Value, sdMetricsPath)
				continue
			}
			raw := scheme + "://" + a.Value + labels[sdMetricsPath]
			u, err := ParseTargetURL(raw)
			if err != nil {
				add(a.Line, "%v", err)
				continue
			}
			t := Target{Name: u.Host, URL: raw, Role: labels[sdRole], Engine: engine, KVUnified: kvUnified,
				Labels: map[string]string{}, ScrapeInterval: cfg.Global.ScrapeInterval, ScrapeTimeout: cfg.Global.ScrapeTimeout,
				HTTPClientConfig: sd.HTTPClientConfig}
			for k, val := range cfg.Global.Labels {
				t.Labels[k] = val
			}
			for _, k := range TargetLabels {
				if val, ok := labels[k]; ok {
					t.Labels[k] = val
				}
			}
			out = append(out, sdTarget{file: path, line: a.Line, target: t})
		}
	}
	return out
}

// LabelKVUnified is the discovered (file_sd, service discovery) target
// label that sets a target's kv_unified: "true" or "false".
const LabelKVUnified = "kv_unified"

// ParseKVUnified reads a kv_unified label: nil for "" (not said).
func ParseKVUnified(v string) (*bool, error) {
	switch v {
	case "":
		return nil, nil
	case "true", "false":
		return new(v == "true"), nil
	}
	return nil, fmt.Errorf("%s %q: want true or false (whether a llama.cpp server's slots share one KV cache)", LabelKVUnified, v)
}
