package querycheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Query is one PromQL expression found in an input file.
type Query struct {
	// File is the input's path as given.
	File string
	// Where says which part of the file holds it: `panel "KV usage" (id 4)`,
	// `group kvwatch alert KVCacheFull`, `variable model`, `line 3`.
	Where string
	// Line is the expression's line in the file when known (rule files,
	// expression files), else 0.
	Line int
	// Expr is the expression as written, variables and all.
	Expr string
	// LabelValues is set for a Grafana label_values(...) variable query:
	// Expr is then its selector ("" for label_values(label)) and Label the
	// label it lists.
	LabelValues bool
	Label       string
	// Vars are the dashboard's variables (nil outside dashboards).
	Vars map[string]Variable
	// Grafana is true when Grafana variables are substituted (dashboards
	// and bare expression files, not rule files).
	Grafana bool
	// EmptyWhen is the condition under which the panel or variable holding
	// the query is empty by design, from the signal.EmptyWhen line of its
	// description ("" when it declares none).
	EmptyWhen string
}

// Note is something an input held that was not checked, with the reason.
type Note struct {
	File    string `json:"file"`
	Where   string `json:"where,omitempty"`
	Message string `json:"message"`
}

// Recorded is a series name a recording rule in the inputs defines.
type Recorded struct {
	Name, File, Rule string
}

// Inputs is what ReadFile found in one or more files.
type Inputs struct {
	Queries  []Query
	Notes    []Note
	Recorded map[string]Recorded
}

// ErrUnknownFormat is wrapped when a file is none of the supported inputs.
var ErrUnknownFormat = errors.New("unknown input format")

// ReadFile reads one input: a Grafana dashboard (.json, also the API's
// {"dashboard": ...} export), a Prometheus rule file, a PrometheusRule
// manifest or a ConfigMap of dashboards (.yml/.yaml, several documents
// allowed), or a file of bare expressions (anything else: one per line,
// '#' comments, indented lines continue the previous one). A trailing
// ".fixed" is ignored when choosing the format.
func (in *Inputs) ReadFile(name string, data []byte) error {
	if in.Recorded == nil {
		in.Recorded = map[string]Recorded{}
	}
	// FILE.fixed (what --fix writes) is read as FILE.
	switch strings.ToLower(filepath.Ext(strings.TrimSuffix(name, ".fixed"))) {
	case ".json":
		return in.readDashboard(name, "", data)
	case ".yml", ".yaml":
		return in.readYAML(name, data)
	default:
		in.readExpressions(name, data)
		return nil
	}
}

// ----- Grafana dashboards -----

type gTarget struct {
	Expr       string          `json:"expr"`
	RefID      string          `json:"refId"`
	Hide       bool            `json:"hide"`
	Datasource json.RawMessage `json:"datasource"`
}

type gPanel struct {
	ID           int             `json:"id"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	Type         string          `json:"type"`
	Targets      []gTarget       `json:"targets"`
	Panels       []gPanel        `json:"panels"`
	LibraryPanel json.RawMessage `json:"libraryPanel"`
	Datasource   json.RawMessage `json:"datasource"`
}

type gVariable struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Description string          `json:"description"`
	Query       json.RawMessage `json:"query"`
	Definition  string          `json:"definition"`
	Current     struct {
		Value json.RawMessage `json:"value"`
	} `json:"current"`
	Datasource json.RawMessage `json:"datasource"`
}

type gDashboard struct {
	Title  string   `json:"title"`
	UID    string   `json:"uid"`
	Panels []gPanel `json:"panels"`
	Rows   []struct {
		Title  string   `json:"title"`
		Panels []gPanel `json:"panels"`
	} `json:"rows"`
	Templating struct {
		List []gVariable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string          `json:"name"`
			Expr       string          `json:"expr"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"annotations"`
	// Dashboard is set in the HTTP API's export format.
	Dashboard *gDashboard `json:"dashboard"`
}

func (in *Inputs) readDashboard(file, prefix string, data []byte) error {
	var d gDashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("%s: not a Grafana dashboard: %w", file, err)
	}
	if d.Dashboard != nil {
		d = *d.Dashboard
	}
	if d.Panels == nil && d.Rows == nil && d.Templating.List == nil {
		if bytes.Contains(data, []byte(`"elements"`)) && bytes.Contains(data, []byte(`"layout"`)) {
			return fmt.Errorf("%s: %w: a Grafana dashboard in schema v2 (elements and layout); export it in the classic JSON model (Export → Export as JSON, without v2)", file, ErrUnknownFormat)
		}
		return fmt.Errorf("%s: %w: JSON without panels, rows or templating; kvwatch reads Grafana dashboards (classic JSON model)", file, ErrUnknownFormat)
	}
	vars := map[string]Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = Variable{Name: v.Name, Type: v.Type, Value: currentValue(v.Current.Value)}
	}
	if prefix != "" {
		prefix += "  "
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" || !promDatasource(v.Datasource) {
			continue
		}
		q := variableQuery(v)
		if q == "" {
			continue
		}
		where := prefix + "variable " + v.Name
		switch {
		case strings.HasPrefix(q, "label_values("):
			sel, label, ok := splitLabelValues(q)
			if !ok {
				in.Notes = append(in.Notes, Note{File: file, Where: where, Message: "label_values query not understood: " + q})
				continue
			}
			in.Queries = append(in.Queries, Query{File: file, Where: where, Expr: sel, LabelValues: true, Label: label, Vars: vars, Grafana: true,
				EmptyWhen: emptyWhen(v.Description)})
		case strings.HasPrefix(q, "query_result("):
			inner := strings.TrimSuffix(strings.TrimPrefix(q, "query_result("), ")")
			in.Queries = append(in.Queries, Query{File: file, Where: where, Expr: inner, Vars: vars, Grafana: true, EmptyWhen: emptyWhen(v.Description)})
		case strings.HasPrefix(q, "label_names(") || strings.HasPrefix(q, "metrics("):
			in.Notes = append(in.Notes, Note{File: file, Where: where, Message: "not checked: " + q + " lists names, it selects no series"})
		default:
			in.Queries = append(in.Queries, Query{File: file, Where: where, Expr: q, Vars: vars, Grafana: true, EmptyWhen: emptyWhen(v.Description)})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" && promDatasource(a.Datasource) {
			in.Queries = append(in.Queries, Query{File: file, Where: prefix + "annotation " + strconv.Quote(a.Name), Expr: a.Expr, Vars: vars, Grafana: true})
		}
	}
	var walk func(ps []gPanel, row string)
	walk = func(ps []gPanel, row string) {
		for _, p := range ps {
			where := prefix + fmt.Sprintf("panel %s (id %d)", strconv.Quote(p.Title), p.ID)
			if row != "" {
				where = prefix + fmt.Sprintf("row %s  panel %s (id %d)", strconv.Quote(row), strconv.Quote(p.Title), p.ID)
			}
			if len(p.LibraryPanel) > 0 && string(p.LibraryPanel) != "null" && len(p.Targets) == 0 {
				in.Notes = append(in.Notes, Note{File: file, Where: where, Message: "library panel skipped: its queries live in Grafana, not in this file; export the library panel's model to check it"})
				continue
			}
			if p.Type == "row" {
				walk(p.Panels, p.Title)
				continue
			}
			for _, t := range p.Targets {
				if t.Expr == "" || !promDatasource(t.Datasource) || (len(t.Datasource) == 0 && !promDatasource(p.Datasource)) {
					continue
				}
				w := where
				if t.RefID != "" {
					w += " query " + t.RefID
				}
				in.Queries = append(in.Queries, Query{File: file, Where: w, Expr: t.Expr, Vars: vars, Grafana: true, EmptyWhen: emptyWhen(p.Description)})
			}
			walk(p.Panels, row)
		}
	}
	walk(d.Panels, "")
	for _, r := range d.Rows {
		walk(r.Panels, r.Title)
	}
	return nil
}

// emptyWhen returns the condition of the signal.EmptyWhen line of a panel's
// or variable's description ("Empty when: no server has a cache tier"), or
// "" when it has none.
func emptyWhen(description string) string {
	for _, l := range strings.Split(description, "\n") {
		if cond, ok := strings.CutPrefix(strings.TrimSpace(l), signal.EmptyWhen); ok && strings.TrimSpace(cond) != "" {
			return strings.TrimSuffix(strings.TrimSpace(cond), ".")
		}
	}
	return ""
}

// promDatasource reports whether a datasource reference (absent, a name, a
// ${variable}, or {type, uid}) can be a Prometheus one.
func promDatasource(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	var ref struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &ref) == nil {
		return ref.Type == "" || ref.Type == "prometheus" || strings.HasPrefix(ref.Type, "$")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s != "-- Grafana --" && !strings.Contains(strings.ToLower(s), "loki")
	}
	return true
}

func currentValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var l []string
	if json.Unmarshal(raw, &l) == nil && len(l) > 0 {
		return l[0]
	}
	return ""
}

func variableQuery(v gVariable) string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil && s != "" {
		return strings.TrimSpace(s)
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil && o.Query != "" {
		return strings.TrimSpace(o.Query)
	}
	return strings.TrimSpace(v.Definition)
}

// splitLabelValues reads label_values(label) or label_values(selector,
// label).
func splitLabelValues(q string) (selector, label string, ok bool) {
	inner, found := strings.CutPrefix(q, "label_values(")
	if !found || !strings.HasSuffix(inner, ")") {
		return "", "", false
	}
	inner = strings.TrimSuffix(inner, ")")
	i := strings.LastIndex(inner, ",")
	if i < 0 {
		return "", strings.TrimSpace(inner), strings.TrimSpace(inner) != ""
	}
	selector, label = strings.TrimSpace(inner[:i]), strings.TrimSpace(inner[i+1:])
	return selector, label, selector != "" && label != ""
}

// ----- YAML: rule files, PrometheusRule, ConfigMaps -----

func (in *Inputs) readYAML(file string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	found := false
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if len(n.Content) == 0 {
			continue
		}
		ok, err := in.readDocument(file, n.Content[0], fmt.Sprintf("document %d", doc))
		if err != nil {
			return err
		}
		found = found || ok
	}
	if !found {
		return fmt.Errorf("%s: %w: YAML without rule groups, a PrometheusRule or a ConfigMap of dashboards", file, ErrUnknownFormat)
	}
	return nil
}

// readDocument reads one YAML document (or one item of a List); found is
// false when it is nothing kvwatch reads.
func (in *Inputs) readDocument(file string, root *yaml.Node, where string) (found bool, err error) {
	kind := scalar(get(root, "kind"))
	switch {
	case get(root, "groups") != nil:
		in.readGroups(file, get(root, "groups"))
	case kind == "PrometheusRule":
		in.readGroups(file, get(get(root, "spec"), "groups"))
	case strings.HasSuffix(kind, "List") && get(root, "items") != nil:
		// kubectl get -o yaml: the objects are the items.
		items := get(root, "items")
		for i, item := range items.Content {
			if _, err := in.readDocument(file, item, fmt.Sprintf("%s item %d", where, i+1)); err != nil {
				return false, err
			}
		}
	case kind == "ConfigMap":
		name := scalar(get(get(root, "metadata"), "name"))
		data := get(root, "data")
		for i := 0; data != nil && i+1 < len(data.Content); i += 2 {
			key, val := data.Content[i].Value, data.Content[i+1].Value
			prefix := "configmap " + name + " key " + key
			switch {
			case strings.HasSuffix(key, ".json"):
				if err := in.readDashboard(file, prefix, []byte(val)); err != nil {
					return false, err
				}
			case strings.HasSuffix(key, ".yml") || strings.HasSuffix(key, ".yaml") || strings.HasSuffix(key, ".rules"):
				sub := Inputs{Recorded: in.Recorded}
				if err := sub.readYAML(file, []byte(val)); err == nil {
					for _, q := range sub.Queries {
						q.Where = prefix + "  " + q.Where
						q.Line = 0
						in.Queries = append(in.Queries, q)
					}
					in.Notes = append(in.Notes, sub.Notes...)
				}
			}
		}
	case get(root, "rule_files") != nil && get(root, "tests") != nil:
		in.Notes = append(in.Notes, Note{File: file, Message: "promtool unit test file skipped: its series are test input; check the rule files it names"})
	case kind != "":
		in.Notes = append(in.Notes, Note{File: file, Where: where, Message: "skipped: a " + kind + ", not a rule group or dashboard"})
	default:
		return false, nil
	}
	return true, nil
}

func (in *Inputs) readGroups(file string, groups *yaml.Node) {
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return
	}
	for _, g := range groups.Content {
		gname := scalar(get(g, "name"))
		rules := get(g, "rules")
		if rules == nil {
			continue
		}
		for _, r := range rules.Content {
			expr := get(r, "expr")
			if expr == nil {
				continue
			}
			where := "group " + gname
			if rec := scalar(get(r, "record")); rec != "" {
				where += "  record " + rec
				if _, dup := in.Recorded[rec]; !dup {
					in.Recorded[rec] = Recorded{Name: rec, File: file, Rule: where}
				}
			} else {
				where += "  alert " + scalar(get(r, "alert"))
			}
			in.Queries = append(in.Queries, Query{File: file, Where: where, Line: expr.Line, Expr: expr.Value})
		}
	}
}

// get returns the value of key in a mapping node, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// ----- bare expressions -----

func (in *Inputs) readExpressions(file string, data []byte) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	var cur *Query
	for sc.Scan() {
		line++
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			cur = nil
		case cur != nil && (text[0] == ' ' || text[0] == '\t'):
			cur.Expr += "\n" + text
		default:
			in.Queries = append(in.Queries, Query{File: file, Where: "line " + strconv.Itoa(line), Line: line, Expr: text, Grafana: true})
			cur = &in.Queries[len(in.Queries)-1]
		}
	}
}
