"""PNG figures of a report's panels, for papers (``rlmetrics report --png``; matplotlib).

One figure per section (``key.png`` for the key panels, ``<group>.png`` per group), four panels
a row, every run on the same axes in the page's colours, intervals as bands, finding onsets as
dashed lines, integer step ticks, y labels, one legend per figure. No pyplot state is touched
(figures are drawn on the Agg canvas directly).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .layout import Panel, band_of
from .runs import RunCurves

__all__ = ["draw_panels"]

_COLS = 4
#: Panels per figure, at most (a figure of more is cut, and its title says so).
MAX_PANELS = 48
#: Line styles of the runs on a panel of a metric's categories (the page's dashes).
_RUN_STYLES = ("-", "--", ":", "-.")


def draw_panels(
    title: str,
    panels: Sequence[Panel],
    runs: Sequence[RunCurves],
    path: Path,
    *,
    colors: Sequence[str],
    onsets: Mapping[str, Sequence[tuple[int, int, str]]] | None = None,
) -> None:
    """Draw ``panels`` into the PNG ``path``; ``onsets`` maps a panel id to ``(run, step, kind)``."""
    shown = list(panels[:MAX_PANELS])
    fig, axes, width, height = _figure(len(shown))
    drawn_runs: set[int] = set()
    for ax, panel in zip(axes.flat, shown):
        drawn_runs.update(_draw_traces(ax, panel, runs, colors))
        _draw_onsets(ax, (onsets or {}).get(panel.id, ()), colors)
        _style_axes(ax, panel)
    for ax in list(axes.flat)[len(shown) :]:
        ax.set_visible(False)
    more = f" (first {MAX_PANELS} of {len(panels)} panels)" if len(panels) > len(shown) else ""
    fig.suptitle(
        f"{title}{more}",
        fontsize=12,
        fontweight="bold",
        x=0.5 / width,
        ha="left",
        y=1 - 0.12 / height,
        va="top",
    )
    if len(runs) > 1:
        _legend(fig, axes.flat[0], runs, sorted(drawn_runs), colors)
    fig.savefig(path)


def _figure(n_panels: int) -> tuple[Any, Any, float, float]:
    """A figure on the Agg canvas with a grid of ``n_panels`` axes, ``_COLS`` a row (margins in
    inches); the figure, the axes (2-D), the width and the height."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = min(_COLS, n_panels)
    nrows = math.ceil(n_panels / ncols)
    width, height = 4.0 * ncols, 2.9 * nrows + 0.9
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        nrows,
        ncols,
        squeeze=False,
        gridspec_kw={
            "left": 0.85 / width,
            "right": 1 - 0.15 / width,
            "bottom": 0.5 / height,
            "top": 1 - 0.9 / height,
            "wspace": 0.45,
            "hspace": 0.6,
        },
    )
    return fig, axes, width, height


def _draw_traces(ax: Any, panel: Panel, runs: Sequence[RunCurves], colors: Sequence[str]) -> set[int]:
    """Each trace of ``panel`` as a line (markers when short) with its band; the runs drawn.

    On a panel of a metric's categories the colour is the category's (as on the page), the line
    style the run's."""
    from .page import category_color

    drawn: set[int] = set()
    for t, (i, key) in enumerate(panel.traces):
        steps, values = runs[i].series[key]
        color = category_color(panel.cats[t]) if panel.cats else colors[i % len(colors)]
        style = _RUN_STYLES[i % len(_RUN_STYLES)] if panel.cats else "-"
        ax.plot(steps, values, color=color, ls=style, lw=1.3, marker="o" if len(steps) <= 30 else None, ms=3)
        band = band_of(runs[i], key)
        if band is not None:
            ax.fill_between(steps, band[0], band[1], color=color, alpha=0.18, lw=0)
        drawn.add(i)
    return drawn


def _draw_onsets(ax: Any, onsets: Sequence[tuple[int, int, str]], colors: Sequence[str]) -> None:
    """A dashed line at each finding's onset, in its run's colour, labelled with its kind."""
    for i, step, kind in onsets:
        color = colors[i % len(colors)]
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


def _style_axes(ax: Any, panel: Panel) -> None:
    """Title (cut at 48 characters), labels, integer step ticks, no y offset, a light grid."""
    from matplotlib.ticker import MaxNLocator

    ax.set_title(panel.title if len(panel.title) <= 48 else panel.title[:47] + "…", fontsize=8.5)
    ax.set_ylabel(panel.ylabel, fontsize=7.5)
    ax.set_xlabel("step", fontsize=7.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=7)
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.grid(alpha=0.3)


def _legend(
    fig: Any, first_ax: Any, runs: Sequence[RunCurves], order: list[int], colors: Sequence[str]
) -> None:
    """One legend for the figure: the runs drawn, in their order, in their colours."""
    handles = [first_ax.plot([], [], color=colors[i % len(colors)], lw=2)[0] for i in order]
    fig.legend(
        handles,
        [runs[i].name for i in order],
        loc="upper right",
        fontsize=8,
        ncols=min(4, len(order)),
        frameon=False,
    )
