"""Exact estimators: brute-force enumeration of best@k, worst@k and maj@k, verl's bootstrap, properties."""

from __future__ import annotations

import itertools
import math
import time
import warnings

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from rlmetrics.validation.bootstrap import bootstrap_metric
from rlmetrics.validation.estimators import best_at_k, maj_at_k, pass_at_k, worst_at_k
from rlmetrics.validation.exact import votes


def _named(err: Exception, *names: str) -> bool:
    return any(str(err).startswith(name) or f"{name} " in str(err) for name in names)


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
    monkeypatch.setattr(votes, "_MAJ_ENUM_LIMIT", 0)
    votes.win_weights.cache_clear()
    approx = maj_at_k(preds, vals, 5, seed=1)
    votes.win_weights.cache_clear()
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


# ----------------------------------------------------------------------------- maj@k with large k
@pytest.mark.parametrize("k", [10**6, 10**12, 2**63 - 1], ids=["1e6", "1e12", "2**63-1"])
def test_maj_at_k_with_replacement_bounded_for_huge_k(k):
    """The Monte Carlo draws vote counts (multinomial), not k indices: fast for any k, and the
    largest answer wins almost surely."""
    t0 = time.perf_counter()
    got = maj_at_k(["a", "a", "b", "c"], [1.0, 1.0, 0.0, 0.0], k, replace=True)
    assert time.perf_counter() - t0 < 10.0  # a hang guard (k draws would never end), not a speed
    assert got.mean == 1.0 and got.std == 0.0


def test_maj_at_k_huge_k_single_answer_and_beyond_int64():
    assert maj_at_k(["a", "a"], [1.0, 0.0], 2**70, replace=True) == (0.5, 0.5)
    with pytest.raises(ValueError, match=r"k must be below 2\*\*63 for maj@k; got 1180591620717411303424"):
        maj_at_k(["a", "b"], [1.0, 0.0], 2**70, replace=True)


def test_maj_at_k_monte_carlo_without_replacement_many_samples(monkeypatch):
    """Hypergeometric vote counts: 10**6 samples cost what 10 do; agrees with exact enumeration."""
    preds = [str(v) for v in [0, 0, 0, 1, 1, 2, 3, 3, 0, 1]]
    vals = np.array([1, 1, 1, 0, 0, 0, 0, 0, 1, 0], dtype=float)
    exact = maj_at_k(preds, vals, 5)
    monkeypatch.setattr(votes, "_MAJ_ENUM_LIMIT", 0)
    votes.win_weights.cache_clear()
    try:
        approx = maj_at_k(preds, vals, 5, seed=3)
        t0 = time.perf_counter()
        big = maj_at_k(preds * 10**5, np.tile(vals, 10**5), 1001, seed=3)
        assert time.perf_counter() - t0 < 5.0
    finally:
        votes.win_weights.cache_clear()
    assert abs(approx.mean - exact.mean) < 5 * approx.mc_error
    assert 0.99 <= big.mean <= 1.0  # answer "0" (40% of the samples) wins 1001-draw votes


# ----------------------------------------------------------------------------- any input
def n_draws(n: int, k: int, replace: bool, ordered: bool = False) -> float:
    """How many draws a brute force enumerates (inf when too many to count)."""
    if n == 0 or k > 64:
        return math.inf
    if replace or ordered:
        return float(n) ** k
    return float(math.comb(n, k))


_value_arrays = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=6),
    st.lists(st.lists(st.floats(-5, 5), min_size=2, max_size=2), max_size=3),
    st.lists(st.one_of(st.integers(-2, 2), st.booleans(), st.none(), st.text(max_size=1)), max_size=4),
    st.builds(
        lambda v, dt: np.asarray(v, dtype=dt),
        st.lists(st.integers(0, 3), max_size=5),
        st.sampled_from([np.float64, np.float16, np.int8, np.bool_, np.uint64]),
    ),
    st.just(np.zeros((2, 2, 2))),
)
_ks = st.one_of(
    st.integers(-1, 8), st.integers(2**62, 2**70), st.floats(0, 4), st.booleans(), st.none(), st.just("2")
)


_good_values = st.one_of(
    st.lists(st.floats(-5, 5), min_size=1, max_size=6),
    st.lists(st.integers(0, 1), min_size=1, max_size=6),
    st.integers(1, 5).flatmap(
        lambda n: st.lists(st.lists(st.floats(-5, 5), min_size=n, max_size=n), min_size=1, max_size=3)
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    values=st.one_of(_good_values, _good_values, _value_arrays),
    k=st.one_of(st.integers(1, 6), st.integers(1, 6), _ks),
    replace=st.booleans(),
)
def test_property_best_worst_at_k_any_input(values, k, replace):
    """best@k / worst@k of anything: enumeration's values, NaN where undefined, or a named error."""
    for fn, pick in ((best_at_k, max), (worst_at_k, min)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                got = fn(values, k, replace=replace)
        except (TypeError, ValueError) as err:
            event(f"{fn.__name__}: named error")
            assert _named(err, "values", "k"), err
            continue
        event(f"{fn.__name__}: result")
        arr = np.atleast_2d(np.asarray(values, dtype=np.float64))
        n = arr.shape[1]
        mean = np.atleast_1d(got.mean)
        if k > n and not replace:
            assert np.isnan(mean).all()
        elif n_draws(n, k, replace) <= 4096:
            for row, m in zip(arr.tolist(), mean.tolist()):
                want, _ = brute_extreme(row, k, replace, pick)
                assert math.isclose(m, want, rel_tol=1e-9, abs_tol=1e-9), (row, k, replace, m, want)
        else:
            assert np.all((arr.min(axis=1) - 1e-9 <= mean) & (mean <= arr.max(axis=1) + 1e-9))


@st.composite
def vote_inputs(draw):
    """(preds, vals): two times in three of one length (hashable answers, finite values)."""
    any_preds = st.one_of(
        st.lists(st.sampled_from(["a", "b", 1, 1.0, None]), max_size=6),
        st.lists(st.one_of(st.just([1]), st.just("a")), max_size=3),
        st.just("ab"),
    )
    any_vals = st.lists(st.one_of(st.floats(-2, 2), st.just(float("nan")), st.booleans()), max_size=6)
    if draw(st.integers(0, 2), label="mode") == 0:
        return draw(any_preds), draw(any_vals)
    n = draw(st.integers(1, 6), label="n")
    preds = draw(st.lists(st.sampled_from(["a", "b", "c", 1, None]), min_size=n, max_size=n), label="preds")
    vals = draw(st.lists(st.one_of(st.floats(-2, 2), st.booleans()), min_size=n, max_size=n), label="vals")
    return preds, vals


@settings(max_examples=200, deadline=None)
@given(args=vote_inputs(), k=st.one_of(st.integers(1, 5), st.integers(1, 5), _ks), replace=st.booleans())
def test_property_maj_at_k_any_input(args, k, replace):
    """maj@k of anything: verl's rule enumerated over every draw, NaN where undefined, or a named error."""
    preds, vals = args
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = maj_at_k(preds, vals, k, replace=replace)
    except (TypeError, ValueError) as err:
        event("named error")
        assert _named(err, "preds", "values", "k"), err
        return
    event("result")
    n = len(vals)
    if k > n and not replace:
        assert math.isnan(got.mean)
    elif n_draws(n, k, replace, ordered=True) <= 5000 and got.mc_error == 0.0:
        want, _ = brute_majority(list(preds), [float(v) for v in vals], k, replace)
        assert math.isclose(got.mean, want, rel_tol=1e-9, abs_tol=1e-9), (preds, vals, k, got, want)
    else:
        assert min(map(float, vals)) - 1e-9 <= got.mean <= max(map(float, vals)) + 1e-9
