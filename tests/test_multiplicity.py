"""Adjusted p-values against brute-force closed testing, the step procedures' loops, and simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rlmetrics.validation.comparison.multiplicity import adjust_p_values


def _holm_by_closed_testing(p):
    """Holm is closed testing with Bonferroni's local tests: the largest, over the subsets that
    hold a comparison, of ``|S| min_{j in S} p_j`` (capped at 1)."""
    m = len(p)
    out = []
    for i in range(m):
        worst = 0.0
        for size in range(1, m + 1):
            for subset in itertools.combinations(range(m), size):
                if i in subset:
                    worst = max(worst, min(1.0, size * min(p[j] for j in subset)))
        out.append(worst)
    return out


def _step_up_rejections(p, alpha):
    """Benjamini-Hochberg by its definition: reject the k smallest, k the largest with
    ``p_(k) <= k alpha / m``."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    k = max((r + 1 for r in range(m) if p[order[r]] <= (r + 1) * alpha / m), default=0)
    return set(order[:k])


def _step_down_rejections(p, alpha):
    """Holm by its definition: walk up from the smallest p-value, stop at the first
    ``p_(r) > alpha / (m - r + 1)``."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = set()
    for r, i in enumerate(order):
        if p[i] > alpha / (m - r):
            break
        out.add(i)
    return out


@pytest.mark.parametrize("seed", range(6), ids=[f"seed{s}" for s in range(6)])
def test_holm_equals_closed_testing(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, size=int(rng.integers(1, 8))).round(3).tolist()  # rounding makes ties
    np.testing.assert_allclose(adjust_p_values(p), _holm_by_closed_testing(p), rtol=1e-12)


@pytest.mark.parametrize("method", ["holm", "bh"], ids=["holm", "bh"])
@pytest.mark.parametrize("seed", range(4), ids=[f"seed{s}" for s in range(4)])
def test_thresholds_give_the_step_procedures(method, seed):
    """``adjusted <= alpha`` declares exactly what the step-down (Holm) or step-up (BH) loop does."""
    rng = np.random.default_rng(100 + seed)
    p = np.r_[rng.uniform(0, 0.01, 5), rng.uniform(0, 1, 25)].round(4)
    adjusted = adjust_p_values(p, method=method)
    procedure = _step_down_rejections if method == "holm" else _step_up_rejections
    for alpha in (0.01, 0.05, 0.1, 0.25):
        assert set(np.flatnonzero(adjusted <= alpha).tolist()) == procedure(p.tolist(), alpha), alpha


@pytest.mark.parametrize("method", ["holm", "bh"], ids=["holm", "bh"])
def test_error_rate_under_the_global_null(method):
    """20 independent true nulls, 4000 families: the chance of any false declaration at 5% is at
    most 5% (both: under the global null the FDR is the FWER); unadjusted it is 1 - 0.95^20."""
    rng = np.random.default_rng(9)
    p = rng.uniform(size=(4000, 20))
    any_false = np.mean([(adjust_p_values(row, method=method) <= 0.05).any() for row in p])
    se = math.sqrt(0.05 * 0.95 / 4000)
    assert any_false <= 0.05 + 3 * se
    assert np.mean((p <= 0.05).any(axis=1)) > 0.6


@pytest.mark.parametrize("method", ["holm", "bh"], ids=["holm", "bh"])
def test_nan_stays_out_of_the_family(method):
    got = adjust_p_values([0.01, np.nan, 0.04], method=method)
    assert math.isnan(got[1])
    np.testing.assert_allclose(got[[0, 2]], adjust_p_values([0.01, 0.04], method=method))
    assert np.isnan(adjust_p_values([np.nan, np.nan])).all() and adjust_p_values([]).shape == (0,)


@pytest.mark.parametrize("method", ["holm", "bh"], ids=["holm", "bh"])
def test_adjusted_are_between_the_p_value_and_one_and_keep_the_order(method):
    rng = np.random.default_rng(3)
    p = rng.uniform(size=50) ** 3
    adjusted = adjust_p_values(p, method=method)
    assert np.all((p <= adjusted) & (adjusted <= 1.0))
    order = np.argsort(p)
    assert np.all(np.diff(adjusted[order]) >= 0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"p_values": [0.1, 1.5]}, ValueError, r"p_values must be in \[0, 1\] \(NaN: no p-value\); got 1.5"),
        ({"p_values": [[0.1]]}, ValueError, r"p_values must be 1-D .*got shape \(1, 1\)"),
        ({"p_values": ["a"]}, TypeError, "p_values must hold numbers; got dtype <U1"),
        (
            {"p_values": [0.1], "method": "bonferroni"},
            ValueError,
            "method must be one of holm, bh; got 'bonferroni'",
        ),
    ],
    ids=["range", "shape", "type", "method"],
)
def test_errors(kwargs, exc, match):
    p = kwargs.pop("p_values")
    with pytest.raises(exc, match=match):
        adjust_p_values(p, **kwargs)
