"""Training curves of one or more JSONL runs, as PNGs and one HTML page (``rlmetrics report``).

A run is a ``metrics.jsonl`` written by :class:`rlmetrics.Tracker` (one flat JSON object per
step; a line cut short by a crash is skipped with a warning). Metrics are grouped by their first
path segment (``critic/``, ``actor/``, ``response_length/``, ``timing_s/``, ``perf/``,
``variance_proxy/``, ``rollout_corr/``, ``val-core/`` ...); each group becomes one PNG with a
panel per metric and every run drawn on the same axes, and the HTML page (images embedded, no
external files needed) shows the figures with a table of each metric's last and best values.

The page opens with the findings of each run (:func:`rlmetrics.health.rules.diagnose` on the
loaded series): each names its kind, severity, onset step and advice, and links to the panel of
its metric (every panel has an anchor ``panel-<key>``), where a dashed vertical line in the run's
colour marks the onset.

matplotlib is imported when drawing (``pip install 'rlmetrics[plot]'``); no pyplot global state
is touched (figures are drawn with the Agg canvas directly). The command itself is
:mod:`rlmetrics.cli.report`.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlmetrics import keys as K
from rlmetrics.health.findings import Diagnosis, Finding
from rlmetrics.health.rules import diagnose
from rlmetrics.tracking import read_jsonl

__all__ = [
    "ReportResult",
    "RunCurves",
    "best_direction",
    "group_metrics",
    "load_run",
    "write_report",
]

_PANEL_COLS = 4
_MAX_PANELS = 48


@dataclass
class RunCurves:
    """The numeric series of one run.

    Attributes
    ----------
    name : str
        Label of the run in plots and tables.
    path : Path
        The JSONL file.
    series : dict[str, tuple[numpy.ndarray, numpy.ndarray]]
        Metric key to ``(steps, values)``, float64 arrays of equal length sorted by step, for
        the steps where the key was logged (NaN values kept).
    """

    name: str
    path: Path
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def step_range(self) -> str:
        """First and last logged step, as ``"1-12"`` (``"none"`` for a run without metrics)."""
        steps = np.concatenate([s for s, _ in self.series.values()]) if self.series else np.zeros(0)
        return f"{steps.min():g}-{steps.max():g}" if steps.size else "none"


def load_run(path: str | os.PathLike[str], *, name: str | None = None) -> RunCurves:
    """Read a JSONL run into per-metric ``(steps, values)`` series.

    Parameters
    ----------
    path : str or Path
        A ``metrics.jsonl`` (a truncated last line is skipped with a ``RuntimeWarning``).
    name : str, optional, keyword-only
        Label (default: the run's folder name when the file is ``metrics.jsonl``, else the
        file's stem).

    Returns
    -------
    RunCurves

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "run.jsonl"
    ...     _ = p.write_text('{"step": 1, "a/x": 1.0}\\n{"step": 2, "a/x": 3.0, "b/y": 5}\\n')
    ...     run = load_run(p)
    >>> run.name, run.series["a/x"][1].tolist(), run.series["b/y"][0].tolist()
    ('run', [1.0, 3.0], [2.0])
    """
    p = Path(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = read_jsonl(p)
    for w in caught:  # re-issue (once, attributed here) e.g. the truncated-line warning
        warnings.warn(str(w.message), w.category, stacklevel=2)
    if not rows:
        raise ValueError(f"path: {str(p)!r} holds no complete JSON line")
    label = name or (p.parent.name if p.name == "metrics.jsonl" and p.parent.name else p.stem)
    acc: dict[str, tuple[list[float], list[float]]] = {}
    for i, row in enumerate(rows):
        step = row.get(K.TRACKING_STEP, i)
        if isinstance(step, bool) or not isinstance(step, int | float):
            raise ValueError(f"{p}: row {i + 1} has a non-numeric step {step!r}")
        for key, value in row.items():
            if key in K.TRACKING_FIELDS or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            steps, values = acc.setdefault(key, ([], []))
            steps.append(float(step))
            values.append(float(value))
    series = {}
    for key, (steps, values) in acc.items():
        s, v = np.asarray(steps), np.asarray(values)
        order = np.argsort(s, kind="stable")
        series[key] = (s[order], v[order])
    return RunCurves(name=label, path=p, series=series)


def group_metrics(keys: Sequence[str]) -> dict[str, list[str]]:
    """Group metric keys by their first path segment (keys without a slash go to ``other``).

    The groups of :data:`rlmetrics.keys.GROUP_ORDER` come first, in that order (``val-core``,
    ``critic``, ``actor``, ``response_length``, ...), the others alphabetically, ``other`` last;
    keys keep their sorted order within a group.

    Examples
    --------
    >>> group_metrics(["perf/mfu", "critic/score/mean", "loss", "critic/advantages/max"])
    {'critic': ['critic/advantages/max', 'critic/score/mean'], 'perf': ['perf/mfu'], 'other': ['loss']}
    """
    groups: dict[str, list[str]] = {}
    for key in sorted(set(keys)):
        groups.setdefault(K.group(key), []).append(key)
    rank = {g: i for i, g in enumerate(K.GROUP_ORDER)}

    def order(g: str) -> tuple[int, int, str]:
        return (0 if g in rank else 1 if g != K.GROUP_OTHER else 2, rank.get(g, 0), g)

    return {g: groups[g] for g in sorted(groups, key=order)}


_HIGHER = re.compile(
    r"(^|[/_@])(acc|accuracy|score|reward|rewards|mean@\d+|pass@\d+|best@\d+|maj@\d+|worst@\d+|"
    r"throughput|mfu|vf_explained_var|train_acc|eff_sample_size|ess_tokens)($|[/_@])"
)
_LOWER = re.compile(
    r"(loss|clipfrac|clip_ratio|timing_s|timing_per_token_ms|time_per_step|kl|ppl_abs_diff|chi2|"
    r"aborted_ratio|grad_norm)"
)
# Families whose extremes and means have no "best": advantages, returns and values.
_NO_DIRECTION = tuple(k.rsplit("/", 1)[0] + "/" for k in (K.ADV_MEAN, K.RETURNS_MEAN, K.VALUES_MEAN))


def best_direction(key: str) -> str | None:
    """``"max"`` when larger is better for ``key``, ``"min"`` when smaller is, else ``None``.

    A heuristic on the key's words: accuracy, score, reward, pass@k, mean@N, throughput, MFU
    go up; losses, clip fractions, timings, KLs go down; spreads (``std``), extremes of
    advantages and lengths have no "best".

    Examples
    --------
    >>> best_direction("val-core/gsm8k/acc/mean@8"), best_direction("actor/pg_loss")
    ('max', 'min')
    >>> best_direction("critic/score/mean"), best_direction("response_length/mean")
    ('max', None)
    """
    last = key.rsplit("/", 1)[-1]
    if last.startswith("std") or "/std" in key:
        return None
    if key.startswith(_NO_DIRECTION):
        return None
    if _HIGHER.search(key):
        return "max"
    if _LOWER.search(key):
        return "min"
    return None


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3e}"


def _finite_last(steps: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    ok = np.flatnonzero(np.isfinite(values))
    if ok.size == 0:
        return math.nan, math.nan
    return float(steps[ok[-1]]), float(values[ok[-1]])


def _best(steps: np.ndarray, values: np.ndarray, direction: str | None) -> tuple[float, float]:
    ok = np.isfinite(values)
    if direction is None or not ok.any():
        return math.nan, math.nan
    v = np.where(ok, values, -np.inf if direction == "max" else np.inf)
    i = int(np.argmax(v) if direction == "max" else np.argmin(v))
    return float(steps[i]), float(values[i])


@dataclass
class ReportResult:
    """Files written by :func:`write_report`.

    Attributes
    ----------
    html_path : Path
    png_paths : dict[str, Path]
        Group name to its PNG.
    runs : list[RunCurves]
    diagnoses : list[Diagnosis]
        The diagnosis of each run, in the order of ``runs``.
    """

    html_path: Path
    png_paths: dict[str, Path]
    runs: list[RunCurves]
    diagnoses: list[Diagnosis] = field(default_factory=list)


def _unique_names(runs: list[RunCurves]) -> None:
    seen: dict[str, int] = {}
    for run in runs:
        n = seen.get(run.name, 0)
        seen[run.name] = n + 1
        if n:
            run.name = f"{run.name} ({n + 1})"
    if len({run.name for run in runs}) < len(runs):  # a suffixed name collided again: number them all
        for i, run in enumerate(runs, start=1):
            run.name = f"{i}: {run.name}"


def _split_bands(keys: list[str]) -> tuple[list[str], set[str]]:
    """Keys to draw (``K/ci_low`` and ``K/ci_high`` folded into ``K``) and the keys that have a band."""
    present = set(keys)
    banded = {k for k in keys if k + K.CI_LOW_SUFFIX in present and k + K.CI_HIGH_SUFFIX in present}
    folded = {k + K.CI_LOW_SUFFIX for k in banded} | {k + K.CI_HIGH_SUFFIX for k in banded}
    return [k for k in keys if k not in folded], banded


#: A panel's place in its figure: (left, top, width, height) as fractions of the figure.
_Box = tuple[float, float, float, float]


def _draw_group(
    group: str,
    keys: list[str],
    runs: list[RunCurves],
    path: Path,
    onsets: dict[str, list[tuple[int, int, str]]] | None = None,
) -> dict[str, _Box]:
    """Draw one group's panels into ``path``; return where each metric's panel lies in the figure.

    ``onsets`` maps a key to ``(run index, step, kind)`` findings marked on its panel.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    keys, banded = _split_bands(keys)
    shown = keys[:_MAX_PANELS]
    ncols = min(_PANEL_COLS, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    # Fixed margins in inches (constrained layout would double the drawing time of big groups).
    width, height = 4.0 * ncols, 2.9 * nrows + 0.8
    fig = Figure(figsize=(width, height), dpi=90)
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        nrows,
        ncols,
        squeeze=False,
        gridspec_kw={
            "left": 0.75 / width,
            "right": 1 - 0.15 / width,
            "bottom": 0.45 / height,
            "top": 1 - 0.8 / height,
            "wspace": 0.4,
            "hspace": 0.55,
        },
    )
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for ax, key in zip(axes.flat, shown):
        for run, color in zip(runs, colors):
            if key not in run.series:
                continue
            steps, values = run.series[key]
            sparse = len(steps) <= 30
            ax.plot(steps, values, color=color, lw=1.4, marker="o" if sparse else None, ms=3, label=run.name)
            low, high = key + K.CI_LOW_SUFFIX, key + K.CI_HIGH_SUFFIX
            if key in banded and low in run.series and high in run.series:
                ls, lo = run.series[low]
                hs, hi = run.series[high]
                if np.array_equal(ls, steps) and np.array_equal(hs, steps):
                    ax.fill_between(steps, lo, hi, color=color, alpha=0.18, lw=0)
        for i_run, step, kind in (onsets or {}).get(key, ()):
            color = colors[i_run]
            ax.axvline(step, color=color, ls="--", lw=1.1, alpha=0.9)
            ax.text(
                step,
                0.98,
                f" {kind}",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                fontsize=6,
                color=color,
                ha="right",
                va="top",
            )
        title = key[len(group) + 1 :] if key.startswith(group + "/") else key
        title += " (95% CI)" if key in banded else ""
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="y", useOffset=False)  # no "+1" / "1e-5+9.999e-1" offset labels
        ax.grid(alpha=0.3)
        ax.set_xlabel(K.TRACKING_STEP, fontsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    more = f" (first {_MAX_PANELS} of {len(keys)} metrics)" if len(keys) > len(shown) else ""
    fig.suptitle(
        f"{group}/{more}",
        fontsize=12,
        fontweight="bold",
        x=0.5 / width,
        ha="left",
        y=1 - 0.12 / height,
        va="top",
    )
    if len(runs) > 1:
        handles = [fig.axes[0].plot([], [], color=c, lw=2)[0] for c in colors]
        fig.legend(
            handles,
            [r.name for r in runs],
            loc="upper right",
            fontsize=8,
            ncols=min(4, len(runs)),
            frameon=False,
        )
    fig.savefig(path)
    boxes = {}
    for ax, key in zip(axes.flat, shown):
        x0, y0, x1, y1 = ax.get_position().extents
        boxes[key] = (x0, 1.0 - y1, x1 - x0, y1 - y0)
    return boxes


def _slug(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", group) or "group"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1400px}
body{color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
img{max-width:100%;height:auto;border:1px solid #eee}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#f4f4f4}
td.k{text-align:left;font-family:ui-monospace,monospace}
.small{color:#666;font-size:.85em}
.fig{position:relative;display:inline-block;max-width:100%}
.fig img{display:block}
.panel{position:absolute;display:block}
.panel:target{outline:3px solid #d62728}
li.error b{color:#c00} li.warning b{color:#b36b00}
"""


def _diagnose(run: RunCurves) -> Diagnosis:
    return diagnose(run.series)


def _panel_ids(keys: Sequence[str]) -> dict[str, str]:
    """A unique HTML id per metric panel: ``panel-<slug>``, numbered where two keys share a slug."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for key in keys:
        base = f"panel-{_slug(key)}"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        ids[key] = name
    return ids


def _panel_of(finding: Finding, panels: Mapping[str, str]) -> str | None:
    """The first of a finding's metrics drawn in a panel."""
    return next((k for k in finding.metric if k in panels), None)


def _findings_section(runs: list[RunCurves], diagnoses: list[Diagnosis], panels: Mapping[str, str]) -> str:
    parts = ['<h2 id="findings">findings</h2>']
    for run, diagnosis in zip(runs, diagnoses):
        parts.append(f"<h3>{html.escape(run.name)}</h3>")
        if not diagnosis.findings:
            parts.append("<p>no findings</p>")
        else:
            items = []
            for f in diagnosis.findings:
                key = _panel_of(f, panels)
                kind = html.escape(f.kind)
                name = f'<a href="#{panels[key]}">{kind}</a>' if key is not None else kind
                metrics = ", ".join(html.escape(m) for m in f.metric)
                evidence = html.escape(f.evidence_text())
                items.append(
                    f'<li class="{html.escape(f.severity)}"><b>{html.escape(f.severity)}</b> {name} '
                    f"from step {f.step} (<code>{metrics}</code>): {html.escape(f.advice)}"
                    + (f' <span class="small">{evidence}</span>' if evidence else "")
                    + "</li>"
                )
            parts.append(f"<ul>{''.join(items)}</ul>")
        if diagnosis.skipped:
            skipped = "; ".join(f"{html.escape(s.kind)} ({html.escape(s.why)})" for s in diagnosis.skipped)
            parts.append(f'<p class="small">checks that could not run: {skipped}</p>')
    return "".join(parts)


def _table(keys: list[str], runs: list[RunCurves]) -> str:
    keys, banded = _split_bands(keys)
    head = "".join(f'<th colspan="2">{html.escape(r.name)}</th>' for r in runs)
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
            ls, lv = _finite_last(s, v)
            bs, bv = _best(s, v, direction)
            last = f"{_fmt(lv)} ({ls:g})" if not math.isnan(ls) else "nan"
            if key in banded and not math.isnan(ls):
                lo = _value_at(run, key + K.CI_LOW_SUFFIX, ls)
                hi = _value_at(run, key + K.CI_HIGH_SUFFIX, ls)
                last = f"{_fmt(lv)} [{_fmt(lo)}, {_fmt(hi)}] ({ls:g})"
            best = f"{_fmt(bv)} ({bs:g})" if not math.isnan(bs) else "&ndash;"
            cells.append(f"<td>{last}</td><td>{best}</td>")
        arrow = {"max": " &uarr;", "min": " &darr;"}.get(direction or "", "")
        rows.append(f'<tr><td class="k">{html.escape(key)}{arrow}</td>{"".join(cells)}</tr>')
    return f'<table><tr><th rowspan="2">metric</th>{head}</tr><tr>{sub}</tr>' + "".join(rows) + "</table>"


def _value_at(run: RunCurves, key: str, step: float) -> float:
    if key not in run.series:
        return math.nan
    s, v = run.series[key]
    hit = np.flatnonzero(s == step)
    return float(v[hit[-1]]) if hit.size else math.nan


def write_report(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    names: Sequence[str] | None = None,
    title: str = "rlmetrics report",
) -> ReportResult:
    """Plot one or more JSONL runs on shared axes and write PNGs plus a self-contained HTML page.

    Parameters
    ----------
    paths : sequence of str or Path
        JSONL runs (``metrics.jsonl`` from :class:`rlmetrics.Tracker`); at least one.
    out_dir : str or Path
        Created if needed; receives ``{group}.png`` per metric group and ``report.html``.
    names : sequence of str, optional, keyword-only
        Labels of the runs (default from the paths; duplicates get a suffix).
    title : str, keyword-only
        Title of the page.

    Returns
    -------
    ReportResult

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "a.jsonl"
    ...     _ = p.write_text('{"step": 1, "critic/x": 0.1}\\n{"step": 2, "critic/x": 0.4}\\n')
    ...     res = write_report([p], pathlib.Path(d) / "out")
    ...     page = res.html_path.read_text()
    >>> sorted(res.png_paths), "data:image/png;base64," in page, "0.4 (2)" in page
    (['critic'], True, True)
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if not paths:
        raise ValueError("paths: give at least one JSONL run")
    if names is not None and len(names) != len(paths):
        raise ValueError(f"names: expected {len(paths)} names (one per run); got {len(names)}")
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError("drawing a report needs matplotlib: pip install 'rlmetrics[plot]'") from exc
    runs = [load_run(p, name=None if names is None else names[i]) for i, p in enumerate(paths)]
    _unique_names(runs)
    diagnoses = [_diagnose(run) for run in runs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_keys = [k for run in runs for k in run.series]
    groups = group_metrics(all_keys)
    drawn = {g: _split_bands(keys)[0][:_MAX_PANELS] for g, keys in groups.items()}
    panels = _panel_ids([k for keys in drawn.values() for k in keys])
    onsets: dict[str, list[tuple[int, int, str]]] = {}
    for i_run, diagnosis in enumerate(diagnoses):
        for f in diagnosis.findings:
            for key in dict.fromkeys(k for k in f.metric if k in panels):
                onsets.setdefault(key, []).append((i_run, f.step, f.kind))
    png_paths: dict[str, Path] = {}
    sections = []
    for group, keys in groups.items():
        png = out / f"{_slug(group)}.png"
        boxes = _draw_group(group, keys, runs, png, onsets)
        png_paths[group] = png
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        anchors = "".join(
            f'<span class="panel" id="{panels[key]}" style="left:{100 * x:.2f}%;top:{100 * y:.2f}%;'
            f'width:{100 * w:.2f}%;height:{100 * h:.2f}%"></span>'
            for key, (x, y, w, h) in boxes.items()
        )
        sections.append(
            f'<h2 id="{html.escape(_slug(group))}">{html.escape(group)}/</h2>'
            f'<div class="fig"><img alt="{html.escape(group)} curves" src="data:image/png;base64,{data}">'
            f"{anchors}</div>" + _table(keys, runs)
        )
    toc = " &middot; ".join(
        ['<a href="#findings">findings</a>']
        + [f'<a href="#{html.escape(_slug(g))}">{html.escape(g)}</a>' for g in groups]
    )
    run_list = "".join(
        f"<li><b>{html.escape(r.name)}</b>: {html.escape(str(r.path))} "
        f"({len(r.series)} metrics, steps {r.step_range})</li>"
        for r in runs
    )
    page = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1><ul>{run_list}</ul>"
        f'<p class="small">{toc}</p>{_findings_section(runs, diagnoses, panels)}'
        f'<p class="small">best: &uarr; highest, &darr; lowest, '
        f"&ndash; no natural direction; (n) is the step.</p>{''.join(sections)}</body></html>\n"
    )
    html_path = out / "report.html"
    html_path.write_text(page, encoding="utf-8")
    return ReportResult(html_path=html_path, png_paths=png_paths, runs=runs, diagnoses=diagnoses)
