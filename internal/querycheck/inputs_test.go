package querycheck

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// q summarises a query for comparison.
func (q Query) String() string {
	s := fmt.Sprintf("%s|%s|%d|%s", q.File, q.Where, q.Line, q.Expr)
	if q.LabelValues {
		s += "|label_values " + q.Label
	}
	return s
}

func TestReadFileFormats(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
		notes      []string
	}{
		{
			name: "export.json",
			data: `{"dashboard": {"title": "x", "panels": [
			  {"id": 2, "title": "A", "targets": [{"refId": "A", "expr": "up"}, {"refId": "B", "expr": ""}]}],
			  "annotations": {"list": [{"name": "Deploys", "expr": "changes(kube_deployment_status_observed_generation[5m]) > 0"},
			                           {"name": "Grafana", "datasource": "-- Grafana --", "expr": "ignored"}]},
			  "templating": {"list": [
			    {"name": "a", "type": "query", "query": "query_result(topk(5, up))"},
			    {"name": "b", "type": "query", "query": "label_names()"},
			    {"name": "c", "type": "query", "query": "label_values(instance)"},
			    {"name": "d", "type": "custom", "query": "x,y"}]}}, "meta": {}}`,
			want: []string{
				"export.json|variable a|0|topk(5, up)",
				"export.json|variable c|0||label_values instance",
				`export.json|annotation "Deploys"|0|changes(kube_deployment_status_observed_generation[5m]) > 0`,
				`export.json|panel "A" (id 2) query A|0|up`,
			},
			notes: []string{"variable b: not checked: label_names()"},
		},
		{
			name: "rules.yaml",
			data: "groups:\n  - name: g\n    rules:\n      - record: a:b\n        expr: |\n          sum by (x) (\n            y)\n      - alert: Z\n        expr: a:b > 1\n",
			want: []string{"rules.yaml|group g  record a:b|5|sum by (x) (\n  y)\n", "rules.yaml|group g  alert Z|9|a:b > 1"},
		},
		{
			name:  "promtool.yml",
			data:  "rule_files: [a.yml]\ntests:\n  - interval: 1m\n",
			notes: []string{": promtool unit test file skipped"},
		},
		{
			name: "cm.yaml",
			data: "kind: ConfigMap\nmetadata:\n  name: dash\ndata:\n  d.json: |\n    {\"panels\": [{\"id\": 1, \"title\": \"T\", \"targets\": [{\"expr\": \"up\"}]}]}\n  r.rules: |\n    groups:\n      - name: g\n        rules:\n          - alert: A\n            expr: down > 0\n",
			want: []string{`cm.yaml|configmap dash key d.json  panel "T" (id 1)|0|up`, "cm.yaml|configmap dash key r.rules  group g  alert A|0|down > 0"},
		},
		{
			name: "list.yaml",
			data: "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: monitoring.coreos.com/v1\n    kind: PrometheusRule\n    metadata: {name: a}\n    spec:\n      groups:\n        - name: g\n          rules:\n            - alert: A\n              expr: x > 1\n",
			want: []string{"list.yaml|group g  alert A|12|x > 1"},
		},
		{
			name: "scaler.txt",
			data: "# KEDA\nsum(a)\n  / sum(b)\n\nc{x=\"1\"}\n",
			want: []string{"scaler.txt|line 2|2|sum(a)\n  / sum(b)", `scaler.txt|line 5|5|c{x="1"}`},
		},
	} {
		in := &Inputs{}
		if err := in.ReadFile(tc.name, []byte(tc.data)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var got []string
		for _, q := range in.Queries {
			got = append(got, q.String())
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: queries\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
		for _, w := range tc.notes {
			found := false
			for _, n := range in.Notes {
				found = found || strings.Contains(n.Where+": "+n.Message, w)
			}
			if !found {
				t.Errorf("%s: no note %q in %+v", tc.name, w, in.Notes)
			}
		}
	}
}

func TestReadFileRejectsUnknownFormats(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"a.json", `{"x": 1}`},
		{"a.json", `not json`},
		{"a.yml", "foo: bar\n"},
		{"a.yml", "groups: [\n"},
		{"v2.json", `{"kind": "Dashboard", "spec": {"elements": {}, "layout": {}}}`},
	} {
		err := (&Inputs{}).ReadFile(tc.name, []byte(tc.data))
		if err == nil {
			t.Errorf("ReadFile(%s, %q) = nil, want an error", tc.name, tc.data)
		}
		if tc.name == "v2.json" && (err == nil || !strings.Contains(err.Error(), "classic JSON model")) {
			t.Errorf("ReadFile(v2 dashboard) = %v, want a hint to export the classic model", err)
		}
		if tc.data == `{"x": 1}` && !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("ReadFile(%s, %q) = %v, want ErrUnknownFormat", tc.name, tc.data, err)
		}
	}
}
