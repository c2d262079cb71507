"""Tests of rlmetrics.report's write_report: the page written for runs (payload, tables, findings,
self-contained, names, errors).

The page in a real browser is tests/test_report_browser.py."""

from __future__ import annotations

import base64
import builtins
import re

import numpy as np
import pytest

from report_runs import PASS2, VAL_EXACT, make_rows, page_payload, write_run
from rlmetrics import keys as K
from rlmetrics.report import (
    write_report,
)
from rlmetrics.report.downsample import thin


def _decode(s, dtype):
    return np.frombuffer(base64.b64decode(s), dtype=dtype)


# --- the page ----------------------------------------------------------------------------------------


def _table_cells(page, key):
    row = re.search(
        rf'<tr data-key="{re.escape(key.lower())}"><td class="k">{re.escape(key)}[^<]*</td>(.*?)</tr>', page
    )
    assert row, key
    return re.findall(r"<td>(.*?)</td>", row.group(1))


def test_report_two_runs(tmp_path):
    ra, rb = make_rows(0), make_rows(1, steps=8)
    a = write_run(
        tmp_path / "a" / "metrics.jsonl", ra, config={"lr": 1e-6, "cmd": "python train.py --lr 1e-6"}
    )
    b = write_run(tmp_path / "b" / "metrics.jsonl", rb, truncate='{"step": 9')
    with pytest.warns(RuntimeWarning, match="truncated"):
        res = write_report([a, b], tmp_path / "out", title="cmp <&>")
    assert [r.name for r in res.runs] == ["a", "b"] and res.png_paths == {}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html"]
    page = res.html_path.read_text()
    # self-contained: plotly.js once, inline; nothing fetched
    assert page.count("plotly.js v") == 1 and "<title>cmp &lt;&amp;&gt;</title>" in page
    markup = re.sub(r"<script>.*?</script>", "<script></script>", page, flags=re.S)
    assert not re.search(r'\s(src|href)="(https?:)?//', markup) and "<script src" not in markup
    # the order: runs (command, config), findings, key panels, groups, constant series
    marks = [
        '<section id="runs">',
        '<section id="findings">',
        '<section id="key"',
        'id="group-val-exact"',
        'id="folded"',
    ]
    assert [page.index(m) for m in marks] == sorted(page.index(m) for m in marks)
    assert "<code>python train.py --lr 1e-6</code>" in page and "config of <b>a</b> (2 entries)" in page
    # last and best values, checked against the rows (brute force)
    cells = _table_cells(page, K.SCORE_MEAN)
    for rows, (last, best) in zip((ra, rb), (cells[0:2], cells[2:4])):
        vals = [(r["step"], r[K.SCORE_MEAN]) for r in rows]
        s_best, v_best = max(vals, key=lambda t: t[1])
        assert last == f"{vals[-1][1]:.4g} ({vals[-1][0]})"
        assert best == f"{v_best:.4g} ({s_best})"
    assert _table_cells(page, K.ACTOR_PG_LOSS)[1] == ""  # no natural direction: no best
    assert _table_cells(page, PASS2)[0] == "1 [0.95, 1.05] (12)"  # the interval of the last point
    assert PASS2 + K.CI_LOW_SUFFIX not in page
    assert _table_cells(page, K.ACTOR_LR) == ["constant 1e-06 (12 points)", "constant 1e-06 (8 points)"]
    # the payload: every drawn value is a logged one
    data = page_payload(page)
    assert [r["name"] for r in data["runs"]] == ["a", "b"] and data["time"] == {"unit": "s", "div": 1}
    assert len(data["panels"]) == len(res.plan.panels)
    for panel, spec in zip(res.plan.panels, data["panels"]):
        for (i, key), (i2, sid) in zip(panel.traces, spec["tr"]):
            assert i == i2
            entry = data["series"][sid]
            steps, values = res.runs[i].series[key]
            axis = data["axes"][entry["a"]]
            assert _decode(axis["s"], "<f8").tolist() == steps.tolist()
            np.testing.assert_array_equal(_decode(entry["v"], "<f8"), values)
            stamps = res.runs[i].times[1]
            np.testing.assert_allclose(_decode(axis["t"], "<f8"), stamps[steps.astype(int) - 1] - stamps[0])
    band = data["series"][data["panels"][res.plan.panels.index(res.plan.key_panels[1])]["tr"][0][1]]
    assert _decode(band["lo"], "<f8").tolist() == [r[VAL_EXACT] - 0.1 for r in ra if VAL_EXACT in r]


def test_a_long_series_is_thinned_and_the_tables_use_every_point(tmp_path):
    rng = np.random.default_rng(5)
    values = rng.normal(size=5000)
    values[1234] = 40.0  # a spike
    rows = [{"step": s, "critic/x": float(v)} for s, v in zip(range(5000), values)]
    res = write_report([write_run(tmp_path / "r.jsonl", rows)], tmp_path / "out", max_points=400)
    page = res.html_path.read_text()
    entry = page_payload(page)["series"][0]
    index = _decode(entry["i"], "<i4")
    assert entry["n"] == 5000 and len(index) <= 400 and 1234 in index
    np.testing.assert_array_equal(_decode(entry["v"], "<f8"), values[index])
    t = thin(values, buckets=200)
    np.testing.assert_array_equal(_decode(entry["m"], "<f4"), t.means.astype(np.float32))
    assert "c" not in entry  # no NaN: the script counts the buckets itself
    assert _table_cells(page, "critic/x")[0] == f"{values[-1]:.4g} (4999)"


def test_duplicate_names_and_explicit_names(tmp_path):
    a = write_run(tmp_path / "x" / "run.jsonl", make_rows(0))
    b = write_run(tmp_path / "y" / "run.jsonl", make_rows(1))
    res = write_report([a, b], tmp_path / "o1")
    assert [r.name for r in res.runs] == ["run", "run (2)"]
    res = write_report([a, b], tmp_path / "o2", names=["base", "new"])
    assert [r.name for r in res.runs] == ["base", "new"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"names": ["one"]}, r"names: expected 2 names \(one per run\); got 1"),
        ({"max_points": 1}, "max_points must be an integer >= 2; got 1"),
        ({"smoothing": 1.0}, r"smoothing must be in \[0, 1\); got 1.0"),
    ],
    ids=["names", "max-points", "smoothing"],
)
def test_write_report_argument_errors(tmp_path, kwargs, message):
    a = write_run(tmp_path / "a.jsonl", make_rows(0))
    with pytest.raises(ValueError, match=message):
        write_report([a, a], tmp_path / "out", **kwargs)


def test_no_runs(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        write_report([], tmp_path / "out")


@pytest.mark.parametrize(
    ("module", "kwargs", "message"),
    [
        ("plotly", {}, "the interactive report needs plotly"),
        ("matplotlib", {"png": True}, "PNG figures need matplotlib"),
    ],
    ids=["plotly", "matplotlib"],
)
def test_a_missing_package_gives_the_pip_line(tmp_path, monkeypatch, module, kwargs, message):
    a = write_run(tmp_path / "a.jsonl", make_rows(0))
    real_import = builtins.__import__

    def without(name, *args, **kw):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {module!r}")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", without)
    with pytest.raises(ImportError, match=rf"{message}.*pip install 'rlmetrics\[plot\]'"):
        write_report([a], tmp_path / "out", **kwargs)


def test_report_opens_with_the_findings_linked_to_their_panels(tmp_path, scripted_diagnose):
    a = write_run(tmp_path / "a" / "metrics.jsonl", make_rows(0))
    b = write_run(tmp_path / "b" / "metrics.jsonl", make_rows(1))
    res = write_report([a, b], tmp_path / "out")
    page = res.html_path.read_text()
    assert [len(d.findings) for d in res.diagnoses] == [4, 1]
    section = page[page.index('<section id="findings">') : page.index('<section id="key"')]
    assert section.index("</span> a</h3>") < section.index("</span> b</h3>")
    links = re.findall(r'<li class="(\w+)"><b>\1</b> (?:<a href="#([\w.-]+)">)?(\w+)', section)
    val_panel = res.plan.panel_of[VAL_EXACT]
    assert links == [
        ("warning", "panel-actor_pg_loss", "grad_spike"),
        ("error", "panel-critic_score_mean", "kl_drift"),  # its first metric with a panel
        ("error", "", "nonfinite"),  # no panel: no link
        ("warning", val_panel, "reward_hacking"),  # val-core drawn as its val-exact twin
        ("warning", "panel-actor_pg_loss", "entropy_collapse"),
    ]
    assert "from step 7 (<code>not/a_panel, critic/score/mean, actor/pg_loss</code>)" in section
    assert "advice on kl_drift" in section and "ratio=12.5" in section
    assert "checks that could not run: critic_failure (no critic/vf_explained_var)" in section
    ids = re.findall(r'class="panel" id="([^"]+)"', page)
    assert set(links_ := {t for _, t, _ in links if t}) <= set(ids) and len(set(ids)) == len(ids), links_
    # the onsets, on each panel drawing one of the finding's metrics, in the run's colour (index)
    data = page_payload(page)
    marks = {
        res.plan.panels[i].id: sorted((r, s, k) for r, s, _, k in p["on"])
        for i, p in enumerate(data["panels"])
        if p["on"]
    }
    assert marks == {
        "panel-actor_pg_loss": [(0, 3, "grad_spike"), (0, 7, "kl_drift"), (1, 4, "entropy_collapse")],
        "panel-critic_score_mean": [(0, 7, "kl_drift")],
        val_panel: [(0, 8, "reward_hacking")],
    }
    pg = next(p for i, p in enumerate(data["panels"]) if res.plan.panels[i].id == "panel-actor_pg_loss")
    assert [0, 3, 6.0, "grad_spike"] in pg["on"]  # seconds since the run's first step (1003 s)


@pytest.mark.trains
def test_report_of_a_real_demo_run(tmp_path):
    from rlmetrics.demo.run import DemoConfig, run_demo

    cfg = DemoConfig(steps=3, n_prompts=4, group_size=4, val_every=3, val_prompts=4, val_samples=4)
    run = run_demo(cfg, out_dir=tmp_path)
    res = write_report([run.jsonl_path], tmp_path / "report")
    titles = [p.title.split(":")[0] for p in res.plan.key_panels]
    assert {"reward", "entropy", "KL to the reference", "gradient norm", "throughput"} <= set(titles)
    val = K.val_metric(K.VAL_EXACT_PREFIX, "reverse", "acc", "mean@4")
    assert ("validation" in titles) != (val in res.plan.folded)  # 3 steps may not lift it off zero
    assert res.runs[0].config["steps"] == 3
    for group in (
        "critic",
        "response_length",
        "timing_s",
        "perf",
        "variance_proxy",
        "grpo",
        "actor",
        "rollout_corr",
    ):
        assert group in res.plan.groups, group
    assert K.ACTOR_LR in res.plan.folded and K.GLOBAL_STEP in res.plan.folded
