"""Tests of rlmetrics.report: reading runs, the layout (key panels, groups, folding, best), the
thinning of long series, the page (payload, tables, findings, self-contained), PNG export.

The page in a real browser is tests/test_report_browser.py.
"""

from __future__ import annotations

import base64
import builtins
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics.health.smoothing import debiased_ema
from rlmetrics.report import (
    RunCurves,
    ValidationDumpError,
    best_direction,
    fold_kind,
    group_metrics,
    load_run,
    plan,
    write_report,
)
from rlmetrics.report.downsample import thin
from rlmetrics.report.page import best_point, build_page, finite_last
from rlmetrics.report.runs import flat_config

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VAL_CORE = K.val_metric(K.VAL_CORE_PREFIX, "src", "acc", "mean@4")
VAL_EXACT = K.val_metric(K.VAL_EXACT_PREFIX, "src", "acc", "mean@4")
PASS2 = K.val_metric(K.VAL_EXACT_PREFIX, "src", "acc", "pass@2")


def _write_run(path, rows, *, truncate=None, config=None):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if truncate:
        text += truncate
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if config is not None:
        (path.parent / "config.json").write_text(json.dumps(config))
    return path


def _rows(seed, steps=12):
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        row = {
            "step": s,
            "timestamp": 1000.0 + 3.0 * s,
            K.SCORE_MEAN: float(s / steps + rng.normal(0, 0.01)),
            K.ACTOR_PG_LOSS: float(rng.normal()),
            K.ACTOR_ENTROPY: float(2 - s / steps + rng.normal(0, 0.01)),
            K.ACTOR_LR: 1e-6,
            K.RESPONSE_LENGTH_MEAN: float(10 + rng.normal()),
            K.timing_s("gen"): float(0.1 + rng.random()),
            K.PERF_THROUGHPUT: float(1000 * rng.random()),
            K.VARIANCE_PROXY_TOTAL_POWER: float(rng.random()),
        }
        if s % 4 == 0:
            acc = s / steps
            row |= {
                VAL_CORE: acc,
                VAL_EXACT: acc,
                VAL_EXACT + K.CI_LOW_SUFFIX: acc - 0.1,
                VAL_EXACT + K.CI_HIGH_SUFFIX: acc + 0.1,
                PASS2: acc,
                PASS2 + K.CI_LOW_SUFFIX: acc - 0.05,
                PASS2 + K.CI_HIGH_SUFFIX: acc + 0.05,
            }
        rows.append(row)
    return rows


def _payload(page: str) -> dict:
    blob = re.search(r'<script type="application/json" id="rlm-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(blob)  # "<\/" is JSON's escaped "/"


def _decode(s, dtype):
    return np.frombuffer(base64.b64decode(s), dtype=dtype)


# --- reading runs -------------------------------------------------------------------------------


def test_load_run_series_times_config_and_name(tmp_path):
    rows = _rows(0)
    p = _write_run(tmp_path / "exp1" / "metrics.jsonl", rows, config={"lr": 1e-6, "command": ["train", "-x"]})
    run = load_run(p)
    assert run.name == "exp1" and run.source == "rlmetrics-jsonl"
    steps, values = run.series[K.SCORE_MEAN]
    assert steps.tolist() == list(range(1, 13))
    assert values.tolist() == [r[K.SCORE_MEAN] for r in rows]
    assert run.series[VAL_CORE][0].tolist() == [4, 8, 12]
    assert "timestamp" not in run.series and "step" not in run.series
    assert run.times[1].tolist() == [r["timestamp"] for r in rows]
    assert (run.duration, run.started, run.command) == (33.0, 1003.0, "train -x")
    assert run.config["lr"] == 1e-6
    assert load_run(p.parent).series.keys() == run.series.keys()  # the folder reads the same


def test_a_step_logged_twice_keeps_its_last_value(tmp_path):
    rows = [{"step": 1, "a/x": 1.0}, {"step": 2, "a/x": 2.0}, {"step": 1, "a/x": 5.0}]
    run = load_run(_write_run(tmp_path / "r.jsonl", rows))
    assert run.series["a/x"][0].tolist() == [1, 2] and run.series["a/x"][1].tolist() == [5.0, 2.0]
    assert run.times is None and run.duration is None


def test_truncated_last_line_is_tolerated(tmp_path):
    p = _write_run(tmp_path / "run.jsonl", _rows(0), truncate='{"step": 13, "critic/sco')
    with pytest.warns(RuntimeWarning, match="truncated"):
        run = load_run(p)
    assert run.series[K.SCORE_MEAN][0][-1] == 12


def test_load_run_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file or directory"):
        load_run(tmp_path / "nope.jsonl")
    with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike; got int"):
        load_run(3)
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


def test_a_validation_dump_is_refused_with_the_command_to_use(tmp_path):
    lines = [
        {"input": f"q{i}", "output": "a", "gts": "a", "score": float(i % 2), "step": 10, "acc": True}
        for i in range(6)
    ]
    p = _write_run(tmp_path / "10.jsonl", lines)
    with pytest.raises(
        ValidationDumpError, match=r"validation rollout dump .*rlmetrics validate .*10\.jsonl"
    ):
        load_run(p)
    with pytest.raises(ValueError, match="input, output, gts"):
        write_report([p], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_other_formats_are_read_through_load_history(tmp_path):
    verl = tmp_path / "verl.jsonl"
    verl.write_text(
        "".join(
            json.dumps({"step": s, "data": {K.ACTOR_ENTROPY: 1.0 / s, K.SCORE_MEAN: None}}) + "\n"
            for s in (1, 2)
        )
    )
    run = load_run(verl)
    assert (run.source, run.name, run.times) == ("verl-jsonl", "verl", None)
    assert run.series[K.ACTOR_ENTROPY][1].tolist() == [1.0, 0.5]
    assert np.isnan(run.series[K.SCORE_MEAN][1]).all()
    trl = tmp_path / "trl-out"
    trl.mkdir()
    history = [{"step": s, "reward": 0.1 * s, "loss": 1.0 / s} for s in (5, 10)]
    (trl / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    run = load_run(trl)
    assert (run.source, run.name) == ("trl-trainer-state", "trl-out")
    assert run.series[K.TRL_REWARD][0].tolist() == [5, 10]


def test_step_range(tmp_path):
    run = load_run(_write_run(tmp_path / "r.jsonl", [{"step": 3, "a/x": 1.0}, {"step": 10, "b/y": 2.0}]))
    assert run.step_range == "3-10"
    assert RunCurves("empty", tmp_path).step_range == "none"


def test_flat_config():
    assert flat_config({"b": {"c": 1, "d": {}}, "a": "x"}) == [("a", '"x"'), ("b.c", "1"), ("b.d", "{}")]


_cell = st.one_of(
    st.floats(-10, 10), st.integers(-5, 5), st.just(math.nan), st.booleans(), st.text(max_size=2), st.none()
)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.dictionaries(st.sampled_from(["a/x", "a/y", "b/z"]), _cell, min_size=1),
        min_size=1,
        max_size=8,
    ),
    stamped=st.booleans(),
)
def test_load_run_round_trip(tmp_path_factory, rows, stamped):
    """Every int or float value comes back at its step (bools, strings, nulls are left out)."""
    rows = [{"step": i, **({"timestamp": 100.0 + i} if stamped else {}), **r} for i, r in enumerate(rows)]
    p = _write_run(tmp_path_factory.mktemp("rt") / "r.jsonl", rows)
    run = load_run(p)

    def kept(v):
        return isinstance(v, int | float) and not isinstance(v, bool)

    want = {k for r in rows for k, v in r.items() if kept(v)} - {"step", "timestamp"}
    assert set(run.series) == want
    for key in want:
        steps, values = run.series[key]
        assert steps.tolist() == [r["step"] for r in rows if kept(r.get(key))]
        np.testing.assert_array_equal(values, [float(r[key]) for r in rows if kept(r.get(key))])
    assert (run.times is None) == (not stamped)


# --- layout ------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("key", "direction"),
    [
        ("val-core/gsm8k/acc/mean@8", "max"),
        ("val-core/gsm8k/acc/best@8/mean", "max"),
        ("val-aux/gsm8k/score/maj@4/mean", "max"),
        ("val-exact/gsm8k/acc/pass@4", "max"),
        ("val-exact/gsm8k/acc/pass^4", "max"),
        ("val-exact/gsm8k/acc/cover@0.5", "max"),
        ("val-exact/gsm8k/acc/mean@4-8", "max"),
        (K.SCORE_MEAN, "max"),
        (K.REWARDS_MEAN, "max"),
        (K.TRAIN_ACC, "max"),
        (K.PERF_THROUGHPUT, "max"),
        (K.VF_EXPLAINED_VAR, "max"),
        (K.TRL_REWARD, "max"),
        ("train/reward", "max"),
        ("eval_reward", "max"),
        ("rewards/accuracy_reward/mean", "max"),
        ("eval_loss", "min"),
        ("eval/loss", "min"),
        (K.CRITIC_VF_LOSS, "min"),
        # no natural direction: conservative
        (K.ACTOR_PG_LOSS, None),
        (K.TRL_LOSS, None),
        (K.PPO_KL, None),
        (K.ROLLOUT_CORR_KL, None),
        (K.ROLLOUT_CORR_K3_KL, None),
        (K.ACTOR_KL_LOSS, None),
        (K.ACTOR_GRAD_NORM, None),
        (K.ACTOR_KL_COEF, None),
        (K.ACTOR_LR, None),
        (K.PG_CLIPFRAC, None),
        (K.timing_s("gen"), None),
        (K.timing_s("reward"), None),
        (K.ACTOR_REWARD_KL_PENALTY, None),
        (K.SCORE_MAX, None),
        (K.RESPONSE_LENGTH_MEAN, None),
        (K.ADV_MAX, None),
        ("val-aux/gsm8k/acc/std@8", None),
        ("val-core/gsm8k/acc/best@8/std", None),
        ("val-aux/response_length/mean", None),
        ("val-exact/gsm8k/acc/pass@2/ci_low", None),
        (K.TRL_REWARD_STD, None),
        (K.TRL_FRAC_REWARD_ZERO_STD, None),
        ("rewards/accuracy_reward/std", None),
    ],
    ids=lambda v: str(v),
)
def test_best_direction(key, direction):
    assert best_direction(key) == direction


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ([0.0, 0.0, 0.0], "zero"),
        ([1e-3, 1e-3, 1e-3], "constant"),
        ([math.nan, math.nan], "no finite value"),
        ([math.nan], "no finite value"),
        ([1.0, 2.0, 3.0], "equals the step"),
        ([5.0], None),
        ([1.0, 1.0, 2.0], None),
        ([1.0, 1.0, math.nan], None),  # a NaN among constants is news
        ([0.0, -0.0, 0.0], "zero"),
    ],
    ids=[
        "zero",
        "constant",
        "all-nan",
        "one-nan",
        "step",
        "one-point",
        "changes",
        "constant-then-nan",
        "signed-zero",
    ],
)
def test_fold_kind(values, kind):
    assert fold_kind(np.arange(1.0, len(values) + 1), np.asarray(values)) == kind


def _run(name, series):
    return RunCurves(
        name, None, {k: (np.asarray(s, float), np.asarray(v, float)) for k, (s, v) in series.items()}
    )


def test_key_panels_take_verl_and_trl_names_alike():
    s = np.arange(1.0, 11.0)
    verl = _run(
        "verl", {K.SCORE_MEAN: (s, s / 10), K.ACTOR_ENTROPY: (s, 1 / s), K.ACTOR_GRAD_NORM: (s, s % 3)}
    )
    trl = _run("trl", {K.TRL_REWARD: (s, s / 2), K.TRL_ENTROPY: (s, 2 / s), "train/kl": (s, s / 9)})
    p = plan([verl, trl])
    titles = {q.title.split(":")[0]: q for q in p.key_panels}
    assert list(titles) == ["reward", "entropy", "KL to the reference", "gradient norm"]  # KEY_PANELS order
    assert titles["reward"].traces == ((0, K.SCORE_MEAN), (1, K.TRL_REWARD))
    assert titles["KL to the reference"].traces == ((1, "train/kl"),)
    assert p.panel_of[K.TRL_REWARD] == p.panel_of[K.SCORE_MEAN] == titles["reward"].id
    # drawn once: no second panel of a key panel's metric in its group, but it stays in the table
    assert [q.keys for q in p.group_panels.get("actor", [])] == []
    assert p.groups["actor"] == [K.ACTOR_ENTROPY, K.ACTOR_GRAD_NORM]


def test_validation_key_panel_is_the_interval_twin_and_bands_fold():
    s = np.array([10.0, 20.0, 30.0])
    acc = np.array([0.1, 0.4, 0.6])
    runs = [
        _run(
            "a",
            {
                VAL_CORE: (s, acc),
                VAL_EXACT: (s, acc),
                VAL_EXACT + K.CI_LOW_SUFFIX: (s, acc - 0.1),
                VAL_EXACT + K.CI_HIGH_SUFFIX: (s, acc + 0.1),
                K.ACTOR_KL_COEF: (s, np.full(3, 0.001)),
                K.GLOBAL_STEP: (s, s),
            },
        )
    ]
    p = plan(runs)
    assert [q.title for q in p.key_panels] == [f"validation: {VAL_EXACT}"]
    assert p.panel_of[VAL_CORE] == p.panel_of[VAL_EXACT] == p.key_panels[0].id
    assert p.banded == {VAL_EXACT}
    assert VAL_EXACT + K.CI_LOW_SUFFIX not in p.panel_of and VAL_EXACT + K.CI_LOW_SUFFIX not in p.folded
    assert p.folded == {K.ACTOR_KL_COEF: ["constant"], K.GLOBAL_STEP: ["equals the step"]}
    # a val-core mean that differs from its val-exact twin is drawn as itself
    runs[0].series[VAL_EXACT] = (s, acc + 0.01)
    assert [q.title for q in plan(runs).key_panels] == [f"validation: {VAL_CORE}"]


def test_a_series_constant_in_one_run_only_is_drawn():
    s = np.arange(1.0, 6.0)
    p = plan([_run("a", {"x/kl_coef": (s, np.ones(5))}), _run("b", {"x/kl_coef": (s, s * 0.1)})])
    assert p.folded == {} and [q.traces for q in p.panels] == [((0, "x/kl_coef"), (1, "x/kl_coef"))]
    p = plan([_run("a", {"x/c": (s, np.ones(5))}), _run("b", {"x/c": (s, np.zeros(5))}), _run("c", {})])
    assert p.folded == {"x/c": ["constant", "zero", None]} and p.panels == []


def test_panel_ids_are_unique_and_fragment_safe():
    s = np.arange(3.0)
    keys = ["a/b c", "a/b_c", "a/b?c", "a/x"]
    p = plan([_run("r", {k: (s, s * (i + 2)) for i, k in enumerate(keys)})])
    ids = [q.id for q in p.panels]
    assert len(set(ids)) == len(ids) == 4
    assert all(re.fullmatch(r"panel-[A-Za-z0-9_.-]+", i) for i in ids)


def _by_source(key, source):
    return K.category_key(key, "data_source", source)


def _category_runs():
    """Run a: the score of three sources (aime always solved: a constant), the length of two, a
    constant lr per source; run b: the score of gsm8k only."""
    s = np.arange(1.0, 9.0)
    a = _run(
        "a",
        {
            K.SCORE_MEAN: (s, s / 10),
            _by_source(K.SCORE_MEAN, "gsm8k"): (s, s / 8),
            _by_source(K.SCORE_MEAN, "math/algebra"): (s, s / 12),
            _by_source(K.SCORE_MEAN, "aime"): (s, np.ones(8)),
            _by_source(K.RESPONSE_LENGTH_MEAN, "gsm8k"): (s, 100 + s),
            _by_source(K.RESPONSE_LENGTH_MEAN, "aime"): (s, 300 - s),
            _by_source(K.ACTOR_LR, "gsm8k"): (s, np.full(8, 1e-6)),
            _by_source(K.ACTOR_LR, "aime"): (s, np.full(8, 1e-6)),
        },
    )
    b = _run("b", {K.SCORE_MEAN: (s, s / 9), _by_source(K.SCORE_MEAN, "gsm8k"): (s, s / 7)})
    return [a, b]


def test_a_metrics_categories_share_one_panel_a_curve_each():
    runs = _category_runs()
    p = plan(runs)
    assert p.categories == [
        ("data_source", "aime"),
        ("data_source", "gsm8k"),
        ("data_source", "math/algebra"),
    ]
    panels = p.group_panels["by_data_source"]
    assert [q.title for q in panels] == [
        f"{K.SCORE_MEAN} by data_source (3 categories)",
        f"{K.RESPONSE_LENGTH_MEAN} by data_source (2 categories)",
    ]
    score, length = panels
    # a curve per category and run, categories sorted; aime's constant score is drawn beside the others
    assert score.traces == (
        (0, _by_source(K.SCORE_MEAN, "aime")),
        (0, _by_source(K.SCORE_MEAN, "gsm8k")),
        (1, _by_source(K.SCORE_MEAN, "gsm8k")),
        (0, _by_source(K.SCORE_MEAN, "math/algebra")),
    )
    assert score.cats == (0, 1, 1, 2) and length.cats == (0, 1)
    assert [p.categories[c][1] for c in length.cats] == ["aime", "gsm8k"]
    assert score.ylabel == "score mean"
    # every category key points at its metric's panel; the plain key keeps its own (key) panel
    assert {p.panel_of[k] for k in score.keys} == {score.id} and p.panel_of[K.SCORE_MEAN] != score.id
    assert not any(q.cats for q in p.key_panels)
    # constant in every category: folded, each key listed; the table lists every drawn key
    assert p.folded == {_by_source(K.ACTOR_LR, c): ["constant", None] for c in ("aime", "gsm8k")}
    assert p.groups["by_data_source"] == sorted(score.keys + length.keys)


def test_the_page_carries_each_curves_category_and_the_category_filter():
    from rlmetrics.health.findings import Diagnosis, Finding

    runs = _category_runs()
    p = plan(runs)
    label = K.category_prefix("data_source", "math/algebra")
    finding = Finding(
        "entropy_collapse", "error", 5, (_by_source(K.SCORE_MEAN, "math/algebra"),), category=label
    )
    page = build_page(
        runs, p, [Diagnosis((finding,)), Diagnosis(())], title="t", max_points=1000, smoothing=0.6
    )
    data = _payload(page)
    assert [(c["g"], c["n"]) for c in data["cats"]] == p.categories
    assert len({c["color"] for c in data["cats"]}) == 3
    for panel, spec in zip(p.panels, data["panels"]):
        if panel.cats:
            assert [t[2] for t in spec["tr"]] == list(panel.cats)
            assert [t[0] for t in spec["tr"]] == [i for i, _ in panel.traces]
        else:
            assert all(len(t) == 2 for t in spec["tr"])
    boxes = re.findall(
        r'<input type="checkbox" data-cat="(\d+)" checked><span class="sw"[^>]*></span>([^<]*)<', page
    )
    assert boxes == [("0", "aime"), ("1", "gsm8k"), ("2", "math/algebra")]
    assert 'id="rlm-cats-count">3 of 3<' in page
    # the finding of one category says which one, and links to the panel of its metric's categories
    assert f"entropy_collapse</a> in <b>{label}</b> from step 5" in page
    assert f'href="#{p.panel_of[_by_source(K.SCORE_MEAN, "math/algebra")]}"' in page
    # a run without categories: no filter
    plain = [_run("c", {K.SCORE_MEAN: (np.arange(3.0), np.arange(3.0))})]
    assert (
        "rlm-cats"
        not in build_page(
            plain, plan(plain), [Diagnosis(())], title="t", max_points=1000, smoothing=0.6
        ).split("<main>")[0]
    )


# --- thinning ----------------------------------------------------------------------------------------


_series = st.lists(
    st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf)), min_size=1, max_size=300
)


@settings(max_examples=150, deadline=None)
@given(values=_series, buckets=st.integers(1, 40))
def test_thin_keeps_each_buckets_extremes(values, buckets):
    x = np.asarray(values)
    if x.size < buckets:
        with pytest.raises(ValueError, match="at least buckets"):
            thin(x, buckets=buckets)
        return
    t = thin(x, buckets=buckets)
    assert t.keep.tolist() == sorted(set(t.keep.tolist())) and len(t.keep) <= 3 * buckets
    bounds = [(k * x.size // buckets, (k + 1) * x.size // buckets) for k in range(buckets)]
    assert t.ends.tolist() == [b - 1 for _, b in bounds]
    kept = set(t.keep.tolist())
    for k, (lo, hi) in enumerate(bounds):  # a loop over each bucket, the reference
        chunk = x[lo:hi]
        fin = [v for v in chunk if math.isfinite(v)]
        assert t.counts[k] == len(fin)
        if fin:
            assert t.means[k] == pytest.approx(sum(fin) / len(fin), rel=1e-12, abs=1e-9)
            for want in (min(fin), max(fin)):
                assert lo + chunk.tolist().index(want) in kept  # the first point at the extreme
        else:
            assert np.isnan(t.means[k]) and lo in kept
        if len(fin) < len(chunk):
            assert any(not math.isfinite(x[i]) for i in kept if lo <= i < hi)  # the gap survives
        assert sum(lo <= i < hi for i in kept) <= 3


def test_thin_errors():
    with pytest.raises(ValueError, match="buckets must be an integer >= 1; got 0"):
        thin([1.0, 2.0], buckets=0)
    with pytest.raises(ValueError, match="expected at least buckets=3 points; got 2"):
        thin([1.0, 2.0], buckets=3)


def _bucket_ema(means, counts, w):
    """The page's smoothing of a thinned series (its script's emaBuckets), in Python."""
    last, n, out = 0.0, 0, []
    for m, c in zip(means, counts):
        last = last * w**c + (1 - w**c) * m
        n += c
        out.append(last / (1 - w**n))
    return np.asarray(out)


@pytest.mark.parametrize("w", [0.3, 0.6, 0.9, 0.99])
def test_the_bucket_ema_is_the_ema_of_every_point_when_buckets_are_flat(w):
    rng = np.random.default_rng(3)
    levels = rng.normal(size=50)
    x = np.repeat(levels, 20)  # 50 flat buckets of 20 points
    t = thin(x, buckets=50)
    np.testing.assert_allclose(_bucket_ema(t.means, t.counts, w), debiased_ema(x, w)[t.ends], rtol=1e-10)


# --- the page ----------------------------------------------------------------------------------------


def _table_cells(page, key):
    row = re.search(
        rf'<tr data-key="{re.escape(key.lower())}"><td class="k">{re.escape(key)}[^<]*</td>(.*?)</tr>', page
    )
    assert row, key
    return re.findall(r"<td>(.*?)</td>", row.group(1))


def test_report_two_runs(tmp_path):
    ra, rb = _rows(0), _rows(1, steps=8)
    a = _write_run(
        tmp_path / "a" / "metrics.jsonl", ra, config={"lr": 1e-6, "cmd": "python train.py --lr 1e-6"}
    )
    b = _write_run(tmp_path / "b" / "metrics.jsonl", rb, truncate='{"step": 9')
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
    data = _payload(page)
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
    res = write_report([_write_run(tmp_path / "r.jsonl", rows)], tmp_path / "out", max_points=400)
    page = res.html_path.read_text()
    entry = _payload(page)["series"][0]
    index = _decode(entry["i"], "<i4")
    assert entry["n"] == 5000 and len(index) <= 400 and 1234 in index
    np.testing.assert_array_equal(_decode(entry["v"], "<f8"), values[index])
    t = thin(values, buckets=200)
    np.testing.assert_array_equal(_decode(entry["m"], "<f4"), t.means.astype(np.float32))
    assert "c" not in entry  # no NaN: the script counts the buckets itself
    assert _table_cells(page, "critic/x")[0] == f"{values[-1]:.4g} (4999)"


@pytest.mark.parametrize(("n_runs", "n_steps"), [(1, 10_000), (2, 3_000)], ids=["1-run", "2-runs"])
def test_a_page_of_400_long_metrics_stays_under_15_mb(n_runs, n_steps):
    rng = np.random.default_rng(0)
    steps = np.arange(1.0, n_steps + 1)
    runs = []
    for r in range(n_runs):
        walk = np.cumsum(rng.normal(size=(n_steps, 400)), axis=0)
        run = _run(f"r{r}", {f"g{i % 7}/m{i}": (steps, walk[:, i]) for i in range(400)})
        run.times = (steps, 1e9 + 10 * steps)
        runs.append(run)
    page = build_page(runs, plan(runs), [_diagnosis()] * n_runs, title="big", max_points=800, smoothing=0.6)
    assert 5e6 < len(page.encode()) < 15e6
    assert page.count('class="panel"') == 400
    drawn = [len(base64.b64decode(e["v"])) // 8 for e in _payload(page)["series"]]
    assert len(drawn) == 400 * n_runs and max(drawn) <= 800 // n_runs  # the page's point budget shared


def _diagnosis():
    from rlmetrics.health.findings import Diagnosis

    return Diagnosis(())


def test_duplicate_names_and_explicit_names(tmp_path):
    a = _write_run(tmp_path / "x" / "run.jsonl", _rows(0))
    b = _write_run(tmp_path / "y" / "run.jsonl", _rows(1))
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
    a = _write_run(tmp_path / "a.jsonl", _rows(0))
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
    a = _write_run(tmp_path / "a.jsonl", _rows(0))
    real_import = builtins.__import__

    def without(name, *args, **kw):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {module!r}")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", without)
    with pytest.raises(ImportError, match=rf"{message}.*pip install 'rlmetrics\[plot\]'"):
        write_report([a], tmp_path / "out", **kwargs)


_values = st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(values=_values, direction=st.sampled_from(["max", "min", None]))
def test_last_and_best_match_a_loop(values, direction):
    steps = np.arange(len(values), dtype=float) * 10
    v = np.asarray(values, dtype=float)
    finite = [(s, x) for s, x in zip(steps, values) if not math.isnan(x)]
    last_step, last_value = finite_last(steps, v)
    best_step, best_value = best_point(steps, v, direction)
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


# --- the findings -----------------------------------------------------------------------------------


def _finding(kind, severity, step, *metric):
    from rlmetrics.health.findings import Finding

    return Finding(kind, severity, step, metric, {"ratio": 12.5}, f"advice on {kind}")


@pytest.fixture
def scripted_diagnose(monkeypatch):
    """diagnose() with findings chosen by the run's name."""
    from rlmetrics import report
    from rlmetrics.health.findings import Diagnosis, Skipped

    script = {
        "a": Diagnosis(
            (
                _finding("grad_spike", "warning", 3, K.ACTOR_PG_LOSS),
                _finding("kl_drift", "error", 7, "not/a_panel", K.SCORE_MEAN, K.ACTOR_PG_LOSS),
                _finding("nonfinite", "error", 9, "not/a_panel"),
                _finding("reward_hacking", "warning", 8, VAL_CORE),
            ),
            (Skipped("critic_failure", "no critic/vf_explained_var"),),
        ),
        "b": Diagnosis((_finding("entropy_collapse", "warning", 4, K.ACTOR_PG_LOSS),)),
    }
    monkeypatch.setattr(report, "_diagnose", lambda run: script.get(run.name, Diagnosis(())))


def test_report_opens_with_the_findings_linked_to_their_panels(tmp_path, scripted_diagnose):
    a = _write_run(tmp_path / "a" / "metrics.jsonl", _rows(0))
    b = _write_run(tmp_path / "b" / "metrics.jsonl", _rows(1))
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
    data = _payload(page)
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


# --- PNG export --------------------------------------------------------------------------------------


def test_png_export(tmp_path, scripted_diagnose, monkeypatch):
    import matplotlib.axes

    lines = []
    original = matplotlib.axes.Axes.axvline

    def spy(ax, x=0, *args, **kwargs):
        lines.append((x, kwargs.get("color")))
        return original(ax, x, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", spy)
    a = _write_run(tmp_path / "a" / "metrics.jsonl", _rows(0))
    b = _write_run(tmp_path / "b" / "metrics.jsonl", _rows(1))
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
    runs = _category_runs()
    score = plan(runs).group_panels["by_data_source"][0]
    draw_panels("t", [score], runs, tmp_path / "c.png", colors=("#000000", "#111111"))
    assert drawn[: len(score.traces)] == [
        (category_color(0), "-"),
        (category_color(1), "-"),
        (category_color(1), "--"),
        (category_color(2), "-"),
    ]
    assert (tmp_path / "c.png").read_bytes().startswith(PNG_MAGIC)


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
