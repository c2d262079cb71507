"""The one maj@k vote counter (rlmetrics.validation.exact.votes) and both of its callers.

Each maj@k is checked against a brute force that enumerates every draw: the exact estimators
(``maj_at_k``, ``prompt_estimates``) against every subset / sequence of k samples, verl's
bootstrap path (``process_validation_metrics``) against verl's own vote on each of its draws.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from rlmetrics.validation.exact import votes as V
from rlmetrics.validation.exact.estimators import maj_at_k
from rlmetrics.validation.exact.inputs import group_prompts, local_codes, predictions
from rlmetrics.validation.exact.summary import prompt_estimates
from rlmetrics.validation.verl.bootstrap import bootstrap_indices, calc_maj_val, process_validation_metrics


def brute_maj(preds: list[str], vals: list[float], k: int, replace: bool) -> tuple[float, float]:
    """Mean and std of the majority-vote value over every equally likely draw of k samples.

    The most voted answer wins (ties: each tied answer with equal chance) and the value is that
    of one of its drawn samples, each drawn slot alike.
    """
    n = len(preds)
    draws = itertools.product(range(n), repeat=k) if replace else itertools.combinations(range(n), k)
    total = m1 = m2 = 0.0
    for drawn in draws:
        slots: dict[str, list[float]] = {}
        for i in drawn:
            slots.setdefault(preds[i], []).append(vals[i])
        top = max(len(v) for v in slots.values())
        tied = [v for v in slots.values() if len(v) == top]
        for winner in tied:
            for v in winner:
                p = 1.0 / (len(tied) * len(winner))
                m1 += p * v
                m2 += p * v * v
        total += 1.0
    mean = m1 / total
    return mean, math.sqrt(max(m2 / total - mean * mean, 0.0))


CASES = {
    "two-answers": (["a", "a", "b"], [1.0, 0.0, 0.0]),
    "tie-heavy": (["a", "b", "c", "a", "b", "c"], [1.0, 0.0, 0.5, 1.0, 0.25, 0.0]),
    "one-answer": (["x"] * 4, [1.0, 0.0, 1.0, 1.0]),
    "singletons": (["p", "q", "r", "s", "t"], [0.1, 0.9, 0.4, 0.6, 0.0]),
    "mixed": (["7", "3", "7", "5", "3", "7", "9"], [1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0]),
}


# without replacement k > n is undefined: those are left out
MAJ_GRID = [
    (case, k, replace)
    for case in CASES
    for k in (1, 2, 3, 4)
    for replace in (False, True)
    if replace or k <= len(CASES[case][0])
]


@pytest.mark.parametrize(
    ("case", "k", "replace"),
    MAJ_GRID,
    ids=[f"{c}-k{k}-{'replace' if r else 'distinct'}" for c, k, r in MAJ_GRID],
)
def test_maj_at_k_agrees_with_brute_force(case, k, replace):
    preds, vals = CASES[case]
    got = maj_at_k(preds, vals, k, replace=replace)
    assert got.mc_error == 0.0
    np.testing.assert_allclose(tuple(got), brute_maj(preds, vals, k, replace), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("replace", [False, True], ids=["distinct", "replace"])
def test_prompt_estimates_maj_agrees_with_brute_force(replace):
    """The summary path (all prompts at once, shared patterns) gives each prompt's brute force."""
    cases = [CASES[c] for c in ("two-answers", "mixed", "tie-heavy", "singletons")]
    uids = [f"u{i}" for i, (p, _) in enumerate(cases) for _ in p]
    preds = [x for p, _ in cases for x in p]
    vals = [x for _, v in cases for x in v]
    tables = prompt_estimates(["s"] * len(uids), uids, {"v": vals, "pred": preds}, ks=[2, 3], replace=replace)
    table = tables["s"]["v"]
    for k in (2, 3):
        col = table.names.index(f"maj@{k}")
        want = [brute_maj(p, v, k, replace)[0] for p, v in cases]
        np.testing.assert_allclose(table.values[:, col], want, rtol=1e-12, atol=1e-12)
        assert table.exact_maj[f"maj@{k}"] is True


@pytest.mark.parametrize("k", [2, 4, 7], ids=["k2", "k4", "k7"])
def test_verl_bootstrap_maj_is_verls_vote_on_each_draw(k):
    """verl's path keeps its own arithmetic: its mean and std are those of calc_maj_val per draw."""
    preds, vals = CASES["mixed"]
    out = process_validation_metrics(["s"] * len(preds), ["u"] * len(preds), {"acc": vals, "pred": preds})
    items = [{"pred": p, "acc": v} for p, v in zip(preds, vals)]
    idx = bootstrap_indices(len(items), k, n_bootstrap=1000, seed=42)
    per_draw = np.array([calc_maj_val([items[i] for i in row], "pred", "acc") for row in idx])
    got = out["s"]["acc"]
    assert got[f"maj@{k}/mean"] == pytest.approx(per_draw.mean(), abs=1e-14)
    assert got[f"maj@{k}/std"] == pytest.approx(per_draw.std(), abs=1e-14)


def test_votes_patterns_rows_and_memo():
    p = group_prompts(["s"] * 9, ["a"] * 3 + ["b"] * 3 + ["c"] * 3)
    votes = V.Votes(predictions(["x", "y", "x", "1", "2", "1", "q", None, "q"], p, "pred"), p.sizes)
    assert votes.complete.tolist() == [True, True, False]
    table = votes.patterns(3)
    assert table.prompts.tolist() == [0, 1]  # prompt c has a missing prediction
    assert table.patterns.tolist() == [[0, 1, 0]] and table.inverse.tolist() == [0, 0]
    assert votes.rows(np.array([1]), 3).tolist() == [1]
    assert votes.patterns(3) is table  # computed once
    calls = []
    assert votes.memo("key", lambda: calls.append(1) or 7) == 7
    assert votes.memo("key", lambda: calls.append(1) or 8) == 7 and calls == [1]
    assert votes.patterns(5).patterns.shape == (0, 5)


def test_votes_without_predictions_and_padded_prompts():
    votes = V.Votes(None, np.array([2, 2, 0]))
    assert votes.complete.tolist() == [False, False, False]
    assert votes.patterns(2).prompts.size == 0


@pytest.mark.parametrize(
    "codes",
    [[5, 2, 5, 9], [0, 0, 0], [3, 1, 2, 1, 3], list(range(6))],
    ids=["mixed", "one", "repeats", "distinct"],
)
def test_first_positions_equal_local_codes(codes):
    arr = np.array(codes)
    assert V.first_positions(arr).tolist() == local_codes(arr[None, :])[0].tolist()


@pytest.mark.parametrize(
    ("sizes", "k", "replace"),
    [((2, 1), 2, False), ((3, 2, 2), 3, True), ((1, 1, 1, 1), 2, False), ((4, 1), 5, True)],
    ids=["2-1", "3-2-2-replace", "singletons", "4-1-replace"],
)
def test_win_weights_against_enumeration(sizes, k, replace):
    preds = [str(a) for a, s in enumerate(sizes) for _ in range(s)]
    want = np.zeros(len(sizes))
    n = len(preds)
    draws = list(itertools.product(range(n), repeat=k) if replace else itertools.combinations(range(n), k))
    for drawn in draws:
        counts = np.bincount([int(preds[i]) for i in drawn], minlength=len(sizes))
        tied = counts == counts.max()
        want += tied / tied.sum() / len(draws)
    got, exact = V.win_weights.__wrapped__(sizes, k, replace, 0)
    assert exact
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_pattern_weights_share_signatures():
    local = np.array([[0, 0, 2], [0, 1, 1], [0, 1, 2]])
    weights, exact = V.pattern_weights(local, 2, False, 0)
    assert exact
    # the answer of size 2 of the first two patterns wins alike wherever it sits
    assert weights[0, 0] == pytest.approx(weights[1, 1]) == pytest.approx(2 / 3)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(weights[2], [1 / 3, 1 / 3, 1 / 3])


def test_monte_carlo_fallback_is_flagged(monkeypatch):
    monkeypatch.setattr(V, "_MAJ_ENUM_LIMIT", 0)
    fresh = functools.partial(V.win_weights.__wrapped__)
    weights, exact = fresh((3, 2, 2), 3, False, 1)
    assert not exact
    assert weights[1] == weights[2]  # answers of equal size share their estimate
    assert weights.sum() == pytest.approx(1.0)


def test_k_beyond_int64_is_refused():
    with pytest.raises(ValueError, match=r"k must be below 2\*\*63 for maj@k; got 36893488147419103232"):
        V.win_weights.__wrapped__((1, 1), 2**65, True, 0)
