"""Tests of rlmetrics.report.png: the PNG export of the panels."""

from __future__ import annotations

from report_runs import category_runs, make_rows, write_run
from rlmetrics.report import (
    plan,
    write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- PNG export --------------------------------------------------------------------------------------


def test_png_export(tmp_path, scripted_diagnose, monkeypatch):
    import matplotlib.axes

    lines = []
    original = matplotlib.axes.Axes.axvline

    def spy(ax, x=0, *args, **kwargs):
        lines.append((x, kwargs.get("color")))
        return original(ax, x, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", spy)
    a = write_run(tmp_path / "a" / "metrics.jsonl", make_rows(0))
    b = write_run(tmp_path / "b" / "metrics.jsonl", make_rows(1))
    res = write_report([a, b], tmp_path / "out", png=True)
    assert next(iter(res.png_paths)) == "key"
    assert set(res.png_paths) == {"key"} | {g for g, ps in res.plan.group_panels.items() if ps}
    for png in res.png_paths.values():
        assert png.read_bytes().startswith(PNG_MAGIC)
    # each onset once per panel drawing its metric, in its run's colour; key panels and groups
    assert sorted(lines) == sorted(
        [(3, "#1f77b4"), (7, "#1f77b4"), (4, "#ff7f0e"), (7, "#1f77b4"), (8, "#1f77b4")]
    )


def test_png_draws_a_category_in_its_colour_and_a_run_in_its_line_style(tmp_path, monkeypatch):
    import matplotlib.axes

    from rlmetrics.report.page import category_color
    from rlmetrics.report.png import draw_panels

    drawn = []
    original = matplotlib.axes.Axes.plot

    def spy(ax, *args, **kwargs):
        drawn.append((kwargs.get("color"), kwargs.get("ls")))
        return original(ax, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    runs = category_runs()
    score = plan(runs).group_panels["by_data_source"][0]
    draw_panels("t", [score], runs, tmp_path / "c.png", colors=("#000000", "#111111"))
    assert drawn[: len(score.traces)] == [
        (category_color(0), "-"),
        (category_color(1), "-"),
        (category_color(1), "--"),
        (category_color(2), "-"),
    ]
    assert (tmp_path / "c.png").read_bytes().startswith(PNG_MAGIC)
