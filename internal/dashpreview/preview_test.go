package dashpreview

import (
	"encoding/xml"
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/stack"
)

var update = flag.Bool("update", false, "rewrite docs/dashboards.md and docs/dashboards/*.svg")

// A small dashboard, with every value below worked out from it by hand.
const small = `{"uid": "u1", "title": "T & co",
 "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}, {"name": "role", "type": "query", "query": "label_values(x, role)"}]},
 "panels": [
  {"type": "table", "title": "Bottom", "gridPos": {"x": 0, "y": 6, "w": 24, "h": 4}, "targets": [{"expr": "up", "instant": true}]},
  {"type": "timeseries", "title": "Right <b>", "gridPos": {"x": 12, "y": 0, "w": 12, "h": 6}, "fieldConfig": {"defaults": {"unit": "percentunit"}},
   "targets": [{"expr": "a", "legendFormat": "{{role}}"}, {"expr": "b", "legendFormat": "b {{role}}"}]},
  {"type": "stat", "title": "Left", "description": "What it shows.", "gridPos": {"x": 0, "y": 0, "w": 12, "h": 6}, "targets": [{"expr": "sum(c)", "legendFormat": "c", "instant": true}]}
 ]}`

func TestMarkdownOfASmallDashboard(t *testing.T) {
	d, err := Parse([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	got := Markdown(d, "t.json", "dashboards/t.svg")
	want := "## T & co\n\n" +
		"`grafana/dashboards/t.json` (uid `u1`). Variables: `$datasource` (a prometheus data source), `$role` = `label_values(x, role)`.\n\n" +
		"![T & co: panel layout](dashboards/t.svg)\n\n" +
		"1. **Left** (stat; at column 0, row 0, 12×6): What it shows.\n" +
		"   ```promql\n   sum(c)\n   ```\n   instant query, legend `c`\n" +
		"2. **Right <b>** (time series, unit `percentunit`; at column 12, row 0, 12×6)\n" +
		"   ```promql\n   a\n   ```\n   range query, legend `{{role}}`\n" +
		"   ```promql\n   b\n   ```\n   range query, legend `b {{role}}`\n" +
		"3. **Bottom** (table; at column 0, row 6, 24×4)\n" +
		"   ```promql\n   up\n   ```\n   instant query\n"
	if got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
}

// svgDoc is the part of the picture the test reads back.
type svgDoc struct {
	Width  int `xml:"width,attr"`
	Height int `xml:"height,attr"`
	Rects  []struct {
		X      int `xml:"x,attr"`
		Y      int `xml:"y,attr"`
		Width  int `xml:"width,attr"`
		Height int `xml:"height,attr"`
	} `xml:"rect"`
	Texts []string `xml:"text"`
}

func TestSVGOfASmallDashboard(t *testing.T) {
	d, err := Parse([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	var doc svgDoc
	if err := xml.Unmarshal(SVG(d), &doc); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v", err)
	}
	// 24 columns of 40 px; 10 grid rows of 30 px plus a 28 px title line.
	if doc.Width != 960 || doc.Height != 328 {
		t.Errorf("size %d×%d, want 960×328", doc.Width, doc.Height)
	}
	// The background, then Left, Right, Bottom in reading order: x = col*40+3,
	// y = row*30+28+3, width = w*40-6, height = h*30-6.
	want := [][4]int{{0, 0, 960, 328}, {3, 31, 474, 174}, {483, 31, 474, 174}, {3, 211, 954, 114}}
	if len(doc.Rects) != len(want) {
		t.Fatalf("%d rects, want %d", len(doc.Rects), len(want))
	}
	for i, w := range want {
		r := doc.Rects[i]
		if [4]int{r.X, r.Y, r.Width, r.Height} != w {
			t.Errorf("rect %d = %v, want %v", i, r, w)
		}
	}
	texts := "\n" + strings.Join(doc.Texts, "\n") + "\n"
	for _, w := range []string{"1. Left", "stat", "▪ c", "sum(c)", "2. Right <b>", "time series · percentunit", "▪ {{role}}", "a", "▪ b {{role}}", "b", "3. Bottom", "table", "▪ (no legend)", "up"} {
		if !strings.Contains(texts, "\n"+w+"\n") {
			t.Errorf("SVG texts lack %q:\n%s", w, texts)
		}
	}
}

func TestWrapPromQL(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want []string
	}{
		{"sum by (role) (x)", 20, []string{"sum by (role) (x)"}},
		// Break after the space before "(role)", not inside it; the rest
		// is exactly 10 characters and fits.
		{"sum by (role) (x)", 10, []string{"sum by ", "(role) (x)"}},
		{"sum by (role) (xy)", 10, []string{"sum by ", "(role) ", "(xy)"}},
		{"abcdefghijklmnop", 5, []string{"abcde", "fghij", "klmn…"}},
	} {
		if got := wrap(c.s, c.n, 3); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestFitCutsLongText(t *testing.T) {
	if got := fit("abcdefghij", 50, 10); got != "abcd…" {
		t.Errorf("fit = %q, want abcd…", got)
	}
	if got := fit("abcde", 50, 10); got != "abcde" {
		t.Errorf("fit = %q, want abcde", got)
	}
}

// TestDocsShowTheGeneratedDashboards keeps docs/dashboards.md and its
// pictures equal to a preview of what `kvwatch stack generate` writes with
// its defaults; -update rewrites them.
func TestDocsShowTheGeneratedDashboards(t *testing.T) {
	files, err := stack.Generate(stack.Options{GrafanaAdminPassword: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join("..", "..", "docs")
	var md strings.Builder
	md.WriteString(header)
	n := 0
	for _, f := range files {
		dir, file := path.Split(f.Path)
		if dir != "grafana/dashboards/" || !strings.HasSuffix(file, ".json") {
			continue
		}
		n++
		d, err := Parse(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		svgName := strings.TrimSuffix(file, ".json") + ".svg"
		md.WriteString("\n" + Markdown(d, file, "dashboards/"+svgName))
		checkDoc(t, filepath.Join(docs, "dashboards", svgName), SVG(d))
	}
	if n < 2 {
		t.Fatalf("stack.Generate wrote %d dashboards, want the fleet and the server dashboard", n)
	}
	checkDoc(t, filepath.Join(docs, "dashboards.md"), []byte(md.String()))
}

const header = `# The Grafana dashboards, previewed

<!-- Generated by internal/dashpreview's test from the dashboards
` + "`kvwatch stack generate`" + ` writes (default options); do not edit. Rewrite with
go test ./internal/dashpreview -update -->

For readers without Grafana: where each panel of the generated dashboards
sits, what it is titled and which PromQL it runs. The pictures are layouts,
not screenshots: values appear once Grafana reads Prometheus. Without
Grafana, kvwatch's own web UI shows the same signals
([web.md](web.md)); with an existing Grafana, import
` + "`grafana/dashboards/*.json`" + ` from the generated stack ([stack.md](stack.md)).
Series names are explained in [metrics.md](metrics.md) and the recording
rules (` + "`pool:…`, `server:…`" + `) in [stack.md](stack.md#recording-rules).
Every rate of a counter is written ` + "`(rate(X[r]) unless resets(X[r]) > 0)`" + `:
no value over a window in which the counter went down, as in kvwatch's web
UI ([stack.md](stack.md#counter-rates)).
`

func checkDoc(t *testing.T, p string, want []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v; write it with go test ./internal/dashpreview -update", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is not the preview of the generated dashboards; rewrite it with go test ./internal/dashpreview -update", p)
	}
}
