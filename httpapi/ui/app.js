// wamux dashboard: polls /ui/state every second, turns counter differences
// into rates, keeps two minutes of history in memory and draws it as SVG.
// No dependencies; nothing is fetched except /ui/state.
"use strict";

const POLL_MS = 1000;
const KEEP = 120;          // points of history per series (two minutes)
const LATENCY_WINDOW = 10; // seconds of histogram difference for percentiles
const COLORS = ["#3b7dd8", "#d8533b", "#2e9e5b", "#9b59b6", "#c99a06", "#17a2b8", "#6c757d"];

let prev = null;           // previous snapshot
const snaps = [];          // recent snapshots, for the latency window
const hist = {};           // chart id -> series name -> [{t, v}]
const accRates = {};       // account id -> {send_rate, rate429, history:[{t, send, r429}]}
let sortKey = "id", sortDir = 1, selected = null, polls = 0;

function $(id) { return document.getElementById(id); }
function esc(s) { return String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c])); }
function sum(obj) { let s = 0; for (const k in obj) s += obj[k]; return s; }
function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + "k";
  return v.toFixed(digits === undefined ? (Number.isInteger(v) ? 0 : 1) : digits);
}
function fmtSeconds(s) {
  if (s === null || Number.isNaN(s)) return "–";
  return s < 1 ? (s * 1000).toFixed(0) + " ms" : s.toFixed(1) + " s";
}

// rate of a counter between two snapshots; a reset (restart) counts as 0.
function rate(cur, old, get, dt) {
  if (!old || dt <= 0) return 0;
  return Math.max(0, get(cur) - get(old)) / dt;
}

// rates of every key of a counter map (e.g. receipts by source).
function rates(cur, old, get, dt) {
  const out = {};
  const c = get(cur) || {}, o = old ? (get(old) || {}) : {};
  for (const k in c) out[k] = old && dt > 0 ? Math.max(0, c[k] - (o[k] || 0)) / dt : 0;
  return out;
}

// quantile of the observations between two cumulative histograms, with
// linear interpolation inside the bucket (what histogram_quantile does).
function quantile(q, cur, old) {
  const count = cur.count - (old ? old.count : 0);
  if (count <= 0) return null;
  const oldB = {};
  if (old) for (const [le, c] of old.buckets) oldB[le] = c;
  const target = q * count;
  let prevLe = 0, prevCum = 0;
  for (const [le, c] of cur.buckets) {
    const cum = c - (oldB[le] || 0);
    if (cum >= target) {
      if (cum === prevCum) return le;
      return prevLe + (le - prevLe) * (target - prevCum) / (cum - prevCum);
    }
    prevLe = le; prevCum = cum;
  }
  return prevLe; // beyond the last finite bucket
}

function push(chart, name, t, v) {
  const c = hist[chart] || (hist[chart] = {});
  const s = c[name] || (c[name] = []);
  s.push({t, v});
  while (s.length > KEEP) s.shift();
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const SVGNS = "http://www.w3.org/2000/svg";
function el(name, attrs, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

// draw renders every series of one chart as lines over the last KEEP
// seconds, with a y axis from 0 to a round maximum and a legend.
function draw(id, series, unit) {
  const svg = $(id);
  const W = 420, H = 150, L = 40, R = 8, T = 18, B = 16;
  const now = Date.now(), span = KEEP * 1000;
  let max = 0;
  for (const name in series) for (const p of series[name]) if (p.v !== null) max = Math.max(max, p.v);
  max = niceMax(max);
  svg.replaceChildren();
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - T - B) * i / 4;
    svg.append(el("line", {class: "grid", x1: L, x2: W - R, y1: y, y2: y}));
    svg.append(el("text", {class: "axis", x: L - 4, y: y + 3, "text-anchor": "end"}, fmt(max * (4 - i) / 4, max < 4 ? 1 : 0)));
  }
  svg.append(el("text", {class: "axis", x: L, y: H - 3}, "−2 min"));
  svg.append(el("text", {class: "axis", x: W - R, y: H - 3, "text-anchor": "end"}, "now" + (unit ? " · " + unit : "")));
  let i = 0, lx = L;
  for (const name in series) {
    const color = COLORS[i++ % COLORS.length];
    const pts = series[name].filter(p => p.v !== null && now - p.t <= span)
      .map(p => [L + (W - L - R) * (1 - (now - p.t) / span), T + (H - T - B) * (1 - p.v / max)]);
    if (pts.length > 1) {
      svg.append(el("polyline", {class: "line", stroke: color, "data-series": name,
        points: pts.map(p => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ")}));
    }
    const last = series[name].length ? series[name][series[name].length - 1].v : null;
    const label = name + " " + fmt(last, last !== null && last < 10 ? 1 : 0);
    svg.append(el("rect", {x: lx, y: 4, width: 8, height: 8, fill: color}));
    svg.append(el("text", {class: "legend", x: lx + 11, y: 12}, label));
    lx += 16 + label.length * 5.5;
  }
}

function update(cur) {
  const dt = prev ? (cur.time - prev.time) / 1000 : 0;
  const t = cur.time, g = cur.gateway, pg = prev ? prev.gateway : null;
  polls++;
  $("live").textContent = "live · " + new Date(t).toLocaleTimeString() + " · #" + polls;
  $("live").classList.remove("stale");
  renderEvents(cur, prev, dt);

  // per account
  const prevAcc = {};
  if (prev) for (const a of prev.accounts) prevAcc[a.id] = a;
  let sends = 0, r429 = 0, unknown = 0;
  const depth = {P0: 0, P1: 0, P2: 0};
  for (const a of cur.accounts) {
    const o = prevAcc[a.id];
    a.send_rate = rate(a, o, x => x.accepted, dt);
    a.rate429 = rate(a, o, x => x.throttled, dt);
    a.utilization = a.rate_per_sec > 0 ? a.send_rate / a.rate_per_sec : 0;
    a.q0 = a.queue_depth.P0; a.q1 = a.queue_depth.P1; a.q2 = a.queue_depth.P2;
    a.owner = a.owner || "";
    sends += a.send_rate; r429 += a.rate429; unknown += a.unknown_outcomes;
    for (const p in depth) depth[p] += a.queue_depth[p] || 0;
    const h = accRates[a.id] || (accRates[a.id] = []);
    h.push({t, send: a.send_rate, r429: a.rate429, q: a.q0 + a.q1 + a.q2});
    while (h.length > KEEP) h.shift();
  }

  // gateway
  const recv = rates(g, pg, x => x.receipts_received, dt);
  const dedup = rates(g, pg, x => x.dedup_hits, dt);
  const submitted = sum(rates(g, pg, x => x.submitted, dt));
  snaps.push({t, lat: g.receipt_latency});
  while (snaps.length > 1 && t - snaps[0].t > LATENCY_WINDOW * 1000) snaps.shift();
  const base = snaps.length > 1 ? snaps[0].lat : null;
  const p50 = quantile(0.5, g.receipt_latency, base), p90 = quantile(0.9, g.receipt_latency, base), p99 = quantile(0.99, g.receipt_latency, base);
  const lags = Object.values(g.stream_lag_seconds);
  const lag = lags.length ? Math.max(...lags) : 0;

  $("t-sends").textContent = fmt(sends, 1);
  $("t-429").textContent = fmt(r429, 1);
  $("t-submitted").textContent = fmt(submitted, 1);
  $("t-receipts").textContent = fmt(sum(recv), 1);
  $("t-dedup").textContent = fmt(sum(dedup), 1);
  $("t-p99").textContent = fmtSeconds(p99);
  $("t-lag").textContent = fmtSeconds(lag);
  $("t-late").textContent = fmt(g.late_receipts);
  $("t-dead").textContent = fmt(g.dead_letters);
  $("t-unknown").textContent = fmt(unknown);
  $("t-late").parentNode.classList.toggle("alert", g.late_receipts > 0);
  $("t-dead").parentNode.classList.toggle("alert", g.dead_letters > 0);
  $("t-unknown").parentNode.classList.toggle("alert", unknown > 0);

  if (prev) {
    push("c-sends", "accepted/s", t, sends);
    push("c-sends", "429/s", t, r429);
    for (const k in recv) push("c-receipts", k, t, recv[k]);
    for (const k of ["batch", "lru", "bloom", "store"]) push("c-dedup", k, t, dedup[k] || 0);
    push("c-latency", "p50", t, p50 === null ? null : p50 * 1000);
    push("c-latency", "p90", t, p90 === null ? null : p90 * 1000);
    push("c-latency", "p99", t, p99 === null ? null : p99 * 1000);
    push("c-lag", "lag s", t, lag);
    push("c-lag", "late/s", t, rate(g, pg, x => x.late_receipts, dt));
    push("c-lag", "dead/s", t, rate(g, pg, x => x.dead_letters, dt));
    for (const p in depth) push("c-depth", p, t, depth[p]);
  }
  for (const id of ["c-sends", "c-receipts", "c-dedup", "c-latency", "c-lag"]) draw(id, hist[id] || {}, id === "c-latency" ? "ms" : "");
  drawAccountChart();
  renderTable(cur.accounts);
  prev = cur;
}

// The sixth chart shows the selected account, or all queues when none is.
function drawAccountChart() {
  const h = selected && accRates[selected];
  if (!h) {
    $("c-account-title").textContent = "Queued messages by priority (all accounts) — click an account to see it here";
    draw("c-account", hist["c-depth"] || {}, "");
    return;
  }
  $("c-account-title").textContent = "Account " + selected + ": sends/s, 429/s, queued";
  draw("c-account", {
    "sends/s": h.map(p => ({t: p.t, v: p.send})),
    "429/s": h.map(p => ({t: p.t, v: p.r429})),
    "queued": h.map(p => ({t: p.t, v: p.q})),
  }, "");
}

function renderTable(accounts) {
  const f = $("filter").value.trim().toLowerCase();
  const busy = $("only-busy").checked;
  let rows = accounts.filter(a => (!f || a.id.toLowerCase().includes(f) || a.state.includes(f)) &&
    (!busy || a.q0 + a.q1 + a.q2 > 0 || a.rate429 > 0 || a.gaps_skipped > 0));
  const th = document.querySelector(`th[data-k="${sortKey}"]`);
  const str = th && th.dataset.t === "s";
  rows.sort((x, y) => {
    const a = x[sortKey], b = y[sortKey];
    const c = str ? String(a).localeCompare(String(b)) : (a - b);
    return (c || x.id.localeCompare(y.id)) * sortDir;
  });
  $("acc-count").textContent = rows.length === accounts.length ? `(${accounts.length})` : `(${rows.length} of ${accounts.length})`;
  const html = rows.map(a => {
    const util = Math.min(1, a.utilization);
    return `<tr data-id="${esc(a.id)}" class="${a.id === selected ? "selected" : ""}">` +
      `<td>${esc(a.id)}</td><td class="state-${esc(a.state)}">${esc(a.state)}</td><td class="owner">${esc(a.owner)}</td>` +
      `<td>${fmt(a.rate_per_sec)}</td><td>${fmt(a.send_rate, 1)}</td>` +
      `<td>${(a.utilization * 100).toFixed(0)} %<span class="bar"><i data-w="${(util * 100).toFixed(0)}"></i></span></td>` +
      `<td>${fmt(a.tokens, 1)} / ${a.burst}</td><td class="${a.effective_rate_ratio < 1 ? "bad" : ""}">${fmt(a.effective_rate_ratio, 2)}</td>` +
      `<td class="${a.rate429 > 0 ? "bad" : ""}">${fmt(a.rate429, 1)}</td><td>${fmt(a.throttled)}</td>` +
      `<td>${a.q0}</td><td>${a.q1}</td><td>${a.q2}</td>` +
      `<td>${fmt(a.seq_waiting)}</td><td class="${a.gaps_skipped > 0 ? "bad" : ""}">${fmt(a.gaps_skipped)}</td>` +
      `<td class="${a.unknown_outcomes > 0 ? "bad" : ""}">${fmt(a.unknown_outcomes)}</td></tr>`;
  }).join("");
  const tbody = document.querySelector("#accounts tbody");
  // The node column shows only in a cluster, where accounts have owners.
  $("accounts").classList.toggle("clustered", accounts.some(a => a.owner));
  tbody.innerHTML = html;
  // Widths go through the CSSOM: the page's policy refuses style="" markup.
  for (const i of tbody.querySelectorAll(".bar i")) i.style.width = i.dataset.w + "%";
}

// renderEvents shows the subscriptions' delivery health and the latest
// events (no customer data: the state carries none).
function renderEvents(cur, old, dt) {
  const subs = cur.subscriptions || [];
  $("sub-count").textContent = "(" + subs.length + ")";
  const oldSubs = {};
  if (old) for (const o of old.subscriptions || []) oldSubs[o.id] = o;
  document.querySelector("#subscriptions tbody").innerHTML = subs.map(s => {
    const o = oldSubs[s.id];
    const dr = o && dt > 0 ? Math.max(0, s.delivered - o.delivered) / dt : 0;
    const rr = o && dt > 0 ? Math.max(0, s.retries - o.retries) / dt : 0;
    return `<tr><td>${esc(s.id)}</td><td>${esc(s.host)}</td>` +
      `<td class="${s.state === "active" ? "" : "bad"}" title="${esc(s.state_reason || "")}">${esc(s.state)}</td>` +
      `<td>${fmt(dr, 1)}</td><td class="${rr > 0 ? "bad" : ""}">${fmt(rr, 1)}</td>` +
      `<td>${fmt(s.pending)}</td><td class="${s.oldest_pending_seconds > 60 ? "bad" : ""}">${fmtSeconds(s.oldest_pending_seconds)}</td></tr>`;
  }).join("");
  document.querySelector("#events tbody").innerHTML = (cur.events || []).slice(0, 20).map(e =>
    `<tr><td>${esc(new Date(e.time).toLocaleTimeString())}</td><td>${esc(e.id)}</td><td>${esc(e.type)}</td>` +
    `<td>${esc(e.account_id)}</td><td>${esc(e.msg_id || "")}</td><td>${esc(e.status || "")}</td></tr>`).join("");
}

async function poll() {
  try {
    const res = await fetch("/ui/state", {cache: "no-store"});
    if (!res.ok) throw new Error("HTTP " + res.status);
    update(await res.json());
  } catch (e) {
    $("live").textContent = "no data: " + e.message;
    $("live").classList.add("stale");
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const th of document.querySelectorAll("#accounts th")) {
    th.addEventListener("click", () => {
      const k = th.dataset.k;
      sortDir = k === sortKey ? -sortDir : (th.dataset.t === "s" ? 1 : -1);
      sortKey = k;
      for (const o of document.querySelectorAll("#accounts th")) o.classList.remove("asc", "desc");
      th.classList.add(sortDir > 0 ? "asc" : "desc");
      if (prev) renderTable(prev.accounts);
    });
  }
  $("filter").addEventListener("input", () => prev && renderTable(prev.accounts));
  $("only-busy").addEventListener("change", () => prev && renderTable(prev.accounts));
  document.querySelector("#accounts tbody").addEventListener("click", ev => {
    const tr = ev.target.closest("tr");
    if (!tr) return;
    selected = tr.dataset.id === selected ? null : tr.dataset.id;
    drawAccountChart();
    if (prev) renderTable(prev.accounts);
  });
  poll();
});
