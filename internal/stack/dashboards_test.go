package stack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaVars are values for the Grafana variables the dashboards use, as
// Grafana would substitute them with "All" selected.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$cluster", ".*", "$pool", ".*", "$role", ".*", "$server", ".*",
)

func TestDashboardPanelsParse(t *testing.T) {
	total := 0
	for _, d := range Dashboards(Options{}) {
		total += d.PanelCount()
		for _, q := range d.Queries() {
			expr := grafanaVars.Replace(q.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("%s / %s: unknown variable left in %q", q.Dashboard, q.Panel, expr)
			}
			if _, err := parser.NewParser(parser.Options{}).ParseExpr(expr); err != nil {
				t.Errorf("%s / %s: %q does not parse: %v", q.Dashboard, q.Panel, expr, err)
			}
			if strings.Contains(strings.ReplaceAll(expr, " ", ""), "orvector(") {
				t.Errorf("%s / %s: %q turns no data into a number; unavailable must stay no data", q.Dashboard, q.Panel, expr)
			}
		}
	}
	if total < 17 {
		t.Errorf("dashboards have %d panels together, want at least 17", total)
	}
}

// TestDashboardJSON checks the marshalled dashboards: the variables exist,
// every panel and query uses the datasource variable (no fixed uid), and
// every panel has coloured thresholds.
func TestDashboardJSON(t *testing.T) {
	files, err := Generate(goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Dashboards(Options{}) {
		var dash struct {
			UID        string
			Templating struct {
				List []struct{ Name, Type string }
			}
			Panels []struct {
				Title      string
				Datasource struct{ UID string }
				Targets    []struct {
					Expr       string
					Datasource struct{ UID string }
				}
				FieldConfig struct {
					Defaults struct {
						Thresholds struct {
							Steps []struct{ Color string }
						}
					}
				}
			}
		}
		b := files.Get(GrafanaDashboardDir + "/" + d.File)
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("%s: %v", d.File, err)
		}
		var vars []string
		for _, v := range dash.Templating.List {
			vars = append(vars, v.Name)
		}
		want := []string{"datasource", "cluster", "pool", "role"}
		if d.UID == "kvwatch-server" {
			want = append(want, "server")
		}
		if strings.Join(vars, ",") != strings.Join(want, ",") {
			t.Errorf("%s: variables %v, want %v", d.File, vars, want)
		}
		if len(dash.Panels) != d.PanelCount() {
			t.Errorf("%s: %d panels in JSON, want %d", d.File, len(dash.Panels), d.PanelCount())
		}
		for _, p := range dash.Panels {
			if p.Datasource.UID != "${datasource}" {
				t.Errorf("%s / %s: datasource uid %q, want ${datasource}", d.File, p.Title, p.Datasource.UID)
			}
			for _, q := range p.Targets {
				if q.Datasource.UID != "${datasource}" || q.Expr == "" {
					t.Errorf("%s / %s: query %q with datasource %q", d.File, p.Title, q.Expr, q.Datasource.UID)
				}
			}
			if len(p.FieldConfig.Defaults.Thresholds.Steps) == 0 {
				t.Errorf("%s / %s: no thresholds", d.File, p.Title)
			}
		}
	}
}
