package stack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// grafanaVars are values for the Grafana variables the dashboards use, as
// Grafana would substitute them with "All" selected.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$kv_cluster", ".*", "$pool", ".*", "$role", ".*", "$server", ".*",
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
		want := []string{"datasource", "kv_cluster", "pool", "role"}
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

// TestDashboardsStrictDecode (issue 15 item 6): every generated dashboard
// decodes with the foundation SDK's strict decoder, which refuses unknown
// fields and nulls in required ones (the table footer's null reducer did),
// and every panel option enum the dashboards use is set, none empty.
func TestDashboardsStrictDecode(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	files, err := Generate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasPrefix(f.Path, GrafanaDashboardDir+"/") {
			continue
		}
		n++
		//lint:ignore SA1019 the v1 JSON model the dashboards are written in
		var d dashboard.Dashboard
		if err := strictDecodeErr(d.UnmarshalJSONStrict(f.Data)); err != nil {
			t.Errorf("%s: strict decode: %v", f.Path, err)
		}
		var raw struct {
			Panels []struct {
				Type, Title string
				Options     map[string]json.RawMessage
			}
			Templating struct{ List []map[string]json.RawMessage }
		}
		if err := json.Unmarshal(f.Data, &raw); err != nil {
			t.Fatal(err)
		}
		for _, p := range raw.Panels {
			var want []string
			switch p.Type {
			case "timeseries":
				var tt struct{ Mode, Sort string }
				_ = json.Unmarshal(p.Options["tooltip"], &tt)
				if tt.Mode == "" || tt.Sort == "" {
					t.Errorf("%s / %s: tooltip mode %q, sort %q: want both set", f.Path, p.Title, tt.Mode, tt.Sort)
				}
			case "stat", "gauge", "bargauge":
				want = []string{"orientation"}
			case "table":
				if _, ok := p.Options["footer"]; ok {
					t.Errorf("%s / %s: table has options.footer, which Grafana 13's table no longer has", f.Path, p.Title)
				}
			}
			for _, k := range want {
				if v := string(p.Options[k]); v == "" || v == `""` {
					t.Errorf("%s / %s: option %s is %q, want it set", f.Path, p.Title, k, v)
				}
			}
		}
		for _, v := range raw.Templating.List {
			if _, ok := v["auto"]; ok && string(v["type"]) != `"interval"` {
				t.Errorf("%s: variable %s has the interval-only field auto", f.Path, v["name"])
			}
		}
	}
	if n < 2 {
		t.Fatalf("%d dashboards, want at least 2", n)
	}
}

// strictDecodeErr is err unless it is an empty cog.BuildErrors, which the
// SDK's UnmarshalJSONStrict returns (as a non-nil error) when all is well.
func strictDecodeErr(err error) error {
	if be, ok := err.(cog.BuildErrors); ok && len(be) == 0 {
		return nil
	}
	return err
}

func TestStrictDecodeCatchesOldTableFooter(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	// The table panel as the generator wrote it before (SDK defaults).
	old := `{"title":"t","panels":[{"type":"table","title":"x","gridPos":{"h":8,"w":12,"x":0,"y":0},
		"options":{"frameIndex":0,"showHeader":true,"showTypeIcons":false,"footer":{"show":false,"reducer":null,"countRows":false},"cellHeight":"sm"}}]}`
	//lint:ignore SA1019 the v1 JSON model the dashboards are written in
	var d dashboard.Dashboard
	if err := strictDecodeErr(d.UnmarshalJSONStrict([]byte(old))); err == nil || !strings.Contains(err.Error(), "reducer") {
		t.Errorf("strict decode of a table footer with a null reducer: err = %v, want one naming reducer", err)
	}
}

// TestDashboardsGrafanaSchema runs the @grafana/schema type check
// (tools/grafana-schema/check.mjs, TypeScript) over the golden dashboards,
// which TestGolden keeps equal to the generated ones. `make test` installs
// its npm packages first.
func TestDashboardsGrafanaSchema(t *testing.T) {
	node := testenv.Tool(t, "nodejs", "node")
	dir := filepath.Join("..", "..", "tools", "grafana-schema")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grafana", "schema")); err != nil {
		msg := "tools/grafana-schema has no node_modules: run `make schema-deps` (npm ci --prefix tools/grafana-schema)"
		if os.Getenv("KVWATCH_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := run(t, dir, node, "check.mjs")
	if !strings.Contains(out, "2 dashboards type-check") {
		t.Errorf("check.mjs: %s", out)
	}
}
