// kvwatch web UI: plain JavaScript, no framework. Pages are rendered from
// serve's report (/api/kvwatch/v1/report), the Prometheus-compatible API
// over the in-memory history (/api/v1/...) and /api/kvwatch/v1/capacity.
// An unavailable value is shown as "--", never as 0.
"use strict";

const state = { settings: null, report: null, alerts: [], charts: [], timer: null, page: "" };

// ---- formatting --------------------------------------------------------

// val returns a kv.Value's number, or null when unavailable.
function val(v) {
  if (v == null || typeof v !== "object") return null;
  if (v.provenance === "unavailable" || v.value == null) return null;
  return v.value;
}
function fmtInt(x) { return x == null ? "--" : Math.round(x).toLocaleString("en-US"); }
function fmtPct(x) { return x == null ? "--" : (x * 100).toFixed(1) + "%"; }
function fmtNum(x) {
  if (x == null) return "--";
  return Number.isInteger(x) ? x.toLocaleString("en-US") : x.toFixed(2);
}
function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function queuedTotal(q) {
  if (!q) return null;
  let sum = null;
  for (const k of ["waiting", "prealloc", "bootstrap", "transfer", "inflight"]) {
    const v = val(q[k]);
    if (v != null) sum = (sum || 0) + v;
  }
  return sum;
}
function barClass(r) {
  if (r == null) return "unknown";
  if (r >= state.settings.kv_usage_critical) return "crit";
  if (r >= state.settings.kv_usage_warning) return "warn";
  return "ok";
}
function bar(r) {
  const w = r == null ? 0 : Math.min(100, Math.max(0, r * 100));
  return `<span class="bar ${barClass(r)}" title="${fmtPct(r)}"><span style="width:${w}%"></span></span>`;
}
// headroom picks the smallest configured request size (not the context length).
function headroom(s) {
  const list = (s.headroom || []).filter((h) => !h.context_length);
  const h = list[0] || (s.headroom || [])[0];
  return h ? { tokens: h.request_tokens, requests: val(h.requests) } : null;
}

// ---- data --------------------------------------------------------------

async function getJSON(path, params) {
  const u = new URL(path, document.baseURI);
  if (params) for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  const r = await fetch(u);
  if (!r.ok) throw new Error(`${u.pathname}: ${r.status} ${(await r.text()).trim()}`);
  return r.json();
}
async function api(path, params) {
  const j = await getJSON(path, params);
  if (j.status !== "success") throw new Error(j.error || "query failed");
  return j.data;
}
async function refreshData() {
  state.report = await getJSON("api/kvwatch/v1/report");
  state.alerts = state.settings.alerts ? (await api("api/v1/alerts")).alerts : [];
  const n = state.alerts.filter((a) => a.state === "firing").length;
  const badge = document.getElementById("alert-count");
  badge.hidden = n === 0;
  badge.textContent = n;
  document.getElementById("updated").textContent = "updated " + new Date(state.report.time).toLocaleTimeString();
}
function alertsOf(server) { return state.alerts.filter((a) => a.labels.server === server); }

// ---- charts ------------------------------------------------------------

const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

// chart draws the range queries into el. Each query is {q, label(metric)}.
async function chart(el, queries, unit) {
  const range = Math.min(state.settings.history_seconds || 3600, 30 * 60);
  const end = Date.now() / 1000, start = end - range;
  const step = Math.max(5, Math.ceil(range / 240));
  const results = await Promise.all(queries.map((q) => api("api/v1/query_range", { query: q.q, start, end, step })));
  const xsSet = new Set();
  const lines = [];
  results.forEach((res, i) => {
    for (const s of res.result) {
      const m = new Map(s.values.map(([t, v]) => [t, parseFloat(v)]));
      s.values.forEach(([t]) => xsSet.add(t));
      lines.push({ label: queries[i].label(s.metric), m });
    }
  });
  const xs = [...xsSet].sort((a, b) => a - b);
  const data = [xs, ...lines.map((l) => xs.map((t) => (l.m.has(t) && isFinite(l.m.get(t)) ? l.m.get(t) : null)))];
  el.innerHTML = "";
  let points = 0;
  data.slice(1).forEach((d) => d.forEach((v) => { if (v != null) points++; }));
  el.dataset.points = points;
  if (lines.length === 0) {
    el.innerHTML = '<p class="muted">no data in the history yet</p>';
    return;
  }
  const fmt = unit === "ratio" ? (v) => fmtPct(v) : (v) => fmtNum(v);
  const u = new uPlot({
    width: Math.max(300, el.clientWidth || 500), height: 200,
    scales: { x: { time: true, range: () => [start, end] } },
    series: [{}, ...lines.map((l, i) => ({ label: l.label, stroke: colors[i % colors.length], width: 1.5, value: (_, v) => fmt(v) }))],
    axes: [{}, { values: (_, ticks) => ticks.map(fmt), size: 70 }],
  }, data, el);
  state.charts.push(u);
}
function chartBox(id, title) {
  return `<div class="chart card"><h3>${esc(title)}</h3><div id="${id}" class="plot"></div></div>`;
}
function destroyCharts() {
  state.charts.forEach((u) => u.destroy());
  state.charts = [];
}
function sel(name) { return JSON.stringify(name); }

// ---- pages -------------------------------------------------------------

function fleetCards(f) {
  return `<div class="fleet">
    <div class="card"><div class="muted">Fleet KV usage</div><div class="v" data-field="fleet-usage">${fmtPct(val(f.usage_ratio))}</div></div>
    <div class="card"><div class="muted">Used / capacity (tokens)</div><div class="v"><span data-field="fleet-used">${fmtInt(val(f.used_tokens))}</span> / <span data-field="fleet-capacity">${fmtInt(val(f.capacity_tokens))}</span></div></div>
    <div class="card"><div class="muted">Running / queued</div><div class="v">${fmtInt(val(f.running))} / ${fmtInt(val(f.queued))}</div></div>
    <div class="card"><div class="muted">Servers counted</div><div class="v">${f.counted} / ${f.servers}</div></div>
  </div>`;
}

async function overview(main) {
  const r = state.report;
  const rows = r.servers.map((s) => {
    const sv = s.server || {};
    const ratio = val(sv.usage_ratio);
    const hr = headroom(s);
    const al = alertsOf(s.name);
    const firing = al.filter((a) => a.state === "firing").length;
    const status = s.ok ? "" : `<div class="error">${esc(s.error || s.reason || "scrape failed")}</div>`;
    return `<tr data-server="${esc(s.name)}">
      <td><a href="#/server/${encodeURIComponent(s.name)}">${esc(s.name)}</a>${status}</td>
      <td data-field="role">${esc(s.role)}</td>
      <td data-field="engine">${esc(sv.engine || "--")}</td>
      <td>${s.role === "router" ? '<span class="muted">router</span>' : bar(ratio)}</td>
      <td class="num" data-field="usage">${fmtPct(ratio)}</td>
      <td class="num" data-field="used">${fmtInt(val(sv.used_tokens))}</td>
      <td class="num" data-field="capacity">${fmtInt(val(sv.capacity_tokens))}</td>
      <td class="num" data-field="headroom" title="${hr ? "requests of " + hr.tokens + " tokens" : ""}">${hr ? fmtInt(hr.requests) : "--"}</td>
      <td class="num" data-field="running">${fmtInt(val(sv.running))}</td>
      <td class="num" data-field="queued">${fmtInt(queuedTotal(sv.queued))}</td>
      <td class="num" data-field="hit">${fmtPct(s.rates ? val(s.rates.prefix_hit_ratio) : null)}</td>
      <td data-field="alerts">${al.length === 0 ? "" : `<a href="#/alerts" class="${firing ? "state-firing" : "state-pending"}">${al.length} ${firing ? "firing" : "pending"}</a>`}</td>
    </tr>`;
  }).join("");
  const hrTokens = r.servers.map(headroom).find((h) => h);
  main.innerHTML = fleetCards(r.fleet) + `
    <table id="servers"><thead><tr><th>Server</th><th>Role</th><th>Engine</th><th>KV cache</th>
      <th class="num">Usage</th><th class="num">Used tok</th><th class="num">Capacity tok</th>
      <th class="num">Headroom${hrTokens ? " (×" + hrTokens.tokens + " tok)" : ""}</th><th class="num">Running</th><th class="num">Queued</th>
      <th class="num">Prefix hit</th><th>Alerts</th></tr></thead><tbody>${rows}</tbody></table>
    ${state.settings.history ? `<div class="charts">${chartBox("chart-usage", "KV usage by server")}</div>`
      : '<p class="muted">History is off (serve --history=0): no charts.</p>'}`;
  if (state.settings.history) {
    await chart(document.getElementById("chart-usage"), [{ q: 'kvwatch_kv_usage_ratio', label: (m) => m.server }], "ratio");
  }
}

function signalRow(name, v, fmt) {
  return `<tr><td>${esc(name)}</td><td class="num" data-field="${esc(name)}">${fmt(val(v))}</td><td class="prov">${esc(v ? v.provenance : "unavailable")}</td></tr>`;
}

async function serverPage(main, name) {
  const s = state.report.servers.find((x) => x.name === name);
  if (!s) {
    main.innerHTML = `<p class="error">No server named ${esc(name)} in the report. <a href="#/">Back to the fleet</a></p>`;
    return;
  }
  const sv = s.server || {};
  const q = sv.queued || {};
  const signals = s.server ? `<table><thead><tr><th>Signal</th><th class="num">Value</th><th>Provenance</th></tr></thead><tbody>
    ${signalRow("usage_ratio", sv.usage_ratio, fmtPct)}
    ${signalRow("reserved_ratio", sv.reserved_ratio, fmtPct)}
    ${signalRow("used_tokens", sv.used_tokens, fmtInt)}
    ${signalRow("capacity_tokens", sv.capacity_tokens, fmtInt)}
    ${signalRow("evictable_tokens", sv.evictable_tokens, fmtInt)}
    ${signalRow("running", sv.running, fmtInt)}
    ${["waiting", "prealloc", "bootstrap", "transfer", "inflight"].map((k) => signalRow("queued_" + k, q[k], fmtInt)).join("")}
    ${signalRow("context_length_tokens", sv.context_length_tokens, fmtInt)}
    ${signalRow("rank_spread_ratio", sv.rank_spread_ratio, fmtPct)}
    ${(s.headroom || []).map((h) => signalRow("headroom ×" + h.request_tokens, h.requests, fmtInt)).join("")}
  </tbody></table>` : "";
  const ranks = (sv.ranks || []).length ? `<h3>Ranks</h3><table><thead><tr><th>DP</th><th>TP</th><th>PP</th><th class="num">Usage</th><th class="num">Used</th><th class="num">Capacity</th></tr></thead><tbody>
    ${sv.ranks.map((k) => `<tr><td>${esc(k.dp_rank || "--")}</td><td>${esc(k.tp_rank || "--")}</td><td>${esc(k.pp_rank || "--")}</td>
      <td class="num">${fmtPct(val(k.usage_ratio))}</td><td class="num">${fmtInt(val(k.used_tokens))}</td><td class="num">${fmtInt(val(k.capacity_tokens))}</td></tr>`).join("")}
  </tbody></table>` : "";
  const sq = `server=${sel(name)}`;
  main.innerHTML = `<h2 id="server-title">${esc(name)} <span class="muted">${esc(s.role)} · ${esc(sv.engine || "--")} ${esc(sv.model || "")}</span></h2>
    ${s.ok ? "" : `<p class="error">${esc(s.error || s.reason)}</p>`}
    <p class="muted">${esc(s.url)}</p>
    ${state.settings.history ? `<div class="charts">
      ${chartBox("c-usage", "KV usage (and reserved)")}
      ${chartBox("c-tokens", "KV tokens: used, capacity, evictable")}
      ${chartBox("c-ranks", "KV usage per rank")}
      ${chartBox("c-queues", "Running and queued requests")}
      ${chartBox("c-preempt", "Preemptions / retractions per second")}
      ${chartBox("c-tput", "Throughput (tokens/s)")}
    </div>` : '<p class="muted">History is off: no charts.</p>'}
    <div class="charts"><div>${signals}</div><div>${ranks}</div></div>`;
  if (!state.settings.history) return;
  await Promise.all([
    chart(document.getElementById("c-usage"), [
      { q: `kvwatch_kv_usage_ratio{${sq}}`, label: () => "used" },
      { q: `kvwatch_kv_reserved_ratio{${sq}}`, label: () => "reserved" }], "ratio"),
    chart(document.getElementById("c-tokens"), [
      { q: `kvwatch_kv_used_tokens{${sq}}`, label: () => "used" },
      { q: `kvwatch_kv_capacity_tokens{${sq}}`, label: () => "capacity" },
      { q: `kvwatch_kv_evictable_tokens{${sq}}`, label: () => "evictable" }], "tokens"),
    chart(document.getElementById("c-ranks"), [
      { q: `kvwatch_rank_kv_usage_ratio{${sq}}`, label: (m) => `dp${m.dp_rank || "-"} tp${m.tp_rank || "-"}` }], "ratio"),
    chart(document.getElementById("c-queues"), [
      { q: `kvwatch_requests_running{${sq}}`, label: () => "running" },
      { q: `kvwatch_requests_queued{${sq}}`, label: (m) => "queued " + m.queue }], "requests"),
    chart(document.getElementById("c-preempt"), [
      { q: `rate(kvwatch_preemptions_total{${sq}}[1m])`, label: () => "preemptions/s" }], "rate"),
    chart(document.getElementById("c-tput"), [
      { q: `rate(kvwatch_prompt_tokens_total{${sq}}[1m])`, label: () => "prompt" },
      { q: `rate(kvwatch_generation_tokens_total{${sq}}[1m])`, label: () => "generation" }], "rate"),
  ]);
}

async function alertsPage(main) {
  if (!state.settings.alerts) {
    main.innerHTML = '<p class="muted">No alert rules are evaluated (serve runs without --rules or history).</p>';
    return;
  }
  const rules = (await api("api/v1/rules", { type: "alert" })).groups.flatMap((g) => g.rules);
  const active = state.alerts.map((a) => `<tr><td class="state-${esc(a.state)}">${esc(a.state)}</td>
      <td>${esc(a.labels.alertname)}</td><td>${esc(a.labels.server || "")}</td><td>${esc(a.labels.severity || "")}</td>
      <td>${esc((a.annotations || {}).summary || "")}</td><td>${esc(new Date(a.activeAt).toLocaleString())}</td><td class="num">${esc(a.value)}</td></tr>`).join("");
  main.innerHTML = `<h2>Active alerts</h2>
    ${active ? `<table id="alerts"><thead><tr><th>State</th><th>Alert</th><th>Server</th><th>Severity</th><th>Summary</th><th>Active since</th><th class="num">Value</th></tr></thead><tbody>${active}</tbody></table>`
      : '<p id="alerts" class="muted">No alert is pending or firing.</p>'}
    <h2>Rules</h2><table><thead><tr><th>Rule</th><th>State</th><th>Health</th><th>For</th><th>Expression</th></tr></thead><tbody>
    ${rules.map((r) => `<tr><td>${esc(r.name)}</td><td class="state-${esc(r.state)}">${esc(r.state)}</td>
      <td>${esc(r.health)}${r.lastError ? ` <span class="error">${esc(r.lastError)}</span>` : ""}</td>
      <td>${r.duration ? esc(r.duration + "s") : ""}</td><td><code>${esc(r.query)}</code></td></tr>`).join("")}
    </tbody></table>`;
}

async function plannerPage(main) {
  if (!document.getElementById("tokens")) {
    main.innerHTML = `<h2>Capacity planner</h2>
      <p>How many more requests of <input id="tokens" type="number" min="1" value="8192"> tokens (prompt + output) fit right now?
      Per DP rank: floor(free KV / N), summed; evictable prefix cache counts as free.</p><div id="plan"></div>`;
    document.getElementById("tokens").addEventListener("input", () => renderPlan());
  }
  await renderPlan();
}
async function renderPlan() {
  const n = parseInt(document.getElementById("tokens").value, 10);
  const out = document.getElementById("plan");
  if (!(n > 0)) {
    out.innerHTML = '<p class="error">Type a positive number of tokens.</p>';
    return;
  }
  const c = await getJSON("api/kvwatch/v1/capacity", { tokens: n });
  out.innerHTML = `<table id="plan-servers"><thead><tr><th>Server</th><th>Role</th><th class="num">Free KV tokens</th><th class="num">More requests of ${n} tokens</th></tr></thead><tbody>
    ${c.servers.map((s) => `<tr data-server="${esc(s.name)}"><td>${esc(s.name)}</td><td>${esc(s.role)}</td>
      <td class="num">${fmtInt(val(s.available_tokens))}</td>
      <td class="num" data-field="requests">${fmtInt(val(s.requests))}${s.fits_context === false ? ' <span class="muted">(over the context length)</span>' : ""}</td></tr>`).join("")}
    </tbody><tfoot>${c.roles.map((r) => `<tr data-role="${esc(r.role)}"><th>fleet · ${esc(r.role)}</th><th>${r.servers} servers</th><th></th>
      <th class="num" data-field="requests">${fmtInt(val(r.requests))}</th></tr>`).join("")}</tfoot></table>`;
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
  window.addEventListener("hashchange", () => render());
  await render();
  state.timer = setInterval(() => { if (!document.hidden) render(); }, state.settings.refresh_seconds * 1000);
}
start();
