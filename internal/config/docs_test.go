package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	promcfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"
)

// TestDocsDefaults compares the default column of docs/configuration.md's
// key tables with the defaults the file is decoded onto (Default(), and
// each list entry's: defaultTarget, defaultFileSD, DefaultRemoteWrite), key
// by key, so that a default changed in code without the docs fails, and
// checks that every key has a row.
//
// A default written as one literal (`5s`, `0.90`, `[8192]`, `true`,
// optionally followed by a remark in parentheses) is decoded as the file
// would decode it and must equal the default. Any other text ("none",
// "required", "the engine's own", a reference such as
// `global.scrape_interval`) says the value comes from elsewhere: the
// default must then be unset (zero, or inherited).
func TestDocsDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	limits := reflect.ValueOf(DefaultLimits())
	sections := map[string]reflect.Value{ // heading: the value of its keys
		"`global`":                  reflect.ValueOf(d.Global),
		"`targets[]`":               reflect.ValueOf(defaultTarget()),
		"`file_sd_configs[]`":       reflect.ValueOf(defaultFileSD()),
		"`probe`":                   reflect.ValueOf(d.Probe),
		"`alerts`":                  reflect.ValueOf(d.Alerts),
		"`history`":                 reflect.ValueOf(d.History),
		"`alerting`":                reflect.ValueOf(d.Alerting),
		"`autoscaling`":             reflect.ValueOf(d.Autoscaling),
		"`autoscaling.workloads[]`": reflect.ValueOf(defaultScaledWorkload()),
		"`remote_write[]`":          reflect.ValueOf(DefaultRemoteWrite()),
		"`kubernetes_sd_configs[]`": reflect.ValueOf(defaultKubernetesSD()),
		"`dns_sd_configs[]`":        reflect.ValueOf(defaultDNSSD()),
		"`http_sd_configs[]`":       reflect.ValueOf(defaultHTTPSD()),
		"Limits":                    limits,
	}
	documented := map[string][]string{} // heading: the keys of its table
	tick := regexp.MustCompile("`([^`]*)`")
	literal := regexp.MustCompile("^`([^`]*)`(?: \\(.*\\))?$")
	section, col := "", -1
	for i, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			section, col = h, -1
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section, col = "", -1
			continue
		}
		def, ok := sections[section]
		if !ok || !strings.HasPrefix(line, "|") {
			col = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if col < 0 { // the header row
			col = slices.IndexFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "default" })
			continue
		}
		if col == 0 || col >= len(cells) || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		var keys []string
		parent := ""
		for _, m := range tick.FindAllStringSubmatch(cells[0], -1) {
			k := m[1]
			if k == "..." {
				continue
			}
			if p, _, ok := strings.Cut(k, "."); ok {
				parent = p
			} else if parent != "" {
				k = parent + "." + k // `queue_config.min_backoff`, `max_backoff`
			}
			keys = append(keys, k)
		}
		parts := strings.Split(strings.TrimSpace(cells[col]), ", ")
		if len(parts) != len(keys) {
			parts = []string{strings.TrimSpace(cells[col])} // one text for every key
		}
		for j, k := range keys {
			documented[section] = append(documented[section], k)
			var v reflect.Value
			if section == "Limits" {
				n := slices.Index(LimitKeys, k)
				if n < 0 {
					t.Errorf("configuration.md:%d: %s is not a limit", i+1, k)
					continue
				}
				v = limits.Field(n)
			} else if v, ok = keyValue(def, k); !ok {
				t.Errorf("configuration.md:%d: %s has no key %s", i+1, section, k)
				continue
			}
			text := parts[min(j, len(parts)-1)]
			lit, isLit := "", false
			if m := literal.FindStringSubmatch(text); m != nil && !isKeyPath(m[1]) {
				lit, isLit = m[1], true
			}
			if err := checkDocDefault(v, lit, isLit); err != nil {
				t.Errorf("configuration.md:%d: %s %s: the docs say %s: %v", i+1, section, k, text, err)
			}
		}
	}
	httpKeys := map[string]reflect.Type{}
	yamlFields(reflect.TypeOf(promcfg.HTTPClientConfig{}), httpKeys)
	for section, def := range sections {
		var want []string
		if section == "Limits" {
			want = LimitKeys
		} else {
			want = ownKeys(def.Type(), "", httpKeys)
		}
		for _, k := range want {
			if !slices.Contains(documented[section], k) {
				t.Errorf("configuration.md: %s has no row for %s", section, k)
			}
		}
	}
	top := map[string]reflect.Type{}
	yamlFields(reflect.TypeOf(Config{}), top)
	for k := range top {
		_, plain := sections["`"+k+"`"]
		_, list := sections["`"+k+"[]`"]
		if !plain && !list {
			t.Errorf("top-level key %s has no section in this test", k)
		}
	}
}

// checkDocDefault compares v, a key's default in code, with what a doc
// says it is. A literal the file could hold (isLit: "5s", "0.90",
// "[8192]", "true") is decoded as the file would decode it and must equal
// v. Without one (the doc's words: "none", "required", "the engine's own",
// a reference such as global.scrape_interval) the value comes from
// elsewhere: the default must be unset (zero, or inherited).
func checkDocDefault(v reflect.Value, lit string, isLit bool) error {
	if !isLit {
		if !v.IsZero() && !(v.Type() == durationType && v.Int() == int64(unset)) {
			return fmt.Errorf("no value, but the code's default is %v", v.Interface())
		}
		return nil
	}
	want := reflect.New(v.Type())
	if err := yaml.Unmarshal([]byte(lit), want.Interface()); err != nil {
		return fmt.Errorf("default %q does not read as the key's value: %v", lit, err)
	}
	if diff := cmp.Diff(want.Elem().Interface(), v.Interface(), cmpopts.IgnoreUnexported(promcfg.ProxyConfig{})); diff != "" {
		return fmt.Errorf("default %s, the code's differs (-docs +code):\n%s", lit, diff)
	}
	return nil
}

// keyValue returns the field of v at the dotted yaml key path k, through
// inline structs.
func keyValue(v reflect.Value, k string) (reflect.Value, bool) {
	for _, name := range strings.Split(k, ".") {
		f, ok := fieldByKey(v, name)
		if !ok {
			return reflect.Value{}, false
		}
		v = f
	}
	return v, true
}

func fieldByKey(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if fv, ok := fieldByKey(v.Field(i), name); ok {
				return fv, true
			}
			continue
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// isKeyPath reports whether s names a key of the config (a reference such
// as global.scrape_interval, not a value).
func isKeyPath(s string) bool {
	_, ok := keyValue(reflect.ValueOf(Config{}), s)
	return ok && strings.Contains(s, ".")
}

// ownKeys lists kvwatch's own keys of struct type t, nested structs as
// dotted paths (a URL, written as one string, is one key), without the
// Prometheus HTTP client keys (httpKeys).
func ownKeys(t reflect.Type, prefix string, httpKeys map[string]reflect.Type) []string {
	fields := map[string]reflect.Type{}
	yamlFields(t, fields)
	var out []string
	for k, ft := range fields {
		if _, ok := httpKeys[k]; ok {
			continue
		}
		if ft.Kind() == reflect.Struct && ft != urlType {
			out = append(out, ownKeys(ft, prefix+k+".", httpKeys)...)
			continue
		}
		out = append(out, prefix+k)
	}
	return out
}

// defaultAt returns the default of the key at path (a list entry's keys
// after its list's key: targets, url), as a file is decoded onto it: a
// list entry's own defaults (defaultTarget, defaultFileSD,
// DefaultRemoteWrite), a limit's DefaultLimits, else Default()'s.
func defaultAt(path []string) (reflect.Value, bool) {
	if n := slices.Index(LimitKeys, path[len(path)-1]); n >= 0 && len(path) == 2 && (path[0] == "global" || path[0] == "targets") {
		return reflect.ValueOf(DefaultLimits()).Field(n), true
	}
	entries := map[string]reflect.Value{
		"targets":         reflect.ValueOf(defaultTarget()),
		"file_sd_configs": reflect.ValueOf(defaultFileSD()),
		"remote_write":    reflect.ValueOf(DefaultRemoteWrite()),
	}
	if e, ok := entries[path[0]]; ok && len(path) > 1 {
		return keyValue(e, strings.Join(path[1:], "."))
	}
	return keyValue(reflect.ValueOf(*Default()), strings.Join(path, "."))
}

// yamlKey is one key of a yaml document.
type yamlKey struct {
	path       []string // the keys down to it; a list entry's keys follow its list's key
	key, value *yaml.Node
	next       []*yaml.Node // the keys after it in its mapping
}

// yamlKeys calls fn with every key of n, parents first.
func yamlKeys(n *yaml.Node, path []string, fn func(yamlKey)) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			yamlKeys(c, path, fn)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamlKey{path: append(slices.Clone(path), n.Content[i].Value), key: n.Content[i], value: n.Content[i+1]}
			for j := i + 2; j < len(n.Content); j += 2 {
				k.next = append(k.next, n.Content[j])
			}
			fn(k)
			yamlKeys(k.value, k.path, fn)
		}
	}
}

var (
	// commentDefaultRE is "default: ..." in a comment of
	// examples/kvwatch.yml.
	commentDefaultRE = regexp.MustCompile(`(?m)(?:^#|[\s;(])\s*default: (.*)$`)
	// commentLiteralRE is a value the file could hold, optionally followed
	// by a remark in parentheses: 5s, [8192], 0.90 (a remark).
	commentLiteralRE = regexp.MustCompile(`^(\[[^\]]*\]|[^\s\[(]+)(?:\s+\(.*\))?$`)
)

// commentLiteral returns the literal of text, a default as a comment says
// it; none and empty are words, not values.
func commentLiteral(text string) (string, bool) {
	m := commentLiteralRE.FindStringSubmatch(text)
	if m == nil || m[1] == "none" || m[1] == "empty" || isKeyPath(m[1]) {
		return "", false
	}
	return m[1], true
}

// TestDocsExampleDefaults compares each "default: ..." in the comments of
// examples/kvwatch.yml with the default of the key it comments, as
// checkDocDefault does. "default: 256, 2048", every part a literal, is the
// default of this key and the next one.
func TestDocsExampleDefaults(t *testing.T) {
	const name = "examples/kvwatch.yml"
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	checked := 0
	yamlKeys(&root, nil, func(k yamlKey) {
		for _, c := range []string{k.key.HeadComment, k.key.LineComment, k.value.LineComment} {
			for _, m := range commentDefaultRE.FindAllStringSubmatch(c, -1) {
				text := strings.TrimSuffix(strings.TrimSpace(m[1]), ".")
				keys, parts := []*yaml.Node{k.key}, []string{text}
				if ps := strings.Split(text, ", "); len(ps) > 1 && !slices.ContainsFunc(ps, func(p string) bool { _, ok := commentLiteral(p); return !ok }) {
					if len(k.next) < len(ps)-1 {
						t.Errorf("%s:%d: %q names %d defaults, but %d keys follow", name, k.key.Line, text, len(ps), len(k.next)+1)
						continue
					}
					keys, parts = append(keys, k.next[:len(ps)-1]...), ps
				}
				for i, key := range keys {
					path := append(slices.Clone(k.path[:len(k.path)-1]), key.Value)
					v, ok := defaultAt(path)
					if !ok {
						t.Errorf("%s:%d: %s is not a config key", name, key.Line, strings.Join(path, "."))
						continue
					}
					lit, isLit := commentLiteral(parts[i])
					if err := checkDocDefault(v, lit, isLit); err != nil {
						t.Errorf("%s:%d: %s: the comment says default: %s: %v", name, key.Line, strings.Join(path, "."), parts[i], err)
					}
					checked++
				}
			}
		}
	})
	t.Logf("%d defaults of %s checked", checked, name)
	if checked == 0 {
		t.Errorf("%s: no \"default: ...\" comment found: the reading of them is broken", name)
	}
}

// docYAML is a ```yaml block of README.md or docs/*.md.
type docYAML struct {
	file string // relative to the repository
	line int    // its first line
	text string
}

var docFenceRE = regexp.MustCompile("^\\s*(`{3,}|~{3,})\\s*(\\S*)")

// docYAMLBlocks returns the yaml blocks of README.md and docs/*.md.
func docYAMLBlocks(t *testing.T) []docYAML {
	t.Helper()
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	var out []docYAML
	for _, path := range append([]string{filepath.Join(root, "README.md")}, files...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, path)
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			m := docFenceRE.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			block := docYAML{file: name, line: i + 2}
			for i++; i < len(lines); i++ {
				l := strings.TrimSpace(lines[i])
				if len(l) >= len(m[1]) && strings.Trim(l, m[1][:1]) == "" {
					break
				}
				block.text += lines[i] + "\n"
			}
			if m[2] == "yaml" || m[2] == "yml" {
				out = append(out, block)
			}
		}
	}
	return out
}

// defaultsCommentRE is the first line of a block that shows defaults.
var defaultsCommentRE = regexp.MustCompile(`^\s*#.*\bdefaults\b`)

// TestDocsConfigBlocks reads each yaml block of README.md and docs/*.md
// that is a kvwatch config (one of its top-level keys is one of the
// file's) as kvwatch reads the file, strictly: an unknown key, a wrong
// value fails. A block whose first line is a comment naming "defaults"
// ("# the defaults") shows them: each value it writes must be the key's
// default, as checkDocDefault reads a literal. Blocks of other programs'
// files (Prometheus, Mimir, web.config) share no top-level key with
// kvwatch's and are left alone.
func TestDocsConfigBlocks(t *testing.T) {
	top := map[string]reflect.Type{}
	yamlFields(reflect.TypeOf(Config{}), top)
	configs, defaultBlocks := 0, 0
	for _, b := range docYAMLBlocks(t) {
		// Lines before the block: lines in errors and nodes are the file's.
		text := strings.Repeat("\n", b.line-1) + b.text
		var root yaml.Node
		if err := yaml.Unmarshal([]byte(text), &root); err != nil {
			t.Errorf("%s:%d: yaml block: %v", b.file, b.line, err)
			continue
		}
		if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode ||
			!slices.ContainsFunc(root.Content[0].Content, func(n *yaml.Node) bool { _, ok := top[n.Value]; return ok }) {
			continue
		}
		configs++
		if _, err := Parse([]byte(text), b.file); err != nil {
			t.Errorf("%s:%d: the block is not a config kvwatch reads: %v", b.file, b.line, err)
		}
		if !defaultsCommentRE.MatchString(strings.SplitN(b.text, "\n", 2)[0]) {
			continue
		}
		defaultBlocks++
		yamlKeys(&root, nil, func(k yamlKey) {
			if k.value.Kind == yaml.MappingNode {
				return
			}
			v, ok := defaultAt(k.path)
			if !ok {
				t.Errorf("%s:%d: %s is not a config key", b.file, k.key.Line, strings.Join(k.path, "."))
				return
			}
			lit := k.value.Value
			if k.value.Kind != yaml.ScalarNode {
				n := *k.value
				n.HeadComment, n.LineComment, n.FootComment = "", "", ""
				out, err := yaml.Marshal(&n)
				if err != nil {
					t.Fatal(err)
				}
				lit = strings.TrimSpace(string(out))
			}
			if err := checkDocDefault(v, lit, true); err != nil {
				t.Errorf("%s:%d: %s: the block of defaults says %s: %v", b.file, k.key.Line, strings.Join(k.path, "."), lit, err)
			}
		})
	}
	t.Logf("%d config blocks, %d of defaults, checked", configs, defaultBlocks)
	if configs == 0 || defaultBlocks == 0 {
		t.Errorf("found %d config blocks and %d blocks of defaults in the docs; want some of each (docs/stack.md's alerts block shows the defaults): the reading of them is broken", configs, defaultBlocks)
	}
}

// proseDefaultRE is a default stated in prose for a config key:
// "`global.evaluation_interval` (default 15s)", "`global.scrape_interval`,
// 5s by default"; a ratio may be written as a percentage (90%).
var proseDefaultRE = regexp.MustCompile("`((?:global|targets\\[\\]|file_sd_configs\\[\\]|probe|alerts|history|alerting|remote_write\\[\\])\\.[a-z_.]+)`(?:\\s+\\(default\\s+([^)\\s]+)\\)|,\\s+([^\\s,]+)\\s+by\\s+default)")

// TestDocsProseDefaults compares the defaults README.md and docs/*.md
// state in prose for config keys (proseDefaultRE) with the code's.
func TestDocsProseDefaults(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	checked := 0
	for _, path := range append([]string{filepath.Join(root, "README.md")}, files...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, path)
		text := string(b)
		for _, m := range proseDefaultRE.FindAllStringSubmatchIndex(text, -1) {
			key := strings.ReplaceAll(text[m[2]:m[3]], "[]", "")
			said := ""
			if m[4] >= 0 {
				said = text[m[4]:m[5]]
			} else {
				said = text[m[6]:m[7]]
			}
			lit := said
			line := 1 + strings.Count(text[:m[0]], "\n")
			v, ok := defaultAt(strings.Split(key, "."))
			if !ok {
				t.Errorf("%s:%d: %s is not a config key", name, line, key)
				continue
			}
			if p, ok := strings.CutSuffix(said, "%"); ok {
				f, err := strconv.ParseFloat(p, 64)
				if err != nil {
					t.Errorf("%s:%d: %s: default %s is not a percentage", name, line, key, said)
					continue
				}
				lit = strconv.FormatFloat(f/100, 'g', -1, 64)
			}
			checked++
			if err := checkDocDefault(v, lit, true); err != nil {
				t.Errorf("%s:%d: %s: the docs say default %s: %v", name, line, key, said, err)
			}
		}
	}
	t.Logf("%d defaults in prose checked", checked)
	if checked == 0 {
		t.Errorf("no default of a config key found in the docs' prose: the reading of them is broken")
	}
}
