"""Training curves of one or more runs, as one interactive offline HTML page (``rlmetrics report``).

A run is a :class:`rlmetrics.Tracker` ``metrics.jsonl`` (with its ``config.json`` and the
wall-clock time of each step) or any run :func:`rlmetrics.load_history` reads (verl's file
logger, TensorBoard, TRL's ``trainer_state.json``, W&B offline). The page, one file with
plotly.js embedded (no network needed), shows in order:

1. the runs: where each was read from, its metrics, steps, duration, start, command and config;
2. the findings of :func:`rlmetrics.diagnose` on each run, each linked to its panel, where a
   dashed line in the run's colour marks its onset;
3. the key panels people check first, one per signal of :mod:`rlmetrics.health.signals`
   (reward, validation with its interval band, entropy, KL, response length and the share cut
   at the limit, clip fraction, gradient norm, throughput), under verl's or TRL's names;
4. every other metric, a panel each, by group (``critic/``, ``actor/``, ``timing_s/`` ...),
   with a table of each metric's last value and, for metrics with a natural direction only,
   its best;
5. the series that never change (or are all zero, or equal the step), listed, not drawn;
6. where a run logged sample tables (``samples.jsonl``, :meth:`rlmetrics.Tracker.log_samples`),
   a sample browser after the key panels: a step's rows (prompt, response, reward, length, stop
   reason, category) filtered by reward range, category and stop reason, searched, and the same
   prompt at two steps side by side; a click on a point of any curve, or a finding's samples
   link, opens it at that step (or the nearest one with samples). The samples are embedded under
   a byte budget (``max_sample_bytes``; the page says what was cut), see
   :mod:`rlmetrics.report.samples`.

One toolbar serves the page: a filter over metric names, TensorBoard's smoothing (the raw
curve kept faint), a log y axis, step or wall time on x, and the legend, whose entries switch
a run on and off in every panel. Panels hover, zoom and pan (plotly); they are drawn when they
scroll into view, and a long series is drawn from its bucket extremes
(:mod:`rlmetrics.report.downsample`), so 400 metrics x 10,000 steps open in a few seconds.
``png=True`` also writes PNG figures (matplotlib) for papers.

``plotly`` (for its JavaScript) and, for PNGs, ``matplotlib`` are imported when drawing
(``pip install 'rlmetrics[plot]'``). The command is :mod:`rlmetrics.cli.report`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlmetrics.health.findings import Diagnosis
from rlmetrics.health.rules import diagnose

from .layout import KEY_PANELS, Panel, Plan, best_direction, fold_kind, group_metrics, plan, slug
from .runs import RunCurves, ValidationDumpError, load_run, unique_names
from .samples import MAX_SAMPLE_BYTES, EmbeddedSamples, embed_samples

__all__ = [
    "KEY_PANELS",
    "MAX_SAMPLE_BYTES",
    "EmbeddedSamples",
    "Panel",
    "Plan",
    "ReportResult",
    "RunCurves",
    "ValidationDumpError",
    "best_direction",
    "fold_kind",
    "group_metrics",
    "load_run",
    "plan",
    "write_report",
]

#: Points drawn per series at most; a longer one keeps the extremes of max_points / 2 buckets.
MAX_POINTS = 800
#: TensorBoard's default smoothing weight, the slider's initial value.
DEFAULT_SMOOTHING = 0.6


@dataclass
class ReportResult:
    """What :func:`write_report` wrote and drew.

    Attributes
    ----------
    html_path : Path
    png_paths : dict[str, Path]
        Section (``key`` or a group) to its PNG; empty unless ``png=True``.
    runs : list[RunCurves]
    diagnoses : list[Diagnosis]
        The diagnosis of each run, in the order of ``runs``.
    plan : Plan
        The panels and the folded series.
    seconds : float
        Time taken to build the page (and the PNGs).
    samples : EmbeddedSamples or None
        The runs' sample tables as the page embeds them (what the budget cut).
    """

    html_path: Path
    png_paths: dict[str, Path]
    runs: list[RunCurves]
    diagnoses: list[Diagnosis] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)
    seconds: float = 0.0
    samples: EmbeddedSamples | None = None


def _diagnose(run: RunCurves) -> Diagnosis:
    return diagnose(run.series)


def _write_pngs(plan_: Plan, runs: list[RunCurves], diagnoses: list[Diagnosis], out: Path) -> dict[str, Path]:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("PNG figures need matplotlib: pip install 'rlmetrics[plot]'") from None
    from .page import COLORS, _onsets
    from .png import draw_panels

    onsets = _onsets(plan_, diagnoses)
    sections = {"key": ("key metrics", plan_.key_panels)} | {
        g: (f"{g}/", ps) for g, ps in plan_.group_panels.items() if ps
    }
    paths = {}
    for name, (title, panels) in sections.items():
        if not panels:
            continue
        path = out / f"{slug(name)}.png"
        draw_panels(title, panels, runs, path, colors=COLORS, onsets=onsets)
        paths[name] = path
    return paths


def write_report(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    names: Sequence[str] | None = None,
    title: str = "rlmetrics report",
    png: bool = False,
    max_points: int = MAX_POINTS,
    smoothing: float = DEFAULT_SMOOTHING,
    max_sample_bytes: int = MAX_SAMPLE_BYTES,
) -> ReportResult:
    """Draw one or more runs on shared axes into a self-contained interactive ``report.html``.

    Parameters
    ----------
    paths : sequence of str or Path
        Runs: ``metrics.jsonl`` files (or their folders), or anything :func:`load_run` reads;
        at least one.
    out_dir : str or Path
        Created if needed; receives ``report.html`` (and the PNGs).
    names : sequence of str, optional, keyword-only
        Labels of the runs (default from the paths; duplicates get a suffix).
    title : str, keyword-only
        Title of the page.
    png : bool, keyword-only
        Also write a PNG per section (``key.png``, ``<group>.png``; needs matplotlib).
    max_points : int, keyword-only
        Points drawn per series at most (a longer series is drawn from the extremes of
        ``max_points // 2`` buckets; the tables use every point).
    smoothing : float, keyword-only
        Initial smoothing weight of the page's slider, in ``[0, 1)``.
    max_sample_bytes : int, keyword-only
        The most bytes (UTF-8) of sample text the page embeds (>= 0); longer texts are cut, then
        steps left out (see :mod:`rlmetrics.report.samples`).

    Returns
    -------
    ReportResult

    Raises
    ------
    ValidationDumpError
        A path is a validation rollout dump (summarise it with ``rlmetrics validate``).
    ImportError
        plotly (or, with ``png=True``, matplotlib) is missing.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "a.jsonl"
    ...     _ = p.write_text('{"step": 1, "critic/x": 0.1}\\n{"step": 2, "critic/x": 0.4}\\n')
    ...     res = write_report([p], pathlib.Path(d) / "out")
    ...     page = res.html_path.read_text()
    >>> res.png_paths, "Plotly" in page, "0.4 (2)" in page, [q.id for q in res.plan.panels]
    ({}, True, True, ['panel-critic_x'])
    """
    start = time.perf_counter()
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if not paths:
        raise ValueError("paths: give at least one run")
    if names is not None and len(names) != len(paths):
        raise ValueError(f"names: expected {len(paths)} names (one per run); got {len(names)}")
    if not isinstance(max_points, int) or isinstance(max_points, bool) or max_points < 2:
        raise ValueError(f"max_points must be an integer >= 2; got {max_points!r}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1); got {smoothing!r}")
    if not isinstance(max_sample_bytes, int) or isinstance(max_sample_bytes, bool) or max_sample_bytes < 0:
        raise ValueError(f"max_sample_bytes must be an integer >= 0; got {max_sample_bytes!r}")
    from .page import build_page, plotly_js

    plotly_js()  # fail before reading the runs when plotly is missing
    if png:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError("PNG figures need matplotlib: pip install 'rlmetrics[plot]'") from None
    runs = [load_run(p, name=None if names is None else names[i]) for i, p in enumerate(paths)]
    unique_names(runs)
    diagnoses = [_diagnose(run) for run in runs]
    layout = plan(runs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    samples = embed_samples(runs, diagnoses, max_bytes=max_sample_bytes)
    page = build_page(
        runs, layout, diagnoses, title=title, max_points=max_points, smoothing=smoothing, samples=samples
    )
    html_path = out / "report.html"
    tmp = html_path.with_name(html_path.name + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, html_path)
    except BaseException:  # a full disk: no half page left behind
        tmp.unlink(missing_ok=True)
        raise
    png_paths = _write_pngs(layout, runs, diagnoses, out) if png else {}
    return ReportResult(html_path, png_paths, runs, diagnoses, layout, time.perf_counter() - start, samples)
