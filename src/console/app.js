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
  metrics: [],                  // {t, series: Map} from /v1/admin/metrics
  list: {cls: "", after: "", rows: []},
  inspect: null,                // {tenant, cls, name, afterHex}
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
  return seconds < 0.001 ? (seconds * 1e6).toFixed(0) + " µs" : seconds < 1 ? (seconds * 1000).toFixed(1) + " ms" : seconds.toFixed(2) + " s";
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
  if (state.who && state.who.kind !== "operator" && ["cluster", "traffic", "bucket"].includes(tab)) tab = "actors";
  state.tab = tab;
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== tab + "-page"; });
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.tab === tab));
  if (tab === "actors" && !$("#class-select").options.length) loadClasses();
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
    tbody.append(el("tr", {"data-class": cls},
      el("td", {text: cls}),
      el("td", {class: "num", text: String(a.resident)}),
      el("td", {class: "num", text: num(d("requests"))}),
      el("td", {class: "num", text: num(d("client_errors"), 2)}),
      el("td", {class: "num", text: num(d("errors"), 2)}),
      el("td", {class: "num", text: ms(meanLatency)}),
      el("td", {}, spark(series.slice(-90)))));
  }
}

// What each series the bucket page shows costs the bucket.
const BUCKET_SERIES = [
  [/^wasmkeep_replica_segments_total/, "segment PUTs: durable writes (group-committed)"],
  [/^wasmkeep_replica_snapshots_total/, "snapshot PUTs"],
  [/^wasmkeep_replica_restores_total/, "restores: 2 LISTs and a GET per chain object"],
  [/^wasmkeep_replica_gc_deleted_total/, "DELETEs by garbage collection"],
  [/^wasmkeep_replica_upload_failures_total/, "segment PUTs that failed or whose outcome is unknown"],
  [/^wasmkeep_node_lease_writes_total/, "node lease PUTs (heartbeats)"],
  [/^wasmkeep_listing_seconds_count/, "listings of nodes/: a LIST and a GET per node"],
  [/^wasmkeep_fences_total/, "fence PUTs"],
  [/^wasmkeep_store_sqlite_/, "the sqlite:// bucket's own counters"],
  [/^wasmkeep_(store|bucket)_/, "the bucket's own counters"],
];

// Prometheus text → Map("name{labels}" → value).
function parseMetrics(text) {
  const m = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const sp = line.lastIndexOf(" ");
    const v = Number(line.slice(sp + 1));
    if (isFinite(v)) m.set(line.slice(0, sp), v);
  }
  return m;
}

async function pollBucket() {
  const text = await api("/v1/admin/metrics", {text: true});
  const series = parseMetrics(text);
  const t = Date.now();
  state.metrics.push({t, series});
  if (state.metrics.length > HISTORY) state.metrics.shift();
  const before = state.metrics.length > 1 ? state.metrics[state.metrics.length - 2] : null;
  const dt = before ? (t - before.t) / 1000 : 0;
  const perSec = (k) => (before && dt > 0 && before.series.has(k) ? Math.max(0, series.get(k) - before.series.get(k)) / dt : null);
  $("#bucket-node").textContent = "(this node's /metrics)";
  // What the bucket is asked, as this node's /metrics has it: the store's own series, the
  // replica's writes and restores, the listing and the lease writes.
  const wanted = /^(wasmkeep_(store|bucket)_\w+|wasmkeep_replica_(segments|snapshots|gc_deleted|restores|upload_failures)_total|wasmkeep_node_lease_writes_total|wasmkeep_listing_seconds_count|wasmkeep_fences_total)/;
  const rows = [...series.keys()].filter((k) => wanted.test(k) && !/_bucket\{/.test(k)).sort();
  const tbody = $("#bucket-series tbody");
  tbody.replaceChildren();
  for (const k of rows) {
    const what = BUCKET_SERIES.find(([re]) => re.test(k));
    tbody.append(el("tr", {}, el("td", {}, el("code", {text: k})), el("td", {class: "muted", text: what ? what[1] : ""}),
      el("td", {class: "num", text: num(series.get(k), 3)}), el("td", {class: "num", text: num(perSec(k), 2)})));
  }
  // Requests by purpose, when this build counts them (a `purpose` label), with their cost.
  const purpose = rows.filter((k) => /purpose="/.test(k));
  const cost = [...series.keys()].filter((k) => /(dollars|cost)/.test(k));
  const box = $("#bucket-purpose");
  if (purpose.length) {
    box.replaceChildren(el("p", {class: "muted", text: "Requests by purpose: " + purpose.map((k) => k.match(/purpose="([^"]*)"/)[1] + " " + num(perSec(k), 2) + "/s").join(", ")}));
  } else {
    box.replaceChildren(el("p", {class: "note", text: "Requests by purpose and their money per day are not counted by this build: it shows the bucket requests its /metrics has (segment and snapshot writes, restores, lease writes, listings, and the store's own counters)."}));
  }
  if (cost.length) box.append(el("p", {text: cost.map((k) => k + " = " + num(series.get(k), 4)).join(", ")}));
  const hist = (k) => state.metrics.map((s, i) => {
    if (!i) return null;
    const a = s.series.get(k), b = state.metrics[i - 1].series.get(k);
    const d = (s.t - state.metrics[i - 1].t) / 1000;
    return a != null && b != null && d > 0 ? Math.max(0, a - b) / d : null;
  });
  chart("#chart-bucket-writes", "Segment PUTs / s (this node)", [{values: hist("wasmkeep_replica_segments_total")}], (v) => num(v));
  chart("#chart-bucket-listing", "Lease writes / s (this node)", [{values: hist("wasmkeep_node_lease_writes_total")}], (v) => num(v, 2));
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
        el("td", {class: "num", text: bytes(a.stored_bytes)}));
      tr.addEventListener("click", () => {
        document.querySelectorAll("#actors tr.selected").forEach((x) => x.classList.remove("selected"));
        tr.classList.add("selected");
        const [tenant, c] = cls.split("/");
        state.inspect = {tenant, cls: c, name: a.name, afterHex: ""};
        inspect(true);
      });
      tbody.append(tr);
    }
    if (fresh && !r.actors.length) tbody.append(el("tr", {}, el("td", {colSpan: 5, class: "muted", text: "No actors."})));
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
      ` · ${r.keys} ${r.keys === 1 ? "key" : "keys"} · ${bytes(r.stored_bytes)} · generation ${r.generation}` + (r.alarm_ms != null ? " · alarm " + new Date(r.alarm_ms).toISOString() : ""));
    if (fresh) tbody.replaceChildren();
    for (const e of r.entries) {
      const v = el("td", {}, e.value_encoding === "hex" ? el("span", {class: "enc", text: "hex"}) : null, e.value + (e.truncated ? " …" : ""));
      tbody.append(el("tr", {"data-key": e.key},
        el("td", {}, e.key_encoding === "hex" ? el("span", {class: "enc", text: "hex"}) : null, e.key), v,
        el("td", {class: "num", text: String(e.value_bytes)})));
    }
    if (fresh && !r.entries.length) tbody.append(el("tr", {}, el("td", {colSpan: 3, class: "muted", text: "No keys."})));
    s.afterHex = r.next_after_hex || "";
    $("#keys-more").hidden = !r.next_after_hex;
  } catch (e) {
    tbody.replaceChildren(el("tr", {}, el("td", {colSpan: 3, class: "error", text: e.message})));
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
    listActors(true);
  } catch (e) {
    $("#inspect-facts").textContent = "not deleted: " + e.message;
  }
}

// ---- sign-in and the loop

async function tick() {
  try {
    if (state.who && state.who.kind === "operator") {
      await pollCluster();
      await pollBucket();
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
  state.metrics = [];
  state.inspect = null;
  // Nothing of the last session stays on the page.
  $("#class-select").replaceChildren();
  $("#actors tbody").replaceChildren();
  $("#entries tbody").replaceChildren();
  $("#inspector-body").hidden = true;
  $("#inspector-empty").hidden = false;
  $("#tabs").hidden = true;
  $("#who").replaceChildren();
  document.querySelectorAll(".page").forEach((p) => { p.hidden = p.id !== "signin-page"; });
  // The next sign-in starts on its own first page, not on the tab this one left open.
  history.replaceState(null, "", location.pathname);
  $("#signin-error").textContent = message || "";
}

window.addEventListener("DOMContentLoaded", () => {
  $("#signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("#token").value); });
  window.addEventListener("hashchange", () => { if (state.who) showTab(location.hash.slice(1)); });
  $("#list-refresh").addEventListener("click", () => listActors(true));
  $("#prefix").addEventListener("keydown", (e) => { if (e.key === "Enter") listActors(true); });
  $("#class-select").addEventListener("change", () => listActors(true));
  $("#list-more").addEventListener("click", () => listActors(false));
  $("#inspect-refresh").addEventListener("click", () => inspect(true));
  $("#key-prefix").addEventListener("keydown", (e) => { if (e.key === "Enter") inspect(true); });
  $("#format").addEventListener("change", () => inspect(true));
  $("#keys-more").addEventListener("click", () => inspect(false));
  $("#delete-actor").addEventListener("click", deleteActor);
  if (state.token) signIn(state.token);
});
