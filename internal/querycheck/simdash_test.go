package querycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestDashboardFromEnginePagesPassesOffline: a dashboard generated from the
// engines' own expositions (the simulator's pages, written by its own code
// from the engines' sources) selects every sample name with a matcher on
// every label it carries. Offline it must pass without one error or
// warning: no false alarm on a name or label an engine really exposes. Each
// page is a dashboard of its own: the fleet has an SGLang that spells its
// names sglang_x beside ones that spell them sglang:x, which one dashboard
// would mix (mixed-escaping). A name whose meaning changed (meaningChanges)
// is the one warning expected.
func TestDashboardFromEnginePagesPassesOffline(t *testing.T) {
	cl := testenv.Builtin(t, "mixed", sim.Options{Seed: 5, ManualClock: true})
	type target struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	type panel struct {
		ID      int      `json:"id"`
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
	}
	var panels []panel
	for i, ep := range cl.Endpoints() {
		if legacy[ep.Engine] {
			continue // old versions: offline, their renamed names are errors by design
		}
		resp, err := http.Get(ep.URL + ep.MetricsPath)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page, err := expo.Parse(body, resp.Header.Get("Content-Type"), nil)
		if err != nil {
			t.Fatal(err)
		}
		p := panel{ID: i + 1, Title: ep.Name}
		names := page.Names()
		slices.Sort(names)
		for j, n := range names {
			ss := page.Samples(n)
			var ls []string
			ss[0].Labels.Range(func(l labels.Label) {
				if l.Name != model.MetricNameLabel {
					ls = append(ls, l.Name+`=~".+"`)
				}
			})
			expr := ss[0].Labels.Get(model.MetricNameLabel) + "{" + strings.Join(ls, ",") + "}"
			p.Targets = append(p.Targets, target{RefID: fmt.Sprint(j), Expr: expr})
		}
		panels = append(panels, p)
	}
	in := &Inputs{}
	for _, p := range panels {
		dash, err := json.Marshal(map[string]any{"title": "from the page of " + p.Title, "panels": []panel{p}})
		if err != nil {
			t.Fatal(err)
		}
		if err := in.ReadFile(p.Title+".json", dash); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := (&Checker{}).Check(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Queries < 200 {
		t.Errorf("only %d queries from %d pages", rep.Queries, len(panels))
	}
	seen := map[any]bool{}
	for _, f := range rep.Findings {
		if f.Severity == Info {
			continue
		}
		if f.Kind == KindMeaningChanged && meaningChanges[f.Selector[:strings.IndexByte(f.Selector, '{')]] {
			seen[f.Kind] = true
			continue
		}
		if f.Kind == KindUnknownLabel {
			if key := strings.SplitN(f.Message, " carries", 2)[0]; simDeviations[key] {
				seen[key] = true
				continue
			}
		}
		t.Errorf("%s: %s %s: %s", f.Where, f.Severity, f.Kind, f.Message)
	}
	for k := range simDeviations {
		if !seen[k] {
			t.Errorf("known simulator deviation %q no longer seen: remove it from simDeviations", k)
		}
	}
	if !seen[KindMeaningChanged] {
		t.Errorf("no %s warning for %v, which the pages expose", KindMeaningChanged, meaningChanges)
	}
}

// meaningChanges are the names on the pages whose meaning their engine
// changed (SGLang #22555: token_usage is the largest pool's usage), in both
// spellings the fleet's SGLang servers use.
var meaningChanges = map[string]bool{"sglang:token_usage": true, "sglang_token_usage": true}

// legacy are the simulator's old engine versions.
var legacy = map[string]bool{"sglang-legacy": true, "vllm-v0": true, "sglang-router-legacy": true}

// simDeviations are labels the simulator's gateway page carries that the
// gateway's source does not set (sgl-model-gateway/src/observability/
// metrics.rs: smg_worker_health and smg_worker_requests_active carry only
// worker; smg_worker_selection_total worker_type, connection_mode, model,
// policy). Keyed "label: metric" as the finding's message starts.
var simDeviations = map[string]bool{
	"worker_type: smg_worker_health":          true,
	"worker_type: smg_worker_requests_active": true,
	"worker: smg_worker_selection_total":      true,
}
