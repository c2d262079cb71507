"""rlmetrics.training.rewards: reward-component statistics against brute force, merging, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import Stats, compute_reward_component_metrics, reward_component_statistics
from rlmetrics import keys as K
from rlmetrics.errors import UndefinedMetricWarning


def brute(components: dict, weights: dict | None = None) -> dict[str, float]:
    names = sorted(components)
    w = {n: (weights or {}).get(n, 1.0) for n in names}
    n_rows = len(components[names[0]])
    decides = dict.fromkeys(names, 0)
    n_decided = 0
    for i in range(n_rows):
        given_here = [
            (abs(w[n] * components[n][i]), -j, n)
            for j, n in enumerate(names)
            if not math.isnan(components[n][i])
        ]
        if given_here:
            decides[max(given_here)[2]] += 1
            n_decided += 1
    out = {}
    for n in names:
        v = [x for x in components[n] if not math.isnan(x)]
        stats = {
            "mean": float(np.mean(v)) if v else math.nan,
            "std": float(np.std(v, ddof=1)) if len(v) > 1 else math.nan,
            "max": max(v) if v else math.nan,
            "min": min(v) if v else math.nan,
            "decides_frac": decides[n] / n_decided if n_decided else math.nan,
        }
        out.update({K.reward_component_key(n, s): x for s, x in stats.items()})
    return out


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    names=st.lists(
        st.sampled_from(["acc", "format/strict", "len pen", "z"]), min_size=1, max_size=4, unique=True
    ),
    cut=st.integers(0, 12),
    weighted=st.booleans(),
)
def test_property_statistics_equal_brute_force_and_shards_merge_into_the_whole(data, names, cut, weighted):
    n_rows = data.draw(st.integers(1, 12))
    comps = {
        n: np.asarray(
            data.draw(
                st.lists(st.one_of(st.floats(-100, 100), st.just(math.nan)), min_size=n_rows, max_size=n_rows)
            )
        )
        for n in names
    }
    weights = {names[0]: 2.5} if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        got = compute_reward_component_metrics(comps, weights=weights)
        parts = [{n: v[:cut] for n, v in comps.items()}, {n: v[cut:] for n, v in comps.items()}]
        merged = Stats.merge(*(reward_component_statistics(p, weights=weights) for p in parts)).finalize()
    want = brute(comps, weights)
    assert got.keys() == want.keys() == merged.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-9, nan_ok=True), key
        assert merged[key] == pytest.approx(value, rel=1e-9, abs=1e-9, nan_ok=True), key


def test_torch_components_and_ties_go_to_the_first_name():
    torch = pytest.importorskip("torch")
    got = compute_reward_component_metrics({"b": torch.tensor([1.0, -2.0]), "a": torch.tensor([1.0, 0.5])})
    assert got[K.reward_component_key("a", "decides_frac")] == 0.5  # the tie of sample 0
    assert got[K.reward_component_key("b", "decides_frac")] == 0.5  # |-2| is the largest
    assert got["reward_components/b/min"] == -2.0


def test_a_component_given_for_no_sample_is_nan_with_a_warning():
    with pytest.warns(UndefinedMetricWarning, match="reward component 'x' is given for no sample"):
        got = compute_reward_component_metrics({"x": np.array([np.nan, np.nan]), "y": np.array([1.0, 2.0])})
    assert math.isnan(got["reward_components/x/mean"]) and got["reward_components/y/decides_frac"] == 1.0


@pytest.mark.parametrize(
    ("components", "kw", "error", "match"),
    [
        pytest.param({}, {}, TypeError, "components must be a non-empty mapping", id="empty"),
        pytest.param([1.0], {}, TypeError, "got list", id="not-a-mapping"),
        pytest.param(
            {"a": np.zeros((2, 2))}, {}, ValueError, r"components\['a'\] must have shape \(B,\)", id="2-d"
        ),
        pytest.param({"a": ["x", "y"]}, {}, TypeError, r"components\['a'\] must hold numbers", id="strings"),
        pytest.param(
            {"a": [1.0, math.inf]}, {}, ValueError, "must be finite or NaN; sample 1 is infinite", id="inf"
        ),
        pytest.param({"a": [1.0], "b": [1.0, 2.0]}, {}, ValueError, r"got lengths \[1, 2\]", id="lengths"),
        pytest.param(
            {"a": [1.0]}, {"weights": {"b": 2.0}}, ValueError, r"not given: \['b'\]", id="weights-name"
        ),
        pytest.param(
            {"a": [1.0]}, {"weights": {"a": math.nan}}, ValueError, "weights must be finite", id="weights-nan"
        ),
    ],
)
def test_errors_name_the_argument(components, kw, error, match):
    with pytest.raises(error, match=match):
        compute_reward_component_metrics(components, **kw)


def test_statistics_of_other_components_or_weights_do_not_merge():
    a = reward_component_statistics({"a": np.ones(2)})
    with pytest.raises(ValueError, match="cannot merge 'reward_components' statistics"):
        a.merge(reward_component_statistics({"b": np.ones(2)}))
    with pytest.raises(ValueError, match=r"different options: \['weights'\]"):
        a.merge(reward_component_statistics({"a": np.ones(2)}, weights={"a": 2.0}))
