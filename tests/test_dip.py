"""rlmetrics._core.dip: Hartigan's dip against a brute force from the definition (a linear
programme per mode), known values, invariances, the null table and the p-value's calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics._core.dip import NULL_PROBS, NULL_QUANTILES, dip, dip_pvalue, simulate_null

EXACT = 1e-12  # the brute force's LP solution against ours (both exact up to rounding)
AFFINE = 1e-9  # the dip of a x + b against x: the hulls' float rounding


def brute_dip(sample) -> float:
    """``min eps`` over unimodal G with ``sup |F - G| <= eps``, one LP per mode ``v_j``: G's values
    at the distinct values (``g``), its value after the mode's atom (``h``) and ``eps``; G convex
    and nondecreasing on ``v_0..v_j-`` (slopes nondecreasing), concave on ``v_j..`` (slopes
    nonincreasing), inside the band ``[F(v) - eps, F(v-) + eps]`` at every value but the mode,
    where the left limit is within eps of ``F(v_j-)`` and ``h`` of ``F(v_j)``."""
    from scipy.optimize import linprog

    v, cnt = np.unique(np.asarray(sample, dtype=np.float64), return_counts=True)
    m, d = v.size, np.cumsum(cnt) / cnt.sum()
    c = d - cnt / cnt.sum()
    best = math.inf
    for j in range(m):
        h, e = m, m + 1
        rows, rhs = [], []

        def add(coef: dict[int, float], bound: float, rows=rows, rhs=rhs) -> None:
            row = np.zeros(m + 2)
            for k, w in coef.items():
                row[k] += w
            rows.append(row)
            rhs.append(bound)

        for i in range(m):
            if i == j:
                add({i: 1, e: -1}, c[i])
                add({i: -1, e: -1}, -c[i])
                add({h: 1, e: -1}, d[i])
                add({h: -1, e: -1}, -d[i])
                add({i: 1, h: -1}, 0.0)
            else:
                add({i: 1, e: -1}, c[i])
                add({i: -1, e: -1}, -d[i])
        chain = [*range(j + 1)], [h, *range(j + 1, m)]
        points = [*range(j + 1)], [*range(j, m)]
        for side, (idx, at) in enumerate(zip(chain, points)):
            for t in range(1, len(idx)):
                add({idx[t - 1]: 1, idx[t]: -1}, 0.0)  # nondecreasing
            for t in range(1, len(idx) - 1):
                a1, a2 = v[at[t]] - v[at[t - 1]], v[at[t + 1]] - v[at[t]]
                sign = 1.0 if side == 0 else -1.0  # convex: slope t-1 <= slope t; concave: >=
                add({idx[t]: sign * (1 / a1 + 1 / a2), idx[t - 1]: -sign / a1, idx[t + 1]: -sign / a2}, 0.0)
        cost = np.zeros(m + 2)
        cost[e] = 1.0
        res = linprog(cost, A_ub=np.array(rows), b_ub=rhs, bounds=[(0, 1)] * (m + 1) + [(0, None)])
        assert res.status == 0, res.message
        best = min(best, float(res.x[e]))
    return best


@pytest.mark.parametrize(
    "sample",
    [
        pytest.param([0.0, 3.0, 3.0, 4.0], id="tied-mode"),
        pytest.param([0.0, 1.0, 1.0, 1.0, 2.0, 2.0], id="ties"),
        pytest.param([0.0, 0.1, 0.2, 5.0, 5.1, 5.2], id="two-clusters"),
        pytest.param([0.0, 1.0, 2.0, 3.0, 4.0], id="evenly-spaced"),
        pytest.param([1.0, 1.1, 1.3, 2.0, 4.0, 8.0, 16.0], id="skewed"),
        pytest.param([0.3], id="one-point"),
        pytest.param([0.3, 0.9], id="two-points"),
    ],
)
def test_the_dip_equals_the_brute_force_from_the_definition(sample):
    assert dip(sample) == pytest.approx(brute_dip(sample), abs=EXACT)


@pytest.mark.parametrize("kind", ["uniform", "two-normals", "ties", "heavy-tail"])
def test_the_dip_equals_the_brute_force_on_random_small_samples(kind):
    rng = np.random.default_rng(["uniform", "two-normals", "ties", "heavy-tail"].index(kind))
    for _ in range(40):
        n = int(rng.integers(2, 11))
        if kind == "uniform":
            x = rng.random(n)
        elif kind == "two-normals":
            x = np.concatenate([rng.normal(0, 1, n // 2), rng.normal(4, 1, n - n // 2)])
        elif kind == "ties":
            x = rng.integers(0, 4, n).astype(np.float64)
        else:
            x = rng.standard_cauchy(n)
        assert dip(x) == pytest.approx(brute_dip(x), abs=EXACT), x


@pytest.mark.parametrize(
    ("sample", "value"),
    [
        pytest.param([5.0] * 7, 0.0, id="one-value"),
        pytest.param([0.0, 0.0, 1.0, 1.0], 0.25, id="two-equal-atoms"),
        pytest.param([0.0, 1.0, 2.0, 3.0], 0.125, id="four-distinct-points:1/(2n)"),
        pytest.param([0.0] * 3 + [1.0], 0.125, id="an-atom-and-a-lone-point:half-its-mass"),
    ],
)
def test_known_values(sample, value):
    assert dip(sample) == pytest.approx(value, abs=EXACT)


@pytest.mark.parametrize("gap", [10.0, 1000.0], ids=["blocks-1-apart-10", "blocks-1-apart-1000"])
def test_two_separated_blocks_tend_to_a_quarter_less_their_width(gap):
    """Two uniform halves on [0, 1] and [gap, gap + 1]: G convex up to 1 (an atom there), then
    concave, must climb from F(1) = 1/2 to 1 over [1, gap + 1] while F stays at 1/2 until gap, so
    2 dip -> (1 - 1 / gap) / 2 (by hand): 0.225 at gap 10, 0.25 as the blocks become points."""
    rng = np.random.default_rng(7)
    want = (1.0 - 1.0 / gap) / 4.0
    for n, tol in ((100, 0.02), (2000, 0.004)):
        assert dip(np.concatenate([rng.random(n), gap + rng.random(n)])) == pytest.approx(want, abs=tol)


def test_a_uniform_sample_dips_as_1_over_sqrt_n():
    rng = np.random.default_rng(8)
    for n in (100, 1000, 4000):
        assert 0.5 / n <= dip(rng.random(n)) < 1.5 / math.sqrt(n)


def test_the_diptest_package_agrees_on_samples_without_ties():
    diptest = pytest.importorskip("diptest")
    rng = np.random.default_rng(3)
    for n in (4, 10, 50, 200, 1000):
        for x in (rng.random(n), np.concatenate([rng.normal(0, 1, n // 2), rng.normal(3, 1, n - n // 2)])):
            assert dip(x) == pytest.approx(diptest.dipstat(x), abs=EXACT)


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40))
def test_the_dip_is_between_its_bounds(sample):
    value = dip(sample)
    distinct = len(set(sample))
    assert 0.0 <= value <= 0.25 + EXACT
    if distinct == len(sample) and distinct > 1:
        assert value >= 1.0 / (2 * len(sample)) - EXACT


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=40),
    st.sampled_from([-3.0, -0.5, 0.25, 1.0, 7.0]),
    st.sampled_from([-100.0, 0.0, 2.5]),
)
def test_the_dip_is_invariant_under_affine_maps(sample, scale, shift):
    x = np.asarray(sample, dtype=np.float64) / 8.0  # exact in binary: the map keeps ties ties
    assert dip(scale * x + shift) == pytest.approx(dip(x), abs=AFFINE)


@pytest.mark.parametrize("n", [8, 24])
def test_the_null_table_is_the_seeded_simulation(n):
    assert simulate_null(n) == pytest.approx(np.array(NULL_QUANTILES[n]), abs=5e-5)


def test_the_null_table_rows_are_quantiles_and_settle_as_n_grows():
    for n, row in NULL_QUANTILES.items():
        assert len(row) == len(NULL_PROBS) and list(row) == sorted(row), n
    big = [NULL_QUANTILES[n][NULL_PROBS.index(0.95)] for n in sorted(NULL_QUANTILES) if n >= 64]
    assert max(big) - min(big) < 0.03  # sqrt(n) dip converges in distribution


def test_p_values_are_calibrated_under_the_uniform_and_reject_two_modes():
    rng = np.random.default_rng(11)
    for n in (40, 300):
        p = np.array([dip_pvalue(rng.random(n))[1] for _ in range(300)])
        assert 0.02 < np.mean(p < 0.05) < 0.09, n  # 5%, within the binomial noise of 300 draws
        assert 0.05 < np.mean(p < 0.1) < 0.16, n
    two = np.concatenate([rng.normal(0, 1, 150), rng.normal(5, 1, 150)])
    assert dip_pvalue(two)[1] <= 0.001 + EXACT
    assert dip_pvalue(rng.normal(0, 1, 300))[1] > 0.05
    assert dip_pvalue([0.0, 1.0, 5.0]) == (pytest.approx(1 / 6), 1.0)  # under 4 points: no test


@pytest.mark.parametrize(
    ("sample", "match"),
    [
        pytest.param([], r"sample must be a non-empty 1-D array; got shape \(0,\)", id="empty"),
        pytest.param([[1.0, 2.0]], r"sample must be a non-empty 1-D array; got shape \(1, 2\)", id="2-d"),
        pytest.param([1.0, math.nan], r"sample must be finite; got a NaN or an infinity", id="nan"),
    ],
)
def test_bad_samples_are_refused(sample, match):
    with pytest.raises(ValueError, match=match):
        dip(sample)
