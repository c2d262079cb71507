"""Tests of rlmetrics.report: reading runs, grouping, best/last values, PNGs and the HTML page."""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics.report import (
    RunCurves,
    _best,
    _finite_last,
    best_direction,
    group_metrics,
    load_run,
    write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write_run(path, rows, *, truncate=None):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if truncate:
        text += truncate
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _rows(seed, steps=12):
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        row = {
            "step": s,
            "timestamp": 1.0 * s,
            "critic/score/mean": float(s / steps + rng.normal(0, 0.01)),
            "actor/pg_loss": float(rng.normal()),
            "response_length/mean": float(10 + rng.normal()),
            "timing_s/gen": float(0.1 + rng.random()),
            "perf/throughput": float(1000 * rng.random()),
            "variance_proxy/proxy2_total_power": float(rng.random()),
        }
        if s % 4 == 0:
            acc = s / steps
            row |= {
                "val-core/src/acc/mean@4": acc,
                "val-exact/src/acc/pass@2": acc,
                "val-exact/src/acc/pass@2/ci_low": acc - 0.1,
                "val-exact/src/acc/pass@2/ci_high": acc + 0.1,
            }
        rows.append(row)
    return rows


def test_load_run_series_and_name(tmp_path):
    rows = _rows(0)
    p = _write_run(tmp_path / "exp1" / "metrics.jsonl", rows)
    run = load_run(p)
    assert run.name == "exp1"
    steps, values = run.series["critic/score/mean"]
    assert steps.tolist() == list(range(1, 13))
    assert values.tolist() == [r["critic/score/mean"] for r in rows]
    assert run.series["val-core/src/acc/mean@4"][0].tolist() == [4, 8, 12]
    assert "timestamp" not in run.series and "step" not in run.series


def test_truncated_last_line_is_tolerated(tmp_path):
    p = _write_run(tmp_path / "run.jsonl", _rows(0), truncate='{"step": 13, "critic/sco')
    with pytest.warns(RuntimeWarning, match="truncated"):
        run = load_run(p)
    assert run.series["critic/score/mean"][0][-1] == 12


def test_load_run_errors(tmp_path):
    with pytest.raises(ValueError, match="no jsonl file"):
        load_run(tmp_path / "nope.jsonl")
    p = tmp_path / "cut.jsonl"
    p.write_text('{"step": 1, "a')
    with (
        pytest.warns(RuntimeWarning, match="truncated"),
        pytest.raises(ValueError, match="holds no complete JSON line"),
    ):
        load_run(p)
    p.write_text('{"step": "x", "a/b": 1}\n')
    with pytest.raises(ValueError, match="non-numeric step"):
        load_run(p)


def test_group_metrics_order():
    keys = [
        "perf/mfu",
        "zzz/a",
        "critic/score/mean",
        "loss",
        "val-core/x/acc/mean@4",
        "actor/pg_loss",
        "critic/advantages/max",
        "timing_s/gen",
    ]
    groups = group_metrics(keys)
    assert list(groups) == ["val-core", "critic", "actor", "timing_s", "perf", "zzz", "other"]
    assert list(group_metrics(["grpo/a", "val-exact/s/acc/pass@2", "rollout_corr/kl"])) == [
        "val-exact",
        "grpo",
        "rollout_corr",
    ]
    assert groups["critic"] == ["critic/advantages/max", "critic/score/mean"]


_segment = st.sampled_from(["critic", "actor", "val-core", "perf", "grpo", "zzz", "aaa", "training"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.builds("{}/{}".format, _segment, st.sampled_from(["x", "y/z"])), st.just("loss")))
)
def test_group_metrics_orders_known_groups_then_the_rest(keys):
    groups = group_metrics(keys)
    assert sorted(k for ks in groups.values() for k in ks) == sorted(set(keys))
    assert all(ks == sorted(ks) and all(K.group(k) == g for k in ks) for g, ks in groups.items())
    known = [g for g in groups if g in K.GROUP_ORDER]
    rest = [g for g in groups if g not in K.GROUP_ORDER and g != K.GROUP_OTHER]
    tail = [K.GROUP_OTHER] if K.GROUP_OTHER in groups else []
    assert list(groups) == sorted(known, key=K.GROUP_ORDER.index) + sorted(rest) + tail


def test_step_range(tmp_path):
    run = load_run(_write_run(tmp_path / "r.jsonl", [{"step": 3, "a/x": 1.0}, {"step": 10, "b/y": 2.0}]))
    assert run.step_range == "3-10"
    assert RunCurves("empty", tmp_path).step_range == "none"


@pytest.mark.parametrize(
    ("key", "direction"),
    [
        ("val-core/gsm8k/acc/mean@8", "max"),
        ("val-exact/gsm8k/acc/pass@4", "max"),
        ("critic/score/mean", "max"),
        ("perf/throughput", "max"),
        ("critic/vf_explained_var", "max"),
        ("actor/pg_loss", "min"),
        ("timing_s/gen", "min"),
        ("actor/pg_clipfrac", "min"),
        ("rollout_corr/k3_kl", "min"),
        ("response_length/mean", None),
        ("critic/advantages/max", None),
        ("val-aux/gsm8k/acc/std@8", None),
    ],
    ids=lambda v: str(v),
)
def test_best_direction(key, direction):
    assert best_direction(key) == direction


def _table_cells(page, key):
    row = re.search(rf'<tr><td class="k">{re.escape(key)}[^<]*</td>(.*?)</tr>', page)
    assert row, key
    return re.findall(r"<td>(.*?)</td>", row.group(1))


def test_report_two_runs(tmp_path):
    ra, rb = _rows(0), _rows(1, steps=8)
    a = _write_run(tmp_path / "a" / "metrics.jsonl", ra)
    b = _write_run(tmp_path / "b" / "metrics.jsonl", rb, truncate='{"step": 9')
    with pytest.warns(RuntimeWarning, match="truncated"):
        res = write_report([a, b], tmp_path / "out", title="cmp")
    assert [r.name for r in res.runs] == ["a", "b"]
    assert sorted(res.png_paths) == sorted(
        ["critic", "actor", "response_length", "timing_s", "perf", "variance_proxy", "val-core", "val-exact"]
    )
    for png in res.png_paths.values():
        assert png.read_bytes().startswith(PNG_MAGIC)
    page = res.html_path.read_text()
    # self-contained: every figure embedded, no external image
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == len(res.png_paths)
    assert all(base64.b64decode(e).startswith(PNG_MAGIC) for e in embedded)
    assert not re.search(r'src="(?!data:)', page)
    # last and best values, checked against the rows (brute force)
    cells = _table_cells(page, "critic/score/mean")
    for run_rows, (last, best) in zip((ra, rb), (cells[0:2], cells[2:4])):
        vals = [(r["step"], r["critic/score/mean"]) for r in run_rows]
        s_best, v_best = max(vals, key=lambda t: t[1])
        assert last == f"{vals[-1][1]:.4g} ({vals[-1][0]})"
        assert best == f"{v_best:.4g} ({s_best})"
    cells = _table_cells(page, "actor/pg_loss")
    s_min, v_min = min(((r["step"], r["actor/pg_loss"]) for r in ra), key=lambda t: t[1])
    assert cells[1] == f"{v_min:.4g} ({s_min})"
    assert _table_cells(page, "response_length/mean")[1] == "&ndash;"  # no natural direction
    # the interval keys fold into their metric: a band in the plot, [lo, hi] in the table
    assert "val-exact/src/acc/pass@2/ci_low" not in page
    assert _table_cells(page, "val-exact/src/acc/pass@2")[0] == "1 [0.9, 1.1] (12)"


def test_duplicate_names_and_explicit_names(tmp_path):
    a = _write_run(tmp_path / "x" / "run.jsonl", _rows(0))
    b = _write_run(tmp_path / "y" / "run.jsonl", _rows(1))
    res = write_report([a, b], tmp_path / "o1")
    assert [r.name for r in res.runs] == ["run", "run (2)"]
    res = write_report([a, b], tmp_path / "o2", names=["base", "new"])
    assert [r.name for r in res.runs] == ["base", "new"]
    with pytest.raises(ValueError, match="expected 2 names"):
        write_report([a, b], tmp_path / "o3", names=["one"])
    with pytest.raises(ValueError, match="at least one"):
        write_report([], tmp_path / "o4")


def test_report_of_a_real_demo_run(tmp_path):
    from rlmetrics.demo.run import DemoConfig, run_demo

    cfg = DemoConfig(steps=3, n_prompts=4, group_size=4, val_every=3, val_prompts=4, val_samples=4)
    run = run_demo(cfg, out_dir=tmp_path)
    res = write_report([run.jsonl_path], tmp_path / "report")
    for group in (
        "critic",
        "response_length",
        "timing_s",
        "perf",
        "variance_proxy",
        "val-core",
        "grpo",
        "actor",
        "rollout_corr",
    ):
        assert group in res.png_paths, group


_values = st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(values=_values, direction=st.sampled_from(["max", "min", None]))
def test_last_and_best_match_a_loop(values, direction):
    steps = np.arange(len(values), dtype=float) * 10
    v = np.asarray(values, dtype=float)
    finite = [(s, x) for s, x in zip(steps, values) if not math.isnan(x)]
    last_step, last_value = _finite_last(steps, v)
    best_step, best_value = _best(steps, v, direction)
    if not finite:
        assert math.isnan(last_step) and math.isnan(best_step)
        return
    assert (last_step, last_value) == finite[-1]
    if direction is None:
        assert math.isnan(best_value)
        return
    pick = max if direction == "max" else min
    want = pick(x for _, x in finite)
    assert best_value == want
    assert best_step == next(s for s, x in finite if x == want)  # the first step reaching it


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(
        st.dictionaries(st.sampled_from(["a/x", "a/y", "b/z"]), st.floats(-10, 10), min_size=1),
        min_size=1,
        max_size=8,
    )
)
def test_load_run_round_trip(tmp_path_factory, rows):
    rows = [{"step": i, **r} for i, r in enumerate(rows)]
    p = _write_run(tmp_path_factory.mktemp("rt") / "r.jsonl", rows)
    run = load_run(p)
    for key in {k for r in rows for k in r} - {"step"}:
        steps, values = run.series[key]
        assert steps.tolist() == [r["step"] for r in rows if key in r]
        assert values.tolist() == [r[key] for r in rows if key in r]


# --- the findings section ---------------------------------------------------------------------


def _finding(kind, severity, step, *metric):
    from rlmetrics.health.findings import Finding

    return Finding(kind, severity, step, metric, {"ratio": 12.5}, f"advice on {kind}")


@pytest.fixture
def scripted_diagnose(monkeypatch):
    """diagnose() with findings chosen by the run's name, and the onsets drawn (axvline calls)."""
    import matplotlib.axes

    from rlmetrics import report
    from rlmetrics.health.findings import Diagnosis, Skipped

    script = {
        "a": Diagnosis(
            (
                _finding("grad_spike", "warning", 3, "actor/pg_loss"),
                _finding("kl_drift", "error", 7, "not/a_panel", "critic/score/mean", "actor/pg_loss"),
                _finding("nonfinite", "error", 9, "not/a_panel"),
            ),
            (Skipped("critic_failure", "no critic/vf_explained_var"),),
        ),
        "b": Diagnosis((_finding("entropy_collapse", "warning", 4, "actor/pg_loss"),)),
    }
    monkeypatch.setattr(report, "_diagnose", lambda run: script.get(run.name, Diagnosis(())))
    lines = []
    original = matplotlib.axes.Axes.axvline

    def spy(ax, x=0, *args, **kwargs):
        lines.append((ax, x, kwargs.get("color")))  # the title is set after the lines
        return original(ax, x, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", spy)
    return lines


def test_report_opens_with_the_findings_linked_to_their_panels(tmp_path, scripted_diagnose):
    a = _write_run(tmp_path / "a" / "metrics.jsonl", _rows(0))
    b = _write_run(tmp_path / "b" / "metrics.jsonl", _rows(1))
    res = write_report([a, b], tmp_path / "out")
    page = res.html_path.read_text()
    assert [len(d.findings) for d in res.diagnoses] == [3, 1]
    section = page[page.index('<h2 id="findings">') : page.index('<h2 id="val-core">')]
    assert section.index("<h3>a</h3>") < section.index("<h3>b</h3>")
    links = re.findall(r'<li class="(\w+)"><b>\1</b> (?:<a href="#([\w.-]+)">)?(\w+)', section)
    assert links == [
        ("warning", "panel-actor_pg_loss", "grad_spike"),
        ("error", "panel-critic_score_mean", "kl_drift"),  # its first metric with a panel
        ("error", "", "nonfinite"),  # no panel: no link
        ("warning", "panel-actor_pg_loss", "entropy_collapse"),
    ]
    assert "from step 7 (<code>not/a_panel, critic/score/mean, actor/pg_loss</code>)" in section
    assert "advice on kl_drift" in section and "ratio=12.5" in section
    assert "checks that could not run: critic_failure (no critic/vf_explained_var)" in section
    # every link lands on a panel anchor placed inside its figure
    for target in ("panel-actor_pg_loss", "panel-critic_score_mean"):
        style = re.search(rf'<span class="panel" id="{target}" style="([^"]+)"', page).group(1)
        box = [float(v) for v in re.findall(r"([\d.]+)%", style)]
        assert len(box) == 4 and all(0 <= v <= 100 for v in box) and box[0] + box[2] <= 100
    assert len(set(re.findall(r'id="(panel-[^"]+)"', page))) == len(re.findall(r'id="(panel-[^"]+)"', page))
    # the onsets drawn: each finding's step on each of its panels, in its run's colour
    drawn = sorted((ax.get_title(), x, color) for ax, x, color in scripted_diagnose)
    assert drawn == [
        ("pg_loss", 3, "C0"),
        ("pg_loss", 4, "C1"),
        ("pg_loss", 7, "C0"),
        ("score/mean", 7, "C0"),
    ]


def test_panel_anchors_follow_the_grid(tmp_path, scripted_diagnose):
    rows = [{"step": s, **{f"critic/m{i}": float(s * i) for i in range(6)}} for s in range(1, 5)]
    res = write_report([_write_run(tmp_path / "r.jsonl", rows)], tmp_path / "out")
    page = res.html_path.read_text()
    boxes = {
        key: [float(v) for v in re.findall(r"([\d.]+)%", style)]
        for key, style in re.findall(r'<span class="panel" id="panel-critic_(m\d)" style="([^"]+)"', page)
    }
    assert sorted(boxes) == [f"m{i}" for i in range(6)]
    # four columns: m0..m3 on the first row left to right, m4 and m5 below
    assert [boxes[f"m{i}"][0] for i in range(4)] == sorted(boxes[f"m{i}"][0] for i in range(4))
    assert boxes["m4"][0] == boxes["m0"][0] and boxes["m4"][1] > boxes["m0"][1] + boxes["m0"][3]
    assert "<h3>r</h3><p>no findings</p>" in page
