package querycheck

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
)

// Variable is one Grafana template variable of a dashboard.
type Variable struct {
	Name string
	// Type is Grafana's variable type: query, custom, interval, constant,
	// textbox, datasource, adhoc.
	Type string
	// Value is the current value (the first when several are selected);
	// "" when unknown.
	Value string
}

// placeholderPrefix marks text that stood for a variable: a name or label
// value containing it is templated and not checked against a store.
const placeholderPrefix = "__kvwatch_var_"

// builtinDurations are Grafana's global variables that expand to a
// duration (or a number of seconds or milliseconds), with a value that
// keeps the expression valid PromQL.
var builtinDurations = map[string]string{
	"__interval":         "1m",
	"__rate_interval":    "4m",
	"__range":            "1h",
	"__interval_ms":      "60000",
	"__rate_interval_ms": "240000",
	"__range_s":          "3600",
	"__range_ms":         "3600000",
	"__from":             "1700000000000",
	"__to":               "1700003600000",
}

// varRef matches Grafana's three variable syntaxes: $name, ${name},
// ${name:format} or ${name.field}, and [[name]] or [[name:format]].
var varRef = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\.[^}:]*)?(?::[^}]*)?\}|\[\[([A-Za-z_][A-Za-z0-9_]*)(?::[^\]]*)?\]\]`)

// span is one substituted stretch: [From, From+OldLen) of the original
// became [To, To+NewLen) of the substituted text.
type span struct {
	From, OldLen, To, NewLen int
}

// Substituted is an expression with its variables replaced.
type Substituted struct {
	// Text is the expression the parser reads.
	Text string
	// Used lists the variables that were replaced, in order of appearance.
	Used []string
	// Undefined lists $-references to variables the dashboard does not
	// define (Grafana leaves those in the query, which then fails).
	Undefined []string
	spans     []span
}

// Orig maps a byte offset in Text back to the original expression: an
// offset inside a replaced variable maps to the variable's start.
func (s *Substituted) Orig(p int) int {
	shift := 0
	for _, sp := range s.spans {
		if p < sp.To {
			break
		}
		if p < sp.To+sp.NewLen {
			return sp.From
		}
		shift = sp.From + sp.OldLen - (sp.To + sp.NewLen)
	}
	return p + shift
}

// Substitute replaces Grafana variables in expr so that the Prometheus
// parser can read it, keeping the structure of the query:
//   - inside a string literal (a label value), a variable becomes a
//     placeholder that the checks recognise and skip;
//   - in a range or offset ([$__rate_interval], offset $shift) it becomes a
//     duration: the variable's current value when that is one, else 5m;
//   - elsewhere, a variable whose current value is a number becomes that
//     number, and any other becomes a placeholder identifier (a templated
//     metric or label name).
//
// vars are the dashboard's variables (nil for a file of bare expressions);
// Grafana's global variables ($__interval, $__rate_interval, $__range, ...)
// are always known. numeric makes every placeholder outside strings a
// number instead, for a second attempt when the first did not parse
// (topk($n, ...)).
func Substitute(expr string, vars map[string]Variable, numeric bool) Substituted {
	out := Substituted{}
	var b strings.Builder
	last := 0
	quotes := stringRegions(expr)
	for _, m := range varRef.FindAllStringSubmatchIndex(expr, -1) {
		start, end := m[0], m[1]
		name := ""
		for g := 1; g <= 3; g++ {
			if m[2*g] >= 0 {
				name = expr[m[2*g]:m[2*g+1]]
			}
		}
		repl, ok := replacement(expr, start, name, vars, inString(quotes, start), numeric)
		if !ok {
			out.Undefined = append(out.Undefined, name)
		}
		b.WriteString(expr[last:start])
		out.spans = append(out.spans, span{From: start, OldLen: end - start, To: b.Len(), NewLen: len(repl)})
		b.WriteString(repl)
		out.Used = append(out.Used, name)
		last = end
	}
	b.WriteString(expr[last:])
	out.Text = b.String()
	return out
}

// replacement is what a reference to name at offset start becomes; ok is
// false when the variable is not defined (a placeholder is still returned).
func replacement(expr string, start int, name string, vars map[string]Variable, quoted, numeric bool) (string, bool) {
	v, defined := vars[name]
	builtin, isBuiltin := builtinDurations[name]
	ok := defined || isBuiltin || vars == nil || strings.HasPrefix(name, "__") // Grafana globals: $__dashboard, $__user, $__auto_interval_x, ...
	if quoted {
		if isBuiltin {
			return builtin, true
		}
		return placeholderPrefix + name + "__", ok
	}
	if durationContext(expr[:start]) {
		switch {
		case isBuiltin && !strings.HasSuffix(name, "_ms") && !strings.HasSuffix(name, "_s"):
			return builtin, true
		case validDuration(v.Value):
			return v.Value, ok
		}
		return "5m", ok
	}
	if isBuiltin {
		return builtin, true
	}
	if _, err := strconv.ParseFloat(v.Value, 64); err == nil && v.Value != "" {
		return v.Value, ok
	}
	if numeric {
		return "1", ok
	}
	return placeholderPrefix + name + "__", ok
}

func validDuration(s string) bool {
	if s == "" {
		return false
	}
	_, err := model.ParseDuration(s)
	return err == nil
}

// durationContext reports whether the text before a variable puts it where
// PromQL wants a duration: right after '[' or a subquery ':' or 'offset'.
func durationContext(before string) bool {
	t := strings.TrimRight(before, " \t\n")
	if strings.HasSuffix(t, "[") {
		return true
	}
	if strings.HasSuffix(t, ":") {
		// a subquery step [5m:$step]: a ':' inside brackets
		return strings.LastIndex(t, "[") > strings.LastIndex(t, "]")
	}
	low := strings.ToLower(t)
	return strings.HasSuffix(low, "offset") && (len(low) == 6 || !isNameByte(low[len(low)-7]))
}

func isNameByte(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// stringRegions returns the [start, end) byte ranges of PromQL string
// literals ("...", '...', `...`) in expr; an unterminated one runs to the end.
func stringRegions(expr string) [][2]int {
	var out [][2]int
	for i := 0; i < len(expr); i++ {
		q := expr[i]
		if q != '"' && q != '\'' && q != '`' {
			continue
		}
		j := i + 1
		for j < len(expr) && expr[j] != q {
			if expr[j] == '\\' && q != '`' {
				j++
			}
			j++
		}
		if j > len(expr) {
			j = len(expr)
		}
		out = append(out, [2]int{i, j + 1})
		i = j
	}
	return out
}

func inString(regions [][2]int, p int) bool {
	for _, r := range regions {
		if p > r[0] && p < r[1] {
			return true
		}
	}
	return false
}

// templated reports whether s contains a placeholder from Substitute.
func templated(s string) bool { return strings.Contains(s, placeholderPrefix) }

// inSpan reports whether byte p of Text lies inside a substituted variable.
func (s *Substituted) inSpan(p int) bool {
	for _, sp := range s.spans {
		if p >= sp.To && p < sp.To+sp.NewLen {
			return true
		}
	}
	return false
}
