package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// unknownKeys walks the parsed file against the config's Go types and
// reports every key no field takes, with its line, its path and the nearest
// known key. The decoder finds the same keys (so a key unknownKeys misses is
// still an error), but names Go types and gives no path or suggestion.
// It also reports durations that do not parse, which stop the decoder
// without a line; badDurations says whether there were any.
func unknownKeys(root *yaml.Node, t reflect.Type) *keyWalker {
	w := &keyWalker{lines: map[int]bool{}}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	w.walk(n, t, nil)
	return w
}

// keyWalker collects problems; lines are those it reported, so the
// decoder's own message for the same line is dropped.
type keyWalker struct {
	out          []string
	lines        map[int]bool
	badDurations bool
}

func (w *keyWalker) add(line int, format string, args ...any) {
	w.out = append(w.out, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...))
	w.lines[line] = true
}

func (w *keyWalker) walk(n *yaml.Node, t reflect.Type, path []any) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t == durationType {
		// model.Duration's own decoder stops the whole decoding on a bad
		// value, without a line: say where it is.
		if n.Kind != yaml.ScalarNode {
			w.add(n.Line, "%s: want a duration such as 5s", pathString(path))
		} else if _, err := model.ParseDuration(n.Value); err != nil {
			w.add(n.Line, "%s: %q is not a duration; write e.g. 5s or 2m", pathString(path), n.Value)
			w.badDurations = true
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		fields := map[string]reflect.Type{}
		yamlFields(t, fields)
		if len(fields) == 0 {
			return // a type with its own scalar form (e.g. a URL)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			ft, ok := fields[k]
			if !ok {
				msg := fmt.Sprintf("%s: unknown key %q", keyPath(path, k), k)
				if s := nearest(k, fields); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				w.add(n.Content[i].Line, "%s", msg)
				continue
			}
			w.walk(n.Content[i+1], ft, append(path[:len(path):len(path)], k))
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			w.walk(c, t.Elem(), append(path[:len(path):len(path)], i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), append(path[:len(path):len(path)], n.Content[i].Value))
		}
	}
}

// yamlFields collects the yaml keys of struct t, inline fields flattened.
func yamlFields(t reflect.Type, into map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				yamlFields(ft, into)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}

// keyPath is path.key in the form problems use.
func keyPath(path []any, key string) string {
	if len(path) == 0 {
		return key
	}
	return pathString(path) + "." + key
}

// nearest returns the known key closest to k, if close enough to be a
// likely misspelling (at most a third of its letters off).
func nearest(k string, known map[string]reflect.Type) string {
	best, bestD := "", -1
	for c := range known {
		d := editDistance(k, c)
		if bestD < 0 || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(1, len(k)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var durationType = reflect.TypeOf(model.Duration(0))

var (
	lineRe   = regexp.MustCompile(`^line (\d+): `)
	fieldRe  = regexp.MustCompile(`^(line \d+: )field (\S+) not found in type \S+$`)
	cannotRe = regexp.MustCompile("^(line \\d+: )?cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")
)

// said reports whether the walker already reported the line of decoder
// message m (an unknown key, a bad duration).
func (w *keyWalker) said(m string) bool {
	g := lineRe.FindStringSubmatch(m)
	if g == nil {
		return false
	}
	n, _ := strconv.Atoi(g[1])
	return w.lines[n]
}

// yamlProblem rewrites a decoder message without Go type names, with the
// path of the key at its line when root has one.
func yamlProblem(root *yaml.Node, m string) string {
	m = strings.TrimPrefix(m, "yaml: ")
	if g := fieldRe.FindStringSubmatch(m); g != nil {
		return fmt.Sprintf("%s%sunknown key %q", g[1], pathAt(root, g[1]), g[2])
	}
	g := cannotRe.FindStringSubmatch(m)
	if g == nil {
		return m
	}
	at := g[1] + pathAt(root, g[1])
	if g[3] == "" {
		return fmt.Sprintf("%sgot %s; want %s", at, yamlKind(g[2]), goKind(g[4]))
	}
	return fmt.Sprintf("%s%q is %s; want %s", at, g[3], yamlKind(g[2]), goKind(g[4]))
}

// pathAt returns "path: " for the key at the line of prefix "line N: ", or "".
func pathAt(root *yaml.Node, prefix string) string {
	l := lineRe.FindStringSubmatch(prefix)
	if l == nil {
		return ""
	}
	n, _ := strconv.Atoi(l[1])
	if p := pathAtLine(root, n); p != "" {
		return p + ": "
	}
	return ""
}

// pathAtLine returns the path of the deepest key written at line, or "".
func pathAtLine(root *yaml.Node, line int) string {
	var best []any
	var walk func(n *yaml.Node, path []any)
	walk = func(n *yaml.Node, path []any) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := append(path[:len(path):len(path)], n.Content[i].Value)
				if n.Content[i].Line == line {
					best = p
				}
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, append(path[:len(path):len(path)], i))
			}
		}
	}
	if root != nil {
		walk(root, nil)
	}
	return pathString(best)
}

// yamlKind names a YAML tag for people.
func yamlKind(tag string) string {
	switch tag {
	case "int":
		return "a number"
	case "float":
		return "a number"
	case "bool":
		return "true or false"
	case "str":
		return "a string"
	case "seq":
		return "a list"
	case "map":
		return "a map"
	case "null":
		return "empty"
	}
	return "a " + tag
}

// goKind names what a Go type reads, for people.
func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a map of keys to values"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case t == "model.Duration":
		return "a duration such as 5s"
	}
	return "a map of keys to values"
}
