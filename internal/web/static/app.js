// kvwatch web UI: plain JavaScript, no framework. Pages are rendered from
// serve's report (/api/kvwatch/v1/report), the Prometheus-compatible API
// over the in-memory history (/api/v1/...) and /api/kvwatch/v1/capacity.
// An unavailable value is shown as "--", never as 0. The overview and the
// pool cards show the report's text (servers[].text, pools[].text): the
// values as status and top write them, formatted and summed once in Go.
// The formatting below is for what the report has no text for: chart
// axes and legends (PromQL), alert values, and the exact values of the
// server page's signal table and the planner. Where a value has a text
// form in Go (package textfmt), the function here writes the same:
// fmtSpan, fmtTimeToFull, fmtCount, fmtRate, alertCounts, hitWindows,
// limitersText (internal/cli TestWebUIFormatsAsTextfmt compares them with
// textfmt's shared cases).
"use strict";

const state = { settings: null, report: null, alerts: [], charts: [], timer: null, page: "", range: 3600, win: null };

// ---- formatting --------------------------------------------------------

// val returns a kv.Value's number, or null when unavailable.
function val(v) {
  if (v == null || typeof v !== "object") return null;
  if (v.provenance === "unavailable" || v.value == null) return null;
  return v.value;
}
function prov(v) { return v && typeof v === "object" ? v.provenance || "unavailable" : "unavailable"; }
function fmtInt(x) { return x == null ? "--" : Math.round(x).toLocaleString("en-US"); }
function fmtPct(x) { return x == null || !isFinite(x) ? "--" : (x * 100).toFixed(1) + "%"; }
function fmtNum(x) {
  if (x == null || !isFinite(x)) return "--";
  return Number.isInteger(x) ? x.toLocaleString("en-US") : x.toLocaleString("en-US", { maximumFractionDigits: 2 });
}
// fmtCompact writes large numbers with an SI suffix for chart axes: 2.58M.
function fmtCompact(x) {
  if (x == null || !isFinite(x)) return "--";
  const a = Math.abs(x);
  for (const [d, suf] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= d) return parseFloat((x / d).toPrecision(3)) + suf;
  }
  return String(parseFloat(x.toPrecision(3)));
}
// fmtValue rounds an alert's value (a string from the API) to 4
// significant digits: 0.9967226982116699 is 0.9967.
function fmtValue(v) {
  const x = parseFloat(v);
  if (!isFinite(x)) return String(v);
  return Number.isInteger(x) ? x.toLocaleString("en-US") : String(parseFloat(x.toPrecision(4)));
}
// fmtCount writes a whole quantity as textfmt.Count: exact below 10,000
// ("9,999"), then three significant digits with k, M or G ("20.5k"), in
// exponent form from 10^12.
function fmtCount(x) {
  if (x == null || !isFinite(x)) return "--";
  if (Math.abs(x) < 9999.5) return (Math.sign(x) * Math.round(Math.abs(x))).toLocaleString("en-US");
  const [mant, exp] = x.toExponential(2).split("e");
  const n = parseInt(exp, 10);
  if (n >= 12) return x.toExponential(2).replace(/\.?0+e/, "e");
  const digits = mant.replace("-", "").replace(".", "");
  const whole = (n % 3) + 1;
  return (x < 0 ? "-" : "") + digits.slice(0, whole) + (whole < 3 ? "." + digits.slice(whole) : "") + "kMG"[Math.floor(n / 3) - 1];
}
// fmtRate writes a rate as textfmt.Rate: two decimals below 10, then as
// fmtCount.
function fmtRate(x) {
  if (x == null || !isFinite(x)) return "--";
  return Math.abs(x) < 9.995 ? x.toFixed(2) : fmtCount(x);
}
// fmtAlertValue writes an alert's value (a string from the API) in the
// unit its rule's value_unit annotation names (internal/stack units.go):
// a ratio as a percentage, seconds as a duration, tokens and requests as
// counts with their unit; without a unit as fmtValue.
function fmtAlertValue(v, unit) {
  const x = parseFloat(v);
  if (!isFinite(x)) return String(v);
  switch (unit) {
    case "ratio": return fmtPct(x);
    case "seconds": return fmtSpan(x);
    case "tokens": return fmtCount(x) + " tok";
    case "requests": return fmtCount(x) + " requests";
    case "requests/s": return fmtRate(x) + " requests/s";
  }
  return fmtValue(v);
}
// alertCounts says how many of the alerts fire and how many are pending,
// as textfmt.AlertCounts: "2 firing, 3 pending".
function alertCounts(list) {
  const firing = list.filter((a) => a.state === "firing").length;
  return `${fmtInt(firing)} firing, ${fmtInt(list.length - firing)} pending`;
}
function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
// fmtDur writes a PromQL duration: 5m, 1h, 90s.
function fmtDur(sec) {
  if (sec >= 86400 && sec % 86400 === 0) return sec / 86400 + "d";
  if (sec >= 3600 && sec % 3600 === 0) return sec / 3600 + "h";
  if (sec >= 60 && sec % 60 === 0) return sec / 60 + "m";
  return Math.round(sec) + "s";
}
// fmtSpan writes a time span from a query as textfmt.Duration writes the
// report's: at most two units, rounded down (45s, 12m, 2h05m, 3d04h).
function fmtSpan(sec) {
  if (!(sec > 0)) return "0s";
  const two = (n) => String(Math.floor(n)).padStart(2, "0");
  if (sec < 100) return Math.floor(sec) + "s";
  if (sec < 6000) return Math.floor(sec / 60) + "m";
  if (sec < 48 * 3600) return Math.floor(sec / 3600) + "h" + two((sec % 3600) / 60) + "m";
  const d = Math.floor(sec / 86400);
  return d >= 1000 ? d + "d" : d + "d" + two((sec % 86400) / 3600) + "h";
}
// fmtTimeToFull writes a pool's time to full as textfmt.TimeToFull does:
// state "filling" (in seconds), "full" (byQueue: its queued demand alone
// fills it), "not_filling", else unavailable.
function fmtTimeToFull(state, seconds, byQueue) {
  switch (state) {
    case "filling": return "full in " + fmtSpan(seconds);
    case "full": return byQueue ? "full now (queue)" : "full now";
    case "not_filling": return "not filling";
  }
  return "time to full --";
}
// limitersText names the servers that limit a pool as textfmt.Limiters:
// "limited by prefill (queue: waits on decode's pre-allocation)".
function limitersText(ls) {
  if (!(ls || []).length) return "nothing limits admission";
  return "limited by " + ls.map((l) => `${l.server} (${l.factor}${l.waits_on ? ": waits on " + l.waits_on : ""})`).join(", ");
}
// hitWindows says once what the rows' prefix hit ratios are over, from
// their text's windows, as textfmt.HitWindows: "hit ratio over the last
// 5s; † since engine start".
function hitWindows(windows) {
  const over = [...new Set(windows.filter((w) => w && w !== "since engine start"))];
  const since = windows.includes("since engine start");
  if (over.length && since) return "hit ratio " + over.join(", ") + "; † since engine start";
  if (over.length) return "hit ratio " + over.join(", ");
  return since ? "† hit ratio since engine start" : "";
}
// addrOf is a row's address (host:port of its URL) where its name is
// another, as status shows it; "" when the name is the address.
function addrOf(s) {
  try {
    const host = new URL(s.url).host;
    return host === s.name ? "" : host;
  } catch (e) {
    return "";
  }
}

// Provenance markers: a reservation is not real use (TGI), a derived value
// is computed from others, a partial sum misses parts, an implausible value
// cannot be true. Direct and unavailable values carry no marker ("--" says
// unavailable).
const provText = {
  reserved: "reservation: KV reserved at admission, not KV actually written",
  derived: "derived: computed by kvwatch from other values",
  partial: "partial: a sum where some DP ranks or servers did not report the value; a lower bound, not a total",
  implausible: "implausible: the engine reported a value that cannot be true; see the server's warnings",
};
const provLetter = { reserved: "R", derived: "d", partial: "?", implausible: "!" };
function mark(p, why) {
  if (!provLetter[p]) return "";
  const t = esc(why ? provText[p] + " (" + why + ")" : provText[p]);
  return `<span class="prov-mark prov-${p}" title="${t}" aria-label="${t}" role="img">${provLetter[p]}</span>`;
}
// shown formats a known value by its provenance: a partial sum as ~900?,
// an implausible value never as a plausible number.
function shown(v, fmt) {
  const x = val(v);
  if (x == null) return fmt(null);
  if (prov(v) === "partial") return "~" + fmt(x) + "?";
  if (prov(v) === "implausible") return "implausible";
  return fmt(x);
}
// cell formats a kv.Value with its marker; the number sits in its own
// element (data-field) so tests and copy-paste read it alone.
function cell(field, v, fmt) {
  const x = val(v);
  return `<span data-field="${esc(field)}" data-provenance="${esc(prov(v))}">${shown(v, fmt)}</span>${x == null ? "" : mark(prov(v))}`;
}
// textCell shows a value's text from the report (servers[].text,
// pools[].text: already marked ~…? when partial, ! when implausible) with
// the provenance of its value v.
function textCell(field, v, text) {
  return `<span data-field="${esc(field)}" data-provenance="${esc(prov(v))}">${esc(text || "--")}</span>${val(v) == null ? "" : mark(prov(v))}`;
}
// fmtTimes writes a demand ratio (unbounded above): 17.6×.
function fmtTimes(x) {
  if (x == null || !isFinite(x)) return "--";
  const a = Math.abs(x);
  return (a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2)) + "×";
}
// warnings lists a server's warnings (implausible or ambiguous pages) and
// why the page leaves values unavailable where it says (an asleep engine,
// a removed or version-dependent name), in status's words.
function warnings(sv) {
  const w = (sv && sv.warnings) || [];
  const u = (sv && sv.unavailable) || [];
  if (!w.length && !u.length) return "";
  return `<ul class="warnings">${w.map((x) => `<li class="error" data-warning="${esc(x.reason)}">warning ${esc(x.reason)}: ${esc(x.detail)}</li>`).join("")}${
    u.map((x) => `<li class="muted" data-unavailable="${esc(x.reason)}">unavailable ${esc(x.reason)}: ${esc(x.detail)}</li>`).join("")}</ul>`;
}
function barClass(r) {
  if (r == null) return "unknown";
  if (r >= state.settings.kv_usage_critical) return "crit";
  if (r >= state.settings.kv_usage_warning) return "warn";
  return "ok";
}
// bar draws a KV usage bar with ticks at the warning and critical
// thresholds; a reservation is hatched.
function bar(v) {
  const r = prov(v) === "implausible" ? null : val(v);
  const w = r == null ? 0 : Math.min(100, Math.max(0, r * 100));
  const s = state.settings;
  const level = { ok: "below warning", warn: "at or over warning", crit: "at or over critical", unknown: "unavailable" }[barClass(r)];
  const label = `KV usage ${fmtPct(r)}, ${level} (warning ${fmtPct(s.kv_usage_warning)}, critical ${fmtPct(s.kv_usage_critical)})` +
    (prov(v) === "reserved" ? "; a reservation, not real use" : "");
  return `<span class="bar ${barClass(r)}${prov(v) === "reserved" ? " reserved" : ""}" role="img" title="${esc(label)}" aria-label="${esc(label)}">` +
    `<span class="fill" style="width:${w}%"></span>` +
    `<span class="tick" style="left:${s.kv_usage_warning * 100}%"></span><span class="tick" style="left:${s.kv_usage_critical * 100}%"></span></span>`;
}
// routerCell is a router's worker health: routers hold no KV cache.
function routerCell(s) {
  return `<span class="muted" title="routers hold no KV cache">workers <span data-field="workers">${esc((s.text || {}).workers || "--")}</span> healthy</span>`;
}
// headroom is the headroom the text shows: the smallest configured request
// size's (the context length's only when there is no other), as
// report.Server.FirstHeadroom picks it.
function headroom(s) {
  const list = (s.headroom || []).filter((h) => !h.context_length);
  const h = list[0] || (s.headroom || [])[0];
  return h ? { tokens: h.request_tokens, requests: h.requests } : null;
}
// rankLabel names a rank by the labels it has: "tp0", "dp1 tp0". The
// pipeline rank is left out while every rank of the set (all) is pp 0.
function rankLabel(m, all) {
  const pp = (all || [m]).some((x) => x.pp_rank && x.pp_rank !== "0");
  const parts = [];
  for (const [k, p] of [["dp_rank", "dp"], ["tp_rank", "tp"], ["pp_rank", "pp"]]) {
    if (m[k] != null && m[k] !== "" && (k !== "pp_rank" || pp)) parts.push(p + m[k]);
  }
  return parts.join(" ") || "rank";
}
// dpRanks counts the DP ranks of a server's ranks (kvwatch_rank_* series
// exist only with more than one).
function dpRanks(ranks) { return new Set(ranks.map((r) => r.dp_rank || "")).size; }

// ---- data --------------------------------------------------------------

// The page sends at most maxInFlight requests at once (serve runs 4
// queries at once by default, --query.max-concurrency, and other clients
// share them), and sends a query again when serve refused it for want of a
// slot (503 with Retry-After), up to busyRetries times, waiting as told
// (capped) and longer each time.
const maxInFlight = 3;
const busyRetries = 4;
let inFlight = 0;
const waiting = [];
async function slot() {
  if (inFlight < maxInFlight) { inFlight++; return; }
  await new Promise((resolve) => waiting.push(resolve));
}
function unslot() {
  const next = waiting.shift();
  if (next) next(); else inFlight--;
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function getJSON(path, params) {
  const u = new URL(path, document.baseURI);
  if (params) for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  for (let attempt = 0; ; attempt++) {
    await slot();
    let r, body;
    try {
      r = await fetch(u);
      body = r.ok ? await r.json() : (await r.text()).trim();
    } finally {
      unslot();
    }
    if (r.ok) return body;
    const after = r.headers.get("Retry-After");
    if (r.status === 503 && after !== null && attempt < busyRetries) {
      await sleep(Math.min(5, Math.max(0.2, parseFloat(after) || 1)) * 1000 * (attempt + 1));
      continue;
    }
    throw new Error(`${u.pathname}: ${r.status} ${body}`);
  }
}
async function api(path, params) {
  const j = await getJSON(path, params);
  if (j.status !== "success") throw new Error(j.error || "query failed");
  return j.data;
}
async function refreshData() {
  state.report = await getJSON("api/kvwatch/v1/report");
  // Before the first scrape the report may hold no servers (null lists).
  state.report.servers = state.report.servers || [];
  state.report.pools = state.report.pools || [];
  state.alerts = state.settings.alerts ? (await api("api/v1/alerts")).alerts || [] : [];
  const n = state.alerts.filter((a) => a.state === "firing").length;
  const badge = document.getElementById("alert-count");
  badge.hidden = state.alerts.length === 0;
  badge.textContent = alertCounts(state.alerts);
  badge.classList.toggle("pending", n === 0);
  document.getElementById("updated").textContent = "updated " + new Date(state.report.time).toLocaleTimeString();
  state.win = state.settings.history && (state.page === "overview" || state.page === "server") ? await timeWindow() : null;
}
function alertsOf(server) { return state.alerts.filter((a) => a.labels.server === server); }
// poolAlertsOf are a pool's own alerts (KVPoolFullSoon, ...): its role,
// cluster and pool labels, no server.
function poolAlertsOf(p) {
  return state.alerts.filter((a) => !a.labels.server && a.labels.role === p.role &&
    (a.labels.cluster || "") === (p.cluster || "") && (a.labels.pool || "") === (p.pool || ""));
}
// alertsLink is a row's or a card's alert counts, linked to the alerts
// page; "" when there is none.
function alertsLink(list) {
  if (!list.length) return "";
  const firing = list.some((a) => a.state === "firing");
  // Each count on one line: "4 firing," and "1 pending" wrap between them.
  const [f, p] = alertCounts(list).split(", ");
  return `<a href="#/alerts" data-field="alert-counts" class="${firing ? "state-firing" : "state-pending"}"><span class="nowrap">${esc(f)},</span> <span class="nowrap">${esc(p)}</span></a>`;
}

// Range choices of the charts, cut to the history window.
const ranges = [900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400];
const minSpan = 5 * 60; // a chart spans at least 5 minutes

// timeWindow decides the charts' time range, step and rate() range from
// the data the history holds: from the first sample (at least minSpan) up
// to now, within the chosen range. samples counts the most-sampled
// target's samples in it.
async function timeWindow() {
  const s = state.settings;
  const end = Date.now() / 1000;
  const max = Math.min(state.range, s.history_seconds || state.range);
  const step0 = Math.max(s.scrape_interval_seconds, Math.ceil(max / 240));
  const [cnt, first] = await Promise.all([
    api("api/v1/query", { query: `max(count_over_time(kvwatch_target_up[${Math.ceil(max)}s]))`, time: end }),
    api("api/v1/query_range", { query: "count(kvwatch_target_up)", start: end - max, end, step: step0 }),
  ]);
  const cr = cnt.result || [], fr = first.result || [];
  const samples = cr.length ? parseFloat(cr[0].value[1]) : 0;
  const firstTs = fr.length && (fr[0].values || []).length ? fr[0].values[0][0] : null;
  let start = end - max;
  if (firstTs != null) start = Math.max(start, Math.min(firstTs - step0, end - minSpan));
  const span = end - start;
  const step = Math.max(s.scrape_interval_seconds, Math.ceil(span / 240));
  // Like Grafana's $__rate_interval: at least 4 scrapes and 2 steps, and
  // 2 downsampled steps once the range reaches the downsampled history;
  // 2 observed sample gaps cover history gathered at another interval.
  const gap = firstTs != null && samples > 1 ? (end - Math.max(firstTs, start)) / (samples - 1) : 0;
  let rate = Math.max(4 * s.scrape_interval_seconds, 2 * step, 2 * gap);
  if (start < end - s.history_full_resolution_seconds) rate = Math.max(rate, 2 * s.history_downsample_step_seconds);
  return { start, end, step, rate: Math.ceil(rate), samples, firstTs };
}

// ---- charts ------------------------------------------------------------

const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];
const units = {
  ratio: { axis: (v) => (v * 100).toFixed(0) + "%", legend: fmtPct },
  tokens: { axis: fmtCompact, legend: (v) => fmtInt(v) },
  requests: { axis: fmtCompact, legend: (v) => fmtInt(v) },
  rate: { axis: fmtCompact, legend: (v) => fmtNum(v) },
  // demand over capacity: its own axis, never the 0–100 % usage axis
  times: { axis: (v) => fmtCompact(v) + "×", legend: fmtTimes },
};

// rateOf is the per-second rate of counter selector sel over range r
// ("$rate": the chart's), without the windows in which the counter went
// down. Across a reset PromQL's rate() counts the new reading as the
// increase: a counter back from 1,000,000 to 995,000 would be drawn at
// about 995,000 / range per second. Those windows are left out (a gap in
// the chart), as status and top show "--" for that window.
function rateOf(sel, r = "$rate") { return `(rate(${sel}[${r}]) unless resets(${sel}[${r}]) > 0)`; }

// chart draws range queries into el over state.win. Each query is
// {q, label(metric)}; "$rate" in q is replaced by the rate() range.
// opts: {unit, thresholds: true to draw the KV warning/critical lines}.
async function chart(el, queries, opts) {
  const w = state.win;
  el.innerHTML = "";
  delete el.dataset.points;
  if (w.samples < 2) {
    el.dataset.state = "collecting";
    el.dataset.points = "0";
    el.innerHTML = `<p class="muted collecting">collecting data… (${w.samples} sample${w.samples === 1 ? "" : "s"} so far; charts draw from two)</p>`;
    return;
  }
  const rate = fmtDur(w.rate);
  const results = await Promise.all(queries.map((q) =>
    api("api/v1/query_range", { query: q.q.replaceAll("$rate", rate), start: w.start, end: w.end, step: w.step })));
  const xsSet = new Set();
  const lines = [];
  results.forEach((res, i) => {
    const all = (res.result || []).map((r) => r.metric);
    const own = (res.result || []).map((s) => {
      s.values.forEach(([t]) => xsSet.add(t));
      return { label: queries[i].label(s.metric, all), m: new Map(s.values.map(([t, v]) => [t, parseFloat(v)])) };
    });
    // Queries keep their order; the series of one are sorted by name.
    own.sort((a, b) => a.label.localeCompare(b.label, "en", { numeric: true }));
    lines.push(...own);
  });
  const xs = [...xsSet].sort((a, b) => a - b);
  const data = [xs, ...lines.map((l) => xs.map((t) => (l.m.has(t) && isFinite(l.m.get(t)) ? l.m.get(t) : null)))];
  let points = 0;
  data.slice(1).forEach((d) => d.forEach((v) => { if (v != null) points++; }));
  el.dataset.points = points;
  el.dataset.rangeStart = w.start;
  el.dataset.rangeEnd = w.end;
  el.dataset.rateInterval = rate;
  if (points === 0) {
    el.dataset.state = "empty";
    el.innerHTML = `<p class="muted">${opts.unavailable ? esc(opts.unavailable) : "no data in this range" +
      (queries.some((q) => q.q.includes("$rate")) ? ` (rates over ${rate})` : "")}</p>`;
    return;
  }
  el.dataset.state = "drawn";
  const u0 = units[opts.unit];
  // Last non-null index of each series: the legend shows the newest values
  // when the cursor is not over the chart.
  const lastIdx = data.map((d, i) => { if (i === 0) return xs.length - 1; for (let j = d.length - 1; j >= 0; j--) if (d[j] != null) return j; return null; });
  // Points are drawn while a series has few of them (a line alone would
  // hide a single sample between gaps).
  const sparse = Math.max(...data.slice(1).map((d) => d.filter((v) => v != null).length)) < 30;
  const thr = opts.thresholds ? [[state.settings.kv_usage_warning, "#d9a400"], [state.settings.kv_usage_critical, "#d64541"]] : [];
  const showLatest = (u) => { if (u.cursor.idx == null) u.setLegend({ idxs: lastIdx }, false); };
  const u = new uPlot({
    width: Math.max(280, el.clientWidth || 500), height: 200,
    scales: { x: { time: true, range: () => [w.start, w.end] }, ...(opts.unit === "ratio" ? { y: { range: (_, lo, hi) => [0, Math.max(1, hi || 0)] } } : {}) },
    series: [{ value: (_, v) => (v == null ? "" : new Date(v * 1000).toLocaleTimeString()) },
      ...lines.map((l, i) => ({ label: l.label, stroke: colors[i % colors.length], width: 1.5, spanGaps: false,
        points: { show: sparse, size: 5 }, value: (_, v) => (v == null ? "--" : u0.legend(v)) }))],
    axes: [{ space: 70 }, { values: (_, ticks) => ticks.map(u0.axis), size: 56 }],
    hooks: {
      draw: [thresholdLines(thr)],
      setCursor: [showLatest],
      ready: [showLatest],
    },
  }, data, el);
  state.charts.push(u);
}
// thresholdLines is a uPlot draw hook: a dashed line at each [value,
// colour] of thr.
function thresholdLines(thr) {
  return (u) => {
    const ctx = u.ctx;
    for (const [v, c] of thr) {
      const y = Math.round(u.valToPos(v, "y", true));
      ctx.save();
      ctx.strokeStyle = c;
      ctx.lineWidth = devicePixelRatio;
      ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
      ctx.beginPath();
      ctx.moveTo(u.bbox.left, y);
      ctx.lineTo(u.bbox.left + u.bbox.width, y);
      ctx.stroke();
      ctx.restore();
    }
  };
}
function chartBox(id, title, note) {
  return `<div class="chart card"><h3>${esc(title)}${note ? ` <span class="muted note">${note}</span>` : ""}</h3><div id="${id}" class="plot"></div></div>`;
}
function destroyCharts() {
  state.charts.forEach((u) => u.destroy());
  state.charts = [];
}
function sel(name) { return JSON.stringify(name); }
function rangePicker() {
  const max = state.settings.history_seconds || 3600;
  const opts = ranges.filter((r) => r <= max);
  if (!opts.includes(max) && max < ranges[ranges.length - 1]) opts.push(max);
  return `<label class="range">Range <select id="range">${opts.map((r) => `<option value="${r}"${r === state.range ? " selected" : ""}>${fmtDur(r)}</option>`).join("")}</select></label>`;
}
function windowNote() {
  const w = state.win;
  if (!w) return "";
  const from = new Date(w.start * 1000).toLocaleTimeString();
  return `<p class="muted window-note">Charts from ${esc(from)} to now, ${w.samples} sample${w.samples === 1 ? "" : "s"} per target; rates over ${fmtDur(w.rate)}. ${rangePicker()}</p>`;
}

// ---- pages -------------------------------------------------------------

// fleetCards are one card per pool (the servers of one role, and of one
// cluster/pool label when set): prefill and decode are never summed. The
// first card names the most constrained pool.
function fleetCards(r) {
  const pools = r.pools || [];
  const f = r.fleet || {};
  const lim = f.limit_index != null && f.limit_index >= 0 ? pools[f.limit_index] : null;
  const head = pools.length > 1
    ? `<div class="card limit" data-limit="${esc(lim ? lim.name : "")}"><div class="muted">The limit</div><div class="v">${lim ? `${esc(lim.name)} pool ${textCell("limit-usage", lim.usage_ratio, (lim.text || {}).usage_ratio)}` : "no pool reports KV usage"}</div>
        <div class="muted">${pools.filter((p) => p !== lim).map((p) => `${esc(p.name)} ${esc((p.text || {}).usage_ratio || "--")}`).join(" · ")}</div></div>`
    : "";
  const card = (p) => {
    // The smallest configured size, as the text's headroom.
    const h = (p.headroom || []).reduce((a, x) => (a && a.request_tokens <= x.request_tokens ? a : x), null);
    const t = p.text || {};
    return `<div class="card pool" data-pool="${esc(p.name)}"><div class="muted">${pools.length > 1 ? esc(p.name) + " pool" : "Fleet"} KV usage · ${p.servers} server${p.servers === 1 ? "" : "s"}${p.counted < p.servers ? ` (${p.counted} report KV)` : ""}</div>
      <div class="v">${textCell("usage", p.usage_ratio, t.usage_ratio)}</div>
      <div>${textCell("used", p.used_tokens, t.used_tokens)} / ${textCell("capacity", p.capacity_tokens, t.capacity_tokens)} tok</div>
      <div title="more requests of the smallest configured size that fit">headroom ${textCell("headroom", h && h.requests, t.headroom)}</div>
      <div>running ${textCell("running", p.running, t.running)} · queued ${textCell("queued", p.queued, t.queued)}</div>
      ${val(p.demand_ratio) != null ? `<div>demand ${textCell("demand", p.demand_ratio, t.demand_ratio)} capacity</div>` : ""}${poolPlanLine(r, p)}
      ${p.role && poolAlertsOf(p).length ? `<div>alerts ${alertsLink(poolAlertsOf(p))}</div>` : ""}</div>`;
  };
  const failed = f.failed ? `<div class="card"><div class="muted">Down</div><div class="v error">${f.failed}</div></div>` : "";
  return `<div class="fleet">${head}${pools.map(card).join("") || card({ name: "fleet", servers: 0, counted: 0 })}${boundCards(r)}${failed}</div>`;
}

// boundCards are one card per hybrid server (a plan with a state pool):
// what caps its concurrency and its state pool, in the report's words
// (servers[].text.binding, state_pool), as status and top write them.
function boundCards(r) {
  return (r.servers || []).filter((s) => s.plan && s.plan.state_pool && s.text).map((s) => `<div class="card bound" data-bound="${esc(s.name)}">
      <div class="muted">${esc(s.name)} · KV tokens and state slots</div>
      <div data-field="binding">${esc(s.text.binding)}</div>
      <div class="muted" data-field="state-pool">${esc(s.text.state_pool)}</div></div>`).join("");
}

// hitCell shows the report's prefix-cache hit ratio (servers[].text): over
// the window named under the table, or since the engine started, marked
// †, as status and top show it; else "--" with the reason.
function hitCell(s) {
  const sv = s.server;
  const out = (text, why, p) => `<span data-field="hit" title="${esc(why)}">${esc(text)}</span>${p ? mark(p, why) : ""}`;
  if (s.role === "router") return out("--", "routers hold no KV cache");
  if (!sv) return out("--", "unavailable: the last scrape failed");
  const c = sv.counters || {};
  if (val(c.prefix_query_tokens) == null || val(c.prefix_hit_tokens) == null) {
    return out("--", `unavailable: ${sv.engine || "the engine"} exports no prefix-cache counters`);
  }
  const t = s.text || {};
  if (t.prefix_hit_window) return out(t.prefix_hit_ratio, `hit over queried tokens ${t.prefix_hit_window}`, "derived");
  return out("--", "no prefix-cache traffic since the engine started");
}

async function overview(main) {
  const r = state.report;
  const rows = r.servers.map((s) => {
    const sv = s.server || {};
    const t = s.text || {};
    const hr = headroom(s);
    const status = s.ok ? warnings(sv) : `<div class="error">${esc(s.error || s.reason || "scrape failed")}</div>`;
    const addr = addrOf(s);
    return `<tr data-server="${esc(s.name)}">
      <td><a href="#/server/${encodeURIComponent(s.name)}">${esc(s.name)}</a>${addr ? `<div class="muted addr" data-field="addr">${esc(addr)}</div>` : ""}${status}</td>
      <td data-field="role">${esc(s.role)}</td>
      <td data-field="engine">${esc(t.engine || sv.engine || "--")}</td>
      <td>${s.role === "router" ? routerCell(s) : s.role === "cache" ? cacheServerCell(s) : bar(sv.usage_ratio)}</td>
      <td class="num">${textCell("usage", sv.usage_ratio, t.usage_ratio)}</td>
      <td class="num">${textCell("used", sv.used_tokens, t.used_tokens)}</td>
      <td class="num">${textCell("capacity", sv.capacity_tokens, t.capacity_tokens)}</td>
      <td class="num" title="${hr ? "more requests of " + hr.tokens + " tokens that fit" : ""}">${textCell("headroom", hr && hr.requests, t.headroom)}</td>
      <td class="num">${textCell("running", sv.running, t.running)}</td>
      <td class="num">${textCell("queued", s.queued_total, t.queued_total)}</td>
      <td class="num">${textCell("demand", sv.demand_ratio, t.demand_ratio)}</td>
      <td class="num">${hitCell(s)}</td>
      <td data-field="alerts">${alertsLink(alertsOf(s.name))}</td>
    </tr>`;
  }).join("");
  main.innerHTML = fleetCards(r) + `
    <div class="table-wrap"><table id="servers"><thead><tr><th scope="col">Server</th><th scope="col">Role</th><th scope="col">Engine</th><th scope="col">KV cache</th>
      <th scope="col" class="num">Usage</th><th scope="col" class="num">Used tok</th><th scope="col" class="num">Capacity tok</th>
      <th scope="col" class="num" title="more requests of the smallest configured size that fit, per DP rank and summed: 276×8k is 276 of 8,192 tokens">Headroom</th><th scope="col" class="num">Running</th><th scope="col" class="num">Queued</th>
      <th scope="col" class="num" title="KV that waiting requests need, over capacity (unbounded above)">Demand</th><th scope="col" class="num" title="the report's prefix-cache hit ratio, over the window named under the table">Prefix hit</th><th scope="col">Alerts</th></tr></thead><tbody>${rows}</tbody></table></div>
    ${hitNote(r)}
    ${state.settings.history ? windowNote() + `<div class="charts single">${chartBox("chart-usage", "KV usage by server", "dashed: warning and critical")}</div>`
      : '<p class="muted">History is off (serve --history=0): no charts.</p>'}`;
  if (state.settings.history) {
    await chart(document.getElementById("chart-usage"), [{ q: "kvwatch_kv_usage_ratio", label: (m) => m.server }], { unit: "ratio", thresholds: true });
  }
}

// hitNote names the window of the overview's hit ratios, once.
function hitNote(r) {
  const w = hitWindows(r.servers.filter((s) => s.role !== "router").map((s) => (s.text || {}).prefix_hit_window || ""));
  return w ? `<p class="muted hit-note" data-field="hit-windows">${esc(w)}</p>` : "";
}

function signalRow(name, v, fmt) {
  const p = prov(v);
  return `<tr><td>${esc(name)}</td><td class="num">${cell(name, v, fmt)}</td><td class="prov" data-provenance="${esc(p)}">${esc(p)}</td></tr>`;
}

async function serverPage(main, name) {
  const s = state.report.servers.find((x) => x.name === name);
  if (!s) {
    main.innerHTML = `<p class="error">No server named ${esc(name)} in the report. <a href="#/">Back to the fleet</a></p>`;
    return;
  }
  const sv = s.server || {};
  const q = sv.queued || {};
  const rates = s.rates || {};
  const signals = s.server ? `<h3>Signals</h3><table id="signals"><thead><tr><th scope="col">Signal</th><th scope="col" class="num">Value</th><th scope="col">Provenance</th></tr></thead><tbody>
    ${sv.router ? signalRow("workers_healthy", sv.router.workers_healthy, fmtInt) + signalRow("workers_total", sv.router.workers_total, fmtInt) : ""}
    ${signalRow("usage_ratio", sv.usage_ratio, fmtPct)}
    ${signalRow("reserved_ratio", sv.reserved_ratio, fmtPct)}
    ${signalRow("demand_ratio", sv.demand_ratio, fmtTimes)}
    ${signalRow("demand_tokens", sv.demand_tokens, fmtInt)}
    ${signalRow("used_tokens", sv.used_tokens, fmtInt)}
    ${signalRow("capacity_tokens", sv.capacity_tokens, fmtInt)}
    ${signalRow("evictable_tokens", sv.evictable_tokens, fmtInt)}
    ${signalRow("running", sv.running, fmtInt)}
    ${["waiting", "prealloc", "bootstrap", "transfer", "inflight"].map((k) => signalRow("queued_" + k, q[k], fmtInt)).join("")}
    ${signalRow("context_length_tokens", sv.context_length_tokens, fmtInt)}
    ${signalRow("rank_spread_ratio", sv.rank_spread_ratio, fmtPct)}
    ${(s.headroom || []).map((h) => signalRow("headroom ×" + h.request_tokens, h.requests, fmtInt)).join("")}
    ${signalRow("prefix_hit_ratio" + (val(rates.prefix_hit_ratio) != null && (s.text || {}).prefix_hit_window ? " (" + s.text.prefix_hit_window + ")" : ""), rates.prefix_hit_ratio, fmtPct)}
    ${signalRow("preemptions_per_second", rates.preemptions_per_second, fmtNum)}
    ${signalRow("prompt_tokens_per_second", rates.prompt_tokens_per_second, fmtNum)}
    ${signalRow("generation_tokens_per_second", rates.generation_tokens_per_second, fmtNum)}
  </tbody></table>` : "";
  const ranks = (sv.ranks || []).length ? `<h3>Ranks</h3><table id="ranks"><thead><tr><th scope="col">Rank</th><th scope="col" class="num">Usage</th><th scope="col" class="num">Used</th><th scope="col" class="num">Capacity</th></tr></thead><tbody>
    ${sv.ranks.map((k) => `<tr><td>${esc(rankLabel(k, sv.ranks))}</td>
      <td class="num">${cell("usage", k.usage_ratio, fmtPct)}</td><td class="num">${cell("used", k.used_tokens, fmtInt)}</td><td class="num">${cell("capacity", k.capacity_tokens, fmtInt)}</td></tr>`).join("")}
  </tbody></table>` : "";
  // Why a chart can stay empty, from the report.
  const eng = sv.engine || "the engine";
  const none = (v, what) => (s.server && val(v) == null ? `unavailable: ${eng} exports no ${what}` : "");
  const noKV = s.role === "router" ? "unavailable: a router holds no KV cache (see its workers above)"
    : s.role === "cache" ? "unavailable: a cache server holds tiers for engines, no KV pool of its own (see its tiers below)" : "";
  const counters = sv.counters || {};
  // Series labels say when the value is a reservation.
  const rsv = (v, label) => (prov(v) === "reserved" ? label + " (reservation)" : label);
  const sq = `server=${sel(name)}`;
  main.innerHTML = `<h2 id="server-title">${esc(name)} <span class="muted">${esc(s.role)} · ${esc((s.text || {}).engine || sv.engine || "--")} ${esc(sv.model || "")}</span></h2>
    ${s.ok ? "" : `<p class="error">${esc(s.error || s.reason)}</p>`}
    <p class="muted">${esc(s.url)}</p>
    ${warnings(sv)}
    ${alertsOf(name).length ? `<h3>Alerts <span class="muted" data-field="alert-counts">${esc(alertCounts(alertsOf(name)))}</span></h3>${alertsTable("server-alerts", alertsOf(name))}` : ""}
    ${state.settings.history ? windowNote() + `<div class="charts">
      ${chartBox("c-usage", "KV usage (and reserved)", "dashed: warning and critical")}
      ${chartBox("c-demand", "Queued KV demand (× capacity)", "unbounded above; 1× is a full cache")}
      ${chartBox("c-tokens", "KV tokens: used, capacity, evictable")}
      ${chartBox("c-ranks", "KV usage per DP rank", "TP and PP ranks collapsed")}
      ${chartBox("c-queues", "Running and queued requests")}
      ${chartBox("c-preempt", "Preemptions / retractions per second")}
      ${chartBox("c-tput", "Throughput (tokens/s)")}
      ${(sv.cache_pools || []).length ? chartBox("c-cache-pools", "KV usage of further pools and tiers", "not the headline pool") : ""}
    </div>` : '<p class="muted">History is off: no charts.</p>'}
    <div class="charts"><div>${signals}</div><div>${ranks}${cachePoolsTable(sv)}</div></div>`;
  if (!state.settings.history) return;
  await Promise.all([
    chart(document.getElementById("c-usage"), [
      { q: `kvwatch_kv_usage_ratio{${sq}}`, label: () => rsv(sv.usage_ratio, "used") },
      { q: `kvwatch_kv_reserved_ratio{${sq}}`, label: () => "reserved" }], { unit: "ratio", thresholds: true, unavailable: noKV }),
    chart(document.getElementById("c-demand"), [
      { q: `kvwatch_kv_demand_ratio{${sq}}`, label: () => "demand" }], { unit: "times",
      unavailable: noKV || none(sv.demand_ratio, "queued demand (only SGLang PD decode does)") }),
    chart(document.getElementById("c-tokens"), [
      { q: `kvwatch_kv_used_tokens{${sq}}`, label: () => rsv(sv.used_tokens, "used") },
      { q: `kvwatch_kv_capacity_tokens{${sq}}`, label: () => "capacity" },
      { q: `kvwatch_kv_evictable_tokens{${sq}}`, label: () => "evictable" }], { unit: "tokens", unavailable: noKV }),
    chart(document.getElementById("c-ranks"), [
      { q: `kvwatch_rank_kv_usage_ratio{${sq}}`, label: rankLabel }], { unit: "ratio", thresholds: true,
      unavailable: noKV || (!s.server ? "" : !(sv.ranks || []).length ? `unavailable: ${eng} reports no per-rank KV` :
        dpRanks(sv.ranks) === 1 ? "one DP rank: same as the server's usage" : "") }),
    chart(document.getElementById("c-queues"), [
      { q: `kvwatch_requests_running{${sq}}`, label: () => "running" },
      { q: `kvwatch_requests_queued{${sq}}`, label: (m) => "queued " + m.queue }], { unit: "requests" }),
    chart(document.getElementById("c-preempt"), [
      { q: rateOf(`kvwatch_preemptions_total{${sq}}`), label: () => "preemptions/s" }], { unit: "rate",
      unavailable: none(counters.preemptions, "preemption or retraction counter") }),
    chart(document.getElementById("c-tput"), [
      { q: rateOf(`kvwatch_prompt_tokens_total{${sq}}`), label: () => "prompt" },
      { q: rateOf(`kvwatch_generation_tokens_total{${sq}}`), label: () => "generation" }], { unit: "rate",
      unavailable: val(counters.prompt_tokens) == null && val(counters.generation_tokens) == null ? none(null, "token counters") : "" }),
    (sv.cache_pools || []).length ? cachePoolsChart(sq, sv) : null,
  ]);
}

// runbookLink links an alert's runbook_url (http and https only).
function runbookLink(a) {
  const u = (a.annotations || {}).runbook_url || "";
  return /^https?:\/\//i.test(u) ? `<a href="${esc(u)}" data-field="runbook" target="_blank" rel="noopener noreferrer">runbook</a>` : "";
}
// alertsTable lists alerts: state, name, where (server or pool), severity,
// summary and description, since when, the value in its unit (the raw
// value on hover) and the runbook.
function alertsTable(id, list) {
  const rows = list.map((a) => {
    const ann = a.annotations || {};
    const where = a.labels.server ? esc(a.labels.server) : a.labels.role ? `<span class="muted">${esc(a.labels.role)} pool</span>` : "";
    return `<tr data-alert="${esc(a.labels.alertname)}"><td class="state-${esc(a.state)}">${esc(a.state)}</td>
      <td>${esc(a.labels.alertname)}</td><td>${where}</td><td>${esc(a.labels.severity || "")}</td>
      <td class="wrap"><div data-field="alert-summary">${esc(ann.summary || "")}</div>${ann.description ? `<div class="muted" data-field="alert-description">${esc(ann.description)}</div>` : ""}</td>
      <td>${esc(new Date(a.activeAt).toLocaleString())}</td>
      <td class="num" data-field="alert-value" data-unit="${esc(ann.value_unit || "")}" title="${esc(a.value)}">${esc(fmtAlertValue(a.value, ann.value_unit))}</td>
      <td>${runbookLink(a)}</td></tr>`;
  }).join("");
  return `<div class="table-wrap"><table id="${esc(id)}"><thead><tr><th scope="col">State</th><th scope="col">Alert</th><th scope="col">Server / pool</th><th scope="col">Severity</th><th scope="col">Summary</th><th scope="col">Active since</th><th scope="col" class="num">Value</th><th scope="col">Runbook</th></tr></thead><tbody>${rows}</tbody></table></div>`;
}

async function alertsPage(main) {
  if (!state.settings.alerts) {
    main.innerHTML = '<p class="muted">No alert rules are evaluated (serve runs without --rules or history).</p>';
    return;
  }
  const rules = ((await api("api/v1/rules", { type: "alert" })).groups || []).flatMap((g) => g.rules || []);
  main.innerHTML = `<h2>Active alerts <span class="muted" data-field="alert-counts">${esc(alertCounts(state.alerts))}</span></h2>
    ${state.alerts.length ? alertsTable("alerts", state.alerts) : '<p id="alerts" class="muted">No alert is pending or firing.</p>'}
    <h2>Rules</h2><div class="table-wrap"><table><thead><tr><th scope="col">Rule</th><th scope="col">State</th><th scope="col">Health</th><th scope="col">For</th><th scope="col">Expression</th></tr></thead><tbody>
    ${rules.map((r) => `<tr><td>${esc(r.name)}</td><td class="state-${esc(r.state)}">${esc(r.state)}</td>
      <td>${esc(r.health)}${r.lastError ? ` <span class="error">${esc(r.lastError)}</span>` : ""}</td>
      <td>${r.duration ? esc(fmtSpan(r.duration)) : ""}</td><td class="wrap"><code>${esc(r.query)}</code></td></tr>`).join("")}
    </tbody></table></div>`;
}

async function plannerPage(main) {
  if (!document.getElementById("tokens")) {
    main.innerHTML = `<h2>Capacity planner</h2>
      <p><label for="tokens">How many more requests of</label> <input id="tokens" type="number" min="1" value="8192"> tokens (prompt + output) fit right now?
      Per DP rank: floor(free KV / N), summed; evictable prefix cache counts as free.</p><div id="plan"></div>
      <h2>Today's mix: will it fit, when is it full, can I drain one?</h2>
      <p class="muted">Requests like the ones running now (free KV over the KV each running request holds), the demand-aware time to full,
      the N−1 answer (the pool's used and queued KV moved onto the rest, against the ${esc(fmtPct(state.settings.kv_usage_warning))} warning),
      and what limits each server. Formulas and limits: docs/planning.md.</p><div id="plan-mix"></div>
      <h2>Projection over days</h2>
      <p class="muted">Each pool's daily peak of KV load (used plus queued demand) in serve's history, the robust trend through it with its 95% band,
      and when the planned peak reaches the warning and the capacity, as <code>kvwatch plan</code> answers (docs/planning.md).</p><div id="projection"></div>`;
    document.getElementById("tokens").addEventListener("input", () => renderPlan());
  }
  await renderPlan();
}
// poolPlanLine is a pool card's planning line: what limits the pool and
// its N−1 answer (docs/planning.md).
function poolPlanLine(r, p) {
  const pp = (r.planning || []).find((x) => x.name === p.name);
  if (!pp) return "";
  const lim = esc(limitersText(pp.limiters));
  const n1 = pp.n1_safe && pp.drain_largest ? `N−1 safe: draining ${esc(pp.drain_largest.server)} leaves ${shown(pp.drain_largest.after_usage_ratio, fmtPct)} of the rest`
    : esc(pp.n1_note || "N−1 unknown");
  const t = p.text || {};
  const st = t.state ? `<div data-field="pool-state" class="state-${esc(pp.state)}">${esc(t.state)}${t.state_evidence ? ": " + esc(t.state_evidence) : ""}</div>` : "";
  return `${st}<div data-field="pool-limit">${lim}</div><div class="muted" data-field="pool-n1">${n1}</div>`;
}
// renderMix draws the planning view of the report (servers[].plan and
// planning[]), with each pool's time to full from the recording rules when
// the history runs.
async function renderMix() {
  const out = document.getElementById("plan-mix");
  if (!out) return;
  const pools = state.report.planning || [];
  const ttf = new Map(), filling = new Map();
  // A pool's key: the report names the inference cluster "cluster" (the
  // config's label), the exported series and the rules "kv_cluster".
  const key = (role, cluster, pool) => [role || "", cluster || "", pool || ""].join("/");
  if (state.settings.history && state.settings.alerts) {
    for (const [m, name] of [[ttf, "pool:kvwatch_kv_seconds_to_full:deriv15m"], [filling, "pool:kvwatch_kv_filling:deriv15m"]]) {
      try {
        for (const r of (await api("api/v1/query", { query: name })).result) m.set(key(r.metric.role, r.metric.kv_cluster, r.metric.pool), parseFloat(r.value[1]));
      } catch (e) { /* no history yet: the column says so */ }
    }
  }
  // As status --trend and top write the time to full (textfmt.TimeToFull):
  // 0 s is full now, by the queue when the pool's KV itself still has room
  // and requests wait for more than is free.
  const full = (p) => {
    const k = key(p.role, p.cluster, p.pool);
    if (ttf.has(k) && ttf.get(k) > 0) return fmtTimeToFull("filling", ttf.get(k));
    if (ttf.has(k)) {
      const rp = state.report.pools.find((x) => key(x.role, x.cluster, x.pool) === k) || {};
      const free = val(rp.capacity_tokens) - val(rp.used_tokens);
      return fmtTimeToFull("full", 0, val(rp.demand_tokens) > 0 && free > 0);
    }
    if (filling.get(k) === 0) return fmtTimeToFull("not_filling");
    return fmtTimeToFull("unavailable");
  };
  const n1 = (p) => {
    if (p.n1_safe && p.drain_largest) return `safe: draining ${esc(p.drain_largest.server)} leaves ${shown(p.drain_largest.after_usage_ratio, fmtPct)} of the rest`;
    return esc(p.n1_note || "--");
  };
  const limiters = (p) => esc(limitersText(p.limiters));
  const servers = state.report.servers.filter((s) => s.plan);
  out.innerHTML = `<div class="table-wrap"><table id="plan-pools"><thead><tr><th scope="col">Pool</th><th scope="col" class="num">Servers</th>
      <th scope="col" class="num">KV per running request</th><th scope="col" class="num">More of today's mix</th><th scope="col" class="num">Saturation</th>
      <th scope="col">Full</th><th scope="col">N−1</th><th scope="col" class="num">N−1 margin tokens</th>
      <th scope="col" class="num" title="servers of the pool's size that keep it at or under the autoscaling target, plus one for N−1">Servers needed</th><th scope="col">What limits it</th></tr></thead><tbody>
    ${pools.map((p) => `<tr data-pool="${esc(p.name)}"><td>${esc(p.name)}</td><td class="num">${p.servers}</td>
      <td class="num">${cell("per-request", p.kv_per_running_request_tokens, fmtInt)}</td>
      <td class="num">${cell("workload", p.workload_headroom_requests, fmtInt)}${val(p.kv_per_running_request_tokens) == null ? ' <span class="muted">(nothing runs)</span>' : ""}</td>
      <td class="num">${cell("saturation", p.saturation_ratio, fmtPct)}</td><td class="wrap" data-field="full">${esc(full(p))}</td>
      <td class="wrap" data-field="n1">${n1(p)}</td><td class="num">${p.drain_largest && p.servers > 1 ? cell("margin", p.drain_largest.margin_tokens, fmtInt) : "--"}</td>
      <td class="num">${cell("desired", p.desired_servers, fmtInt)}</td><td class="wrap" data-field="limiters">${limiters(p)}</td></tr>`).join("")}</tbody></table></div>
    <div class="table-wrap"><table id="plan-limits"><thead><tr><th scope="col">Server</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Limit</th>
      <th scope="col" class="num">More of today's mix</th><th scope="col" class="num">Max running</th><th scope="col" class="num">Saturation</th><th scope="col">Why</th></tr></thead><tbody>
    ${servers.map((s) => `<tr data-server="${esc(s.name)}"><td>${esc(s.name)}</td><td>${esc(s.role)}</td>
      <td data-field="state" class="state-${esc(s.plan.state)}" title="${esc(s.plan.state_evidence || "")}">${esc((s.text && s.text.state) || "--")}</td>
      <td data-field="limit" class="limit-${esc(s.plan.limiting_factor)}">${esc(s.plan.limiting_factor === "unknown" ? "--" : s.plan.limiting_factor)}</td>
      <td class="num">${cell("workload", s.plan.workload_headroom_requests, fmtInt)}</td>
      <td class="num">${cell("max-running", s.plan.max_running_requests, fmtInt)}${s.plan.max_running_source ? ` <span class="muted">(${esc(s.plan.max_running_source)})</span>` : ""}</td>
      <td class="num">${cell("saturation", s.plan.saturation_ratio, fmtPct)}</td><td class="wrap">${esc(s.plan.limit_reason || "")}</td></tr>`).join("")}
    </tbody></table></div>`;
}
// fmtDay writes a projected date: the day, in UTC as kvwatch plan does.
function fmtDay(iso) { return iso ? iso.slice(0, 10) : "--"; }
// crossingText is a Crossing of the projection: "2026-03-31 (2026-03-28 –
// 2026-04-04)", "now", "beyond the horizon", "no growth".
function crossingText(c) {
  if (!c) return "--";
  if (c.state === "now") return "now";
  if (c.state === "no_growth") return "no growth";
  const band = `${c.earliest ? fmtDay(c.earliest) : "…"} – ${c.latest ? fmtDay(c.latest) : "beyond the horizon"}`;
  if (c.state === "beyond_horizon") return `beyond the horizon (${band})`;
  return `${fmtDay(c.date)} (${band})`;
}
// renderProjection draws serve's projection (api/kvwatch/v1/projection):
// per planned pool its daily peaks, the planned line and its band from
// the plan (forecast.PoolPlan.line: nothing is fitted here), the warning
// and capacity; per other pool, why it is not planned.
async function renderProjection() {
  const out = document.getElementById("projection");
  if (!out) return;
  let pr;
  try {
    pr = await getJSON("api/kvwatch/v1/projection");
  } catch (e) {
    out.innerHTML = `<p class="error">Cannot load the projection: ${esc(e.message)}</p>`;
    return;
  }
  if (!pr.available) {
    out.innerHTML = `<p class="muted" id="projection-reason">${esc(pr.reason || "no projection")}</p>`;
    return;
  }
  const pools = pr.report.pools || [];
  out.innerHTML = pools.map((p, i) => p.state !== "planned"
    ? `<p class="muted" data-projection="${esc(p.name)}" data-state="${esc(p.state)}">${esc(p.name)}: ${esc(p.reason || p.state)}</p>`
    : `<div class="chart card" data-projection="${esc(p.name)}" data-state="planned"><h3>${esc(p.name)} <span class="muted note">${esc(p.trend)};
        warning ${esc(crossingText(p.warning))}; full ${esc(crossingText(p.full))};
        add ${p.servers_to_add == null ? "--" : fmtInt(p.servers_to_add)} (up to ${p.servers_to_add_high == null ? "--" : fmtInt(p.servers_to_add_high)}) by ${esc(fmtDay(pr.report.at))} + ${esc(pr.report.horizon)}</span></h3>
        <div id="proj-${i}" class="plot"></div></div>`).join("") || '<p class="muted">The history holds no pool.</p>';
  pools.forEach((p, i) => { if (p.state === "planned") projectionChart(document.getElementById(`proj-${i}`), p); });
}
function projectionChart(el, p) {
  const t = (iso) => Date.parse(iso) / 1000;
  const ps = p.periods || [];
  // A peak stands in the middle of its period, as the plan places it.
  const half = ps.length > 1 ? (t(ps[1].end) - t(ps[0].end)) / 2 : 43200;
  const peaks = new Map(), left = new Map();
  ps.forEach((pe) => { if (pe.peak_load_tokens != null) (pe.use === "fitted" ? peaks : left).set(t(pe.end) - half, pe.peak_load_tokens); });
  const line = new Map((p.line || []).map((pt) => [t(pt.at), pt]));
  const xs = [...new Set([...peaks.keys(), ...left.keys(), ...line.keys()])].sort((a, b) => a - b);
  const col = (f) => xs.map(f);
  const data = [xs, col((x) => (peaks.has(x) ? peaks.get(x) : null)), col((x) => (left.has(x) ? left.get(x) : null)),
    col((x) => (line.has(x) ? line.get(x).tokens : null)), col((x) => (line.has(x) ? line.get(x).low_tokens : null)),
    col((x) => (line.has(x) ? line.get(x).high_tokens : null))];
  const thr = [[p.warning && p.warning.threshold_tokens, "#d9a400"], [p.full && p.full.threshold_tokens, "#d64541"]].filter(([v]) => v != null);
  // The chart ends a week past the latest full date (of the band), or at
  // the horizon: the months after it are the same line.
  const full = p.full && (p.full.latest || p.full.date);
  const xmax = full ? Math.min(xs[xs.length - 1], t(full) + 7 * 86400) : xs[xs.length - 1];
  const ymax = 1.1 * Math.max(...thr.map(([v]) => v), ...peaks.values(), ...left.values());
  const tok = (_, v) => (v == null ? "--" : fmtInt(v));
  const dot = { show: true, size: 6 };
  const u = new uPlot({
    width: Math.max(280, el.clientWidth || 500), height: 220,
    scales: { x: { time: true, range: () => [xs[0], xmax] }, y: { range: () => [0, ymax] } },
    series: [{ value: (_, v) => (v == null ? "" : new Date(v * 1000).toISOString().slice(0, 10)) },
      { label: "daily peak", stroke: colors[0], paths: () => null, points: dot, value: tok },
      { label: "left out", stroke: "#9a9aa0", paths: () => null, points: dot, value: tok },
      { label: "planned", stroke: colors[0], width: 2, spanGaps: true, value: tok },
      { label: "95% low", stroke: "rgba(31,119,180,0.4)", width: 1, dash: [4, 4], spanGaps: true, value: tok },
      { label: "95% high", stroke: "rgba(31,119,180,0.4)", width: 1, dash: [4, 4], spanGaps: true, value: tok }],
    bands: [{ series: [5, 4], fill: "rgba(31,119,180,0.15)" }],
    axes: [{ space: 70 }, { values: (_, ticks) => ticks.map(fmtCompact), size: 56 }],
    hooks: { draw: [thresholdLines(thr)] },
  }, data, el);
  state.charts.push(u);
  el.dataset.state = "drawn";
  el.dataset.peaks = String(peaks.size);
  el.dataset.band = String((p.line || []).filter((pt) => pt.high_tokens > pt.low_tokens).length);
}
async function renderPlan() {
  await renderMix();
  await renderProjection();
  const n = parseInt(document.getElementById("tokens").value, 10);
  const out = document.getElementById("plan");
  if (!(n > 0)) {
    out.innerHTML = '<p class="error">Type a positive number of tokens.</p>';
    return;
  }
  const c = await getJSON("api/kvwatch/v1/capacity", { tokens: n });
  out.innerHTML = `<div class="table-wrap"><table id="plan-servers"><thead><tr><th scope="col">Server</th><th scope="col">Role</th><th scope="col" class="num">Free KV tokens</th><th scope="col" class="num">More requests of ${fmtInt(n)} tokens</th></tr></thead><tbody>
    ${c.servers.map((s) => `<tr data-server="${esc(s.name)}"><td>${esc(s.name)}</td><td>${esc(s.role)}</td>
      <td class="num">${cell("available", s.available_tokens, fmtInt)}</td>
      <td class="num">${cell("requests", s.requests, fmtInt)}${s.fits_context === false ? ' <span class="muted">(over the context length)</span>' : ""}</td></tr>`).join("")}
    </tbody><tfoot>${c.pools.map((p) => `<tr data-pool="${esc(p.pool)}"><th>pool · ${esc(p.pool)}</th><th>${p.servers} server${p.servers === 1 ? "" : "s"}</th><th></th>
      <th class="num">${cell("requests", p.requests, fmtInt)}</th></tr>`).join("")}</tfoot></table></div>`;
}

// ---- router ------------------------------------------------------------

let rendering = null;
// render draws the current page; calls while one runs wait for it, then draw again.
async function render() {
  while (rendering) await rendering;
  rendering = draw();
  try { await rendering; } finally { rendering = null; }
}
async function draw() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const main = document.getElementById("main");
  const page = hash.startsWith("/server/") ? "server" : hash.slice(1) || "overview";
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === page));
  if (page !== state.page && page !== "planner") main.innerHTML = "";
  if (page !== state.page && page === "planner") main.innerHTML = "";
  state.page = page;
  try {
    await refreshData();
    destroyCharts();
    if (page === "server") await serverPage(main, decodeURIComponent(hash.slice("/server/".length)));
    else if (page === "alerts") await alertsPage(main);
    else if (page === "planner") await plannerPage(main);
    else await overview(main);
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  } catch (e) {
    main.insertAdjacentHTML("afterbegin", `<p class="error">Cannot load: ${esc(e.message)}</p>`);
  }
}

async function start() {
  try {
    state.settings = await getJSON("api/kvwatch/v1/ui");
  } catch (e) {
    document.getElementById("main").innerHTML = `<p class="error">Cannot load settings: ${esc(e.message)}</p>`;
    return;
  }
  state.range = Math.min(3600, state.settings.history_seconds || 3600);
  window.addEventListener("hashchange", () => render());
  document.getElementById("main").addEventListener("change", (e) => {
    if (e.target.id === "range") {
      state.range = Number(e.target.value);
      render();
    }
  });
  await render();
  state.timer = setInterval(() => { if (!document.hidden) render(); }, state.settings.refresh_seconds * 1000);
}
start();

// Pools and tiers: a server's KV pools beyond the primary one (report
// server.cache_pools; docs/engines.md "Pools and tiers"), each in its own unit,
// with the prompt tokens a tier served from its cache and the KV bytes it
// loaded into and stored from the GPU (load_bytes, store_bytes; "--" where
// the engine reports neither).
function cachePoolName(p) {
  const base = p.pool_type === "full" ? p.tier + " tier" : p.pool_type + " pool" + (p.tier === "gpu" ? "" : " (" + p.tier + ")");
  return p.name ? base + " " + p.name : base;
}
function fmtBytes(x) {
  if (x == null) return "--";
  const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return i === 0 ? Math.round(x) + " B" : x.toFixed(1) + " " + u[i];
}
function cachePoolsTable(sv) {
  const ps = sv.cache_pools || [];
  if (!ps.length) return "";
  const amount = (p, field, v) => (p.unit === "bytes" ? cell(field, v, fmtBytes) : cell(field, v, fmtInt) + (p.unit === "slots" ? " slots" : ""));
  const rows = ps.map((p) => `<tr data-cache-pool="${esc(cachePoolName(p))}"><td>${esc(cachePoolName(p))}</td>
    <td class="num">${cell("usage", p.usage_ratio, fmtPct)}</td><td class="num">${amount(p, "used", p.used)}</td><td class="num">${amount(p, "capacity", p.capacity)}</td>
    <td class="num">${val(p.hit_tokens) != null ? cell("hits", p.hit_tokens, fmtInt) : val(p.hit_rate) != null ? cell("hit_rate", p.hit_rate, fmtPct) : '<span data-field="hits">--</span>'}</td>
    <td class="num">${val(p.load_bytes) != null || val(p.store_bytes) != null ? cell("load_bytes", p.load_bytes, fmtBytes) + " / " + cell("store_bytes", p.store_bytes, fmtBytes) : "--"}</td>
    <td class="wrap muted">${esc(p.note || "")}</td></tr>`).join("");
  return `<h3>Pools and tiers</h3><table id="cache-pools"><thead><tr><th scope="col">Pool / tier</th><th scope="col" class="num">Usage</th><th scope="col" class="num">Used</th><th scope="col" class="num">Capacity</th><th scope="col" class="num">Prefix hits served</th><th scope="col" class="num" title="KV bytes loaded from the tier into the GPU / stored from the GPU into the tier, since the engine started">Loaded / stored</th><th scope="col">Note</th></tr></thead><tbody>${rows}</tbody></table>`;
}
// cacheServerCell is a cache server's usage cell: its tiers' fill (it has
// no KV pool of its own), the report's text.
function cacheServerCell(s) {
  return `<span class="muted" data-field="tiers" title="a cache server holds tiers for engines and no KV pool of its own: it is in no pool's KV sums">tiers ${esc((s.text || {}).tiers || "--")}</span>`;
}
function cachePoolsChart(sq, sv) {
  const eng = sv.engine || "the engine";
  return chart(document.getElementById("c-cache-pools"), [
    { q: `kvwatch_kv_pool_usage_ratio{${sq}}`, label: (m) => cachePoolName({ pool_type: m.pool_type, tier: m.tier, name: m.pool_name }) }],
  { unit: "ratio", unavailable: `unavailable: ${eng} exports no fill of its further pools (hits only)` });
}
