"""The HTML page: the runs and their config, the findings, the panels' data, the tables.

Everything is in one file: plotly.js (embedded once, from the installed ``plotly`` package:
the page needs no network), the stylesheet and script of :mod:`rlmetrics.report._assets`, and a
JSON payload that the script draws from:

``runs``
    ``{name, color}`` per run, in order.
``axes``
    ``{s, t}``: a step array (base64 of little-endian float64) and the seconds since the run's
    first step at those steps (``t``, null without times); shared by the series of a run that
    were logged at the same steps.
``series``
    ``{a, v, n, i, m, c, lo, hi}``: the axis, the values drawn (float64) and, for a series of
    ``n`` points thinned by :func:`rlmetrics.report.downsample.thin`, the indices of those
    values into the axis (``i``, int32), the bucket means (``m``, float32) and, where some
    bucket holds a non-finite value, the finite counts (``c``) that the smoothing runs on (the
    buckets' bounds follow from ``n`` and the number of means); ``lo`` / ``hi`` the interval at
    the drawn points.
``panels``
    ``{y, tr, on}``: the y label, ``[run, series]`` per trace (``[run, series, category]`` on a
    panel of a metric's categories), ``[run, step, seconds, kind]`` per finding onset marked.
``cats``
    ``{g, n, color}`` per category of :attr:`rlmetrics.report.layout.Plan.categories`: its group,
    its name, its colour (the category filter of the toolbar shows and hides them on every panel).

When a run has sample tables, a second JSON element (``rlm-samples``,
:mod:`rlmetrics.report.samples`) holds them for the sample browser, with its script; a page
without samples has neither.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics.health.findings import Diagnosis, Finding

from ._assets import CSS, SAMPLES_CSS, SAMPLES_SCRIPT, SCRIPT
from .downsample import thin
from .layout import Panel, Plan, band_of, best_direction, slug
from .runs import RunCurves, flat_config
from .samples import EmbeddedSamples, embed_samples, finding_sample_steps, nearest_step, samples_json

__all__ = ["COLORS", "build_page", "plotly_js"]

#: Run colours (plotly's and matplotlib's default cycle, so the PNGs match the page).
COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: Line styles of the runs on a panel of a metric's categories (the colour is the category's).
RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")


def category_color(index: int) -> str:
    """The colour of category ``index``: :data:`COLORS` first, then hues a golden angle apart.

    >>> category_color(0), category_color(10)
    ('#1f77b4', '#d9a526')
    """
    if index < len(COLORS):
        return COLORS[index]
    import colorsys

    hue = (0.118 + (index - len(COLORS)) * 0.618033988749895) % 1.0
    r, g, b = colorsys.hls_to_rgb(hue, 0.5, 0.7)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


#: A series of at most this many points (a validation every N steps) is drawn as logged, with
#: markers, and not smoothed: an EMA over a handful of points lags by whole evaluations.
SPARSE_POINTS = 40
#: Points drawn on the whole page at most (about 400 long series of 800 points): with more long
#: series (several runs overlaid), each is thinned to fewer points, down to MIN_POINTS, so the
#: page stays near 12 MB and opens as fast.
POINT_BUDGET = 320_000
MIN_POINTS = 200
#: Groups whose panels show without a click (larger ones open on a click, or on a filter).
OPEN_GROUP_PANELS = 16
_MAX_CONFIG_ROWS = 400


def plotly_js() -> str:
    """plotly.js, minified, from the installed ``plotly`` package."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise ImportError(
            "the interactive report needs plotly (its JavaScript is embedded in the page): "
            "pip install 'rlmetrics[plot]'"
        ) from None
    return str(get_plotlyjs())


def _b64(values: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(values, dtype=dtype).tobytes()).decode("ascii")


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _step(s: float) -> str:
    return f"{s:g}" if abs(s) < 1e15 else f"{s:.0f}"


def finite_last(steps: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """``(step, value)`` of the last finite point (NaNs without one)."""
    ok = np.flatnonzero(np.isfinite(values))
    if ok.size == 0:
        return math.nan, math.nan
    return float(steps[ok[-1]]), float(values[ok[-1]])


def best_point(steps: np.ndarray, values: np.ndarray, direction: str | None) -> tuple[float, float]:
    """``(step, value)`` of the first highest (``"max"``) or lowest (``"min"``) finite point."""
    ok = np.isfinite(values)
    if direction is None or not ok.any():
        return math.nan, math.nan
    v = np.where(ok, values, -np.inf if direction == "max" else np.inf)
    i = int(np.argmax(v) if direction == "max" else np.argmin(v))
    return float(steps[i]), float(values[i])


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "&ndash;"
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {sec:02d} s" if m else f"{seconds:.1f} s"


def _time_unit(runs: Sequence[RunCurves]) -> dict[str, Any]:
    longest = max((r.duration or 0.0 for r in runs), default=0.0)
    unit, div = ("s", 1) if longest < 120 else ("min", 60) if longest < 7200 else ("h", 3600)
    return {"unit": unit, "div": div}


class _Payload:
    def __init__(self, runs: Sequence[RunCurves], *, max_points: int) -> None:
        self.runs = runs
        self.max_points = max_points
        self.axes: list[dict[str, str | None]] = []
        self.series: list[dict[str, Any]] = []
        self._axis_ids: dict[tuple[int, bytes], int] = {}
        self._series_ids: dict[tuple[int, str], int] = {}

    def seconds_at(self, run: int, steps: np.ndarray) -> np.ndarray | None:
        r = self.runs[run]
        if r.times is None or r.started is None:
            return None
        t_steps, stamps = r.times
        idx = np.minimum(np.searchsorted(t_steps, steps), t_steps.size - 1)
        hit = t_steps[idx] == steps
        return np.where(hit, stamps[idx] - r.started, np.nan)

    def axis(self, run: int, steps: np.ndarray) -> int:
        tag = (run, steps.tobytes())
        if tag not in self._axis_ids:
            secs = self.seconds_at(run, steps)
            self._axis_ids[tag] = len(self.axes)
            self.axes.append({"s": _b64(steps, "<f8"), "t": None if secs is None else _b64(secs, "<f8")})
        return self._axis_ids[tag]

    def add(self, run: int, key: str) -> int:
        tag = (run, key)
        if tag in self._series_ids:
            return self._series_ids[tag]
        r = self.runs[run]
        steps, values = r.series[key]
        entry: dict[str, Any] = {"a": self.axis(run, steps)}
        band = band_of(r, key)
        if values.size > self.max_points:
            t = thin(values, buckets=max(1, self.max_points // 2))
            entry |= {
                "n": int(values.size),
                "v": _b64(values[t.keep], "<f8"),
                "i": _b64(t.keep, "<i4"),
                "m": _b64(t.means, "<f4"),  # for the smoothed line only
            }
            sizes = np.diff(np.append(-1, t.ends))
            if not np.array_equal(t.counts, sizes):  # else the script counts the buckets itself
                entry["c"] = _b64(t.counts, "<i4")
            if band is not None:
                band = (band[0][t.keep], band[1][t.keep])
        else:
            entry["v"] = _b64(values, "<f8")
        if band is not None:
            entry |= {"lo": _b64(band[0], "<f8"), "hi": _b64(band[1], "<f8")}
        self._series_ids[tag] = len(self.series)
        self.series.append(entry)
        return self._series_ids[tag]


def _onsets(plan: Plan, diagnoses: Sequence[Diagnosis]) -> dict[str, list[tuple[int, int, str]]]:
    """Panel id -> ``(run, step, kind)`` of each finding whose metric it draws."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    for i, diagnosis in enumerate(diagnoses):
        for f in diagnosis.findings:
            for pid in dict.fromkeys(plan.panel_of[k] for k in f.metric if k in plan.panel_of):
                out.setdefault(pid, []).append((i, f.step, f.kind))
    return out


def payload(
    runs: Sequence[RunCurves],
    plan: Plan,
    diagnoses: Sequence[Diagnosis],
    *,
    max_points: int,
    smoothing: float,
) -> dict[str, Any]:
    """The JSON the page's script draws from (see the module docstring)."""
    long = {(i, k) for p in plan.panels for i, k in p.traces if runs[i].series[k][1].size > max_points}
    if long:
        max_points = min(max_points, max(MIN_POINTS, POINT_BUDGET // len(long)))
    data = _Payload(runs, max_points=max_points)
    onsets = _onsets(plan, diagnoses)
    panels = []
    for panel in plan.panels:
        marks = []
        for run, step, kind in onsets.get(panel.id, ()):
            secs = data.seconds_at(run, np.asarray([float(step)]))
            sec = None if secs is None or not np.isfinite(secs[0]) else float(secs[0])
            marks.append([run, step, sec, kind])
        tr = [[i, data.add(i, key)] for i, key in panel.traces]
        for t, cat in zip(tr, panel.cats):
            t.append(cat)
        panels.append({"y": panel.ylabel, "tr": tr, "on": marks})
    return {
        "runs": [{"name": r.name, "color": COLORS[i % len(COLORS)]} for i, r in enumerate(runs)],
        "axes": data.axes,
        "series": data.series,
        "panels": panels,
        "cats": [{"g": g, "n": c, "color": category_color(i)} for i, (g, c) in enumerate(plan.categories)],
        "dashes": RUN_DASHES,
        "time": _time_unit(runs),
        "smoothing": smoothing,
        "sparse": SPARSE_POINTS,
    }


# --- HTML pieces ---------------------------------------------------------------------------------

_e = html.escape


def _swatch(i: int) -> str:
    return f'<span class="sw" style="background:{COLORS[i % len(COLORS)]}"></span>'


def _runs_section(runs: Sequence[RunCurves]) -> str:
    rows = []
    for i, r in enumerate(runs):
        started = (
            dt.datetime.fromtimestamp(r.started, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            if r.started is not None
            else "&ndash;"
        )
        command = f"<code>{_e(r.command)}</code>" if r.command else '<span class="small">not recorded</span>'
        rows.append(
            f"<tr><td>{_swatch(i)} <b>{_e(r.name)}</b></td><td><code>{_e(str(r.path))}</code>"
            f' <span class="small">({_e(r.source)})</span></td><td>{len(r.series)}</td>'
            f"<td>{_e(r.step_range)}</td><td>{_duration(r.duration)}</td><td>{started}</td>"
            f"<td>{command}</td></tr>"
        )
    table = (
        '<table class="meta"><colgroup><col style="width:13%"><col style="width:27%"><col style="width:7%">'
        '<col style="width:9%"><col style="width:11%"><col style="width:13%"><col></colgroup>'
        "<tr><th>run</th><th>read from</th><th>metrics</th><th>steps</th><th>duration</th><th>started</th>"
        "<th>command</th></tr>" + "".join(rows) + "</table>"
    )
    configs = []
    for r in runs:
        pairs = flat_config(r.config)
        if not pairs:
            continue
        shown = pairs[:_MAX_CONFIG_ROWS]
        more = f" (first {_MAX_CONFIG_ROWS} of {len(pairs)})" if len(pairs) > len(shown) else ""
        cells = "".join(f'<tr><td class="k">{_e(k)}</td><td class="k">{_e(v)}</td></tr>' for k, v in shown)
        configs.append(
            f"<details><summary>config of <b>{_e(r.name)}</b> ({len(pairs)} entries{more})</summary>"
            f'<table class="meta"><colgroup><col class="k"><col></colgroup>{cells}</table></details>'
        )
    if not configs:
        configs.append(
            '<p class="small">no config recorded (a Tracker writes config.json beside its metrics.jsonl)</p>'
        )
    return '<section id="runs"><h2>runs</h2>' + table + "".join(configs) + "</section>"


def _shares_a_prompt(run: RunCurves, a: int, b: int) -> bool:
    return bool(set(run.samples[a].prompt) & set(run.samples[b].prompt))


def _sample_links(run: int, finding: Finding, steps: Sequence[int], curves: RunCurves, key: str = "") -> str:
    """Links to the sample browser at the steps a finding points at (the nearest with samples),
    and the step before its onset beside the onset when the two share a prompt; ``key`` (the
    finding's ``run:index``) marks them to highlight its example rows there."""
    at: dict[str, int] = {}
    for label, step in finding_sample_steps(finding).items():
        near = nearest_step(steps, step)
        if near is not None and near not in at.values():
            at[label] = near
    if not at:
        return ""
    mark = f' data-sfind="{key}"' if key else ""
    links = [
        f'<a href="#samples" class="slink" data-srun="{run}" data-sstep="{step}"{mark}>'
        f"{label} (step {step})</a>"
        for label, step in at.items()
    ]
    if "before" in at and "onset" in at and _shares_a_prompt(curves, at["before"], at["onset"]):
        links.append(
            f'<a href="#samples" class="slink" data-srun="{run}" data-sstep="{at["before"]}" '
            f'data-svs="{at["onset"]}"{mark}>before | onset, side by side</a>'
        )
    return ' <span class="slinks">samples: ' + " &middot; ".join(links) + "</span>"


def _findings_section(
    runs: Sequence[RunCurves],
    diagnoses: Sequence[Diagnosis],
    plan: Plan,
    sample_steps: Sequence[Sequence[int]] = (),
    with_examples: Collection[str] = (),
) -> str:
    """The findings per run, with links to the sample browser (``with_examples``: the
    ``run:index`` keys of the findings whose example rows the page data holds)."""
    parts = ['<section id="findings"><h2>findings</h2>']
    for i, (run, diagnosis) in enumerate(zip(runs, diagnoses)):
        parts.append(f"<h3>{_swatch(i)} {_e(run.name)}</h3>")
        if not diagnosis.findings:
            parts.append("<p>no findings</p>")
        else:
            items = []
            for j, f in enumerate(diagnosis.findings):
                key = next((k for k in f.metric if k in plan.panel_of), None)
                kind = _e(f.kind)
                name = f'<a href="#{plan.panel_of[key]}">{kind}</a>' if key is not None else kind
                metrics = ", ".join(_e(m) for m in f.metric)
                evidence = _e(f.evidence_text())
                steps = sample_steps[i] if i < len(sample_steps) else ()
                where = f" in <b>{_e(f.category)}</b>" if f.category is not None else ""
                items.append(
                    f'<li class="{_e(f.severity)}"><b>{_e(f.severity)}</b> {name}{where} '
                    f"from step {f.step} (<code>{metrics}</code>): {_e(f.advice)}"
                    + (f' <span class="small">{evidence}</span>' if evidence else "")
                    + _sample_links(i, f, steps, run, f"{i}:{j}" if f"{i}:{j}" in with_examples else "")
                    + "</li>"
                )
            parts.append(f'<ul class="findings">{"".join(items)}</ul>')
        if diagnosis.skipped:
            n = len(diagnosis.skipped)
            skipped = "; ".join(f"{_e(s.kind)} ({_e(s.why)})" for s in diagnosis.skipped)
            parts.append(
                f'<details class="small"><summary>{n} check{_s(n)} could not run</summary>'
                f"<p>checks that could not run: {skipped}</p></details>"
            )
    return "".join(parts) + "</section>"


def _panel_html(panel: Panel, index: int) -> str:
    keys = " ".join([panel.title, *panel.keys]).lower()
    return (
        f'<div class="panel" id="{panel.id}" data-p="{index}" data-keys="{_e(keys)}">'
        f'<div class="ptitle" title="{_e(" · ".join(panel.keys))}">{_e(panel.title)}</div>'
        '<div class="plot"></div></div>'
    )


def _value_at(run: RunCurves, key: str, step: float) -> float:
    if key not in run.series:
        return math.nan
    s, v = run.series[key]
    hit = np.flatnonzero(s == step)
    return float(v[hit[-1]]) if hit.size else math.nan


def _table(keys: Sequence[str], runs: Sequence[RunCurves], banded: set[str]) -> str:
    head = "".join(f'<th colspan="2">{_swatch(i)} {_e(r.name)}</th>' for i, r in enumerate(runs))
    sub = "".join("<th>last (step)</th><th>best (step)</th>" for _ in runs)
    rows = []
    for key in keys:
        direction = best_direction(key)
        cells = []
        for run in runs:
            if key not in run.series:
                cells.append("<td></td><td></td>")
                continue
            s, v = run.series[key]
            ls, lv = finite_last(s, v)
            bs, bv = best_point(s, v, direction)
            last = f"{_fmt(lv)} ({_step(ls)})" if not math.isnan(ls) else "nan"
            if key in banded and not math.isnan(ls):
                lo = _value_at(run, key + K.CI_LOW_SUFFIX, ls)
                hi = _value_at(run, key + K.CI_HIGH_SUFFIX, ls)
                last = f"{_fmt(lv)} [{_fmt(lo)}, {_fmt(hi)}] ({_step(ls)})"
            best = f"{_fmt(bv)} ({_step(bs)})" if not math.isnan(bs) else ""
            cells.append(f"<td>{last}</td><td>{best}</td>")
        arrow = {"max": " &uarr;", "min": " &darr;"}.get(direction or "", "")
        rows.append(
            f'<tr data-key="{_e(key.lower())}"><td class="k">{_e(key)}{arrow}</td>{"".join(cells)}</tr>'
        )
    return (
        '<table><colgroup><col class="k"></colgroup>'
        f'<tr><th rowspan="2">metric</th>{head}</tr><tr>{sub}</tr>' + "".join(rows) + "</table>"
    )


def _folded_section(plan: Plan, runs: Sequence[RunCurves]) -> str:
    if not plan.folded:
        return ""
    head = "".join(f"<th>{_swatch(i)} {_e(r.name)}</th>" for i, r in enumerate(runs))
    rows = []
    for key in sorted(plan.folded):
        cells = []
        for run, kind in zip(runs, plan.folded[key]):
            if kind is None:
                cells.append("<td></td>")
                continue
            s, v = run.series[key]
            finite = v[np.isfinite(v)]
            what = f"{kind} {_fmt(float(finite[0]))}" if kind == "constant" else kind
            cells.append(f"<td>{_e(what)} ({s.size} points)</td>")
        rows.append(f'<tr data-key="{_e(key.lower())}"><td class="k">{_e(key)}</td>{"".join(cells)}</tr>')
    return (
        '<section id="folded" data-section><h2>constant series</h2>'
        f'<p class="small">{len(plan.folded)} series that never change, are all zero, hold no finite '
        "value or equal the step: listed here instead of drawn.</p>"
        f'<table><colgroup><col class="k"></colgroup><tr><th>metric</th>{head}</tr>{"".join(rows)}</table>'
        "</section>"
    )


def _samples_section(runs: Sequence[RunCurves], samples: EmbeddedSamples) -> str:
    """The sample browser's frame (the page's script fills it); empty without samples."""
    if samples.data is None:
        return ""
    with_samples = [e["r"] for e in samples.data["runs"]]
    options = "".join(f'<option value="{r}">{_e(runs[r].name)}</option>' for r in with_samples)
    counts = ", ".join(
        f"{_e(runs[r].name)}: {len(samples.steps[r])} steps, {samples.data['runs'][j]['o'][-1]} rows"
        for j, r in enumerate(with_samples)
    )
    note = samples.data["note"]
    return (
        '<section id="samples"><h2>samples</h2>'
        f'<p class="small">the rollouts logged with <code>Tracker.log_samples</code> ({counts}). '
        "Click a point of a curve, or a finding's samples link, to open its step (or the nearest "
        "step with samples). Side by side pairs the same prompt text at two steps.</p>"
        + (f'<p class="small scut" id="rlm-s-cut">{_e(note)}</p>' if note else "")
        + '<div class="sbar">'
        + f'<label{"" if len(with_samples) > 1 else " hidden"}>run <select id="rlm-s-run">{options}</select>'
        "</label>"
        '<label>step <button type="button" id="rlm-s-prev" aria-label="previous step">&lsaquo;</button>'
        '<select id="rlm-s-step"></select>'
        '<button type="button" id="rlm-s-next" aria-label="next step">&rsaquo;</button></label>'
        '<label>side by side with <select id="rlm-s-vs"></select></label>'
        '<label>reward <input type="number" step="any" id="rlm-s-wmin" placeholder="min" '
        'aria-label="lowest reward"> to <input type="number" step="any" id="rlm-s-wmax" placeholder="max" '
        'aria-label="highest reward"></label>'
        '<label>category <select id="rlm-s-cat"></select></label>'
        '<label>stop reason <select id="rlm-s-stop"></select></label>'
        '<input type="search" id="rlm-s-q" placeholder="search prompts and responses" '
        'aria-label="search samples"><label title="filter and search the rows of every step">'
        '<input type="checkbox" id="rlm-s-all"> every step</label>'
        '</div><p id="rlm-s-info" class="small"></p><div id="rlm-s-table"></div></section>'
    )


def _category_filter(plan: Plan) -> str:
    """The toolbar's category filter: a checkbox a category, by group, with all / none."""
    if not plan.categories:
        return ""
    groups: dict[str, list[str]] = {}
    for i, (group, category) in enumerate(plan.categories):
        swatch = f'<span class="sw" style="background:{category_color(i)}"></span>'
        groups.setdefault(group, []).append(
            f'<label class="chip"><input type="checkbox" data-cat="{i}" checked>{swatch}'
            f"{_e(category)}</label>"
        )
    rows = "".join(
        f'<div class="cat-group" data-cat-group="{_e(g)}"><b>{_e(g)}</b> '
        '<button type="button" data-cat-set="1">all</button>'
        '<button type="button" data-cat-set="0">none</button> ' + "".join(chips) + "</div>"
        for g, chips in groups.items()
    )
    n = len(plan.categories)
    return (
        f'<details class="cats" id="rlm-cats"><summary>categories (<span id="rlm-cats-count">{n} of {n}'
        f'</span>)</summary><div class="cats-in">{rows}</div></details>'
    )


def _toolbar(runs: Sequence[RunCurves], smoothing: float, plan: Plan | None = None) -> str:
    has_time = any(r.times is not None for r in runs)
    chips = "".join(
        f'<label class="chip"><input type="checkbox" data-run="{i}" checked>{_swatch(i)}{_e(r.name)}</label>'
        for i, r in enumerate(runs)
    )
    time_opt = (
        '<option value="time">wall time</option>'
        if has_time
        else '<option value="time" disabled>wall time (not logged)</option>'
    )
    return (
        '<div class="bar"><div class="bar-in">'
        '<input type="search" id="rlm-filter" placeholder="filter metrics, e.g. kl entropy" '
        'aria-label="filter metrics"><span id="rlm-count" class="small"></span>'
        "<label title=\"TensorBoard's debiased EMA; the raw curve stays faint. Series of "
        f"{SPARSE_POINTS} points or fewer (validations) and estimates drawn with their interval "
        'are shown as logged">smoothing '
        f'<input type="range" id="rlm-smooth" min="0" max="0.99" step="0.01" value="{smoothing:.2f}"> '
        f'<span id="rlm-smooth-val">{smoothing:.2f}</span></label>'
        '<label><input type="checkbox" id="rlm-log"> log y</label>'
        f'<label>x <select id="rlm-x"><option value="step" selected>step</option>{time_opt}</select></label>'
        f'<span class="runs">{chips}</span>{_category_filter(plan) if plan is not None else ""}</div></div>'
    )


_LEGEND = (
    '<p class="small">best: &uarr; highest, &darr; lowest, for metrics with a natural direction only; '
    "(n) is the step; [low, high] the interval. Drag to zoom, double-click to reset; "
    "long series are drawn from the extremes of each pixel-wide bucket (every point shown was "
    "logged).</p>"
)


def build_page(
    runs: Sequence[RunCurves],
    plan: Plan,
    diagnoses: Sequence[Diagnosis],
    *,
    title: str,
    max_points: int,
    smoothing: float,
    samples: EmbeddedSamples | None = None,
) -> str:
    """The whole HTML page (``samples``: the runs' samples as embedded, by default
    :func:`~rlmetrics.report.samples.embed_samples` with its default budget)."""
    data = payload(runs, plan, diagnoses, max_points=max_points, smoothing=smoothing)
    if samples is None:
        samples = embed_samples(runs, diagnoses)
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    index = {p.id: i for i, p in enumerate(plan.panels)}
    sections = []
    if plan.key_panels:
        grid = "".join(_panel_html(p, index[p.id]) for p in plan.key_panels)
        sections.append(
            f'<section id="key" data-section><h2>key metrics</h2><div class="grid">{grid}</div></section>'
        )
    sections.append(_samples_section(runs, samples))
    for group, keys in plan.groups.items():
        panels = plan.group_panels.get(group, [])
        grid = "".join(_panel_html(p, index[p.id]) for p in panels)
        above = len(keys) - len(panels)
        note = f", {above} drawn above" if above else ""
        is_open = " open" if len(panels) <= OPEN_GROUP_PANELS else ""
        metrics = f"{len(keys)} metric{_s(len(keys))}"
        table_open = " open" if len(keys) <= 8 else ""
        sections.append(
            f'<details class="group" id="group-{_e(slug(group))}" data-section{is_open}>'
            f'<summary><h2>{_e(group)}/ <span class="small">{metrics}{note}</span></h2>'
            "</summary>"
            + (f'<div class="grid">{grid}</div>' if grid else "")
            + f"<details{table_open}><summary>last and best values ({metrics})</summary>"
            + _table(keys, runs, plan.banded)
            + "</details></details>"
        )
    folded = _folded_section(plan, runs)
    toc = " &middot; ".join(
        ['<a href="#runs">runs</a>', '<a href="#findings">findings</a>']
        + (['<a href="#key">key metrics</a>'] if plan.key_panels else [])
        + [f'<a href="#group-{_e(slug(g))}">{_e(g)}</a>' for g in plan.groups]
        + (['<a href="#samples">samples</a>'] if samples.data is not None else [])
        + (['<a href="#folded">constant series</a>'] if folded else [])
    )
    browser = (
        ""
        if samples.data is None
        else f'<script type="application/json" id="rlm-samples">{samples_json(samples.data)}</script>'
        f"<script>{SAMPLES_SCRIPT}</script>"
    )
    findings = _findings_section(
        runs, diagnoses, plan, samples.steps, set((samples.data or {}).get("examples", ()))
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{CSS}{SAMPLES_CSS if browser else ''}</style><script>{plotly_js()}</script></head><body>"
        f"{_toolbar(runs, smoothing, plan)}<main><h1>{_e(title)}</h1>"
        f'<nav class="toc">{toc}</nav>{_runs_section(runs)}{findings}'
        f"{_LEGEND}{''.join(sections)}{folded}</main>"
        f'<script type="application/json" id="rlm-data">{blob}</script><script>{SCRIPT}</script>{browser}'
        "</body></html>\n"
    )
