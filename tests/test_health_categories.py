"""rlmetrics.health.categories and diagnose per category: planted multi-source runs where one source
collapses while the mean stays healthy, the folding rule, the key parsing, JSON round trips, cost."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from planted_runs import healthy_run, plant, to_history
from rlmetrics import keys as K
from rlmetrics.health.categories import check_groups, fold_findings, in_category, split_history
from rlmetrics.health.findings import Diagnosis, Finding
from rlmetrics.health.rules import diagnose

N_STEPS = 120
ONSET = 60
SOURCES = ("gsm8k", "math/algebra", "openai/humaneval")


def _label(source: str, group: str = "data_source") -> str:
    return K.category_key("x", group, source)[: -len("/x")]  # independent of category_prefix


def multi_source_history(
    sources=SOURCES, *, seed: int = 0, broken: dict[str, str] | None = None, n_steps: int = N_STEPS
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A run of ``sources`` (each a healthy planted run of its own seed, the failures of ``broken``
    {source: kind} planted at ONSET): every metric per source under ``category_key``, and the plain
    key the mean over the sources (equal shares of the batch). Validation stays plain."""
    broken = broken or {}
    per_source = {}
    for i, source in enumerate(sources):
        run = healthy_run(n_steps, seed=seed * 100 + i)
        if source in broken:
            run = plant(run, broken[source], ONSET, seed=i)
        per_source[source] = to_history(run)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    first = per_source[sources[0]]
    for key, (steps, _) in first.items():
        stacked = np.stack([per_source[s][key][1] for s in sources])
        out[key] = (steps, stacked.mean(axis=0))
        if key.startswith("val"):
            continue
        for source in sources:
            out[K.category_key(key, "data_source", source)] = per_source[source][key]
    return out


def _plain_only(history):
    return {k: v for k, v in history.items() if not k.startswith(K.CATEGORY_PREFIX)}


# --- planted runs ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")
def test_a_healthy_multi_source_run_has_no_finding(seed):
    d = diagnose(multi_source_history(seed=seed))
    assert d.findings == ()
    assert d.categories == tuple(sorted(_label(s) for s in SOURCES))


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        ("entropy_collapse", "gsm8k"),
        ("entropy_collapse", "openai/humaneval"),
        ("length_collapse", "math/algebra"),  # responses of a few tokens, the reward down to 30%
    ],
    ids=["entropy-gsm8k", "entropy-humaneval", "length-reward-math"],
)
def test_one_source_collapsing_while_the_mean_looks_healthy_is_found_and_named(kind, source):
    history = multi_source_history(broken={source: kind})
    # the premise: the run's means alone look healthy
    assert [f.kind for f in diagnose(_plain_only(history))] == []
    d = diagnose(history)
    assert [(f.kind, f.category) for f in d.findings] == [(kind, _label(source))]
    f = d.findings[0]
    assert ONSET <= f.step <= ONSET + 15
    assert f.categories == ()
    # the metric is the key the run logged, under the category's prefix
    assert f.metric and all(m.startswith(_label(source) + "/") for m in f.metric)
    assert all(m in history for m in f.metric)


def test_groups_off_or_another_group_diagnoses_no_category():
    history = multi_source_history(broken={"gsm8k": "entropy_collapse"})
    assert diagnose(history, groups=()).findings == ()
    assert diagnose(history, groups=()).categories == ()
    assert diagnose(history, groups=["task"]).findings == ()
    assert [f.category for f in diagnose(history, groups=["data_source"])] == [_label("gsm8k")]


def test_a_failure_of_the_whole_run_is_reported_once_with_the_categories_that_show_it():
    # a NaN loss in every source: the mean is NaN too
    history = multi_source_history(broken=dict.fromkeys(SOURCES, "nonfinite"))
    d = diagnose(history)
    assert [(f.kind, f.category) for f in d.findings] == [("nonfinite", None)]
    assert d.findings[0].categories == tuple(sorted(_label(s) for s in SOURCES))
    assert d.findings[0].where.startswith("run (also ")


def test_a_failure_of_the_run_and_one_source_names_only_that_source():
    history = multi_source_history(broken={"gsm8k": "nonfinite"})  # the mean is NaN where gsm8k is
    d = diagnose(history)
    assert [(f.kind, f.category, f.categories) for f in d.findings] == [
        ("nonfinite", None, (_label("gsm8k"),))
    ]


def test_the_outcome_split_is_left_out_unless_named():
    history = multi_source_history()
    rng = np.random.default_rng(0)
    steps = np.arange(N_STEPS)
    entropy = np.where(steps < ONSET, 1.0, 0.001) * np.exp(rng.normal(0, 0.05, N_STEPS))
    history[K.category_key(K.ACTOR_ENTROPY, K.OUTCOME_GROUP, K.OUTCOME_CORRECT)] = (steps, entropy)
    assert diagnose(history).findings == ()
    label = _label(K.OUTCOME_CORRECT, K.OUTCOME_GROUP)
    assert [(f.kind, f.category) for f in diagnose(history, groups=[K.OUTCOME_GROUP])] == [
        ("entropy_collapse", label)
    ]


def test_a_signal_named_by_the_user_is_read_in_each_category():
    history = multi_source_history(broken={"gsm8k": "entropy_collapse"})
    renamed = {}
    for key, value in history.items():
        split = K.split_category_key(key)
        plain = split[0] if split else key
        new = "my_entropy" if plain == K.ACTOR_ENTROPY else plain
        renamed[K.category_key(new, split[1], split[2]) if split else new] = value
    assert diagnose(renamed).findings == ()  # no candidate of the entropy signal is logged
    d = diagnose(renamed, signals={"entropy": "my_entropy"})
    assert [(f.kind, f.category, f.metric) for f in d.findings] == [
        ("entropy_collapse", _label("gsm8k"), (_label("gsm8k") + "/my_entropy",))
    ]


def test_findings_round_trip_through_json():
    history = multi_source_history(broken={"gsm8k": "entropy_collapse", "math/algebra": "nonfinite"})
    d = diagnose(history)
    assert {f.category for f in d.findings} >= {None, _label("gsm8k")}
    back = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    assert back["categories"] == list(d.categories)
    assert tuple(Finding.from_dict(f) for f in back["findings"]) == d.findings
    for f, raw in zip(d.findings, back["findings"], strict=True):
        assert raw["category"] == f.category and raw["categories"] == list(f.categories)


# --- cost ------------------------------------------------------------------------------------------


def test_64_categories_stay_fast():
    sources = tuple(f"source{i:02d}" for i in range(64))
    history = multi_source_history(sources, broken={"source17": "entropy_collapse"}, n_steps=200)
    plain = _plain_only(history)
    diagnose(plain)
    start = time.perf_counter()
    diagnose(plain)
    one = time.perf_counter() - start
    start = time.perf_counter()
    d = diagnose(history)
    every = time.perf_counter() - start
    assert [(f.kind, f.category) for f in d.findings] == [("entropy_collapse", _label("source17"))]
    # 65 histories: each category costs about what the run costs; a cost growing with the key count
    # would be ~65x more again, so the bound is loose enough for any machine's load and still fails it
    assert every < 300 * one + 2.0, (every, one)


# --- the pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "category", ["gsm8k", "openai/gsm8k", "a b:c", "", K.OTHER_CATEGORY, "é%"], ids=lambda c: repr(c)
)
def test_split_history_inverts_category_key(category):
    a, b = (np.arange(3), np.ones(3)), (np.arange(2), np.zeros(2))
    key = K.category_key(K.SCORE_MEAN, "data_source", category)
    plain, cats = split_history({K.SCORE_MEAN: a, key: b, "by_not_a_category": a})
    assert set(plain) == {K.SCORE_MEAN, "by_not_a_category"}  # a malformed category key stays plain
    (label,) = cats
    assert key == f"{label}/{K.SCORE_MEAN}"
    assert cats[label] == {K.SCORE_MEAN: b}
    assert cats[label][K.SCORE_MEAN] is b  # shared, not copied


def test_split_history_keeps_named_category_keys_in_the_plain_history():
    key = K.category_key(K.SCORE_MEAN, "data_source", "a")
    plain, cats = split_history({key: ([0], [1.0])}, keep=[key])
    assert list(plain) == [key] and list(cats) == [_label("a")]


@pytest.mark.parametrize(
    ("groups", "message"),
    [("data_source", "sequence of group names"), ([1], "group names"), (3, "sequence of group names")],
    ids=["a-string", "not-strings", "not-a-sequence"],
)
def test_check_groups_errors(groups, message):
    with pytest.raises(TypeError, match=message):
        check_groups(groups)
    with pytest.raises(TypeError, match=message):
        diagnose({}, groups=groups)


def test_in_category_renames_metric_and_evidence_keys_only():
    f = Finding(
        "nonfinite", "error", 3, ("actor/pg_loss",), {"nonfinite_points": {"actor/pg_loss": 2}, "n": "actor"}
    )
    g = in_category(f, "by_data_source/a", ["actor/pg_loss", "critic/score/mean"])
    assert g.metric == ("by_data_source/a/actor/pg_loss",)
    assert g.evidence == {"nonfinite_points": {"by_data_source/a/actor/pg_loss": 2}, "n": "actor"}
    assert (g.kind, g.severity, g.step, g.advice) == (f.kind, f.severity, 3, f.advice)
    assert g.category == "by_data_source/a"


def _f(kind, severity, category=None):
    return Finding(kind, severity, 1, (), category=category)


@pytest.mark.parametrize(
    ("run", "cats", "expected"),
    [
        # the run shows it, the category at the same severity: folded
        ([_f("k", "warning")], [_f("k", "warning", "A")], [("k", "warning", None, ("A",))]),
        # a lower severity: folded
        ([_f("k", "error")], [_f("k", "warning", "A")], [("k", "error", None, ("A",))]),
        # more severe in the category: reported on its own
        (
            [_f("k", "warning")],
            [_f("k", "error", "A"), _f("k", "warning", "B")],
            [("k", "warning", None, ("B",)), ("k", "error", "A", ())],
        ),
        # a kind the run does not show: its own
        (
            [],
            [_f("k", "error", "A"), _f("k", "error", "B")],
            [("k", "error", "A", ()), ("k", "error", "B", ())],
        ),
        # no category finding: the run's as it was
        ([_f("k", "warning")], [], [("k", "warning", None, ())]),
    ],
    ids=["same-severity", "lower-severity", "more-severe", "only-categories", "only-run"],
)
def test_fold_findings(run, cats, expected):
    got = fold_findings(run, cats)
    assert [(f.kind, f.severity, f.category, f.categories) for f in got] == expected


def test_a_diagnosis_of_a_run_without_categories_is_as_before():
    history = to_history(plant(healthy_run(N_STEPS, seed=3), "entropy_collapse", ONSET))
    d = diagnose(history)
    assert isinstance(d, Diagnosis) and d.categories == ()
    assert [(f.kind, f.category, f.categories) for f in d.findings] == [("entropy_collapse", None, ())]
