package promapi

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fixture fills 20 minutes at 5s: decode server d1 (pool p1) has used
// growing 10 tokens/s from 1000 of capacity 100000; d2 (p1) flat 30000 of
// 100000; prefill p (pool p2) flat 5000 of 50000. Every server's prefix
// hit counter grows 40 tokens/s and query counter 100 tokens/s.
// fixtureServer is one server of a fixture: its KV used over the seconds
// since t0, and its capacity.
type fixtureServer struct {
	name, pool, role string
	used             func(sec float64) float64
	capacity         float64
}

// fixture is 20 minutes of three servers every 5 s: d1 fills, d2 and p
// are flat.
func fixture(t *testing.T) (*history.Store, time.Time) {
	return fixtureOf(t, []fixtureServer{
		{"d1", "p1", "decode", func(s float64) float64 { return 1000 + 10*s }, 100000},
		{"d2", "p1", "decode", func(float64) float64 { return 30000 }, 100000},
		{"p", "p2", "prefill", func(float64) float64 { return 5000 }, 50000},
	})
}

func fixtureOf(t *testing.T, servers []fixtureServer) (*history.Store, time.Time) {
	t.Helper()
	st := history.New(history.Options{Retention: time.Hour})
	var end time.Time
	for i := 0; i <= 240; i++ {
		end = t0.Add(time.Duration(i) * 5 * time.Second)
		sec := float64(i * 5)
		for _, s := range servers {
			id := []string{signal.LabelServer, s.name, signal.LabelRole, s.role, signal.LabelPool, s.pool}
			add := func(m signal.Metric, v float64) {
				st.Append(labels.FromStrings(append([]string{model.MetricNameLabel, m.Name}, id...)...), end.UnixMilli(), v)
			}
			add(signal.KVUsedTokens, s.used(sec))
			add(signal.KVCapacityTokens, s.capacity)
			add(signal.KVUsageRatio, s.used(sec)/s.capacity)
			add(signal.PrefixCacheHitTokens, 40*sec)
			add(signal.PrefixCacheQueryTokens, 100*sec)
		}
	}
	return st, end
}

type response struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

type vectorData struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
		Values [][2]any          `json:"values"`
	} `json:"result"`
}

func call(t *testing.T, srv *httptest.Server, method, path string, form url.Values) (int, response) {
	t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = srv.Client().PostForm(srv.URL+path, form)
	} else {
		resp, err = srv.Client().Get(srv.URL + path + "?" + form.Encode())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	return resp.StatusCode, r
}

func server(t *testing.T, opts Options) *httptest.Server {
	mux := http.NewServeMux()
	a := New(opts)
	a.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	apis.Store(srv, a)
	return srv
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func TestQueries(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st, Now: func() time.Time { return end }})
	// At the end (1200s): d1 used 13000.
	tests := []struct {
		query string
		by    string
		want  map[string]float64
	}{
		{`sum by (pool) (kvwatch_kv_used_tokens) / sum by (pool) (kvwatch_kv_capacity_tokens)`, "pool",
			map[string]float64{"p1": 43000.0 / 200000, "p2": 0.1}},
		{`sum by (server) (rate(kvwatch_prefix_cache_hit_tokens_total[5m])) / sum by (server) (rate(kvwatch_prefix_cache_query_tokens_total[5m]))`, "server",
			map[string]float64{"d1": 0.4, "d2": 0.4, "p": 0.4}},
		// 10 tokens/s over capacity 100000: +0.36 in an hour.
		{`predict_linear(kvwatch_kv_usage_ratio{server="d1"}[15m], 3600)`, "server",
			map[string]float64{"d1": 0.13 + 0.36}},
		{`topk(1, kvwatch_kv_usage_ratio)`, "server", map[string]float64{"d2": 0.3}},
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, tt := range tests {
			code, r := call(t, srv, method, "/api/v1/query", url.Values{"query": {tt.query}})
			if code != 200 || r.Status != "success" {
				t.Fatalf("%s %s: %d %s %s", method, tt.query, code, r.ErrorType, r.Error)
			}
			var d vectorData
			json.Unmarshal(r.Data, &d)
			if d.ResultType != "vector" || len(d.Result) != len(tt.want) {
				t.Errorf("%s %s: %s with %d results, want vector with %d", method, tt.query, d.ResultType, len(d.Result), len(tt.want))
				continue
			}
			for _, res := range d.Result {
				got, _ := strconv.ParseFloat(res.Value[1].(string), 64)
				// The history stores *_ratio series to 21 significant
				// bits (docs/web.md, "Stored precision"): 2^-21 relative.
				if w := tt.want[res.Metric[tt.by]]; math.Abs(got-w) > 1e-6*math.Max(1, math.Abs(w)) {
					t.Errorf("%s %s [%s] = %v, want %v", method, tt.query, res.Metric[tt.by], got, w)
				}
				if ts := res.Value[0].(float64); ts != float64(end.Unix()) {
					t.Errorf("%s: sample time %v, want %v (the default time is now)", tt.query, ts, end.Unix())
				}
			}
		}
	}
}

// TestRecordingRuleQueries runs the stack's recording rules, then queries
// their outputs the way the generated dashboards do.
func TestRecordingRuleQueries(t *testing.T) {
	st, end := fixture(t)
	groups := stack.RecordingRules(stack.Options{}).Groups
	m, err := alerting.New(alerting.Options{Groups: groups, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	for ts := end.Add(-5 * time.Minute); !ts.After(end); ts = ts.Add(15 * time.Second) {
		m.EvalAt(t.Context(), ts)
	}
	srv := server(t, Options{Queryable: st, Rules: m, Now: func() time.Time { return end }})
	q := stack.RecUsageRatio("pool")
	code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {q}, "time": {unix(end)}})
	if code != 200 {
		t.Fatalf("%s: %s", q, r.Error)
	}
	var d vectorData
	json.Unmarshal(r.Data, &d)
	got := map[string]float64{}
	for _, res := range d.Result {
		v, err := strconv.ParseFloat(res.Value[1].(string), 64)
		if err != nil {
			t.Fatalf("%s: value %v: %v", q, res.Value[1], err)
		}
		got[res.Metric["pool"]+"/"+res.Metric["role"]] = v
	}
	// Recording-rule ratios are stored to 21 significant bits
	// (docs/web.md, "Stored precision"): 2^-21 relative.
	want := map[string]float64{"p1/decode": 0.215, "p2/prefill": 0.1}
	ok := len(got) == len(want)
	for k, w := range want {
		if g, found := got[k]; !found || math.Abs(g-w) > 0x1p-21*w {
			ok = false
		}
	}
	if !ok {
		t.Errorf("%s = %v, want %v (within 2^-21 relative)", q, got, want)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/rules", url.Values{"type": {"record"}})
	if code != 200 || !strings.Contains(string(r.Data), `"name":"`+q+`"`) || !strings.Contains(string(r.Data), `"health":"ok"`) {
		t.Errorf("/api/v1/rules?type=record = %d %s, want the rule %s with health ok", code, r.Data, q)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/rules", url.Values{"type": {"alert"}})
	if code != 200 || string(r.Data) != `{"groups":[]}` {
		t.Errorf("/api/v1/rules?type=alert = %d %s, want no groups (only recording rules loaded)", code, r.Data)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/alerts", nil)
	if code != 200 || string(r.Data) != `{"alerts":[]}` {
		t.Errorf("/api/v1/alerts = %d %s, want empty", code, r.Data)
	}
}

func TestQueryRange(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st})
	form := url.Values{"query": {`kvwatch_kv_used_tokens{server="d1"}`},
		"start": {unix(end.Add(-2 * time.Minute))}, "end": {end.Format(time.RFC3339)}, "step": {"60"}}
	code, r := call(t, srv, http.MethodPost, "/api/v1/query_range", form)
	if code != 200 {
		t.Fatalf("query_range: %d %s", code, r.Error)
	}
	var d vectorData
	json.Unmarshal(r.Data, &d)
	if d.ResultType != "matrix" || len(d.Result) != 1 {
		t.Fatalf("query_range = %s", r.Data)
	}
	var got []string
	for _, v := range d.Result[0].Values {
		got = append(got, v[1].(string))
	}
	if want := []string{"11800", "12400", "13000"}; !slices.Equal(got, want) {
		t.Errorf("query_range values = %v, want %v", got, want)
	}
}

func TestSeriesAndLabels(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st, Now: func() time.Time { return end }})
	code, r := call(t, srv, http.MethodGet, "/api/v1/series", url.Values{"match[]": {`kvwatch_kv_used_tokens{pool="p1"}`}})
	if code != 200 {
		t.Fatalf("series: %s", r.Error)
	}
	var series []map[string]string
	json.Unmarshal(r.Data, &series)
	if len(series) != 2 || series[0]["server"] != "d1" || series[1]["server"] != "d2" {
		t.Errorf("series = %v, want d1 and d2", series)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/labels", nil)
	if want := `["__name__","pool","role","server"]`; code != 200 || string(r.Data) != want {
		t.Errorf("labels = %s, want %s", r.Data, want)
	}
	code, r = call(t, srv, http.MethodPost, "/api/v1/label/server/values", url.Values{"match[]": {`{role="decode"}`}})
	if want := `["d1","d2"]`; code != 200 || string(r.Data) != want {
		t.Errorf("label/server/values{role=decode} = %s, want %s", r.Data, want)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/label/__name__/values", nil)
	if code != 200 || !strings.Contains(string(r.Data), signal.KVUsageRatio.Name) {
		t.Errorf("label/__name__/values = %s", r.Data)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/metadata", url.Values{"metric": {signal.KVUsedTokens.Name}})
	if code != 200 || !strings.Contains(string(r.Data), `"unit":"tokens"`) {
		t.Errorf("metadata = %s", r.Data)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/status/buildinfo", nil)
	if code != 200 || !strings.Contains(string(r.Data), `"goVersion"`) {
		t.Errorf("buildinfo = %s", r.Data)
	}
}

func TestErrors(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st, Now: func() time.Time { return end }})
	tests := []struct {
		path string
		form url.Values
		code int
		want string
	}{
		{"/api/v1/query", url.Values{"query": {"sum("}}, 400, "bad_data"},
		{"/api/v1/query", url.Values{"query": {"up"}, "time": {"yesterday"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"up"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "start": {"100"}, "end": {"50"}, "step": {"1"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"up"}, "start": {"0"}, "end": {"100000"}, "step": {"1"}}, 400, "bad_data"},
		{"/api/v1/series", nil, 400, "bad_data"},
		{"/api/v1/query", url.Values{"query": {`kvwatch_kv_used_tokens + on(pool) kvwatch_kv_capacity_tokens`}}, 422, "execution"},
	}
	for _, tt := range tests {
		code, r := call(t, srv, http.MethodGet, tt.path, tt.form)
		if code != tt.code || r.Status != "error" || r.ErrorType != tt.want {
			t.Errorf("GET %s?%s = %d %s %s, want %d %s", tt.path, tt.form.Encode(), code, r.ErrorType, r.Error, tt.code, tt.want)
		}
	}
}

// TestOnDemandRules queries the stack's on-demand server rules (never
// stored) the way the generated dashboards do, and checks they are listed
// as metric names and rules.
func TestOnDemandRules(t *testing.T) {
	st, end := fixture(t)
	groups := append(stack.RecordingRules(stack.Options{}).Groups, stack.AlertRules(stack.Options{}).Groups...)
	m, err := alerting.New(alerting.Options{Groups: groups, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	for ts := end.Add(-5 * time.Minute); !ts.After(end); ts = ts.Add(15 * time.Second) {
		m.EvalAt(t.Context(), ts)
	}
	srv := server(t, Options{Queryable: st, Rules: m, Now: func() time.Time { return end }})
	hit := stack.RecHitRatio("server")
	// Every server's hit counter grows 40 tokens/s and query counter 100/s:
	// ratio 0.4; d1 fills 10 tokens/s of 100000 from 13000 at the end:
	// (1 - 0.13) / 1e-4 = 8700 s to full; d2 and p are flat (no result).
	tests := []struct {
		query string
		want  map[string]float64 // by server
		name  string             // the __name__ of the results, "" for none
	}{
		{hit, map[string]float64{"d1": 0.4, "d2": 0.4, "p": 0.4}, hit},
		{hit + `{role="decode"}`, map[string]float64{"d1": 0.4, "d2": 0.4}, hit},
		{stack.RecTimeToFull, map[string]float64{"d1": 8700}, stack.RecTimeToFull},
		// The generated Grafana dashboards' two queries of an on-demand
		// rule, with their variables as Grafana substitutes "All".
		{`bottomk(10, ` + stack.RecTimeToFull + `{kv_cluster=~".*",pool=~".*",role=~".*"})`, map[string]float64{"d1": 8700}, stack.RecTimeToFull},
		{stack.RecTimeToFull + `{kv_cluster=~".*",pool=~"p1",role=~".*",server=~"d1|d2"}`, map[string]float64{"d1": 8700}, stack.RecTimeToFull},
		{`server:kvwatch_prefix_cache_query_tokens:rate5m{server="p"} * 2`, map[string]float64{"p": 200}, ""},
		{`max_over_time(server:kvwatch_prefix_cache_hit_tokens:rate5m{server="d2"}[10m])`, map[string]float64{"d2": 40}, ""},
	}
	for _, tt := range tests {
		code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {tt.query}})
		if code != 200 {
			t.Fatalf("%s: %d %s", tt.query, code, r.Error)
		}
		var d vectorData
		json.Unmarshal(r.Data, &d)
		got := map[string]float64{}
		for _, res := range d.Result {
			v, _ := strconv.ParseFloat(res.Value[1].(string), 64)
			got[res.Metric["server"]] = v
			if res.Metric["__name__"] != tt.name {
				t.Errorf("%s: result __name__ %q, want %q", tt.query, res.Metric["__name__"], tt.name)
			}
		}
		ok := len(got) == len(tt.want)
		for k, w := range tt.want {
			// The usage ratio is stored to 21 bits: 2^-21 relative.
			if g, found := got[k]; !found || math.Abs(g-w) > 1e-5*w {
				ok = false
			}
		}
		if !ok {
			t.Errorf("%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	form := url.Values{"query": {hit + `{server="d1"}`}, "start": {unix(end.Add(-2 * time.Minute))}, "end": {unix(end)}, "step": {"60"}}
	code, r := call(t, srv, http.MethodPost, "/api/v1/query_range", form)
	var d vectorData
	json.Unmarshal(r.Data, &d)
	if code != 200 || len(d.Result) != 1 || len(d.Result[0].Values) != 3 || d.Result[0].Values[2][1] != "0.4" {
		t.Errorf("query_range %s = %d %s, want 3 points of 0.4", form.Get("query"), code, r.Data)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {hit + "{"}})
	if code != 400 || r.ErrorType != "bad_data" || !strings.Contains(r.Error, "parse error") {
		t.Errorf("bad query = %d %s %s, want 400 bad_data with the parse error", code, r.ErrorType, r.Error)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/label/__name__/values", nil)
	if code != 200 || !strings.Contains(string(r.Data), `"`+hit+`"`) || !strings.Contains(string(r.Data), `"`+signal.KVUsageRatio.Name+`"`) {
		t.Errorf("label/__name__/values = %s, want the stored names and %s", r.Data, hit)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/label/__name__/values", url.Values{"match[]": {`{__name__=~"server:.*"}`}})
	if code != 200 || !strings.Contains(string(r.Data), `"`+stack.RecTimeToFull+`"`) {
		t.Errorf("label/__name__/values{__name__=~server:.*} = %s, want %s", r.Data, stack.RecTimeToFull)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/label/__name__/values", url.Values{"match[]": {`{role="decode"}`}})
	if code != 200 || !strings.Contains(string(r.Data), `"`+hit+`"`) || strings.Contains(string(r.Data), "server:kvwatch_prompt_tokens:rate5m") {
		t.Errorf("label/__name__/values{role=decode} = %s, want %s and not the rate of a counter the history lacks", r.Data, hit)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/rules", url.Values{"type": {"record"}})
	if code != 200 || !strings.Contains(string(r.Data), `"name":"`+hit+`"`) || !strings.Contains(string(r.Data), `"onDemand":true`) {
		t.Errorf("/api/v1/rules?type=record = %d %s, want %s marked onDemand", code, r.Data, hit)
	}
}

// TestOnDemandSeriesAsStored: the series and label endpoints list an
// on-demand rule's series as they would list it stored. The same history
// is served twice, its rules evaluated every 15 s, once with the
// on-demand rules computed on demand and once with every rule stored
// (StoreAllRules, as before on-demand rules): the answers are the same.
// Every server fills here: a rule that filters by value (the time to
// full keeps rising usage only, deriv > 0) is listed on demand wherever
// its inputs are, which TestOnDemandSeriesOfAFilter shows.
func TestOnDemandSeriesAsStored(t *testing.T) {
	rising := []fixtureServer{
		{"d1", "p1", "decode", func(s float64) float64 { return 1000 + 10*s }, 100000},
		{"d2", "p1", "decode", func(s float64) float64 { return 30000 + 2*s }, 100000},
		{"p", "p2", "prefill", func(s float64) float64 { return 5000 + s }, 50000},
	}
	onDemand, names, end := rulesServer(t, rising, false)
	stored, _, _ := rulesServer(t, rising, true)
	if len(names) != 7 {
		t.Fatalf("on-demand rules %v, want the seven server rules", names)
	}
	recent := url.Values{"start": {unix(end.Add(-2 * time.Minute))}, "end": {unix(end)}}
	type ask struct {
		path  string
		match string
		form  url.Values
	}
	var asks []ask
	for _, n := range names {
		asks = append(asks, ask{"/api/v1/series", n, nil}, ask{"/api/v1/series", n + `{role="decode"}`, nil},
			ask{"/api/v1/series", n + `{server=~"d.*"}`, recent}, ask{"/api/v1/labels", n, nil},
			ask{"/api/v1/label/server/values", n, nil}, ask{"/api/v1/label/pool/values", n + `{role="prefill"}`, recent})
	}
	asks = append(asks, ask{"/api/v1/series", `{server="d1"}`, nil}, ask{"/api/v1/series", `{__name__=~"server:.+", pool="p1"}`, nil},
		ask{"/api/v1/label/__name__/values", `{server="d1"}`, nil}, ask{"/api/v1/label/__name__/values", `{__name__=~"server:.*hit.*"}`, nil},
		ask{"/api/v1/labels", `{role="prefill"}`, recent})
	listed := 0
	for _, a := range asks {
		form := url.Values{"match[]": {a.match}}
		for k, v := range a.form {
			form[k] = v
		}
		_, got := call(t, onDemand, http.MethodGet, a.path, form)
		_, want := call(t, stored, http.MethodGet, a.path, form)
		if got.Status != "success" || want.Status != "success" {
			t.Fatalf("%s %s: on demand %s %s, stored %s %s", a.path, a.match, got.Status, got.Error, want.Status, want.Error)
		}
		if string(got.Data) != string(want.Data) {
			t.Errorf("%s?match[]=%s:\n on demand %s\n stored    %s", a.path, a.match, got.Data, want.Data)
		}
		if string(got.Data) != "[]" {
			listed++
		}
	}
	if listed < len(asks)/2 {
		t.Errorf("only %d of %d answers list anything: the fixture does not exercise the rules", listed, len(asks))
	}
}

// TestOnDemandSeriesOfAFilter: an on-demand rule that filters by value is
// listed where its inputs are: the time to full of the flat d2 and p,
// which no evaluation kept (docs/web.md says so).
func TestOnDemandSeriesOfAFilter(t *testing.T) {
	st, end := fixture(t)
	m, err := alerting.New(alerting.Options{Groups: stack.RecordingRules(stack.Options{}).Groups, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := server(t, Options{Queryable: st, Rules: m, Now: func() time.Time { return end }})
	servers := func(path, query string) []string {
		_, r := call(t, srv, http.MethodGet, path, url.Values{"match[]": {stack.RecTimeToFull}, "query": {query}})
		var out []string
		if path == "/api/v1/series" {
			var series []map[string]string
			json.Unmarshal(r.Data, &series)
			for _, l := range series {
				out = append(out, l["server"])
			}
			return out
		}
		var d vectorData
		json.Unmarshal(r.Data, &d)
		for _, res := range d.Result {
			out = append(out, res.Metric["server"])
		}
		return out
	}
	if got := servers("/api/v1/series", ""); !slices.Equal(got, []string{"d1", "d2", "p"}) {
		t.Errorf("series of %s: servers %v, want d1 (rising) and the flat d2 and p", stack.RecTimeToFull, got)
	}
	if got := servers("/api/v1/query", stack.RecTimeToFull); !slices.Equal(got, []string{"d1"}) {
		t.Errorf("%s: servers %v, want d1 only", stack.RecTimeToFull, got)
	}
}

// rulesServer serves a fixture of servers with the stack's recording
// rules evaluated every 15 s over it, on demand or all stored; it returns
// the on-demand names and the fixture's end.
func rulesServer(t *testing.T, servers []fixtureServer, storeAll bool) (*httptest.Server, []string, time.Time) {
	st, end := fixtureOf(t, servers)
	m, err := alerting.New(alerting.Options{Groups: stack.RecordingRules(stack.Options{}).Groups, Storage: st, StoreAllRules: storeAll})
	if err != nil {
		t.Fatal(err)
	}
	for ts := t0; !ts.After(end); ts = ts.Add(15 * time.Second) {
		m.EvalAt(t.Context(), ts)
	}
	return server(t, Options{Queryable: st, Rules: m, Now: func() time.Time { return end }}), m.OnDemandNames(), end
}
