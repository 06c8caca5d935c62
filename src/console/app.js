// The WasmKeep console: one page, no framework, no build step. It talks to the node that
// served it through the JSON routes of docs/http-api.md with the token it was given, and
// keeps the last minutes of samples in memory for its charts (nothing is stored but the
// token, in this tab's sessionStorage).
"use strict";

const POLL_MS = 2000;           // one refresh every 2 s
const HISTORY = 300;            // samples kept: 10 minutes at 2 s
const $ = (sel) => document.querySelector(sel);

const state = {
  token: sessionStorage.getItem("wasmkeep-token") || "",
  who: null,                    // {kind: "operator"} or {kind: "tenant", tenant}
  tab: "cluster",
  timer: null,
  samples: [],                  // {t, nodes: {id: status}} from /v1/admin/cluster
  ticks: 0,
  dueStale: true,               // list the due alarms at the next tick
  list: {cls: "", after: "", rows: []},
  inspect: null,                // {tenant, cls, name, afterHex}
  tenant: "",                   // the tenant whose usage the Tenants page charts
};

// ---- HTTP

async function api(path, options = {}) {
  const r = await fetch(path, {
    method: options.method || "GET",
    headers: {Authorization: "Bearer " + state.token},
    cache: "no-store",
  });
  const text = await r.text();
  if (options.text) {
    if (!r.ok) throw new Error("HTTP " + r.status + ": " + text.trim());
    return text;
  }
  let body = null;
  try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const err = new Error((body && body.error) || ("HTTP " + r.status + ": " + text.trim()));
    err.status = r.status;
    throw err;
  }
  return body;
}

// ---- formatting

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}
function badge(text, cls) { return el("span", {class: "badge " + (cls || text), text}); }
function bytes(n) {
  if (n == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}
function num(v, digits = 1) {
  if (v == null || !isFinite(v)) return "–";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en");
  if (v === Math.round(v)) return String(v);
  return v.toFixed(Math.abs(v) >= 10 ? Math.min(digits, 1) : digits);
}
function ms(seconds) {
  if (seconds == null || !isFinite(seconds)) return "–";
  if (seconds < 0.001) return (seconds * 1e6).toFixed(0) + " µs";
  if (seconds < 1) return (seconds * 1000).toFixed(1) + " ms";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  const m = Math.floor(seconds / 60);
  return m < 60 ? m + " min " + Math.round(seconds - 60 * m) + " s" : (seconds / 3600).toFixed(1) + " h";
}
function age(msv) {
  if (msv == null) return "–";
  if (msv < 1000) return msv + " ms ago";
  if (msv < 120000) return (msv / 1000).toFixed(1) + " s ago";
  return Math.round(msv / 60000) + " min ago";
}

// ---- charts (inline SVG)

// series: [{values: [number|null], cls}], drawn over the last samples, newest on the right.
function chart(target, title, series, format, legend) {
  const w = 400, h = 120, pad = 4;
  const all = series.flatMap((s) => s.values).filter((v) => v != null && isFinite(v));
  const top = Math.max(1e-9, ...all);
  const max = top * 1.15;
  const n = Math.max(2, ...series.map((s) => s.values.length));
  const x = (i, len) => (w * (i + (n - len))) / (n - 1);
  const y = (v) => h - pad - (h - 2 * pad) * (Math.max(0, v) / max);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const add = (name, attrs) => {
    const e = document.createElementNS(ns, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    svg.append(e);
  };
  add("line", {x1: 0, y1: h - pad, x2: w, y2: h - pad, class: "axis"});
  add("line", {x1: 0, y1: y(top), x2: w, y2: y(top), class: "axis"});
  series.forEach((s, k) => {
    const pts = [];
    s.values.forEach((v, i) => { if (v != null && isFinite(v)) pts.push([x(i, s.values.length), y(v)]); });
    if (pts.length < 2) return;
    if (k === 0) {
      add("path", {d: "M" + pts.map((p) => p.join(",")).join("L") + `L${pts[pts.length - 1][0]},${h - pad}L${pts[0][0]},${h - pad}Z`, class: "area"});
    }
    add("polyline", {points: pts.map((p) => p.join(",")).join(" "), class: s.cls || "line"});
  });
  const last = series[0].values[series[0].values.length - 1];
  const plot = el("div", {class: "plot"}, svg,
    el("span", {class: "ymax", text: format(top)}), el("span", {class: "ymin", text: "0"}));
  plot.querySelector(".ymax").style.top = ((y(top) / h) * 120 - 7) + "px";
  $(target).replaceChildren(el("h3", {}, title, el("span", {class: "now", text: last == null ? "–" : format(last)})), plot,
    el("div", {class: "legend", text: legend || `last ${Math.max(1, Math.round((n * POLL_MS) / 60000))} min`}));
}

function spark(values) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 140 26");
  svg.setAttribute("preserveAspectRatio", "none");
  const vals = values.filter((v) => v != null);
  const max = Math.max(1e-9, ...vals);
  const pts = values.map((v, i) => [(140 * i) / Math.max(1, values.length - 1), 24 - 22 * ((v || 0) / max)]);
  const pl = document.createElementNS(ns, "polyline");
  pl.setAttribute("points", pts.map((p) => p.join(",")).join(" "));
  pl.setAttribute("class", "line");
  svg.append(pl);
  return svg;
}

// ---- samples → rates

// Per-node counters of two samples → per-second rates (a restarted node, whose counters
// went down, counts from zero).
function rate(now, before, get) {
  if (!before) return null;
  const dt = (now.t - before.t) / 1000;
  if (dt <= 0) return null;
  let sum = 0;
  for (const [id, s] of Object.entries(now.nodes)) {
    const b = before.nodes[id];
    const a = get(s), p = b ? get(b) : 0;
    sum += a >= p ? a - p : a;
  }
  return sum / dt;
}
function sumNodes(sample, get) {
  let s = 0;
  for (const st of Object.values(sample.nodes)) s += get(st) || 0;
  return s;
}
function totalRequests(st) { return (st.classes || []).reduce((a, c) => a + c.requests, 0); }
function totalErrors(st) { return (st.classes || []).reduce((a, c) => a + c.errors, 0); }
// Durable-write latency over the interval: mean, and the bucket bound under which 99% fell.
function writeLatency(now, before) {
  if (!before) return {mean: null, p99: null};
  let count = 0, sum = 0;
  const buckets = new Map();
  for (const [id, s] of Object.entries(now.nodes)) {
    const b = before.nodes[id];
    const dw = s.durable_writes, bw = b ? b.durable_writes : null;
    if (!dw) continue;
    const dc = dw.upload_seconds_count - (bw ? bw.upload_seconds_count : 0);
    if (dc < 0) continue;
    count += dc;
    sum += dw.upload_seconds_sum - (bw ? bw.upload_seconds_sum : 0);
    dw.upload_seconds_buckets.forEach(([le, c], i) => {
      const prev = bw ? bw.upload_seconds_buckets[i][1] : 0;
      buckets.set(le, (buckets.get(le) || 0) + (c - prev));
    });
  }
  if (count <= 0 || sum < 0) return {mean: null, p99: null};
  let p99 = null;
  for (const [le, c] of buckets) { if (c >= 0.99 * count) { p99 = le == null ? null : le; break; } }
  return {mean: sum / count, p99};
}

// ---- pages

function showTab(tab) {
  if (state.who && state.who.kind !== "operator" && ["cluster", "traffic", "bucket", "tenants"].includes(tab)) tab = "actors";
  state.tab = tab;
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== tab + "-page"; });
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.tab === tab));
  if (tab === "actors" && !$("#class-select").options.length) loadClasses();
  if (tab === "tenants" && state.who) {
    pollTenants().catch((e) => { $("#tenants-updated").textContent = "not listed: " + e.message; });
  }
  if (tab === "alarms" && state.who) {
    document.querySelectorAll(".op-only").forEach((e) => { e.hidden = state.who.kind !== "operator"; });
    state.dueStale = false;
    pollDueAlarms().catch((e) => { $("#alarms-updated").textContent = "not listed: " + e.message; });
  }
}

async function pollCluster() {
  const c = await api("/v1/admin/cluster");
  const sample = {t: c.time_ms, nodes: {}, view: c};
  for (const n of c.nodes) if (n.status) sample.nodes[n.node] = n.status;
  state.samples.push(sample);
  if (state.samples.length > HISTORY) state.samples.shift();
  const before = state.samples.length > 1 ? state.samples[state.samples.length - 2] : null;

  const tbody = $("#nodes tbody");
  tbody.replaceChildren();
  let live = 0, resident = 0, pending = 0;
  for (const n of c.nodes) {
    const st = n.status;
    const answering = !!st;
    const down = n.state !== "live" || !answering;
    if (n.state === "live") live++;
    const leaseCell = el("td", {}, badge(n.state));
    if (n.state === "live" && !answering) leaseCell.append(" ", badge("not answering", "unanswered"));
    let reqs = null;
    if (st && before && before.nodes[n.node]) {
      const dt = (sample.t - before.t) / 1000;
      const d = totalRequests(st) - totalRequests(before.nodes[n.node]);
      reqs = dt > 0 && d >= 0 ? d / dt : null;
    }
    if (st) { resident += st.resident_actors; pending += st.pending_releases; }
    tbody.append(el("tr", {class: down ? "down" : "", "data-node": n.node},
      el("td", {class: "node-id", text: n.node + (n.node === c.self ? " (this node)" : "")}),
      leaseCell,
      el("td", {text: age(n.age_ms)}),
      el("td", {text: n.address || "–"}),
      el("td", {text: n.version || "–"}),
      el("td", {}, st ? badge(st.ready ? "yes" : "no") : "–"),
      el("td", {class: "num", text: st ? String(st.resident_actors) : "–"}),
      el("td", {class: "num", text: st ? String(st.holds) : "–"}),
      el("td", {class: "num", text: st ? String(st.pending_releases) : "–"}),
      el("td", {class: "num", text: st && st.alarms && st.alarms.shards_held != null ? String(st.alarms.shards_held) : "–"}),
      el("td", {class: "num", text: num(reqs)})));
    if (!answering && n.status_error) tbody.lastChild.title = n.status_error;
  }
  $("#cluster-updated").textContent = "updated " + new Date(c.time_ms).toLocaleTimeString() + " by " + c.self;
  const reqRate = rate(sample, before, totalRequests);
  const lat = writeLatency(sample, before);
  $("#cluster-summary").replaceChildren(
    stat("live nodes", live + " / " + c.nodes.length),
    stat("resident actors", String(resident)),
    stat("pending releases", String(pending)),
    stat("requests / s", num(reqRate)),
    stat("durable write (mean)", ms(lat.mean)));

  // Charts over the history.
  const rates = [], errs = [], means = [], p99s = [], res = [], writes = [];
  state.samples.forEach((s, i) => {
    const b = i ? state.samples[i - 1] : null;
    rates.push(rate(s, b, totalRequests));
    errs.push(rate(s, b, totalErrors));
    const l = writeLatency(s, b);
    means.push(l.mean == null ? null : l.mean * 1000);
    p99s.push(l.p99 == null ? null : l.p99 * 1000);
    res.push(sumNodes(s, (x) => x.resident_actors));
    writes.push(rate(s, b, (x) => x.durable_writes.segments));
  });
  chart("#chart-requests", "Requests / s (all nodes)", [{values: rates}], (v) => num(v));
  chart("#chart-errors", "5xx answers / s", [{values: errs}], (v) => num(v, 2));
  chart("#chart-latency", "Durable write latency (ms)", [{values: means}, {values: p99s, cls: "line2"}], (v) => num(v, 1),
    "mean (solid), p99 bucket bound (dashed): segment PUTs acknowledged");
  chart("#chart-resident", "Resident actors", [{values: res}], (v) => num(v, 0));
  chart("#chart-write-latency", "Durable write latency (ms)", [{values: means}, {values: p99s, cls: "line2"}], (v) => num(v, 1),
    "mean (solid), p99 bucket bound (dashed)");
  chart("#chart-writes", "Segment writes / s (group commits)", [{values: writes}], (v) => num(v));
  renderTraffic(sample, before);
  renderBucket();
  renderAlarmCharts();
}

function stat(k, v) { return el("div", {class: "stat"}, el("div", {class: "v", text: v}), el("div", {class: "k", text: k})); }

function renderTraffic(sample, before) {
  // Per class, summed over the nodes.
  const sum = (s) => {
    const m = new Map();
    for (const st of Object.values(s.nodes)) {
      for (const c of st.classes || []) {
        const a = m.get(c.class) || {resident: 0, requests: 0, client_errors: 0, errors: 0, seconds: 0};
        a.resident += c.resident; a.requests += c.requests; a.client_errors += c.client_errors; a.errors += c.errors; a.seconds += c.seconds;
        m.set(c.class, a);
      }
    }
    return m;
  };
  const now = sum(sample), prev = before ? sum(before) : new Map();
  const dt = before ? (sample.t - before.t) / 1000 : 0;
  const history = state.samples.map((s) => sum(s));
  const tbody = $("#classes-traffic tbody");
  tbody.replaceChildren();
  if (!now.size) tbody.append(el("tr", {}, el("td", {colSpan: 7, class: "muted", text: "No actor requests yet."})));
  for (const [cls, a] of [...now.entries()].sort()) {
    const p = prev.get(cls) || {requests: 0, client_errors: 0, errors: 0, seconds: 0};
    const d = (k) => (dt > 0 ? Math.max(0, a[k] - p[k]) / dt : null);
    const dreq = a.requests - p.requests;
    const meanLatency = dreq > 0 ? (a.seconds - p.seconds) / dreq : null;
    const series = history.map((m, i) => {
      if (!i) return null;
      const x = m.get(cls), y = history[i - 1].get(cls);
      const t = (state.samples[i].t - state.samples[i - 1].t) / 1000;
      return x && t > 0 ? Math.max(0, x.requests - (y ? y.requests : 0)) / t : 0;
    });
    // "(unknown class)" and "(other)" are the nodes' shared rows (src/routing/class_traffic.h).
    const shared = cls.startsWith("(");
    tbody.append(el("tr", {"data-class": cls},
      el("td", shared ? {text: cls, class: "muted",
        title: cls === "(other)" ? "deployed classes past the nodes' 1,000 rows" : "classes not deployed, or not known to the node they reached"}
        : {text: cls}),
      el("td", {class: "num", text: String(a.resident)}),
      el("td", {class: "num", text: num(d("requests"))}),
      el("td", {class: "num", text: num(d("client_errors"), 2)}),
      el("td", {class: "num", text: num(d("errors"), 2)}),
      el("td", {class: "num", text: ms(meanLatency)}),
      el("td", {}, spark(series.slice(-90)))));
  }
}

// ---- the bucket: requests by purpose, and what they cost

// Per request, by operation: the built-in price tables of `wasmkeep cluster cost`
// (src/cli/cost.h; sources and dates in docs/cli.md). Requests only.
const PRICES = {
  "aws-s3": {currency: "$", put: 0.005 / 1000, get: 0.0004 / 1000, head: 0.0004 / 1000, list: 0.005 / 1000, delete: 0},
  "r2": {currency: "$", put: 4.5 / 1e6, get: 0.36 / 1e6, head: 0.36 / 1e6, list: 4.5 / 1e6, delete: 0},
};
const OPS = ["put", "get", "head", "list", "delete"];
// What sends each purpose's requests (docs/storage-backends.md).
const PURPOSES = {
  lease: "the node's own lease: a write every heartbeat period",
  listing: "the listing of nodes/ every period, and the bodies it reads",
  fence: "fences: a deciding read and a write",
  owner: "ownership records: acquire, release, routing reads; alarm shard holds",
  segment: "durable writes: segment uploads (group-committed)",
  snapshot: "snapshot uploads",
  restore: "restores: listing and reading an actor's log",
  gc: "garbage collection: listing logs, deleting what snapshots cover",
  alarm: "the alarm index: entries, their removal, shard scans",
  control: "control/: drain requests, tenants and tokens, the cluster secret",
  class: "classes/: class pointers and modules",
  admin: "the console and the admin routes: listings, inspections, deletions",
  other: "requests no subsystem claimed (should stay 0)",
};
const RATE_WINDOW = 5;  // samples: rates over the last 10 s

// Per purpose and operation, the requests of every node of a sample.
function bucketCounts(sample) {
  const m = {};
  for (const st of Object.values(sample.nodes)) {
    for (const [purpose, ops] of Object.entries(st.bucket_requests || {})) {
      m[purpose] = m[purpose] || {};
      for (const [op, n] of Object.entries(ops)) m[purpose][op] = (m[purpose][op] || 0) + n;
    }
  }
  return m;
}
// Rates per purpose and operation between two samples: a node in both counts its growth
// (a restarted node, whose counters went down, from zero); a node in one of them only is
// left out, so a node that stops answering does not look like a drop to zero.
function bucketRates(now, before) {
  const dt = (now.t - before.t) / 1000;
  const out = {};
  if (dt <= 0) return out;
  for (const [id, st] of Object.entries(now.nodes)) {
    const b = before.nodes[id];
    if (!b) continue;
    for (const [purpose, ops] of Object.entries(st.bucket_requests || {})) {
      for (const [op, n] of Object.entries(ops)) {
        const p = ((b.bucket_requests || {})[purpose] || {})[op] || 0;
        out[purpose] = out[purpose] || {};
        out[purpose][op] = (out[purpose][op] || 0) + (n >= p ? n - p : n) / dt;
      }
    }
  }
  return out;
}
function perDay(ops, prices) {
  return OPS.reduce((a, op) => a + (ops[op] || 0) * prices[op], 0) * 86400;
}
function money(v, currency) {
  if (v == null || !isFinite(v)) return "–";
  return currency + (v >= 100 ? Math.round(v).toLocaleString("en") : v >= 1 ? v.toFixed(2) : v.toFixed(4));
}

function renderBucket() {
  const n = state.samples.length;
  if (!n) return;
  const now = state.samples[n - 1];
  const before = state.samples[Math.max(0, n - 1 - RATE_WINDOW)];
  const prices = PRICES[$("#prices").value] || PRICES["aws-s3"];
  const rates = before === now ? {} : bucketRates(now, before);
  const tbody = $("#bucket-purposes tbody");
  tbody.replaceChildren();
  const totals = {};
  let totalDay = 0;
  const purposes = Object.keys(bucketCounts(now)).sort();
  for (const purpose of purposes) {
    const ops = rates[purpose] || {};
    const sum = OPS.reduce((a, op) => a + (ops[op] || 0), 0);
    const day = perDay(ops, prices);
    totalDay += day;
    OPS.forEach((op) => { totals[op] = (totals[op] || 0) + (ops[op] || 0); });
    tbody.append(el("tr", {"data-purpose": purpose},
      el("td", {}, el("code", {text: purpose})),
      ...OPS.map((op) => el("td", {class: "num", text: num(ops[op] || 0, 2)})),
      el("td", {class: "num", text: num(sum, 2)}),
      el("td", {class: "num", text: money(day, prices.currency)}),
      el("td", {class: "muted small", text: PURPOSES[purpose] || ""})));
  }
  if (!purposes.length) {
    tbody.append(el("tr", {}, el("td", {colSpan: 9, class: "muted", text: "No node reports its bucket requests yet."})));
  } else {
    const all = OPS.reduce((a, op) => a + totals[op], 0);
    tbody.append(el("tr", {class: "total"}, el("td", {text: "all"}),
      ...OPS.map((op) => el("td", {class: "num", text: num(totals[op], 2)})),
      el("td", {class: "num", text: num(all, 2)}), el("td", {class: "num", text: money(totalDay, prices.currency)}), el("td", {})));
  }
  const all = OPS.reduce((a, op) => a + (totals[op] || 0), 0);
  $("#bucket-summary").replaceChildren(
    stat("requests / s", num(all, 1)),
    stat("writes (put) / s", num(totals.put || 0, 1)),
    stat("reads (get, head) / s", num((totals.get || 0) + (totals.head || 0), 1)),
    stat("lists / s", num(totals.list || 0, 1)),
    stat("per day at this rate", money(totalDay, prices.currency)));
  $("#bucket-updated").textContent = "(every live node, the last " + Math.round((now.t - before.t) / 1000) + " s)";
  // Charts over the history, each point over the window before it.
  const total = [], day = [];
  state.samples.forEach((s, i) => {
    const b = state.samples[Math.max(0, i - RATE_WINDOW)];
    if (b === s) { total.push(null); day.push(null); return; }
    const r = bucketRates(s, b);
    total.push(Object.values(r).reduce((a, ops) => a + OPS.reduce((x, op) => x + (ops[op] || 0), 0), 0));
    day.push(Object.values(r).reduce((a, ops) => a + perDay(ops, prices), 0));
  });
  chart("#chart-bucket-total", "Bucket requests / s (all nodes)", [{values: total}], (v) => num(v, 1));
  chart("#chart-bucket-money", "Money per day at that rate", [{values: day}], (v) => money(v, prices.currency),
    "requests only, priced as chosen above");
}

// ---- alarms

// Lateness of the alarm runs that succeeded over an interval: mean, and the bucket bound
// under which 99% fell (every node's wasmkeep_alarms_late_seconds).
function alarmLateness(now, before) {
  if (!before) return {mean: null, p99: null};
  let count = 0, sum = 0;
  const buckets = new Map();
  for (const [id, s] of Object.entries(now.nodes)) {
    const a = s.alarms, b = before.nodes[id] ? before.nodes[id].alarms : null;
    if (!a) continue;
    const dc = a.late_seconds_count - (b ? b.late_seconds_count : 0);
    if (dc < 0) continue;
    count += dc;
    sum += a.late_seconds_sum - (b ? b.late_seconds_sum : 0);
    a.late_seconds_buckets.forEach(([le, c], i) => {
      const prev = b ? b.late_seconds_buckets[i][1] : 0;
      buckets.set(le, (buckets.get(le) || 0) + (c - prev));
    });
  }
  if (count <= 0) return {mean: null, p99: null};
  let p99 = null;
  for (const [le, c] of buckets) { if (c >= 0.99 * count) { p99 = le; break; } }
  return {mean: sum / count, p99};
}

function renderAlarmCharts() {
  const fired = [], retried = [], mean = [], p99 = [];
  state.samples.forEach((s, i) => {
    const b = i ? state.samples[i - 1] : null;
    fired.push(rate(s, b, (x) => (x.alarms ? x.alarms.fired : 0)));
    retried.push(rate(s, b, (x) => (x.alarms ? x.alarms.retried : 0)));
    const l = alarmLateness(s, b);
    mean.push(l.mean == null ? null : l.mean * 1000);
    p99.push(l.p99 == null ? null : l.p99 * 1000);
  });
  chart("#chart-alarms-fired", "Alarms fired / s (all nodes)", [{values: fired}, {values: retried, cls: "line2"}], (v) => num(v, 2),
    "handlers that succeeded (solid), retries after a failure (dashed)");
  chart("#chart-alarms-late", "Alarm lateness (ms)", [{values: mean}, {values: p99, cls: "line2"}], (v) => num(v, 1),
    "from the alarm's time to its run: mean (solid), p99 bucket bound (dashed)");
}

const DUE_EVERY = 5;  // ticks: the due alarms are listed every 10 s (16 LISTs each time)
const LATE_MS = 5000; // an entry due longer ago than this is shown as late
const DUE_WITHIN_MS = 300000;  // and the alarms due in the next 5 minutes

async function pollDueAlarms() {
  const r = await api("/v1/due-alarms?within_ms=" + DUE_WITHIN_MS + "&limit=100");
  const tbody = $("#due-alarms tbody");
  tbody.replaceChildren();
  let late = 0;
  for (const a of r.alarms) {
    const isLate = a.late_ms > LATE_MS;
    if (isLate) late++;
    tbody.append(el("tr", {class: isLate ? "late" : "", "data-actor": a.actor},
      el("td", {}, el("code", {text: a.actor})),
      el("td", {text: new Date(a.due_ms).toLocaleTimeString()}),
      el("td", {}, a.late_ms >= 0 ? badge("late " + ms(a.late_ms / 1000), isLate ? "fenced" : "live-expired")
                                  : badge("in " + ms(-a.late_ms / 1000), "idle")),
      el("td", {class: "num", text: a.generation + " · " + a.batch})));
  }
  if (!r.alarms.length) tbody.append(el("tr", {}, el("td", {colSpan: 4, class: "muted", text: "No alarm due now or in the next 5 minutes."})));
  const sample = state.samples[state.samples.length - 1];
  const before = state.samples.length > 1 ? state.samples[state.samples.length - 2] : null;
  const stats = [
    stat("due now", String(r.due)),
    stat("late (> " + LATE_MS / 1000 + " s)", String(late)),
    stat("due in the next 5 min", String(r.upcoming)),
  ];
  if (sample && state.who.kind === "operator") {
    stats.push(stat("fired / s", num(rate(sample, before, (x) => (x.alarms ? x.alarms.fired : 0)), 2)));
    stats.push(stat("shards held", String(sumNodes(sample, (x) => (x.alarms ? x.alarms.shards_held : 0))) + " / 16"));
  }
  $("#alarms-summary").replaceChildren(...stats);
  $("#alarms-updated").textContent = "updated " + new Date(r.time_ms).toLocaleTimeString() +
    (r.tenant ? " · tenant " + r.tenant : " · every tenant") + (r.complete ? "" : " · some shards not read whole") +
    (r.truncated ? " · the first 100 shown" : "");
}

// ---- actor browser

async function loadClasses() {
  const sel = $("#class-select");
  try {
    const r = await api("/v1/classes");
    sel.replaceChildren();
    for (const c of r.classes) sel.append(el("option", {value: c.tenant + "/" + c.class, text: c.tenant + "/" + c.class}));
    if (!r.classes.length) sel.append(el("option", {value: "", text: "(no classes deployed)"}));
    await listActors(true);
  } catch (e) {
    $("#list-note").textContent = e.message;
  }
}

async function listActors(fresh) {
  const cls = $("#class-select").value;
  if (!cls) return;
  if (fresh) state.list = {cls, after: "", rows: []};
  const q = new URLSearchParams({prefix: $("#prefix").value, after: state.list.after, limit: "50"});
  const tbody = $("#actors tbody");
  try {
    const r = await api(`/v1/classes/${cls}/actors?${q}`);
    if (fresh) tbody.replaceChildren();
    for (const a of r.actors) {
      const tr = el("tr", {"data-actor": a.name},
        el("td", {text: a.name}),
        el("td", {}, badge(a.state)),
        el("td", {text: a.node || "–"}),
        el("td", {class: "num", text: a.generation == null ? "–" : String(a.generation)}),
        el("td", {class: "num", text: bytes(a.stored_bytes)}),
        el("td", {class: "small", text: a.alarm_unknown ? "?" : a.alarm_ms == null ? "–" : new Date(a.alarm_ms).toLocaleString("en-GB")}));
      if (a.alarm_entries > 1) tr.lastChild.title = a.alarm_entries + " index entries: the latest set's shown, the others stale";
      const open = state.inspect;
      if (open && cls === open.tenant + "/" + open.cls && a.name === open.name) tr.classList.add("selected");
      tr.addEventListener("click", () => {
        document.querySelectorAll("#actors tr.selected").forEach((x) => x.classList.remove("selected"));
        tr.classList.add("selected");
        const [tenant, c] = cls.split("/");
        openActor(tenant, c, a.name);
      });
      tbody.append(tr);
    }
    if (fresh && !r.actors.length) tbody.append(el("tr", {}, el("td", {colSpan: 6, class: "muted", text: "No actors."})));
    state.list.after = r.next_after || "";
    $("#list-more").hidden = !r.next_after;
    $("#list-note").textContent = "";
  } catch (e) {
    $("#list-note").textContent = e.message;
  }
}

async function inspect(fresh) {
  const s = state.inspect;
  if (!s) return;
  if (s.past) return loadPast(fresh);
  showPastView(false);
  if (fresh) s.afterHex = "";
  const q = new URLSearchParams({prefix: $("#key-prefix").value, after_hex: s.afterHex, limit: "100", format: $("#format").value});
  $("#inspector-empty").hidden = true;
  $("#inspector-body").hidden = false;
  $("#inspect-name").textContent = `${s.tenant}/${s.cls}/${s.name}`;
  const tbody = $("#entries tbody");
  try {
    const r = await api(`/v1/classes/${s.tenant}/${s.cls}/actors/${encodeURIComponent(s.name)}?${q}`);
    const facts = $("#inspect-facts");
    facts.replaceChildren("read from ", el("b", {text: r.source === "owner" ? "its owner " + r.node : "the bucket (read-only restore)"}),
      ` · ${r.keys} ${r.keys === 1 ? "key" : "keys"} · ${bytes(r.stored_bytes)} · generation ${r.generation}` + (r.alarm_ms != null ? " · alarm " + new Date(r.alarm_ms).toISOString() : "") +
      (r.running_version != null ? ` · runs version ${r.running_version}` : "") +
      (r.state_version ? ` · state written by version ${r.state_version}` : ""));
    if (fresh) tbody.replaceChildren();
    for (const e of r.entries) {
      tbody.append(entryRow(e.key, e.key_encoding, e.value, e.value_encoding, e.value_bytes, e.truncated));
    }
    if (fresh && !r.entries.length) tbody.append(el("tr", {}, el("td", {colSpan: 3, class: "muted", text: "No keys."})));
    s.afterHex = r.next_after_hex || "";
    $("#keys-more").hidden = !r.next_after_hex;
  } catch (e) {
    tbody.replaceChildren(el("tr", {}, el("td", {colSpan: 3, class: "error", text: e.message})));
  }
  if (fresh) {
    $("#messages-note").textContent = "";
    await loadMessages();
  }
}

// The inspected actor's messages (docs/messages.md): to deliver, dead (with their last
// error, and Retry / Drop), and per sender the highest number it applied. Read where its
// keys are read (its owner, else the bucket); a retry or drop is made by the node holding
// the actor, which answers once the change is durable.
function actorPath(s) {
  return `/v1/classes/${s.tenant}/${s.cls}/actors/${encodeURIComponent(s.name)}`;
}
function messagesPath(s) {
  return actorPath(s) + "/messages";
}

async function loadMessages() {
  const s = state.inspect;
  if (!s) return;
  const tbody = $("#messages tbody");
  try {
    const r = await api(messagesPath(s));
    if (state.inspect !== s) return;  // another actor was picked meanwhile
    tbody.replaceChildren();
    const row = (kind, badgeText, seq, who, cells, actions) => tbody.append(el("tr", {"data-kind": kind, "data-seq": String(seq)},
      el("td", {}, badge(badgeText, kind)), el("td", {class: "num", text: String(seq)}), el("td", {text: who}), ...cells,
      el("td", {class: "actions"}, ...(actions || []))));
    for (const m of r.outbox) {
      row("outbox", "to deliver", m.seq, m.to, [el("td", {class: "num", text: bytes(m.bytes)}),
        el("td", {class: "num", text: String(m.attempts)}), el("td", {text: m.last_error || "–"})]);
    }
    for (const m of r.dead) {
      const retry = el("button", {type: "button", class: "retry", text: "Retry"});
      retry.addEventListener("click", () => resolveDead(s, m.seq, true));
      const drop = el("button", {type: "button", class: "danger drop", text: "Drop…"});
      drop.addEventListener("click", () => resolveDead(s, m.seq, false));
      row("dead", "dead", m.seq, m.to, [el("td", {class: "num", text: bytes(m.bytes)}),
        el("td", {class: "num", text: String(m.attempts)}), el("td", {text: m.last_error || "–"})], [retry, drop]);
    }
    for (const a of r.applied) {
      row("applied", "applied", a.seq, a.from, [el("td", {}), el("td", {}), el("td", {class: "muted", text: "applied up to this number"})]);
    }
    if (!r.outbox.length && !r.dead.length && !r.applied.length) {
      tbody.append(el("tr", {}, el("td", {colSpan: 7, class: "muted", text: "No messages."})));
    }
    $("#messages-facts").textContent = `${r.outbox.length} to deliver · ${r.dead.length} dead · applied from ` +
      `${r.applied.length} ${r.applied.length === 1 ? "sender" : "senders"}` + (r.truncated ? " · the first 1,000 of each shown" : "");
  } catch (e) {
    if (state.inspect !== s) return;
    tbody.replaceChildren(el("tr", {}, el("td", {colSpan: 7, class: "error", text: e.message})));
  }
}

async function resolveDead(s, seq, retry) {
  const name = `${s.tenant}/${s.cls}/${s.name}`;
  if (!retry && !confirm(`Drop dead message ${seq} of ${name}? It will never be delivered.`)) return;
  const note = $("#messages-note");
  try {
    const r = await api(messagesPath(s) + "/dead/" + seq + (retry ? "/retry" : ""), {method: retry ? "POST" : "DELETE"});
    if (state.inspect !== s) return;
    note.textContent = retry ? `dead message ${seq} sent again as message ${r.retried_as} (node ${r.node})`
                             : `dead message ${seq} dropped (node ${r.node})`;
  } catch (e) {
    if (state.inspect !== s) return;
    note.textContent = (retry ? `dead message ${seq} not sent again: ` : `dead message ${seq} not dropped: `) + e.message;
  }
  await loadMessages();
}

// ---- an actor's history (docs/storage.md, "History and point-in-time restore")
//
// The inspector's History panel: the batches of the actor's retention window, newest first,
// read from the bucket (GET .../history: nothing is woken, acquired or written). A batch, or
// a chosen time, opens the state at that point read-only in the keys table (GET
// .../history/state), labelled as a past state. From there Restore makes it the actor's
// state again (a new batch after the current ones, so the state before stays in the history
// and the answer's `undo` batch restores it), and Fork makes it a new actor's.

const HISTORY_PAGE = 25;        // batches per page: each one shown costs a GET of its segment
const HISTORY_MAX = 10000;      // the route's largest limit
const STATE_VALUE_BYTES = 1024; // the state route shows the first KiB of a value

function openActor(tenant, cls, name) {
  state.inspect = {tenant, cls, name, afterHex: "", history: null, limit: HISTORY_PAGE, past: null};
  setPointNote(null);
  $("#history-note").textContent = "";
  $("#history-at").value = "";
  inspect(true);
  loadHistory();
}

function actorName(s) { return `${s.tenant}/${s.cls}/${s.name}`; }
function clock(t) {
  const d = new Date(t);
  return d.toLocaleTimeString("en-GB") + "." + String(d.getMilliseconds()).padStart(3, "0");
}
function day(t) { return new Date(t).toLocaleDateString("en-CA"); }
function when(t) { return day(t) + " " + clock(t); }
function span(msv) {
  if (msv >= 86400000 && msv % 86400000 === 0) return msv / 86400000 + (msv === 86400000 ? " day" : " days");
  if (msv >= 3600000 && msv % 3600000 === 0) return msv / 3600000 + " h";
  return ms(msv / 1000);
}
function alarmChange(a, t) {
  if (a == null || a === "unchanged") return "–";
  if (a === "deleted") return "deleted";
  return "set " + (day(a) === day(t) ? new Date(a).toLocaleTimeString("en-GB") : when(a));
}
// What a batch changed: counts, the first few keys, the runtime's own entries.
function changes(b) {
  const what = [];
  if (b.delete_all) what.push("all keys cleared");
  if (b.puts) what.push(b.puts + (b.puts === 1 ? " put" : " puts"));
  if (b.deletes) what.push(b.deletes + (b.deletes === 1 ? " delete" : " deletes"));
  if (!what.length) what.push("no key changed");
  const out = [el("span", {class: "what", text: what.join(", ")})];
  for (const k of b.keys) out.push(" ", el("code", {class: "key", text: k}));
  const more = b.puts + b.deletes - b.keys.length;
  if (more > 0) out.push(el("span", {class: "muted", text: " +" + more + " more"}));
  if (b.system) {
    out.push(el("span", {class: "muted small", text: ` · ${b.system} runtime ${b.system === 1 ? "entry" : "entries"}`,
      title: "the runtime's own entries: idempotency records, messages"}));
  }
  return out;
}

function setPointNote(content, bad) {
  const n = $("#point-note");
  n.hidden = content == null;
  n.classList.toggle("bad", !!bad);
  n.replaceChildren(...(content == null ? [] : Array.isArray(content) ? content : [content]));
}

async function loadHistory() {
  const s = state.inspect;
  if (!s) return;
  const tbody = $("#timeline tbody");
  $("#history-note").textContent = "reading the history…";
  try {
    const r = await api(`${actorPath(s)}/history?limit=${s.limit}`);
    if (state.inspect !== s) return;
    s.history = r;
    renderTimeline(s);
    $("#history-note").textContent = "";
  } catch (e) {
    if (state.inspect !== s) return;
    s.history = {error: e.message};
    tbody.replaceChildren(el("tr", {}, el("td", {colSpan: 7, class: e.status === 404 ? "muted" : "error", text: e.message})));
    $("#history-facts").textContent = "";
    $("#history-older").hidden = true;
    $("#history-note").textContent = "";
  }
}

function renderTimeline(s) {
  const r = s.history;
  if (!r || !r.batches) return;
  const tbody = $("#timeline tbody");
  tbody.replaceChildren();
  const rail = () => el("td", {class: "rail"}, el("span", {class: "dot"}));
  const now = el("tr", {class: "now", "data-batch": "now"}, rail(),
    el("td", {colSpan: 6}, el("b", {text: "now"}), el("span", {class: "muted", text: " · the current state"})));
  now.addEventListener("click", backToCurrent);
  tbody.append(now);
  const batches = [...r.batches].reverse();  // newest first
  batches.forEach((b, i) => {
    const newer = batches[i - 1], older = batches[i + 1];
    const outside = r.earliest_ms != null && b.time_ms < r.earliest_ms;
    const tr = el("tr", {class: "batch" + (outside ? " outside" : ""), "data-batch": b.batch, "data-time": String(b.time_ms),
                         title: b.time + (outside ? " · before the restorable window" : "")},
      rail(),
      el("td", {class: "when"}, clock(b.time_ms),
        !newer || day(newer.time_ms) !== day(b.time_ms) ? el("div", {class: "muted small", text: day(b.time_ms)}) : null),
      el("td", {}, el("code", {text: b.batch})),
      el("td", {class: "num", text: String(b.generation)}),
      el("td", {class: "changes"}, ...changes(b)),
      el("td", {class: "num", text: bytes(b.bytes)}),
      el("td", {class: "small", text: alarmChange(b.alarm, b.time_ms)}));
    tr.addEventListener("click", () => openPoint(s, {batch: b.batch}));
    tbody.append(tr);
    // The first batch of a generation: a new hold (a start after a restart, a move, a
    // takeover, a restore or a fork).
    if (older && older.generation !== b.generation) {
      tbody.append(el("tr", {class: "hold", "data-generation": String(b.generation)}, el("td", {class: "rail"}),
        el("td", {colSpan: 6, text: `▲ generation ${b.generation}: a new hold from here (generation ${older.generation} before)`})));
    }
  });
  if (!batches.length) {
    tbody.append(el("tr", {}, el("td", {class: "rail"}), el("td", {colSpan: 6, class: "muted", text: "No batches in the window."})));
  }
  if (!r.truncated) {
    tbody.append(el("tr", {class: "edge"}, el("td", {class: "rail"}), el("td", {colSpan: 6, class: "muted small",
      text: r.earliest_ms != null ? "restorable from " + when(r.earliest_ms) + ": nothing older is kept" : "nothing to restore to"})));
  }
  const n = r.batches.length;
  $("#history-facts").textContent = `${n} ${n === 1 ? "batch" : "batches"}` + (r.truncated ? " (the newest)" : "") +
    (r.earliest_ms != null ? " · restorable from " + when(r.earliest_ms) : "") +
    " · retention " + (r.retention_ms > 0 ? span(r.retention_ms) : "off (only what a restore needs is kept)");
  $("#history-older").hidden = !r.truncated || s.limit >= HISTORY_MAX;
  markTimeline(s);
}

// Highlights the point shown: "now", or the past state's batch.
function markTimeline(s) {
  const at = s.past ? s.past.batch : "now";
  let row = null;
  document.querySelectorAll("#timeline tbody tr").forEach((tr) => {
    const on = tr.dataset.batch != null && tr.dataset.batch === at;
    tr.classList.toggle("selected", on);
    if (on) row = tr;
  });
  // Into view within the timeline's own scroll box (a point chosen by time may be far down).
  const box = $(".timeline-scroll");
  if (!row) return;
  const r = row.getBoundingClientRect(), b = box.getBoundingClientRect();
  if (r.top < b.top + 30 || r.bottom > b.bottom) box.scrollTop += r.top - b.top - box.clientHeight / 3;
}

function olderBatches() {
  const s = state.inspect;
  if (!s) return;
  s.limit = Math.min(HISTORY_MAX, s.limit + HISTORY_PAGE);
  loadHistory();
}

function showTimeChosen() {
  const s = state.inspect;
  if (!s) return;
  const v = $("#history-at").value;
  const t = v ? new Date(v).getTime() : NaN;
  if (!isFinite(t)) {
    setPointNote("Choose a time first: the state as of that time is shown.", true);
    return;
  }
  openPoint(s, {at_ms: t});
}

// A point of the history: {batch} or {at_ms}. The keys table shows its state until Back.
function openPoint(s, point) {
  if (state.inspect !== s) return;
  s.past = {batch: point.batch || null, at_ms: point.at_ms == null ? null : point.at_ms, time_ms: null, after: ""};
  setPointNote(null);
  markTimeline(s);
  inspect(true);
}

function backToCurrent() {
  const s = state.inspect;
  if (!s || !s.past) return;
  s.past = null;
  markTimeline(s);
  inspect(true);
}

function showPastView(on) {
  $("#past-banner").hidden = !on;
  $("#entries").classList.toggle("past", on);
  $("#delete-actor").hidden = on;
  const prefix = $("#key-prefix");
  prefix.disabled = on;
  prefix.title = on ? "a past state is listed whole, by key (Back to the current state to filter)" : "";
}

function entryRow(key, keyEnc, value, valueEnc, valueBytes, cut) {
  return el("tr", {"data-key": key},
    el("td", {}, keyEnc === "hex" ? el("span", {class: "enc", text: "hex"}) : null, key),
    el("td", {}, valueEnc === "hex" ? el("span", {class: "enc", text: "hex"}) : null, value + (cut ? " …" : "")),
    el("td", {class: "num", text: String(valueBytes)}));
}

function pointLabel(p) {
  if (p.batch) return "batch " + p.batch + (p.time_ms != null ? " (" + when(p.time_ms) + ")" : "");
  return "the empty state of " + when(p.at_ms) + " (before its first batch)";
}
function pointQuery(p) {
  return p.batch ? "batch=" + encodeURIComponent(p.batch) : "at=" + p.at_ms;
}

async function loadPast(fresh) {
  const s = state.inspect;
  const p = s.past;
  if (fresh) p.after = "";
  showPastView(true);
  const q = new URLSearchParams({limit: "100", format: $("#format").value});
  if (p.batch) q.set("batch", p.batch);
  else q.set("at", String(p.at_ms));
  if (p.after) q.set("after", p.after);
  const tbody = $("#entries tbody");
  if (fresh) $("#past-facts").textContent = p.batch ? "batch " + p.batch + ": reading…" : "at " + when(p.at_ms) + ": reading…";
  try {
    const r = await api(`${actorPath(s)}/history/state?${q}`);
    if (state.inspect !== s || s.past !== p) return;
    if (fresh) {
      // A chosen time names the state of one batch: later pages, a restore and a fork name
      // that batch, so they are that state exactly.
      if (r.batch) p.batch = r.batch;
      p.time_ms = r.time_ms;
      markTimeline(s);
      const chosen = p.at_ms != null ? "the time chosen, " + when(p.at_ms) + ", is as of " : "as of ";
      $("#past-facts").replaceChildren(
        chosen + (r.batch ? "batch " : ""), r.batch ? el("b", {text: r.batch}) : el("b", {text: "no batch (the empty state)"}),
        r.batch ? ` · ${when(r.time_ms)} (${age(Date.now() - r.time_ms)})` : "",
        ` · ${r.keys_total} ${r.keys_total === 1 ? "key" : "keys"} · ${bytes(r.bytes)}` +
        (r.alarm_ms != null ? " · alarm " + when(r.alarm_ms) : " · no alarm") + " · read from the bucket");
      tbody.replaceChildren();
    }
    for (const e of r.keys) {
      tbody.append(entryRow(e.key, e.key_encoding, e.value, e.value_encoding, e.value_bytes, e.value_bytes > STATE_VALUE_BYTES));
    }
    if (fresh && !r.keys.length) tbody.append(el("tr", {}, el("td", {colSpan: 3, class: "muted", text: "No keys at this point."})));
    p.after = r.next_after || "";
    $("#keys-more").hidden = !r.next_after;
  } catch (e) {
    if (state.inspect !== s || s.past !== p) return;
    $("#past-facts").textContent = "not read";
    tbody.replaceChildren(el("tr", {}, el("td", {colSpan: 3, class: "error", text: e.message})));
    $("#keys-more").hidden = true;
  }
}

async function restorePoint() {
  const s = state.inspect;
  if (!s || !s.past) return;
  const p = s.past;
  if (!confirm(`Restore ${actorName(s)} to ${pointLabel(p)}?\n\nIts keys and alarm become that point's, written as a new ` +
               "batch. The state it has now stays in its history: the answer names the batch that undoes this.")) return;
  await restore(s, pointQuery(p), pointLabel(p));
}

// POST .../restore; the answer in the note, with an Undo that restores the batch it names.
async function restore(s, query, label) {
  setPointNote("restoring " + actorName(s) + " to " + label + "…");
  try {
    const r = await api(`${actorPath(s)}/restore?${query}`, {method: "POST"});
    if (state.inspect !== s) return;
    const note = [`Restored to ${r.to ? "batch " + r.to : "the empty state"} (${when(r.to_time_ms)}) by ${r.node}: written as batch `,
      el("code", {text: r.batch}), ` of generation ${r.generation}.`];
    if (r.undo) {
      const undo = el("button", {type: "button", class: "undo", text: "Undo"});
      undo.addEventListener("click", () => {
        undo.disabled = true;
        restore(s, "batch=" + encodeURIComponent(r.undo), "batch " + r.undo + ", its state before");
      });
      note.push(" ", undo, " ", el("span", {class: "muted small", text: `restores batch ${r.undo}, the state before`}));
    }
    setPointNote(note);
    s.past = null;
    // The listing shows who holds it and its generation: both changed.
    if ($("#class-select").value === s.tenant + "/" + s.cls) listActors(true);
    await Promise.all([inspect(true), loadHistory()]);
  } catch (e) {
    if (state.inspect !== s) return;
    setPointNote("not restored: " + e.message, true);
  }
}

async function forkPoint() {
  const s = state.inspect;
  if (!s || !s.past) return;
  const p = s.past;
  const to = prompt(`Fork ${actorName(s)} from ${pointLabel(p)}: a new actor of tenant ${s.tenant} with that point's keys ` +
                    "and alarm (the source is only read). Its name, or CLASS/NAME:", s.name + "-fork");
  if (to == null || !to.trim()) return;
  setPointNote("forking " + actorName(s) + " into " + to.trim() + "…");
  try {
    const r = await api(`${actorPath(s)}/fork?${pointQuery(p)}&to=${encodeURIComponent(to.trim())}`, {method: "POST"});
    if (state.inspect !== s) return;
    const [t, c, ...rest] = r.actor.split("/");
    const open = el("button", {type: "button", class: "open-fork", text: "Open it"});
    open.addEventListener("click", () => openActor(t, c, rest.join("/")));
    setPointNote([`Forked into `, el("code", {text: r.actor}), ` from ${r.from ? "batch " + r.from : "the empty state"} by ${r.node} ` +
      `(generation ${r.generation}). `, open]);
    if ($("#class-select").value === t + "/" + c) listActors(true);
  } catch (e) {
    if (state.inspect !== s) return;
    setPointNote("not forked: " + e.message, true);
  }
}

async function deleteActor() {
  const s = state.inspect;
  if (!s) return;
  const name = `${s.tenant}/${s.cls}/${s.name}`;
  if (!confirm(`Delete ${name}? Its state and log are removed for good.`)) return;
  try {
    const r = await api(`/v1/classes/${s.tenant}/${s.cls}/actors/${encodeURIComponent(s.name)}`, {method: "DELETE"});
    $("#inspect-facts").textContent = `deleted on ${r.node}: ${r.objects} objects, ${bytes(r.bytes)}; record names nobody at generation ${r.generation}`;
    $("#entries tbody").replaceChildren();
    $("#messages tbody").replaceChildren();
    $("#messages-facts").textContent = "";
    if (state.inspect === s) loadHistory();
    listActors(true);
  } catch (e) {
    $("#inspect-facts").textContent = "not deleted: " + e.message;
  }
}

// ---- sign-in and the loop

// ---- Tenants (operators): quotas, this node's use now, every node's usage by hour.

const TENANTS_EVERY = 5;  // ticks: the tenants are listed every 10 s (one GET a tenant)

function quotaText(q) {
  const set = Object.entries(q || {}).filter(([, v]) => v != null);
  if (!set.length) return "unlimited";
  return set.map(([k, v]) => `${k} ${k.endsWith("bytes") ? bytes(v) : num(v, 0)}`).join(" · ");
}

async function pollTenants() {
  const list = await api("/v1/admin/tenants");
  const tbody = $("#tenants tbody");
  tbody.replaceChildren();
  for (const t of list.tenants) {
    if (t.error) {
      tbody.append(el("tr", {"data-tenant": t.tenant, class: "bad"},
        el("td", {text: t.tenant}), el("td", {colSpan: 6, text: "corrupt record: " + t.error})));
      continue;
    }
    const h = t.this_hour || {requests: {}, cpu_ms: 0};
    const requests = Object.values(h.requests || {}).reduce((a, v) => a + v, 0);
    const row = el("tr", {"data-tenant": t.tenant, class: t.tenant === state.tenant ? "selected" : ""},
      el("td", {}, el("code", {text: t.tenant})),
      el("td", {class: "small", text: quotaText(t.quotas)}),
      el("td", {class: "num", text: num(t.resident_actors, 0)}),
      el("td", {class: "num", text: num(requests, 0)}),
      el("td", {class: "num", text: num((h.requests || {}).throttled || 0, 0)}),
      el("td", {class: "num", text: num(h.cpu_ms || 0, 0)}),
      el("td", {class: "num", text: num(t.tokens, 0)}));
    row.addEventListener("click", () => {
      state.tenant = t.tenant;
      tbody.querySelectorAll("tr").forEach((r) => r.classList.toggle("selected", r === row));
      loadTenantUsage().catch((e) => { $("#tenants-updated").textContent = "usage not read: " + e.message; });
    });
    tbody.append(row);
  }
  if (!list.tenants.length) tbody.append(el("tr", {}, el("td", {colSpan: 7, class: "muted", text: "No tenants (wasmkeep tenant add NAME)."})));
  $("#tenants-updated").textContent = `via node ${list.node}, ${clock(Date.now())}`;
  if (state.tenant) await loadTenantUsage();
}

async function loadTenantUsage() {
  const u = await api(`/v1/admin/tenants/${encodeURIComponent(state.tenant)}/usage?hours=24`);
  $("#tenant-usage").hidden = false;
  $("#tenant-usage-name").textContent = u.tenant;
  const rows = u.by_hour;
  const reqs = (r, k) => (k ? r.requests[k] : Object.values(r.requests).reduce((a, v) => a + v, 0));
  const legend = `last 24 h, ${u.nodes} node(s) reporting`;
  chart("#chart-tenant-requests", "requests per hour",
    [{values: rows.map((r) => reqs(r))}, {values: rows.map((r) => reqs(r, "throttled")), cls: "line2"}],
    (v) => num(v, 0), legend + " · the second line: throttled");
  chart("#chart-tenant-cpu", "CPU ms per hour", [{values: rows.map((r) => r.cpu_ms)}], (v) => num(v, 0), legend);
  chart("#chart-tenant-resident", "resident actors (mean)", [{values: rows.map((r) => r.resident_actor_seconds / 3600)}],
    (v) => num(v, 1), legend);
  chart("#chart-tenant-stored", "stored bytes of resident actors (mean)",
    [{values: rows.map((r) => r.stored_byte_seconds / 3600)}], (v) => bytes(Math.round(v)), legend);
}

async function tick() {
  const n = state.ticks++;
  try {
    if (state.who && state.who.kind === "operator") await pollCluster();
    if (state.who && state.who.kind === "operator" && state.tab === "tenants" && n % TENANTS_EVERY === 0) await pollTenants();
    if (state.who && state.tab === "alarms" && (n % DUE_EVERY === 0 || state.dueStale)) {
      state.dueStale = false;
      await pollDueAlarms();
    }
    $("#footer").textContent = "";
  } catch (e) {
    if (e.status === 401) return signOut("signed out: " + e.message);
    $("#footer").textContent = "refresh failed: " + e.message;
  }
}

async function signIn(token) {
  state.token = token.trim();
  try {
    state.who = await api("/v1/whoami");
  } catch (e) {
    $("#signin-error").textContent = e.message;
    return;
  }
  sessionStorage.setItem("wasmkeep-token", state.token);
  $("#signin-error").textContent = "";
  const op = state.who.kind === "operator";
  document.querySelectorAll("nav a.op").forEach((a) => { a.hidden = !op; });
  $("#tabs").hidden = false;
  const out = el("button", {type: "button", text: "Sign out"});
  out.addEventListener("click", () => signOut(""));
  $("#who").replaceChildren(op ? "operator" : "tenant " + state.who.tenant, " · via node " + state.who.node, out);
  showTab((location.hash || "").slice(1) || (op ? "cluster" : "actors"));
  await tick();
  clearInterval(state.timer);
  state.timer = setInterval(tick, POLL_MS);
}

function signOut(message) {
  clearInterval(state.timer);
  sessionStorage.removeItem("wasmkeep-token");
  state.token = "";
  state.who = null;
  state.samples = [];
  state.dueStale = true;
  state.inspect = null;
  state.tenant = "";
  $("#tenant-usage").hidden = true;
  // Nothing of the last session stays on the page: every table, count and chart goes (the
  // next sign-in may be another tenant's).
  $("#class-select").replaceChildren();
  document.querySelectorAll("main tbody, .summary, .chart, #inspect-facts, #inspect-name, #list-note, #alarms-updated, #cluster-updated, #bucket-updated, #messages-facts, #messages-note, #history-facts, #history-note, #past-facts, #point-note, #tenants-updated, #tenant-usage-name")
    .forEach((e) => e.replaceChildren());
  showPastView(false);
  $("#point-note").hidden = true;
  $("#history-older").hidden = true;
  $("#inspector-body").hidden = true;
  $("#inspector-empty").hidden = false;
  $("#tabs").hidden = true;
  $("#who").replaceChildren();
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== "signin-page"; });
  // The next sign-in starts on its own first page, not on the tab this one left open.
  history.replaceState(null, "", location.pathname);
  $("#signin-error").textContent = message || "";
}

// A sign-in link (scripts/demo.sh prints one): "#token=<token>" in the fragment, which the
// browser never sends; taken into this tab's session and removed from the address bar.
function linkSignIn() {
  if (!location.hash.startsWith("#token=")) return false;
  const token = decodeURIComponent(location.hash.slice("#token=".length));
  history.replaceState(null, "", location.pathname);
  signIn(token);
  return true;
}

window.addEventListener("DOMContentLoaded", () => {
  $("#signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("#token").value); });
  window.addEventListener("hashchange", () => {
    if (!linkSignIn() && state.who) showTab(location.hash.slice(1));
  });
  $("#list-refresh").addEventListener("click", () => listActors(true));
  $("#prefix").addEventListener("keydown", (e) => { if (e.key === "Enter") listActors(true); });
  $("#class-select").addEventListener("change", () => listActors(true));
  $("#list-more").addEventListener("click", () => listActors(false));
  $("#inspect-refresh").addEventListener("click", async () => {
    const s = state.inspect;
    if (!s) return;
    await Promise.all([inspect(true), loadHistory()]);
  });
  $("#key-prefix").addEventListener("keydown", (e) => { if (e.key === "Enter") inspect(true); });
  $("#format").addEventListener("change", () => inspect(true));
  $("#keys-more").addEventListener("click", () => inspect(false));
  $("#delete-actor").addEventListener("click", deleteActor);
  $("#history-refresh").addEventListener("click", () => { if (state.inspect) loadHistory(); });
  $("#history-older").addEventListener("click", olderBatches);
  $("#history-at-show").addEventListener("click", showTimeChosen);
  $("#history-at").addEventListener("keydown", (e) => { if (e.key === "Enter") showTimeChosen(); });
  $("#past-back").addEventListener("click", backToCurrent);
  $("#past-restore").addEventListener("click", restorePoint);
  $("#past-fork").addEventListener("click", forkPoint);
  $("#prices").addEventListener("change", renderBucket);
  if (!linkSignIn() && state.token) signIn(state.token);
});
