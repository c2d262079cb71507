"""The page's stylesheet and script (plain strings: they are written into every report).

The script reads the JSON payload (``<script id="rlm-data">``, see :mod:`rlmetrics.report.page`)
and draws each panel with plotly.js when it first scrolls into view, so a page of hundreds of
panels opens at once. Its smoothing is TensorBoard's debiased EMA
(:func:`rlmetrics.health.smoothing.debiased_ema`, line for line) over the raw points of a
series, and over the bucket means of a thinned one (:mod:`rlmetrics.report.downsample`).
``window.rlmReport`` tells a test or a benchmark when the first screen is drawn (``ready``,
``loadMs`` since navigation) and exposes the smoothing functions.

``SAMPLES_SCRIPT`` and ``SAMPLES_CSS`` are the sample browser's, written only into a page with
samples (:mod:`rlmetrics.report.samples`). It parses its JSON when first used, writes every text
of a sample into the page as text (``textContent``, never as markup), and is opened at a step by
``window.rlmSamples.at(run, step, vs, finding)``: a finding's samples link, and a click on a point
of a curve (the main script), call it. Opened from a finding whose example rows the data holds
(its links' ``data-sfind``), those rows are marked (class ``sex``, their reason beside the
``chosen`` cell) and drawn first at their step; the section's ``data-finding`` names the finding.
"""

from __future__ import annotations

__all__ = ["CSS", "SAMPLES_CSS", "SAMPLES_SCRIPT", "SCRIPT"]

CSS = """
*{box-sizing:border-box}
[hidden]{display:none!important}
[id]{scroll-margin-top:64px}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;background:#fff;
font-size:14px}
main{max-width:1240px;margin:0 auto;padding:0 16px 48px}
h1{font-size:1.45em;margin:.8em 0 .3em} h2{font-size:1.15em;margin:1.4em 0 .5em;border-bottom:1px solid #ddd}
h3{font-size:1em;margin:.8em 0 .3em}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.92em}
.bar{position:sticky;top:0;z-index:20;background:#fafafa;border-bottom:1px solid #ddd}
.bar-in{max-width:1240px;margin:0 auto;padding:6px 16px;display:flex;flex-wrap:wrap;gap:6px 18px;
align-items:center;font-size:13px}
.bar input[type=search]{width:240px;padding:3px 6px}
.bar input[type=range]{width:120px;vertical-align:middle}
.runs{display:flex;flex-wrap:wrap;gap:4px 12px}
.chip{display:inline-flex;align-items:center;gap:4px;cursor:pointer;white-space:nowrap}
.sw{display:inline-block;width:14px;height:4px;border-radius:2px;vertical-align:middle}
.small{color:#666;font-size:.86em}
nav.toc{font-size:.9em;margin:.4em 0;overflow-wrap:anywhere}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(370px,1fr));gap:10px}
.panel{border:1px solid #e2e2e2;border-radius:4px;padding:4px 4px 0;min-width:0;background:#fff}
.panel:target{outline:3px solid #d62728}
.ptitle{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;padding:0 4px;
overflow-wrap:anywhere;min-height:1.3em}
.plot{height:230px;width:100%}
table{border-collapse:collapse;font-size:12px;margin:.5em 0;width:100%;table-layout:fixed}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;overflow-wrap:anywhere;vertical-align:top}
th{background:#f4f4f4} td.k{text-align:left;font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
col.k{width:34%}
table.meta td,table.meta th{text-align:left}
details>summary{cursor:pointer}
details.group>summary{list-style:none} details.group>summary::-webkit-details-marker{display:none}
details.group>summary h2::before{content:"\\25B8 ";color:#888}
details.group[open]>summary h2::before{content:"\\25BE "}
li.error b{color:#c00} li.warning b{color:#b36b00}
ul.findings{padding-left:1.2em} ul.findings li{margin:.2em 0}
details.cats{position:relative} details.cats>summary{white-space:nowrap}
.cats-in{position:absolute;right:0;top:1.6em;z-index:30;background:#fff;border:1px solid #ccc;
border-radius:4px;padding:6px 8px;width:min(560px,90vw);max-height:60vh;overflow:auto;
box-shadow:0 2px 8px rgba(0,0,0,.15)}
.cat-group{display:flex;flex-wrap:wrap;gap:4px 10px;align-items:center;margin:2px 0 6px}
.cat-group button{font-size:11px;padding:0 5px}
"""

# Kept in a Python string (not a package data file) so that every install has it.
SCRIPT = r"""
(function () {
"use strict";
const D = JSON.parse(document.getElementById("rlm-data").textContent);
const R = window.rlmReport = {ready: false, loadMs: null};
const st = {smooth: D.smoothing, log: false, x: "step", hidden: new Set(), cats: new Set(), filter: []};
const CONFIG = {displaylogo: false, responsive: true,
  modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
  toImageButtonOptions: {format: "png", scale: 2}};

function decode(s, T) {
  if (!s) return null;
  const bin = atob(s), u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  return new T(u.buffer);
}
const axes = new Map(), series = new Map();
function axis(a) {
  if (!axes.has(a)) {
    const A = D.axes[a];
    axes.set(a, {s: decode(A.s, Float64Array), t: decode(A.t, Float64Array)});
  }
  return axes.get(a);
}
function ser(id) {
  if (!series.has(id)) {
    const S = D.series[id];
    const T = {a: S.a, v: decode(S.v, Float64Array), i: decode(S.i, Int32Array),
      m: decode(S.m, Float32Array), c: decode(S.c, Int32Array), e: null,
      lo: decode(S.lo, Float64Array), hi: decode(S.hi, Float64Array)};
    if (T.m) {
      // bucket k holds points floor(k n / B) .. floor((k + 1) n / B) - 1 (downsample.thin)
      const B = T.m.length, e = new Int32Array(B);
      for (let k = 0; k < B; k++) e[k] = Math.floor((k + 1) * S.n / B) - 1;
      T.e = e;
      if (!T.c) { T.c = new Int32Array(B); for (let k = 0; k < B; k++) T.c[k] = e[k] - (k ? e[k - 1] : -1); }
    }
    series.set(id, T);
  }
  return series.get(id);
}

// TensorBoard's debiased EMA, as rlmetrics.health.smoothing.debiased_ema.
function ema(v, w) {
  const out = Array.from(v);
  if (v.length === 0 || v.every(x => x === v[0])) return out;
  let last = 0, n = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (!Number.isFinite(x)) continue;
    last = last * w + (1 - w) * x;
    n += 1;
    out[i] = last / (1 - Math.pow(w, n));
  }
  return out;
}
// The same EMA over bucket means m with c finite points each: exact when a bucket is flat.
function emaBuckets(m, c, w) {
  const out = new Array(m.length);
  let last = 0, n = 0;
  for (let j = 0; j < m.length; j++) {
    if (c[j] === 0) { out[j] = NaN; continue; }
    const wc = Math.pow(w, c[j]);
    last = last * wc + (1 - wc) * m[j];
    n += c[j];
    out[j] = last / (1 - Math.pow(w, n));
  }
  return out;
}
const finite = x => (Number.isFinite(x) ? x : null);
function xsOf(ax, idx, n) {
  const src = st.x === "time" ? ax.t : ax.s;
  if (!src) return null;
  const div = st.x === "time" ? D.time.div : 1, out = new Array(n);
  for (let k = 0; k < n; k++) out[k] = finite(src[idx ? idx[k] : k] / div);
  return out;
}
function esc(s) { return String(s).replace(/[&<>]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c])); }

function traces(p) {
  const out = [];
  for (const [r, sid, c] of p.tr) {
    if (st.hidden.has(r) || st.cats.has(c)) continue;
    const S = ser(sid), ax = axis(S.a);
    // on a panel of a metric's categories: the category's colour, the run's dash
    const run = c === undefined ? D.runs[r] : {name: D.runs[r].name + " · " + D.cats[c].n,
      color: D.cats[c].color, dash: D.runs.length > 1 ? D.dashes[r % D.dashes.length] : "solid"};
    // an estimate drawn with its interval is not smoothed (the band is about the raw value)
    const smooth = st.smooth > 0 && !S.lo && (S.m || S.v.length > D.sparse);
    const n = S.i ? S.i.length : S.v.length, x = xsOf(ax, S.i, n);
    if (!x) continue;
    const y = Array.from(S.v, finite), name = esc(run.name);
    const at = st.x === "time" ? "%{x:.4~g} " + D.time.unit : "step %{x}";
    if (S.lo) {
      const lo = Array.from(S.lo, finite), hi = Array.from(S.hi, finite);
      out.push({type: "scatter", mode: "lines", x: x.concat(x.slice().reverse()),
        y: lo.concat(hi.slice().reverse()), fill: "toself", fillcolor: run.color, opacity: 0.18,
        line: {width: 0}, hoverinfo: "skip", name: run.name + " interval"});
    }
    out.push({type: "scatter", mode: n <= D.sparse ? "lines+markers" : "lines", x: x, y: y, name: run.name,
      line: {color: run.color, width: smooth ? 1 : 1.7, dash: run.dash}, marker: {size: 4, color: run.color},
      opacity: smooth ? 0.3 : 1, meta: "raw", rlm: [r, sid, 0],
      hovertemplate: at + ": %{y:.6~g}<extra>" + name + "</extra>"});
    if (smooth) {
      let sx = x, sy;
      if (S.m) { sy = emaBuckets(S.m, S.c, st.smooth); sx = xsOf(ax, S.e, S.e.length); }
      else sy = ema(S.v, st.smooth);
      out.push({type: "scatter", mode: "lines", x: sx, y: Array.from(sy, finite),
        name: run.name + " (smoothed)", line: {color: run.color, width: 2, dash: run.dash}, meta: "smoothed",
        rlm: [r, sid, 1],
        hovertemplate: at + ": %{y:.6~g}<extra>" + name + " smoothed</extra>"});
    }
  }
  return out;
}
function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}
function intTicks(lo, hi) {
  if (!(hi > lo)) return 1;
  return Math.max(1, niceStep((hi - lo) / 6));
}
function xRange(tr) {
  let lo = Infinity, hi = -Infinity;
  for (const t of tr) for (const v of t.x) if (v !== null) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}
function layout(p, tr) {
  const time = st.x === "time";
  const lay = {height: 230, margin: {l: 62, r: 12, t: 8, b: 38}, showlegend: false, hovermode: "closest",
    font: {size: 11}, paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    xaxis: {title: {text: time ? "wall time (" + D.time.unit + ")" : "step", standoff: 2},
      zeroline: false, gridcolor: "#eee", linecolor: "#999", automargin: false},
    yaxis: {title: {text: esc(p.y), standoff: 4}, type: st.log ? "log" : "linear", exponentformat: "e",
      zeroline: false, gridcolor: "#eee", linecolor: "#999", automargin: true},
    shapes: [], annotations: []};
  if (!time) {
    const [lo, hi] = xRange(tr);
    Object.assign(lay.xaxis, {tickmode: "linear", tick0: 0, dtick: intTicks(lo, hi), tickformat: "d"});
  }
  for (const [r, step, secs, kind] of p.on) {
    if (st.hidden.has(r)) continue;
    const x = time ? (secs === null ? null : secs / D.time.div) : step;
    if (x === null) continue;
    const color = D.runs[r].color;
    lay.shapes.push({type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
      line: {color: color, width: 1.3, dash: "dash"}});
    lay.annotations.push({x: x, y: 1, xref: "x", yref: "paper", text: esc(kind), showarrow: false,
      textangle: -90, xanchor: "right", yanchor: "top", font: {size: 9, color: color}});
  }
  return lay;
}
function onRelayout(plot, ev) {
  if (st.x !== "step" || !plot.layout || plot.layout.xaxis.tickmode !== "linear") return;
  let lo, hi;
  if (ev["xaxis.range[0]"] !== undefined) { lo = ev["xaxis.range[0]"]; hi = ev["xaxis.range[1]"]; }
  else if (ev["xaxis.autorange"] || ev["xaxis.range"]) {
    [lo, hi] = ev["xaxis.range"] || xRange(plot.data);
  } else return;
  const d = intTicks(lo, hi);
  if (d !== plot.layout.xaxis.dtick) Plotly.relayout(plot, {"xaxis.dtick": d});
}

// a click on a point of a curve opens the sample browser at its step (the logged point's, or the
// last of a smoothed bucket)
function stepOf(t, k) {
  const S = ser(t[1]), ax = axis(S.a);
  return ax.s[t[2] ? (S.e ? S.e[k] : k) : (S.i ? S.i[k] : k)];
}
function onClick(ev) {
  const pt = ev && ev.points && ev.points[0], t = pt && pt.data && pt.data.rlm;
  if (!t || !window.rlmSamples) return;
  const k = pt.pointIndex !== undefined ? pt.pointIndex : pt.pointNumber;
  window.rlmSamples.at(t[0], stepOf(t, k));
}
R.stepOf = stepOf;

const panelEls = Array.from(document.querySelectorAll(".panel[data-p]"));
// a panel drawn before a control changed carries data-stale until it is drawn again
const rendered = new Set(), inView = new Set();
function render(el) {
  const p = D.panels[+el.dataset.p], plot = el.querySelector(".plot"), tr = traces(p);
  Plotly.react(plot, tr, layout(p, tr), CONFIG);
  if (!rendered.has(el)) {
    rendered.add(el);
    plot.on("plotly_relayout", ev => onRelayout(plot, ev));
    plot.on("plotly_click", ev => onClick(ev));
  }
  delete el.dataset.stale;
}
function refresh() {
  for (const el of rendered) el.dataset.stale = "1";
  for (const el of inView) render(el);
}
let first = true;
const io = new IntersectionObserver(entries => {
  for (const e of entries) {
    if (e.isIntersecting) {
      inView.add(e.target);
      if (!rendered.has(e.target) || e.target.dataset.stale) render(e.target);
    } else inView.delete(e.target);
  }
  if (first) {
    first = false;
    requestAnimationFrame(() => { R.ready = true; R.loadMs = performance.now(); });
  }
}, {rootMargin: "300px 0px"});
panelEls.forEach(el => io.observe(el));
if (panelEls.length === 0) requestAnimationFrame(() => { R.ready = true; R.loadMs = performance.now(); });

// --- controls -------------------------------------------------------------------------------
const $ = id => document.getElementById(id);
const slider = $("rlm-smooth"), sval = $("rlm-smooth-val");
let pending = 0;
slider.addEventListener("input", () => {
  st.smooth = +slider.value; sval.textContent = st.smooth.toFixed(2);
  cancelAnimationFrame(pending); pending = requestAnimationFrame(refresh);
});
$("rlm-log").addEventListener("change", e => { st.log = e.target.checked; refresh(); });
$("rlm-x").addEventListener("change", e => { st.x = e.target.value; refresh(); });
document.querySelectorAll("input[data-run]").forEach(cb => cb.addEventListener("change", () => {
  const r = +cb.dataset.run;
  if (cb.checked) st.hidden.delete(r); else st.hidden.add(r);
  refresh();
}));
// the category filter: a category switched off leaves every panel of a metric's categories
const catBoxes = Array.from(document.querySelectorAll("input[data-cat]"));
function applyCats() {
  st.cats = new Set(catBoxes.filter(cb => !cb.checked).map(cb => +cb.dataset.cat));
  const n = $("rlm-cats-count");
  if (n) n.textContent = (catBoxes.length - st.cats.size) + " of " + catBoxes.length;
  refresh();
}
catBoxes.forEach(cb => cb.addEventListener("change", applyCats));
document.querySelectorAll("button[data-cat-set]").forEach(b => b.addEventListener("click", () => {
  const on = b.dataset.catSet === "1";
  b.closest(".cat-group").querySelectorAll("input[data-cat]").forEach(cb => { cb.checked = on; });
  applyCats();
}));
const rows = Array.from(document.querySelectorAll("tr[data-key]"));
const sections = Array.from(document.querySelectorAll("[data-section]"));
const count = $("rlm-count");
function applyFilter() {
  const terms = st.filter, match = s => terms.every(t => s.includes(t));
  let shown = 0;
  for (const el of panelEls) { el.hidden = !match(el.dataset.keys); if (!el.hidden) shown++; }
  for (const tr of rows) tr.hidden = !match(tr.dataset.key);
  for (const sec of sections) {
    const any = sec.querySelector(".panel[data-p]:not([hidden]), tr[data-key]:not([hidden])");
    sec.hidden = !any;
    if (terms.length && sec.tagName === "DETAILS") sec.open = true;
  }
  const all = panelEls.length + " panels";
  count.textContent = terms.length ? shown + " of " + all : all;
}
let ftimer = 0;
$("rlm-filter").addEventListener("input", e => {
  clearTimeout(ftimer);
  ftimer = setTimeout(() => {
    st.filter = e.target.value.toLowerCase().split(/\s+/).filter(Boolean);
    applyFilter();
  }, 120);
});
applyFilter();
// a link to a panel (a finding) opens its group and clears a filter that hides it
document.addEventListener("click", e => {
  const a = e.target.closest('a[href^="#panel-"]');
  if (!a) return;
  const el = document.getElementById(a.getAttribute("href").slice(1));
  if (!el) return;
  if (el.hidden) { $("rlm-filter").value = ""; st.filter = []; applyFilter(); }
  for (let d = el.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
});
Object.assign(R, {ema: ema, emaBuckets: emaBuckets, rendered: () => rendered.size});
})();
"""

SAMPLES_CSS = """
#samples .sbar{display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center;font-size:13px;margin:.4em 0}
#samples .sbar input[type=number]{width:72px} #samples .sbar input[type=search]{width:220px;padding:2px 6px}
#samples .sbar select{max-width:220px}
#samples table{table-layout:auto} #samples td,#samples th{text-align:left} #samples th{white-space:nowrap}
#samples td.n{text-align:right;white-space:nowrap}
#samples .txt{white-space:pre-wrap;overflow-wrap:anywhere;max-height:16em;overflow:auto;
font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
#samples td.t{width:36%} #samples td.pair{width:37%}
#samples .one{border-top:1px dashed #ddd;padding-top:2px;margin-top:2px}
#samples .one:first-child{border-top:0;margin-top:0}
#samples .meta{color:#666;font-size:11px}
.scut{color:#b36b00}
.slinks{font-size:.86em}
#samples tr.sex{background:#fff4d6} #samples tr.sex>td:first-child{box-shadow:inset 3px 0 #e69500}
#samples .one.sex{background:#fff4d6} #samples .why{color:#a04f00;font-size:11px;font-weight:600}
"""

SAMPLES_SCRIPT = r"""
(function () {
"use strict";
const $ = id => document.getElementById(id);
const sec = $("samples"), src = $("rlm-samples");
if (!sec || !src) return;
const SHOWN = 200;  // rows drawn at most when every step is searched
let D = null;
const st = {e: 0, k: 0, vs: -1, asked: null, find: null};
const el = {run: $("rlm-s-run"), step: $("rlm-s-step"), prev: $("rlm-s-prev"), next: $("rlm-s-next"),
  vs: $("rlm-s-vs"), wmin: $("rlm-s-wmin"), wmax: $("rlm-s-wmax"), cat: $("rlm-s-cat"),
  stop: $("rlm-s-stop"), q: $("rlm-s-q"), all: $("rlm-s-all"), info: $("rlm-s-info"),
  table: $("rlm-s-table")};

function node(tag, text, cls) {
  const n = document.createElement(tag);
  if (text !== undefined && text !== null) n.textContent = String(text);
  if (cls) n.className = cls;
  return n;
}
function option(value, text) { const o = node("option", text); o.value = String(value); return o; }
function fmt(w) { return Number.isInteger(w) ? String(w) : w.toPrecision(4).replace(/\.?0+$/, ""); }
function label(i) { return i < 0 ? null : D.labels[i]; }
function plural(n) { return n === 1 ? "" : "s"; }

function init() {
  D = JSON.parse(src.textContent);
  for (const E of D.runs) {
    // prompt -> the step indices it appears at (for side by side)
    E.at = new Map();
    for (let k = 0; k < E.s.length; k++)
      for (let i = E.o[k]; i < E.o[k + 1]; i++) {
        if (!E.at.has(E.p[i])) E.at.set(E.p[i], []);
        const a = E.at.get(E.p[i]);
        if (a[a.length - 1] !== k) a.push(k);
      }
    E.lx = null;
  }
  el.run.addEventListener("change", () => {
    st.e = entry(+el.run.value); st.k = 0; st.vs = -1; st.asked = null; st.find = null; runChanged(); draw();
  });
  el.step.addEventListener("change", () => {
    st.k = +el.step.value; st.asked = null; stepChanged(); draw();
  });
  el.prev.addEventListener("click", () => move(-1));
  el.next.addEventListener("click", () => move(1));
  el.vs.addEventListener("change", () => { st.vs = +el.vs.value; draw(); });
  for (const x of [el.wmin, el.wmax, el.q]) x.addEventListener("input", schedule);
  for (const x of [el.cat, el.stop, el.all]) x.addEventListener("change", draw);
  runChanged();
}
function data() { if (!D) init(); return D; }
function entry(r) { const j = D.runs.findIndex(E => E.r === r); return j; }
function move(d) {
  const E = D.runs[st.e], k = Math.min(E.s.length - 1, Math.max(0, st.k + d));
  if (k !== st.k) { st.k = k; st.asked = null; stepChanged(); draw(); }
}
let timer = 0;
function schedule() { clearTimeout(timer); sec.dataset.pending = "1"; timer = setTimeout(draw, 120); }

function fillSelect(sel, items) {
  const frag = document.createDocumentFragment();
  for (const [v, t] of items) frag.appendChild(option(v, t));
  sel.replaceChildren(frag);
}
function runChanged() {
  const E = D.runs[st.e];
  el.run.value = String(E.r);
  fillSelect(el.step, E.s.map((s, k) => [k, "step " + s + " (" + (E.o[k + 1] - E.o[k]) + ")"]));
  const used = idx => Array.from(new Set(E[idx].filter(i => i >= 0)))
    .sort((a, b) => (D.labels[a] < D.labels[b] ? -1 : 1));
  const labs = idx => [["", "any"]].concat(used(idx).map(i => [i, D.labels[i]]))
    .concat(E[idx].some(i => i < 0) ? [["-1", "(none)"]] : []);
  fillSelect(el.cat, labs("c"));
  fillSelect(el.stop, labs("q"));
  stepChanged();
}
function stepChanged() {
  const E = D.runs[st.e];
  el.step.value = String(st.k);
  el.prev.disabled = st.k === 0;
  el.next.disabled = st.k === E.s.length - 1;
  // the other steps sharing prompts with this one, with how many
  const seen = new Set(), shared = new Map();
  for (let i = E.o[st.k]; i < E.o[st.k + 1]; i++) {
    if (seen.has(E.p[i])) continue;
    seen.add(E.p[i]);
    for (const k of E.at.get(E.p[i])) if (k !== st.k) shared.set(k, (shared.get(k) || 0) + 1);
  }
  const ks = Array.from(shared.keys()).sort((a, b) => a - b);
  const items = [["-1", ks.length ? "(none)" : "(no other step has these prompts)"]]
    .concat(ks.map(k => [k, "step " + E.s[k] + " (" + shared.get(k) + " prompt" + plural(shared.get(k))
      + ")"]));
  fillSelect(el.vs, items);
  if (!ks.includes(st.vs)) st.vs = -1;
  el.vs.value = String(st.vs);
  el.vs.disabled = ks.length === 0;
}

function filters() {
  const num = x => (x.value.trim() === "" || !Number.isFinite(+x.value) ? null : +x.value);
  const q = el.q.value.trim().toLowerCase();
  return {wmin: num(el.wmin), wmax: num(el.wmax), cat: el.cat.value === "" ? null : +el.cat.value,
    stop: el.stop.value === "" ? null : +el.stop.value, q: q, any: false};
}
function lower(E) {
  if (!E.lx) { E.lx = E.x.map(t => t.toLowerCase()); }
  if (!D.lp) D.lp = D.prompts.map(t => t.toLowerCase());
}
function passes(E, i, f) {
  if (f.wmin !== null && !(E.w[i] >= f.wmin)) return false;
  if (f.wmax !== null && !(E.w[i] <= f.wmax)) return false;
  if (f.cat !== null && E.c[i] !== f.cat) return false;
  if (f.stop !== null && E.q[i] !== f.stop) return false;
  if (f.q) { lower(E); if (!E.lx[i].includes(f.q) && !D.lp[E.p[i]].includes(f.q)) return false; }
  return true;
}
function filtered(f) {
  return f.wmin !== null || f.wmax !== null || f.cat !== null || f.stop !== null || !!f.q;
}

function meta(E, i) {
  const parts = ["reward " + fmt(E.w[i])];
  if (E.n[i] !== null) parts.push(E.n[i] + " tokens");
  if (E.q[i] >= 0) parts.push(label(E.q[i]));
  if (E.c[i] >= 0) parts.push(label(E.c[i]));
  parts.push(D.chosen[E.h[i]]);
  return parts.join(" \u00b7 ");
}
function text(t) { return node("div", t, "txt"); }
// the example rows of the finding the browser was opened from: row -> why, in their order
function examples() {
  const rows = st.find === null ? null : (D.examples || {})[st.find];
  return new Map(rows && D.runs[st.e].r === +st.find.split(":")[0] ? rows : []);
}
function mark(n, ex, i) {
  if (!ex.has(i)) return;
  n.classList.add("sex");
  n.dataset.why = ex.get(i);
}
function header(names) {
  const tr = node("tr");
  for (const n of names) tr.appendChild(node("th", n));
  return tr;
}
function rowOf(E, i, k, withStep, ex) {
  const tr = node("tr");
  tr.dataset.row = String(i);
  mark(tr, ex, i);
  if (withStep) tr.appendChild(node("td", E.s[k], "n"));
  const chosen = node("td", D.chosen[E.h[i]]);
  if (ex.has(i)) chosen.appendChild(node("div", ex.get(i), "why"));
  tr.appendChild(chosen);
  tr.appendChild(node("td", fmt(E.w[i]), "n"));
  tr.appendChild(node("td", E.n[i] === null ? "\u2013" : E.n[i], "n"));
  tr.appendChild(node("td", label(E.q[i]) === null ? "\u2013" : label(E.q[i])));
  tr.appendChild(node("td", label(E.c[i]) === null ? "\u2013" : label(E.c[i])));
  const p = node("td", null, "t"); p.appendChild(text(D.prompts[E.p[i]])); tr.appendChild(p);
  const x = node("td", null, "t"); x.appendChild(text(E.x[i])); tr.appendChild(x);
  return tr;
}
const COLS = ["chosen", "reward", "length", "stop reason", "category", "prompt", "response"];

// a step's rows, the finding's examples first (in their order) when one step is shown
function order(E, k, ex, every) {
  const rows = [];
  for (let i = E.o[k]; i < E.o[k + 1]; i++) rows.push(i);
  if (every || !ex.size) return rows;
  const first = Array.from(ex.keys()).filter(i => i >= E.o[k] && i < E.o[k + 1]);
  return first.concat(rows.filter(i => !ex.has(i)));
}
function drawRows(E, f) {
  const table = node("table"), every = el.all.checked, ex = examples();
  table.appendChild(header(every ? ["step"].concat(COLS) : COLS));
  let n = 0, steps = 0, shown = 0, marked = 0;
  const ks = every ? E.s.map((_, k) => k) : [st.k];
  for (const k of ks) {
    let hit = false;
    for (const i of order(E, k, ex, every)) {
      if (!passes(E, i, f)) continue;
      n++; hit = true;
      if (shown < SHOWN) { table.appendChild(rowOf(E, i, k, every, ex)); shown++; marked += ex.has(i); }
    }
    if (hit) steps++;
  }
  el.table.replaceChildren(table);
  const rows = E.o[st.k + 1] - E.o[st.k];
  let info;
  if (every) {
    info = n + " rows match at " + steps + " of " + E.s.length + " steps";
    if (n > shown) info += "; the first " + shown + " shown";
  } else info = "step " + E.s[st.k] + ": " + (filtered(f) ? n + " of " + rows : rows) + " rows";
  if (marked)
    info += "; " + marked + " example" + plural(marked) + " of the finding marked" + (every ? "" : ", first");
  return info;
}
function side(E, rows, ex) {
  const td = node("td", null, "pair");
  for (const i of rows) {
    const d = node("div", null, "one");
    d.dataset.row = String(i);
    mark(d, ex, i);
    d.appendChild(node("div", meta(E, i), "meta"));
    if (ex.has(i)) d.appendChild(node("div", ex.get(i), "why"));
    d.appendChild(text(E.x[i]));
    td.appendChild(d);
  }
  return td;
}
function drawPairs(E, f) {
  const a = st.k, b = st.vs, A = new Map(), B = new Map(), ex = examples();
  for (let i = E.o[a]; i < E.o[a + 1]; i++) { if (!A.has(E.p[i])) A.set(E.p[i], []); A.get(E.p[i]).push(i); }
  for (let i = E.o[b]; i < E.o[b + 1]; i++) { if (!B.has(E.p[i])) B.set(E.p[i], []); B.get(E.p[i]).push(i); }
  const table = node("table");
  table.appendChild(header(["prompt", "step " + E.s[a], "step " + E.s[b]]));
  let both = 0, shown = 0;
  for (const [p, ra] of A) {
    if (!B.has(p)) continue;
    both++;
    const rb = B.get(p);
    if (!ra.some(i => passes(E, i, f)) && !rb.some(i => passes(E, i, f))) continue;
    shown++;
    const tr = node("tr");
    tr.dataset.prompt = String(p);
    const td = node("td", null, "t"); td.appendChild(text(D.prompts[p])); tr.appendChild(td);
    tr.appendChild(side(E, ra, ex)); tr.appendChild(side(E, rb, ex));
    table.appendChild(tr);
  }
  el.table.replaceChildren(table);
  const onlyA = A.size - both, onlyB = B.size - both;
  return both + " prompt" + plural(both) + " at both steps " + E.s[a] + " and " + E.s[b]
    + (filtered(f) ? " (" + shown + " matching)" : "") + "; other prompts: " + onlyA + " at step "
    + E.s[a] + ", " + onlyB + " at step " + E.s[b];
}
function draw() {
  data();
  const E = D.runs[st.e], f = filters();
  let info = st.vs >= 0 && !el.all.checked ? drawPairs(E, f) : drawRows(E, f);
  if (st.asked !== null && st.asked !== E.s[st.k])
    info += " (the nearest step with samples to step " + st.asked + ")";
  el.info.textContent = info;
  clearTimeout(timer);
  delete sec.dataset.pending;
  sec.dataset.step = String(E.s[st.k]);
  sec.dataset.vs = st.vs >= 0 ? String(E.s[st.vs]) : "";
  sec.dataset.finding = st.find === null ? "" : st.find;
}

function nearest(s, x) {
  let lo = 0, hi = s.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (s[m] < x) lo = m + 1; else hi = m; }
  if (lo === 0) return 0;
  if (lo === s.length) return s.length - 1;
  return x - s[lo - 1] <= s[lo] - x ? lo - 1 : lo;
}
// open the browser at run r's step nearest `step` (side by side with the step nearest `vs`), with
// the example rows of finding `find` ("run:index") marked, first
function at(r, step, vs, find) {
  data();
  const j = entry(r);
  if (j < 0) return null;
  st.find = find === undefined ? null : find;
  if (j !== st.e) { st.e = j; st.k = 0; st.vs = -1; runChanged(); }
  const E = D.runs[j];
  st.k = nearest(E.s, step);
  st.asked = step;
  stepChanged();
  if (vs !== undefined && vs !== null) {
    const kv = nearest(E.s, vs);
    st.vs = kv !== st.k && Array.from(el.vs.options).some(o => +o.value === kv) ? kv : -1;
    el.vs.value = String(st.vs);
  } else { st.vs = -1; el.vs.value = "-1"; }
  el.all.checked = false;
  draw();
  history.replaceState(null, "", "#samples");
  sec.scrollIntoView({block: "start"});
  return E.s[st.k];
}
document.addEventListener("click", e => {
  const a = e.target.closest("a.slink");
  if (!a) return;
  e.preventDefault();
  at(+a.dataset.srun, +a.dataset.sstep, a.dataset.svs === undefined ? null : +a.dataset.svs, a.dataset.sfind);
});
// drawn when it first comes near the screen
const io = new IntersectionObserver(entries => {
  if (entries.some(x => x.isIntersecting)) { io.disconnect(); if (!el.table.firstChild) draw(); }
}, {rootMargin: "400px 0px"});
io.observe(sec);
window.rlmSamples = {at: at, state: () => (D ? {run: D.runs[st.e].r, step: D.runs[st.e].s[st.k],
  vs: st.vs >= 0 ? D.runs[st.e].s[st.vs] : null} : null)};
})();
"""
