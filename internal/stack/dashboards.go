package stack

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/gauge"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// panelKind is the Grafana visualization of a panel.
type panelKind int

const (
	kindTimeseries panelKind = iota
	kindStat
	kindGauge
	kindBarGauge
	kindTable
)

// query is one PromQL target of a panel.
type query struct {
	expr, legend string
	instant      bool
}

// step is one threshold: from value (nil: the base) the colour applies.
type step struct {
	value *float64
	color string
}

// panelSpec describes a panel independently of the Grafana builder types,
// so tests and the end-to-end check can walk every query.
type panelSpec struct {
	kind        panelKind
	title       string
	description string
	unit        string
	queries     []query
	steps       []step
	min, max    *float64
	w, h        uint32
	// emptyOK says why the panel may legitimately show no data; "" means it
	// must have data whenever kvwatch scrapes a live engine that reports the
	// signal. The generated description ends with it after
	// signal.EmptyWhen, which `kvwatch check queries` reads.
	emptyOK string
}

// panelDescription is p's description, with the line that declares when
// the panel is empty by design.
func panelDescription(p panelSpec) string {
	return withEmptyWhen(p.description, p.emptyOK)
}

// withEmptyWhen appends the signal.EmptyWhen line of cond to description
// (as a paragraph of its own: Grafana renders descriptions as Markdown).
func withEmptyWhen(description, cond string) string {
	if cond == "" {
		return description
	}
	return description + "\n\n" + signal.EmptyWhen + cond + "."
}

// DashboardSpec is one generated dashboard.
type DashboardSpec struct {
	// File is the JSON file name under grafana/dashboards/.
	File   string
	UID    string
	Title  string
	panels []panelSpec
}

// PanelQuery is one PromQL expression of a generated dashboard panel.
type PanelQuery struct {
	Dashboard, Panel, Expr string
	// EmptyOK says why the panel may legitimately return nothing ("" if it
	// must return data on a live stack).
	EmptyOK string
}

// Queries lists every PromQL expression of d's panels, with Grafana
// variables still in place.
func (d DashboardSpec) Queries() []PanelQuery {
	var out []PanelQuery
	for _, p := range d.panels {
		for _, q := range p.queries {
			out = append(out, PanelQuery{Dashboard: d.Title, Panel: p.title, Expr: q.expr, EmptyOK: p.emptyOK})
		}
	}
	return out
}

// PanelCount is the number of panels of d.
func (d DashboardSpec) PanelCount() int { return len(d.panels) }

func f(v float64) *float64 { return &v }

// Colours of thresholds.
const (
	green  = "green"
	orange = "orange"
	red    = "red"
	blue   = "blue"
)

// Grafana variable names.
const (
	varDatasource = "datasource"
	varCluster    = signal.LabelCluster
	varPool       = "pool"
	varRole       = "role"
	varServer     = "server"
)

// Selectors with the dashboard variables. All variables allow "All" as .*,
// which also matches an absent label (targets without cluster or pool).
func poolSel(extra ...string) string {
	s := []string{
		signal.LabelCluster + `=~"$` + varCluster + `"`,
		signal.LabelPool + `=~"$` + varPool + `"`,
		signal.LabelRole + `=~"$` + varRole + `"`,
	}
	return "{" + strings.Join(append(s, extra...), ",") + "}"
}

func serverSel(extra ...string) string {
	return poolSel(append([]string{signal.LabelServer + `=~"$` + varServer + `"`}, extra...)...)
}

func targetSel(extra ...string) string {
	return "{" + strings.Join(append([]string{signal.LabelServer + `=~"$` + varServer + `"`}, extra...), ",") + "}"
}

// poolLegend names a pool-level series in a panel's legend.
const poolLegend = "{{" + signal.LabelCluster + "}}/{{" + signal.LabelPool + "}} {{" + signal.LabelRole + "}}"

// usageSteps colours KV usage by the alert thresholds.
func usageSteps(o Options) []step {
	return []step{{nil, green}, {f(o.Config.Alerts.KVUsageWarning), orange}, {f(o.Config.Alerts.KVUsageCritical), red}}
}

// Dashboards returns the fleet and server dashboards.
func Dashboards(o Options) []DashboardSpec {
	o = o.WithDefaults()
	a := o.Config.Alerts
	ratio := f(0)
	one := f(1)
	rateQ := func(m signal.Metric, sel string) string { return counterRate(m.Name+sel, "$__rate_interval", "") }
	pd := strings.Join([]string{signal.QueuePrealloc, signal.QueueBootstrap, signal.QueueTransfer, signal.QueueInflight}, "|")
	alertNames := strings.Join(AlertNames(), "|")
	sumPool := func(m signal.Metric, by ...string) string {
		return fmt.Sprintf("sum by (%s) (%s%s)", strings.Join(by, ", "), recSum("pool", m), poolSel())
	}
	sumPoolRate := func(m signal.Metric, by ...string) string {
		return fmt.Sprintf("sum by (%s) (%s%s)", strings.Join(by, ", "), recRate("pool", m), poolSel())
	}
	role := signal.LabelRole
	// A pool is one role in one cluster and pool: the fleet panels group
	// by all three, so two clusters' decode servers are never summed.
	poolKey := []string{signal.LabelCluster, signal.LabelPool, role}
	fleet := DashboardSpec{File: "kvwatch-fleet.json", UID: "kvwatch-fleet", Title: "kvwatch / Fleet KV cache", panels: []panelSpec{
		{kind: kindStat, title: "KV usage by pool", unit: "percentunit", min: ratio, max: one, w: 6, h: 6,
			description: "Capacity-weighted KV usage of each selected pool (one role in one cluster and pool: pools are never summed together): sum of used tokens over sum of capacity (never an average of ratios).",
			queries:     []query{{expr: fmt.Sprintf("%s / (%s > 0)", sumPool(signal.KVUsedTokens, poolKey...), sumPool(signal.KVCapacityTokens, poolKey...)), legend: poolLegend, instant: true}},
			steps:       usageSteps(o)},
		{kind: kindTimeseries, title: "KV usage per pool", unit: "percentunit", min: ratio, max: one, w: 18, h: 6,
			description: "Capacity-weighted KV usage of each pool and role.",
			queries:     []query{{expr: RecUsageRatio("pool") + poolSel(), legend: poolLegend}},
			steps:       usageSteps(o)},
		{kind: kindTimeseries, title: "KV tokens: used, available, capacity", unit: "short", w: 12, h: 8,
			description: "Per selected pool, in tokens.",
			queries: []query{
				{expr: sumPool(signal.KVUsedTokens, poolKey...), legend: "used " + poolLegend},
				{expr: sumPool(signal.KVAvailableTokens, poolKey...), legend: "available " + poolLegend},
				{expr: sumPool(signal.KVCapacityTokens, poolKey...), legend: "capacity " + poolLegend},
			},
			steps: []step{{nil, green}}},
		{kind: kindBarGauge, title: "Headroom: requests that still fit", unit: "short", w: 12, h: 8,
			description: "How many more requests of request_tokens tokens fit in the free KV cache of each selected pool.",
			queries:     []query{{expr: sumPool(signal.KVHeadroomRequests, append(poolKey, signal.LabelRequest)...), legend: poolLegend + " × {{request_tokens}} tok", instant: true}},
			steps:       []step{{nil, red}, {f(1), orange}, {f(10), green}}},
		{kind: kindBarGauge, title: "Fullest servers", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "KV usage of the 15 fullest servers.",
			queries:     []query{{expr: fmt.Sprintf("topk(15, %s%s)", signal.KVUsageRatio.Name, poolSel()), legend: "{{server}} ({{role}})", instant: true}},
			steps:       usageSteps(o)},
		{kind: kindTimeseries, title: "Running and queued requests", unit: "short", w: 12, h: 8,
			description: "Requests in the running batch and waiting, by queue (waiting, and the PD queues prealloc, bootstrap, transfer, inflight).",
			queries: []query{
				{expr: sumPool(signal.RequestsRunning, poolKey...), legend: "running " + poolLegend},
				{expr: sumPool(signal.RequestsQueued, append(poolKey, signal.LabelQueue)...), legend: "{{queue}} " + poolLegend},
			},
			steps: []step{{nil, green}, {f(a.QueueLength), orange}}},
		{kind: kindTimeseries, title: "Prefix-cache hit ratio", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: "Rate of prompt tokens found in the prefix cache over rate of tokens looked up (5m), per pool. No data for engines without prefix-cache counters.",
			queries:     []query{{expr: RecHitRatio("pool") + poolSel(), legend: poolLegend}},
			steps:       []step{{nil, red}, {f(a.PrefixHitRatioLow), green}}},
		{kind: kindTimeseries, title: "Preemptions / retractions per second", unit: "reqps", w: 8, h: 8,
			description: "vLLM preemptions and SGLang retractions per second (5m rate), per pool.",
			queries:     []query{{expr: recRate("pool", signal.Preemptions) + poolSel(), legend: poolLegend}},
			steps:       []step{{nil, green}, {f(a.PreemptionsPerSecond), red}}},
		{kind: kindTimeseries, title: "Throughput: prompt and generation tokens/s", unit: "short", w: 8, h: 8,
			description: "Prompt (prefill) and generation (decode) tokens per second (5m rate), per role.",
			queries: []query{
				{expr: sumPoolRate(signal.PromptTokens, role), legend: "prompt {{role}}"},
				{expr: sumPoolRate(signal.GenerationTokens, role), legend: "generation {{role}}"},
			},
			steps: []step{{nil, green}}},
		{kind: kindTable, title: "Time to full", unit: "s", w: 12, h: 8,
			description: "Servers whose KV cache would be full soonest at the fill rate of the last 15m.",
			emptyOK:     "no server's KV usage is rising",
			queries:     []query{{expr: fmt.Sprintf("bottomk(10, %s%s)", RecTimeToFull, poolSel()), legend: "{{server}}", instant: true}},
			steps:       []step{{nil, red}, {f(time.Duration(a.KVFullWithin).Seconds()), orange}, {f(4 * time.Duration(a.KVFullWithin).Seconds()), green}}},
		{kind: kindTable, title: "Scrape health", unit: "short", w: 12, h: 8,
			description: "1 when kvwatch's last scrape of the engine succeeded; failing engines show their reason in the server dashboard.",
			queries:     []query{{expr: signal.TargetUp.Name, legend: "{{server}}", instant: true}},
			steps:       []step{{nil, red}, {f(1), green}}},
		{kind: kindTable, title: "Active kvwatch alerts", unit: "short", w: 24, h: 6,
			description: "kvwatch alerts firing now in this Prometheus.",
			emptyOK:     "no alert fires",
			queries:     []query{{expr: fmt.Sprintf(`ALERTS{alertstate="firing",alertname=~"%s"}`, alertNames), legend: "{{alertname}} {{server}}", instant: true}},
			steps:       []step{{nil, orange}}},
	}}
	server := DashboardSpec{File: "kvwatch-server.json", UID: "kvwatch-server", Title: "kvwatch / Server KV cache", panels: []panelSpec{
		{kind: kindGauge, title: "KV usage", unit: "percentunit", min: ratio, max: one, w: 6, h: 7,
			description: "Used over capacity of each selected server.",
			queries:     []query{{expr: signal.KVUsageRatio.Name + serverSel(), legend: "{{server}}", instant: true}},
			steps:       usageSteps(o)},
		{kind: kindTimeseries, title: "KV tokens: used, available, capacity", unit: "short", w: 12, h: 7,
			description: "In tokens. Capacity sums DP ranks and collapses TP duplicates.",
			queries: []query{
				{expr: signal.KVUsedTokens.Name + serverSel(), legend: "used {{server}}"},
				{expr: signal.KVAvailableTokens.Name + serverSel(), legend: "available {{server}}"},
				{expr: signal.KVCapacityTokens.Name + serverSel(), legend: "capacity {{server}}"},
			},
			steps: []step{{nil, green}}},
		{kind: kindStat, title: "Headroom", unit: "short", w: 6, h: 7,
			description: "Requests of request_tokens tokens that still fit.",
			queries:     []query{{expr: signal.KVHeadroomRequests.Name + serverSel(), legend: "{{server}} × {{request_tokens}} tok", instant: true}},
			steps:       []step{{nil, red}, {f(1), orange}, {f(10), green}}},
		{kind: kindTimeseries, title: "Evictable tokens", unit: "short", w: 6, h: 7,
			description: "Reusable prefix cache that can be reclaimed, in tokens. No data for engines that do not report it.",
			emptyOK:     "the engine does not report evictable prefix cache (e.g. vLLM, llama.cpp, TGI)",
			queries:     []query{{expr: signal.KVEvictableTokens.Name + serverSel(), legend: "{{server}}"}},
			steps:       []step{{nil, green}}},
		{kind: kindTimeseries, title: "Reserved ratio", unit: "percentunit", min: ratio, max: one, w: 6, h: 7,
			description: "KV reserved at admission but not yet written (TGI), shown apart from use.",
			emptyOK:     "the engine makes no reservations (only TGI does)",
			queries:     []query{{expr: signal.KVReservedRatio.Name + serverSel(), legend: "{{server}}"}},
			steps:       usageSteps(o)},
		{kind: kindTimeseries, title: "Queued KV demand", unit: "short", min: ratio, w: 6, h: 7,
			description: "KV that waiting requests need, over capacity (SGLang PD decode pre-allocation queue): unbounded above, 2 means the queue alone wants twice the cache. Never added to usage.",
			emptyOK:     "the engine does not report queued demand (only SGLang PD decode does)",
			queries:     []query{{expr: signal.KVDemandRatio.Name + serverSel(), legend: "{{server}}"}},
			steps:       []step{{nil, green}, {f(1), red}}},
		{kind: kindTimeseries, title: "Time to full", unit: "s", w: 6, h: 7,
			description: "Seconds until the KV cache is full at the fill rate of the last 15m; no data while usage is flat or falling.",
			emptyOK:     "the server's KV usage is not rising",
			queries:     []query{{expr: RecTimeToFull + serverSel(), legend: "{{server}}"}},
			steps:       []step{{nil, red}, {f(time.Duration(a.KVFullWithin).Seconds()), orange}, {f(4 * time.Duration(a.KVFullWithin).Seconds()), green}}},
		{kind: kindTimeseries, title: "Per-rank KV usage", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "KV usage of each DP rank (TP and PP ranks collapsed by maximum). No series for a server with one DP rank: its usage is the server's.",
			emptyOK:     "every selected server has one DP rank",
			queries:     []query{{expr: signal.RankKVUsageRatio.Name + serverSel(), legend: "{{server}} dp={{dp_rank}}"}},
			steps:       usageSteps(o)},
		{kind: kindTimeseries, title: "Rank spread", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "Highest minus lowest KV usage across DP ranks (0 with one rank).",
			queries:     []query{{expr: signal.RankSpreadRatio.Name + serverSel(), legend: "{{server}}"}},
			steps:       []step{{nil, green}, {f(a.RankSpread), orange}}},
		{kind: kindTimeseries, title: "Running and waiting requests", unit: "short", w: 12, h: 8,
			description: "Requests in the running batch and in the admission queue.",
			queries: []query{
				{expr: signal.RequestsRunning.Name + serverSel(), legend: "running {{server}}"},
				{expr: signal.RequestsQueued.Name + serverSel(signal.LabelQueue+`="`+signal.QueueWaiting+`"`), legend: "waiting {{server}}"},
			},
			steps: []step{{nil, green}, {f(a.QueueLength), orange}}},
		{kind: kindTimeseries, title: "PD queues: pre-allocation, bootstrap, transfer, in flight", unit: "short", w: 12, h: 8,
			description: "Prefill/decode disaggregation queues. No data on unified servers.",
			emptyOK:     "no PD-disaggregated (prefill/decode) server is selected",
			queries:     []query{{expr: signal.RequestsQueued.Name + serverSel(signal.LabelQueue+`=~"`+pd+`"`), legend: "{{queue}} {{server}}"}},
			steps:       []step{{nil, green}}},
		{kind: kindTimeseries, title: "Prefix-cache hit ratio", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: "Rate of hit tokens over rate of looked-up tokens.",
			queries: []query{{expr: fmt.Sprintf("%s / (%s > 0)", rateQ(signal.PrefixCacheHitTokens, serverSel()), rateQ(signal.PrefixCacheQueryTokens, serverSel())),
				legend: "{{server}}"}},
			steps: []step{{nil, red}, {f(a.PrefixHitRatioLow), green}}},
		{kind: kindTimeseries, title: "Preemptions / retractions per second", unit: "reqps", w: 8, h: 8,
			description: "Requests preempted (vLLM) or retracted (SGLang) per second.",
			queries:     []query{{expr: rateQ(signal.Preemptions, serverSel()), legend: "{{server}}"}},
			steps:       []step{{nil, green}, {f(a.PreemptionsPerSecond), red}}},
		{kind: kindTimeseries, title: "Prompt and generation tokens/s", unit: "short", w: 8, h: 8,
			description: "Prefill and decode throughput.",
			queries: []query{
				{expr: rateQ(signal.PromptTokens, serverSel()), legend: "prompt {{server}}"},
				{expr: rateQ(signal.GenerationTokens, serverSel()), legend: "generation {{server}}"},
			},
			steps: []step{{nil, green}}},
		{kind: kindTimeseries, title: "Scrape staleness", unit: "s", w: 8, h: 7,
			description: "Seconds since kvwatch's last successful scrape of the engine.",
			queries:     []query{{expr: "time() - " + signal.TargetLastSuccess.Name + targetSel(), legend: "{{server}}"}},
			steps:       []step{{nil, green}, {f(time.Duration(a.StaleAfter).Seconds()), red}}},
		{kind: kindTimeseries, title: "Scrape duration", unit: "s", w: 8, h: 7,
			description: "Duration of kvwatch's last scrape of the engine.",
			queries:     []query{{expr: signal.TargetScrapeDuration.Name + targetSel(), legend: "{{server}}"}},
			steps:       []step{{nil, green}, {f(1), orange}}},
		{kind: kindTable, title: "Scrape errors", unit: "short", w: 8, h: 7,
			description: "Why kvwatch's last scrape failed (http_404: metrics turned off in the engine).",
			emptyOK:     "every selected engine scrapes fine",
			queries:     []query{{expr: signal.TargetScrapeError.Name + targetSel(), legend: "{{server}} {{reason}}", instant: true}},
			steps:       []step{{nil, red}}},
		{kind: kindTable, title: "Signal provenance", unit: "short", w: 24, h: 8,
			description: "Where each signal comes from: direct, derived, reserved, or unavailable (shown as no data everywhere, never 0).",
			queries:     []query{{expr: signal.SignalInfo.Name + serverSel(), legend: "{{server}} {{signal}} {{provenance}}", instant: true}},
			steps:       []step{{nil, blue}}},
	}}
	fleet.panels = append(fleet.panels, planningPanels(o)...)
	fleet.panels = append(fleet.panels, projectionPanels()...)
	fleet.panels = append(fleet.panels, fleetTierPanels(o)...)
	fleet.panels = append(fleet.panels, fleetStatePanels(o)...)
	server.panels = append(server.panels, tierPanels(o)...)
	server.panels = append(server.panels, statePanels(o)...)
	return []DashboardSpec{fleet, server}
}

// dsRef is the datasource of every panel and query: the dashboard's
// datasource variable, never a fixed uid.
func dsRef() common.DataSourceRef {
	t, uid := "prometheus", "${"+varDatasource+"}"
	return common.DataSourceRef{Type: &t, Uid: &uid}
}

func thresholds(steps []step) *dashboard.ThresholdsConfigBuilder {
	ts := make([]dashboard.Threshold, len(steps))
	for i, s := range steps {
		ts[i] = dashboard.Threshold{Value: s.value, Color: s.color}
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(ts)
}

func targets(qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		b := prometheus.NewDataqueryBuilder().Expr(q.expr).LegendFormat(q.legend).
			RefId(string(rune('A' + i))).Datasource(dsRef())
		if q.instant {
			b = b.Instant().Format(prometheus.PromQueryFormatTable)
		} else {
			b = b.Range()
		}
		out[i] = b
	}
	return out
}

// panelBuilder turns a spec into the Grafana builder of its kind.
func panelBuilder(p panelSpec) cog.Builder[dashboard.Panel] {
	gp := dashboard.GridPos{W: p.w, H: p.h}
	colors := dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdThresholds)
	switch p.kind {
	case kindStat:
		b := stat.NewPanelBuilder().Title(p.title).Description(panelDescription(p)).Datasource(dsRef()).
			Targets(targets(p.queries)).Unit(p.unit).Thresholds(thresholds(p.steps)).GridPos(gp).
			ColorMode(common.BigValueColorModeBackground).GraphMode(common.BigValueGraphModeNone).
			Orientation(common.VizOrientationAuto).
			ColorScheme(colors).ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		if p.min != nil {
			b = b.Min(*p.min).Max(*p.max)
		}
		return b
	case kindGauge:
		b := gauge.NewPanelBuilder().Title(p.title).Description(panelDescription(p)).Datasource(dsRef()).
			Targets(targets(p.queries)).Unit(p.unit).Thresholds(thresholds(p.steps)).GridPos(gp).
			Orientation(common.VizOrientationAuto).
			ColorScheme(colors).ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		if p.min != nil {
			b = b.Min(*p.min).Max(*p.max)
		}
		return b
	case kindBarGauge:
		b := bargauge.NewPanelBuilder().Title(p.title).Description(panelDescription(p)).Datasource(dsRef()).
			Targets(targets(p.queries)).Unit(p.unit).Thresholds(thresholds(p.steps)).GridPos(gp).
			ColorScheme(colors).Orientation(common.VizOrientationHorizontal).
			DisplayMode(common.BarGaugeDisplayModeGradient).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		if p.min != nil {
			b = b.Min(*p.min).Max(*p.max)
		}
		return b
	case kindTable:
		return table.NewPanelBuilder().Title(p.title).Description(panelDescription(p)).Datasource(dsRef()).
			Targets(targets(p.queries)).Unit(p.unit).Thresholds(thresholds(p.steps)).GridPos(gp).
			ColorScheme(colors).CellOptions(common.TableCellOptions{TableAutoCellOptions: common.NewTableAutoCellOptions()})
	default:
		b := timeseries.NewPanelBuilder().Title(p.title).Description(panelDescription(p)).Datasource(dsRef()).
			Targets(targets(p.queries)).Unit(p.unit).Thresholds(thresholds(p.steps)).GridPos(gp).
			ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdPaletteClassic)).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)).
			FillOpacity(10).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
		if p.min != nil {
			b = b.Min(*p.min)
		}
		if p.max != nil {
			b = b.Max(*p.max)
		}
		return b
	}
}

// variables are the dashboard's template variables: datasource, then
// cluster, pool, role (and server on the server dashboard), each chained to
// the ones before it.
func variables(withServer bool) []cog.Builder[dashboard.VariableModel] {
	info := signal.ServerInfo.Name
	qv := func(name, label, q string) *dashboard.QueryVariableBuilder {
		return dashboard.NewQueryVariableBuilder(name).Label(label).
			Query(dashboard.StringOrMap{String: &q}).Datasource(dsRef()).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).IncludeAll(true).AllValue(".*")
	}
	// cluster and pool are optional target labels: without them the
	// variable has no values and All (.*) selects every series.
	optional := func(v *dashboard.QueryVariableBuilder, what string) *dashboard.QueryVariableBuilder {
		return v.Description(withEmptyWhen("The "+what+" of the servers, from the labels of their targets in the kvwatch config.",
			"no target has a "+what+"; All then selects every server"))
	}
	vs := []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder(varDatasource).Label("Data source").Type("prometheus"),
		optional(qv(varCluster, "Inference cluster", fmt.Sprintf("label_values(%s, %s)", info, signal.LabelCluster)), "cluster"),
		optional(qv(varPool, "Pool", fmt.Sprintf(`label_values(%s{%s=~"$%s"}, %s)`, info, signal.LabelCluster, varCluster, signal.LabelPool)), "pool"),
		qv(varRole, "Role", fmt.Sprintf(`label_values(%s{%s=~"$%s",%s=~"$%s"}, %s)`, info, signal.LabelCluster, varCluster, signal.LabelPool, varPool, signal.LabelRole)),
	}
	if withServer {
		vs = append(vs, qv(varServer, "Server", fmt.Sprintf(`label_values(%s{%s=~"$%s",%s=~"$%s",%s=~"$%s"}, %s)`,
			info, signal.LabelCluster, varCluster, signal.LabelPool, varPool, signal.LabelRole, varRole, signal.LabelServer)))
	}
	return vs
}

// schemaClean removes what the SDK's defaults add but Grafana 13's schema
// (@grafana/schema) does not have: the table footer (replaced in Grafana 13;
// the SDK's default also has a null reducer, which its own strict decode
// refuses) and the interval-variable fields auto, auto_min and auto_count
// on query and datasource variables.
//
//lint:ignore SA1019 the dashboards are Grafana's v1 JSON model (see dashboardJSON)
func schemaClean(d *dashboard.Dashboard) {
	for i := range d.Panels {
		if p := d.Panels[i].Panel; p != nil {
			if o, ok := p.Options.(*table.Options); ok {
				o.Footer = nil
			}
		}
	}
	if d.Templating.List == nil {
		return
	}
	for i := range d.Templating.List {
		v := &d.Templating.List[i]
		if v.Type != "interval" {
			v.Auto, v.AutoMin, v.AutoCount = nil, nil, nil
		}
	}
}

// dashboardJSON builds d with the Grafana foundation SDK and marshals it.
func dashboardJSON(d DashboardSpec) ([]byte, error) {
	//lint:ignore SA1019 the dashboards are Grafana's v1 JSON model, which every Grafana imports; dashboardv2 is not yet that
	b := dashboard.NewDashboardBuilder(d.Title).Uid(d.UID).Tags([]string{"kvwatch", "kv-cache"}).
		Refresh("30s").Time("now-3h", "now").Timezone("browser").Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Variables(variables(d.UID == "kvwatch-server")).
		Link(dashboard.NewDashboardLinkBuilder("kvwatch dashboards").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"kvwatch"}).AsDropdown(false).IncludeVars(true).KeepTime(true))
	for _, p := range d.panels {
		b = b.WithPanel(panelBuilder(p))
	}
	dash, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("build dashboard %s: %w", d.UID, err)
	}
	schemaClean(&dash)
	out, err := json.MarshalIndent(dash, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal dashboard %s: %w", d.UID, err)
	}
	return append(out, '\n'), nil
}
