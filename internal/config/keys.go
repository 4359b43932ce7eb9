package config

import (
	"fmt"
	"reflect"
	"regexp"
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
func unknownKeys(root *yaml.Node, t reflect.Type) (problems []string, badDurations bool) {
	w := &keyWalker{}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	w.walk(n, t, nil)
	return w.out, w.badDurations
}

type keyWalker struct {
	out          []string
	badDurations bool
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
		if _, err := model.ParseDuration(n.Value); n.Kind == yaml.ScalarNode && err != nil {
			w.out = append(w.out, fmt.Sprintf("line %d: %s: %q is not a duration; write e.g. 5s or 2m", n.Line, pathString(path), n.Value))
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
				msg := fmt.Sprintf("line %d: %s: unknown key %q", n.Content[i].Line, keyPath(path, k), k)
				if s := nearest(k, fields); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				w.out = append(w.out, msg)
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
	unknownFieldRe = regexp.MustCompile(`^line \d+: field \S+ not found in type \S+$`)
	cannotRe       = regexp.MustCompile("^(line \\d+: )?cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
)

// isUnknownField reports whether a decoder message is about an unknown key.
func isUnknownField(m string) bool { return unknownFieldRe.MatchString(m) }

// yamlProblem rewrites a decoder message without Go type names.
func yamlProblem(m string) string {
	m = strings.TrimPrefix(m, "yaml: ")
	if g := cannotRe.FindStringSubmatch(m); g != nil {
		return fmt.Sprintf("%s%q is %s; want %s", g[1], g[3], yamlKind(g[2]), goKind(g[4]))
	}
	return m
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
