package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Setup is a validated configuration: the config file and every target to
// scrape, from the config file, the command line and file_sd files.
type Setup struct {
	// Config is the parsed config file (defaults applied).
	Config *config.Config
	// Targets are every target, config file and command line first, then
	// file_sd targets in file name order.
	Targets []*scrape.Target
	// FileSDTargets is how many of Targets came from file_sd files.
	FileSDTargets int

	file  string
	extra []config.Target
	// sdFiles maps each file_sd file read to its modification time.
	sdFiles map[string]time.Time
}

// LoadSetup reads the config file (none when file is ""), adds the extra
// targets (from the command line), reads the file_sd files and checks
// everything serve needs, reporting every problem at once with its line.
// A nil reg means engine.NewRegistry().
// `kvwatch check config` and serve (at start and on every reload) both call
// it, so they accept exactly the same files. reg checks engine names.
func LoadSetup(file string, extra []config.Target, reg *engine.Registry) (*Setup, error) {
	var cfg *config.Config
	if file != "" {
		c, err := config.Load(file)
		if err != nil {
			return nil, err
		}
		cfg = c
	} else {
		cfg = config.Default()
	}
	name := file
	if len(extra) > 0 {
		cfg.Targets = append(cfg.Targets, extra...)
		if name == "" {
			name = "command line"
		}
		if err := cfg.Check(name); err != nil {
			return nil, err
		}
	}
	return buildSetup(cfg, name, file, extra, reg)
}

// SetupFromConfig checks a config built in code (e.g. by `kvwatch demo`);
// file_sd files it names are read like LoadSetup's.
func SetupFromConfig(cfg *config.Config, reg *engine.Registry) (*Setup, error) {
	if err := cfg.Check("config"); err != nil {
		return nil, err
	}
	return buildSetup(cfg, "config", "", nil, reg)
}

func buildSetup(cfg *config.Config, name, file string, extra []config.Target, reg *engine.Registry) (*Setup, error) {
	if reg == nil {
		reg = engine.NewRegistry()
	}
	e := &config.Error{File: name}
	var root *yaml.Node
	if file != "" {
		if b, err := os.ReadFile(file); err == nil {
			var n yaml.Node
			if yaml.Unmarshal(b, &n) == nil {
				root = &n
			}
		}
	}
	for i, t := range cfg.Targets {
		if t.Engine == "" {
			continue
		}
		if _, err := reg.ByName(t.Engine); err != nil {
			e.Problems = append(e.Problems, atLine(root, []any{"targets", i, "engine"}, fmt.Sprintf("targets[%d].engine: %v", i, err)))
		}
	}
	sd, files, problems := readFileSD(cfg, reg, root)
	e.Problems = append(e.Problems, problems...)
	names := map[string]bool{}
	for _, t := range cfg.Targets {
		names[t.Name] = true
	}
	all := *cfg
	all.Targets = slices.Clone(cfg.Targets)
	for _, t := range sd {
		if names[t.target.Name] {
			e.Problems = append(e.Problems, fmt.Sprintf("%s: line %d: target %s is already defined; each target must appear once", t.file, t.line, t.target.Name))
			continue
		}
		names[t.target.Name] = true
		all.Targets = append(all.Targets, t.target)
	}
	if len(e.Problems) > 0 {
		return nil, e
	}
	targets, err := scrape.Targets(&all)
	if err != nil {
		e.Problems = append(e.Problems, err.Error())
		return nil, e
	}
	return &Setup{Config: cfg, Targets: targets, FileSDTargets: len(all.Targets) - len(cfg.Targets),
		file: file, extra: extra, sdFiles: files}, nil
}

// atLine prefixes msg with the line of the node at path in root, if found.
func atLine(root *yaml.Node, path []any, msg string) string {
	if line := config.LineOf(root, path); line > 0 {
		return fmt.Sprintf("line %d: %s", line, msg)
	}
	return msg
}

// sdTarget is one target read from a file_sd file.
type sdTarget struct {
	file   string
	line   int
	target config.Target
}

// file_sd labels kvwatch understands; other labels are ignored, so the same
// files can feed Prometheus.
const (
	sdMetricsPath = "__metrics_path__"
	sdScheme      = "__scheme__"
	sdRole        = "role"
	sdEngine      = "engine"
)

var sdRoles = []string{"prefill", "decode", "unified", "router"}

// readFileSD reads every file matched by the config's file_sd patterns.
func readFileSD(cfg *config.Config, reg *engine.Registry, root *yaml.Node) ([]sdTarget, map[string]time.Time, []string) {
	var out []sdTarget
	var problems []string
	files := map[string]time.Time{}
	for i, f := range cfg.FileSD {
		for j, pat := range f.Files {
			matches, err := filepath.Glob(pat)
			if err != nil {
				problems = append(problems, atLine(root, []any{"file_sd_configs", i, "files", j}, fmt.Sprintf("file_sd_configs[%d].files[%d]: bad pattern %q: %v", i, j, pat, err)))
				continue
			}
			if len(matches) == 0 && !strings.ContainsAny(pat, "*?[") {
				problems = append(problems, atLine(root, []any{"file_sd_configs", i, "files", j}, fmt.Sprintf("file_sd_configs[%d].files[%d]: %s does not exist; create it or use a glob pattern that may match nothing yet", i, j, pat)))
				continue
			}
			sort.Strings(matches)
			for _, m := range matches {
				if _, seen := files[m]; seen {
					continue
				}
				st, err := os.Stat(m)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: %v", m, err))
					continue
				}
				files[m] = st.ModTime()
				ts, ps := readSDFile(m, cfg, &cfg.FileSD[i], reg)
				out = append(out, ts...)
				problems = append(problems, ps...)
			}
		}
	}
	return out, files, problems
}

// readSDFile reads one Prometheus file_sd file (JSON or YAML): a list of
// {targets: [host:port...], labels: {...}} groups, scraped with sd's
// scheme, auth and TLS. A file matched by several file_sd_configs entries
// is read once, with the first entry's.
func readSDFile(path string, cfg *config.Config, sd *config.FileSD, reg *engine.Registry) ([]sdTarget, []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	var problems []string
	add := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: line %d: %s", path, line, fmt.Sprintf(format, args...)))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, []string{fmt.Sprintf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file lists no targets
	}
	root := doc.Content[0]
	if root.Kind != yaml.SequenceNode {
		add(root.Line, "want a list of {targets: [...], labels: {...}} groups, as Prometheus file_sd reads")
		return nil, problems
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
			k, v := g.Content[i], g.Content[i+1]
			switch k.Value {
			case "targets":
				if v.Kind != yaml.SequenceNode {
					add(v.Line, "targets: want a list of host:port")
					continue
				}
				addrs = v.Content
			case "labels":
				if v.Kind != yaml.MappingNode {
					add(v.Line, "labels: want a map of label names to values")
					continue
				}
				for j := 0; j+1 < len(v.Content); j += 2 {
					labels[v.Content[j].Value] = v.Content[j+1].Value
					labelLine[v.Content[j].Value] = v.Content[j].Line
				}
			default:
				add(k.Line, "unknown key %q; a group has targets and labels", k.Value)
			}
		}
		scheme := labels[sdScheme]
		if scheme == "" {
			scheme = sd.Scheme
		}
		if scheme == "" {
			scheme = "http"
		}
		if scheme != "http" && scheme != "https" {
			add(labelLine[sdScheme], "%s %q: want http or https", sdScheme, scheme)
			continue
		}
		if r := labels[sdRole]; r != "" && !slices.Contains(sdRoles, r) {
			add(labelLine[sdRole], "unknown role %q; want one of %s", r, strings.Join(sdRoles, ", "))
			continue
		}
		if en := labels[sdEngine]; en != "" {
			if _, err := reg.ByName(en); err != nil {
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
			u, err := config.ParseTargetURL(raw)
			if err != nil {
				add(a.Line, "%v", err)
				continue
			}
			t := config.Target{Name: u.Host, URL: raw, Role: labels[sdRole], Engine: labels[sdEngine],
				Labels: map[string]string{}, ScrapeInterval: cfg.Global.ScrapeInterval, ScrapeTimeout: cfg.Global.ScrapeTimeout,
				HTTPClientConfig: sd.HTTPClientConfig}
			for k, v := range cfg.Global.Labels {
				t.Labels[k] = v
			}
			for _, k := range []string{"cluster", "pool", "model"} {
				if v, ok := labels[k]; ok {
					t.Labels[k] = v
				}
			}
			out = append(out, sdTarget{file: path, line: a.Line, target: t})
		}
	}
	return out, problems
}

// sdChanged reports whether the file_sd files matched now differ from those
// read into s (added, removed or modified).
func (s *Setup) sdChanged() bool {
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

// refreshFileSD re-reads the file_sd files with the same config.
func (s *Setup) refreshFileSD(reg *engine.Registry) (*Setup, error) {
	name := s.file
	if name == "" {
		name = "config"
	}
	return buildSetup(s.Config, name, s.file, s.extra, reg)
}
