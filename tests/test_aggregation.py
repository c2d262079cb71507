"""rlmetrics.aggregation: reduce_metrics, Metric and AggregationType against verl.utils.metric (with
the key fix), and MetricCollector in one process (across ranks: test_distributed.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import (
    AggregationType,
    Metric,
    MetricCollector,
    all_reduce_metric,
    all_reduce_metrics,
    reduce_metrics,
    reducer_for_key,
)

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def verl_metric() -> object:
    from verl.utils import metric

    return metric


def test_reduce_metrics_matches_verl_where_verl_is_right(verl_metric):
    metrics = {
        "critic/score/mean": [1.0, 2.0, 4.0],
        "critic/score/max": [1.0, 7.0, 3.0],
        "critic/score/min": [1.0, -7.0, 3.0],
        "perf/max_memory_allocated_gb": [3.0, 9.0],
        "actor/pg_loss": [0.5, torch.tensor(1.5)],
        "actor/entropy": np.array([0.1, 0.3]),
    }
    ref = verl_metric.reduce_metrics({k: list(v) for k, v in metrics.items()})
    ours = reduce_metrics(metrics)
    assert ours == pytest.approx({k: float(v) for k, v in ref.items()}, rel=1e-12)


def test_reducer_comes_from_the_last_path_segment_not_a_substring(verl_metric):
    metrics = {
        "actor/minibatch_loss": [1.0, 3.0],
        "timing/admin_step": [2.0, 4.0],
        "maximal/score": [1.0, 5.0],
    }
    ref = verl_metric.reduce_metrics({k: list(v) for k, v in metrics.items()})
    assert ref["actor/minibatch_loss"] == 1.0  # verl's substring bug: "min" in "minibatch"
    assert reduce_metrics(metrics) == {
        "actor/minibatch_loss": 2.0,
        "timing/admin_step": 3.0,
        "maximal/score": 3.0,
    }


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("critic/score/max", AggregationType.MAX),
        ("critic/score/min", AggregationType.MIN),
        ("rollout_corr/ratio_max", AggregationType.MAX),
        ("max_reward", AggregationType.MAX),
        ("actor/minibatch_loss", AggregationType.MEAN),
        ("critic/vf_explained_var", AggregationType.MEAN),
        ("maximum", AggregationType.MEAN),
    ],
    ids=lambda v: v if isinstance(v, str) else v.value,
)
def test_reducer_for_key(key, kind):
    assert reducer_for_key(key) is kind


def test_empty_list_gives_nan_with_a_warning():
    with pytest.warns(RuntimeWarning, match="no values to aggregate for 'loss'"):
        assert math.isnan(reduce_metrics({"loss": []})["loss"])
    with pytest.warns(RuntimeWarning, match="no values"):
        assert math.isnan(Metric("sum").aggregate())


def test_reduce_metrics_does_not_modify_its_input():
    metrics = {"loss": [1.0, 2.0]}
    reduce_metrics(metrics)
    assert metrics == {"loss": [1.0, 2.0]}


@pytest.mark.parametrize("aggregation", ["mean", "sum", "min", "max"])
def test_metric_matches_verl(verl_metric, aggregation):
    values = [3.0, torch.tensor(1.0), 2, np.array(5.0)]
    ref = verl_metric.Metric(aggregation)
    ref.extend(values)  # verl's constructor takes one value only; ours also takes a list
    ours = Metric(aggregation, values)
    assert ours.aggregate() == pytest.approx(float(ref.aggregate()))
    ours_dp = Metric.aggregate_dp([Metric(aggregation, [1.0, 4.0]), Metric(aggregation, [3.0, 2.0])])
    ref_parts = [verl_metric.Metric(aggregation), verl_metric.Metric(aggregation)]
    ref_parts[0].extend([1.0, 4.0])
    ref_parts[1].extend([3.0, 2.0])
    ref_dp = verl_metric.Metric.aggregate_dp(ref_parts)
    assert ours_dp == pytest.approx(float(ref_dp))
    assert reduce_metrics({"x": ours})["x"] == pytest.approx(float(ref.aggregate()))


def test_metric_merging_and_helpers():
    m = Metric(AggregationType.MAX, 1.0)
    m.append(Metric("max", [7.0, 2.0]))
    assert m.aggregate() == 7.0 and len(m) == 3 and m.init_list().values == []
    assert {k: v.aggregate() for k, v in Metric.from_dict({"a": 1.0, "b": [2.0, 4.0]}, "mean").items()} == {
        "a": 1.0,
        "b": 3.0,
    }


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda: Metric("median"),
            ValueError,
            r"aggregation must be one of 'mean', 'sum', 'min', 'max'; "
            r"got 'median'",
            id="bad-aggregation",
        ),
        pytest.param(
            lambda: Metric("mean", "x"), TypeError, r"Metric.append: expected a number.*got str", id="string"
        ),
        pytest.param(
            lambda: Metric("mean", torch.ones(2)),
            ValueError,
            r"only scalar arrays.*shape \(2,\)",
            id="non-scalar",
        ),
        pytest.param(
            lambda: Metric("mean").extend(Metric("max")),
            ValueError,
            r"cannot merge a 'max' Metric into a "
            r"'mean' Metric",
            id="mismatched-merge",
        ),
        pytest.param(
            lambda: Metric.aggregate_dp([]), ValueError, r"metric_lists must hold at least one", id="empty-dp"
        ),
        pytest.param(
            lambda: Metric.aggregate_dp([Metric("mean", [1.0]), Metric("mean", [1.0, 2.0])]),
            ValueError,
            r"as many values; got lengths \[1, 2\]",
            id="ragged-dp",
        ),
        pytest.param(
            lambda: reduce_metrics({"loss": [1.0, None]}),
            TypeError,
            r"metrics\['loss'\]: expected a number",
            id="none-value",
        ),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30))
def test_property_reducers_bound_each_other(values):
    out = reduce_metrics({"a/max": values, "a/min": values, "a/mean": values})
    assert out["a/min"] <= out["a/mean"] + 1e-6 * (1 + abs(out["a/mean"]))
    assert out["a/mean"] <= out["a/max"] + 1e-6 * (1 + abs(out["a/mean"]))
    assert out["a/max"] == max(values) and out["a/min"] == min(values)


# --- MetricCollector ---------------------------------------------------------------------------


def test_collector_errors():
    c = MetricCollector()
    with pytest.raises(ValueError, match=r"metrics\['a'\] holds 1 NaN"):
        c.update({"a": [1.0, float("nan")]})
    with pytest.raises(ValueError, match=r"metrics\['t'\] holds 1 NaN or infinite"):
        c.update({"t": torch.tensor([float("inf")])})
    assert len(c) == 0
    with pytest.raises(TypeError, match=r"metrics\['s'\] must be a number"):
        c.update({"s": "text"})
    with pytest.raises(TypeError, match="metrics must be a mapping"):
        c.update([1.0])
    with pytest.raises(ValueError, match=r"aggregations\['k'\] must be one of"):
        MetricCollector(aggregations={"k": "median"})
    with pytest.raises(ValueError, match="never collected; keys present: none"):
        c.summary("zzz")
    c.update({"e": []})
    with pytest.warns(RuntimeWarning, match="no values to aggregate for 'e'"):
        assert math.isnan(c.compute()["e"])


def test_collector_reducers_follow_keys():
    c = MetricCollector(aggregations={"tokens": "sum"})
    c.update({"tokens": [3, 4], "a/max": [1, 9], "a/min": [1, 9], "a/mean": [1, 9]})
    c.update({"actor/minibatch_loss": [1, 3]})
    want = {"a/max": 9.0, "a/mean": 5.0, "a/min": 1.0, "actor/minibatch_loss": 2.0, "tokens": 7.0}
    assert c.compute() == want


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=6), min_size=1, max_size=5)
)
def test_collector_merge_equals_single_pass(chunks):
    """Merging per-chunk collectors equals one collector fed everything (float64 tolerance)."""
    merged = MetricCollector()
    for chunk in chunks:
        part = MetricCollector()
        part.update({"x": chunk})
        merged = merged + part
    every = [v for chunk in chunks for v in chunk]
    if not every:
        with pytest.warns(RuntimeWarning):
            assert math.isnan(merged.compute()["x"])
        return
    s = merged.summary("x") if len(every) > 1 else None
    assert merged.compute()["x"] == pytest.approx(np.mean(every), rel=1e-9, abs=1e-6)
    if s is not None:
        assert s["max"] == max(every) and s["min"] == min(every) and s["count"] == len(every)
        assert s["std"] == pytest.approx(np.std(every, ddof=1), rel=1e-6, abs=1e-3)


# --- the collectives' checks in a world of one (one bad rank of three: test_distributed.py) ------


@pytest.fixture
def world1():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(
            lambda g: all_reduce_metrics({"loss": [1.0, math.nan]}, g),
            ValueError,
            r"^rank 0: metrics\['loss'\] holds 1 NaN or infinite value\(s\)",
            id="metrics-nan",
        ),
        pytest.param(
            lambda g: all_reduce_metrics({"loss": ["a"]}, g),
            TypeError,
            r"^rank 0: metrics\['loss'\] must be a number or an array/list of numbers",
            id="metrics-text",
        ),
        pytest.param(
            lambda g: all_reduce_metrics({3: [1.0]}, g),  # type: ignore[dict-item]
            TypeError,
            r"^rank 0: metric keys must be strings; got int 3",
            id="metrics-int-key",
        ),
        pytest.param(
            lambda g: all_reduce_metrics([("loss", 1.0)], g),  # type: ignore[arg-type]
            TypeError,
            r"^rank 0: metrics must be a mapping",
            id="metrics-not-a-mapping",
        ),
        pytest.param(
            lambda g: all_reduce_metric(Metric("mean", [math.inf]), g),
            ValueError,
            r"^rank 0: metrics\['metric'\] holds 1 NaN or infinite",
            id="metric-inf",
        ),
        pytest.param(
            lambda g: MetricCollector().all_reduce(g, keys="loss"),
            TypeError,
            r"^rank 0: keys must be an iterable of metric keys, not one string",
            id="keys-one-string",
        ),
        pytest.param(
            lambda g: MetricCollector().all_reduce(g, keys=["a", 1]),  # type: ignore[list-item]
            TypeError,
            r"^rank 0: keys must be strings; got int 1",
            id="keys-not-strings",
        ),
    ],
)
def test_bad_values_raise_named_errors_through_the_agreement(world1, call, error, match):
    with pytest.raises(error, match=match):
        call(world1)


def test_all_reduce_metrics_in_a_world_of_one_is_reduce_metrics(world1):
    metrics: dict[str, Any] = {
        "loss": [1.0, 3.0],
        "critic/score/max": [5.0, 8.0],
        "tokens": Metric("sum", [2.0, 3.0]),
    }
    assert all_reduce_metrics(metrics, world1) == dict(sorted(reduce_metrics(metrics).items()))
    c = MetricCollector()
    c.update({"a": [1.0, 2.0]})
    assert c.all_reduce(world1, keys=["a", "a"]).compute() == {"a": 1.5}


# --- the collector on Stats: one agreement step, its judges (other ranks stood in for) ----------


def _other_rank(**fields):
    """A stand-in for agree(): the signatures differ; rank 1's is this rank's with ``fields``."""
    from rlmetrics._core import stats as stats_module

    def fake(signature, error=None, **kwargs):
        return [dict(signature), {**signature, **fields}]

    return stats_module, fake


def test_all_reduce_over_a_union_of_keys_takes_the_other_ranks_aggregation(world1, monkeypatch):
    c = MetricCollector()
    c.update({"loss": [1.0, 3.0]})
    module, fake = _other_rank(aggregations=(("loss", "mean"), ("tokens", "sum")))
    monkeypatch.setattr(module, "agree", fake)
    out = c.all_reduce(world1)
    assert out.keys() == ["loss", "tokens"] and out.aggregation("tokens") is AggregationType.SUM
    assert out.summary("loss")["mean"] == 2.0 and c.keys() == ["loss"]  # self unchanged
    with pytest.warns(RuntimeWarning, match="no values to aggregate for 'tokens'"):
        assert math.isnan(out.compute()["tokens"])  # no value here, and the stand-in rank sent none


@pytest.mark.parametrize(
    ("call", "fields", "match"),
    [
        pytest.param(
            lambda c, g: c.all_reduce(g),
            {"aggregations": (("loss", "max"),)},
            r"^ranks disagree on the aggregation of some keys: \{'loss': \['max', 'mean'\]\}$",
            id="aggregation-clash",
        ),
        pytest.param(
            lambda c, g: c.all_reduce(g, keys=["loss"]),
            {"layout": ((), ("b", "loss"), ("b", "loss"))},
            r"^keys= must be the same on every rank; rank 1 has \['b'\] more than rank 0$",
            id="keys-differ",
        ),
        pytest.param(
            lambda c, g: all_reduce_metric(Metric("mean", [1.0]), g),
            {"aggregation": "max"},
            r"^ranks disagree on the Metric's aggregation: aggregation: rank 0: 'mean'; rank 1: 'max'$",
            id="metric-aggregation",
        ),
    ],
)
def test_the_judges_raise_named_errors(world1, monkeypatch, call, fields, match):
    c = MetricCollector()
    c.update({"loss": [1.0]})
    module, fake = _other_rank(**fields)
    monkeypatch.setattr(module, "agree", fake)
    with pytest.raises(ValueError, match=match):
        call(c, world1)


def test_all_reduce_with_keys_reduces_exactly_those(world1):
    c = MetricCollector(aggregations={"n": "sum"})
    c.update({"a": [1.0, 2.0], "n": [4.0], "dropped": [9.0]})
    out = c.all_reduce(world1, keys=["n", "a", "zz/max"])
    assert out.keys() == ["a", "n", "zz/max"]
    with pytest.warns(RuntimeWarning, match="no values collected for 'zz/max'"):
        assert out.summary("zz/max")["count"] == 0.0
    with pytest.warns(RuntimeWarning, match="no values to aggregate for 'zz/max'"):
        got = out.compute()
    assert got["a"] == 1.5 and got["n"] == 4.0


@pytest.mark.parametrize(
    "value",
    [2.5, -0.0, 1e200, np.float64(2.5), [2.5], np.array(2.5)],
    ids=["float", "minus-zero", "huge", "np", "list", "0d"],
)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_float_is_one_observation_like_any_other_value(value):
    via_numpy = MetricCollector()
    via_numpy.update({"a": np.asarray(value, dtype=np.float64).reshape(-1)})
    c = MetricCollector()
    c.update({"a": value})
    with pytest.raises(ValueError, match=r"metrics\['b'\] holds 1 NaN or infinite"):
        c.update({"b": math.inf})
    assert c._stats.host_values() == via_numpy._stats.host_values()  # the same float64 numbers
    total = c._stats.host_values()[0]["sum/a"]
    assert math.copysign(1.0, total) == math.copysign(1.0, float(np.asarray(value, dtype=np.float64).sum()))


def test_merge_over_different_keys_and_reset():
    a, b = MetricCollector(aggregations={"s": "sum"}), MetricCollector(aggregations={"s": "max", "t": "sum"})
    a.update({"s": [1.0, 2.0], "x": [4.0]})
    b.update({"s": [5.0], "t": [1.0, 1.0]})
    both = a + b
    assert both.keys() == ["s", "t", "x"] and both.compute() == {
        "s": 8.0,
        "t": 2.0,
        "x": 4.0,
    }  # a's "sum" wins
    assert both.summary("s")["max"] == 5.0 and a.keys() == ["s", "x"]
    both.reset()
    assert len(both) == 0 and both.aggregation("t") is AggregationType.SUM and both.compute() == {}
