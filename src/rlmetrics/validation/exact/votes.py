"""The one maj@k vote counter: each prompt's predictions as a vote pattern, and who wins a vote.

A prompt's predictions are named by the position of their first occurrence (its *local codes*:
``["7", "3", "7", "5"]`` is ``[0, 1, 0, 3]``), so prompts with the same *pattern* vote alike,
whatever the answers say. :class:`Votes` holds, per number of samples, the patterns of the
prompts whose predictions are complete, computed once and shared by every ``k`` and variable.
Both maj@k paths read them:

* the exact one (:func:`~rlmetrics.validation.exact.estimators.maj_at_k` for one prompt,
  :func:`~rlmetrics.validation.exact.summary.prompt_estimates` for all): :func:`pattern_weights`,
  the exact chance that each answer wins a vote of ``k`` draws (ties split evenly, which is what
  verl's first-drawn rule gives in expectation), and :func:`maj_stats`, the mean (and std) of
  the value of one of the winner's drawn samples;
* verl's bootstrap (:func:`~rlmetrics.validation.verl.bootstrap.process_validation_metrics`):
  :func:`~rlmetrics.validation.verl.majority.pattern_counts`, how many of verl's own draws
  return each position (its vote over the very draws verl makes, ties to the answer drawn
  first), so that its numbers stay those of verl.

The two answer different questions (an expectation against verl's 1000 particular draws), so
they share the counter, not the arithmetic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

from rlmetrics.validation.exact.inputs import Predictions, local_codes, unique_rows

__all__ = [
    "Signatures",
    "VotePatterns",
    "Votes",
    "answer_means",
    "first_positions",
    "maj_stats",
    "pattern_weights",
    "signatures",
    "vote_means",
    "win_weights",
]

# Count vectors enumerated at most by win_weights before switching to Monte Carlo.
_MAJ_ENUM_LIMIT = 200_000
#: Votes drawn by the Monte Carlo fallback of :func:`win_weights`.
MC_DRAWS = 20_000
# Largest k accepted (int64 counts of the draws).
_MAX_COUNT = np.iinfo(np.int64).max

_T = TypeVar("_T")


class VotePatterns(NamedTuple):
    """The prompts with complete predictions and ``n`` samples, as vote patterns."""

    #: (Q,) the prompts, ascending
    prompts: np.ndarray
    #: (Q, n) int64 local codes of each prompt (a prediction named by its first position)
    local: np.ndarray
    #: (U, n) int64 the distinct rows of ``local``
    patterns: np.ndarray
    #: (Q,) int64 prompt -> pattern, ``local == patterns[inverse]``
    inverse: np.ndarray


class Votes:
    """The prompts' predictions as vote patterns, per number of samples, computed on first use.

    Parameters
    ----------
    pred : Predictions or None
        The prediction codes (:func:`~rlmetrics.validation.exact.inputs.predictions`); None when
        there are none (no prompt votes).
    sizes : (P,) int
        Samples per prompt; prompts past those of ``pred`` (verl's prompts only listed in
        ``expected_acc_counts``) have no predictions.

    Examples
    --------
    >>> from rlmetrics.validation.exact.inputs import group_prompts, predictions
    >>> p = group_prompts(["s"] * 6, ["a", "a", "a", "b", "b", "b"])
    >>> votes = Votes(predictions(["7", "3", "7", "x", "x", "y"], p, "pred"), p.sizes)
    >>> t = votes.patterns(3)
    >>> t.local.tolist(), t.patterns.tolist(), t.inverse.tolist()
    ([[0, 1, 0], [0, 0, 2]], [[0, 1, 0], [0, 0, 2]], [0, 1])
    """

    def __init__(self, pred: Predictions | None, sizes: np.ndarray) -> None:
        #: (P,) whether each prompt's predictions are all present
        self.complete = np.zeros(sizes.shape[0], dtype=bool)
        if pred is not None:
            self.complete[: pred.complete.shape[0]] = pred.complete
        self._pred = pred
        self._sizes = sizes
        self._starts = np.concatenate([[0], np.cumsum(sizes)])
        self._patterns: dict[int, VotePatterns] = {}
        self._memo: dict[Hashable, object] = {}

    def patterns(self, n: int) -> VotePatterns:
        """The :class:`VotePatterns` of every prompt with complete predictions and ``n`` samples."""
        if n not in self._patterns:
            prompts = np.flatnonzero(self.complete & (self._sizes == n))
            if self._pred is None or prompts.size == 0:
                empty = np.zeros((0, n), dtype=np.int64)
                self._patterns[n] = VotePatterns(prompts, empty, empty, np.zeros(0, dtype=np.int64))
            else:
                codes = self._pred.codes[self._starts[prompts][:, None] + np.arange(n)[None, :]]
                local = local_codes(codes)
                self._patterns[n] = VotePatterns(prompts, local, *unique_rows(local))
        return self._patterns[n]

    def memo(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()`` once per ``key``: the callers' tables per ``k`` (the exact win chances,
        verl's counts), shared by every variable."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]  # type: ignore[return-value]

    def rows(self, prompts: np.ndarray, n: int) -> np.ndarray:
        """Where ``prompts`` (ascending, complete, ``n`` samples each) are in :meth:`patterns`."""
        every = self.patterns(n).prompts
        if np.array_equal(every, prompts):
            return np.arange(prompts.shape[0])
        return np.searchsorted(every, prompts)


def first_positions(codes: np.ndarray) -> np.ndarray:
    """Local codes of one prompt's prediction codes in O(n log n) (:func:`local_codes` of one
    row compares every pair, O(n**2)).

    Examples
    --------
    >>> first_positions(np.array([5, 2, 5, 9])).tolist()
    [0, 1, 0, 3]
    """
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)].astype(np.int64)


def _answer_sizes(local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, n) samples of each answer at its first position (0 elsewhere), and ``row * n + local``."""
    r, n = local.shape
    lin = (np.repeat(np.arange(r), n) * n + local.ravel()).astype(np.int64)
    return np.bincount(lin, minlength=r * n).reshape(r, n).astype(np.float64), lin


class Signatures(NamedTuple):
    """Vote patterns grouped by their answers' sizes (a vote's odds depend on nothing else)."""

    #: (U, n) each pattern's positions by answer size, largest first (stable)
    order: np.ndarray
    #: each signature's answer sizes, largest first
    sizes: list[tuple[int, ...]]
    #: (U,) pattern -> signature
    inverse: np.ndarray


def signatures(patterns: np.ndarray) -> Signatures:
    """The :class:`Signatures` of vote patterns (U, n), shared by every ``k``."""
    u = patterns.shape[0]
    sizes, _ = _answer_sizes(patterns)
    order = np.argsort(-sizes, axis=1, kind="stable")
    sig = np.take_along_axis(sizes, order, axis=1).astype(np.int64)
    if u == 1:  # one prompt (maj_at_k): nothing to share, and no row sort of a long row
        distinct, inverse = sig, np.zeros(1, dtype=np.int64)
    else:
        distinct, inverse = np.unique(sig, axis=0, return_inverse=True)
    return Signatures(order, [tuple(row[row > 0].tolist()) for row in distinct], inverse.reshape(-1))


def pattern_weights(
    patterns: np.ndarray, k: int, replace: bool, seed: int, *, sig: Signatures | None = None
) -> tuple[np.ndarray, bool]:
    """(U, n) chance that each pattern's answer (at its first position) wins a vote of ``k`` draws.

    Patterns with the same answer sizes (``sig``, their :func:`signatures`, computed when not
    given) share one :func:`win_weights` call. Returns the weights and whether all of them are
    exact (not Monte Carlo).
    """
    u, n = patterns.shape
    sig = signatures(patterns) if sig is None else sig
    per_sig = np.zeros((len(sig.sizes), n))
    exact = True
    for s, sizes in enumerate(sig.sizes):
        w, ok = win_weights(sizes, k, replace, seed)
        per_sig[s, : len(w)] = w
        exact = exact and ok
    weights = np.zeros((u, n))
    np.put_along_axis(weights, sig.order, per_sig[sig.inverse], axis=1)
    return weights, exact


def answer_means(local: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """(R, n) mean value of each row's answer at its first position (0 elsewhere).

    ``local`` (R, n) holds the rows' local codes, ``vals`` (R, n) their samples' values.
    """
    sizes, lin = _answer_sizes(local)
    sums = np.bincount(lin, weights=vals.ravel(), minlength=sizes.size).reshape(sizes.shape)
    return np.divide(sums, sizes, out=np.zeros_like(sums), where=sizes > 0)


def vote_means(weights: np.ndarray, means: np.ndarray) -> np.ndarray:
    """(R,) maj@k of each row: its answers' :func:`answer_means` weighted by their chance to win.

    Given the vote's counts, the winner's drawn samples are a uniform subset of its samples, so
    one of them (verl takes the first) has the answer's mean value in expectation.
    """
    return np.einsum("pn,pn->p", weights, means)


def maj_stats(local: np.ndarray, vals: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over the votes of the majority-vote value of each row.

    Parameters
    ----------
    local : (R, n) int
        Local codes of each row.
    vals : (R, n) float
        Each sample's value.
    weights : (R, n)
        :func:`pattern_weights` of each row's pattern.

    Returns
    -------
    mean, std : (R,) float64

    Examples
    --------
    >>> local = np.array([[0, 1]])
    >>> mean, std = maj_stats(local, np.array([[1.0, 0.0]]), pattern_weights(local, 2, False, 0)[0])
    >>> mean.tolist(), std.tolist()
    ([0.5], [0.5])
    """
    mean = vote_means(weights, answer_means(local, vals))
    dev = vals - mean[:, None]
    var = vote_means(weights, answer_means(local, dev * dev))
    return mean, np.sqrt(np.maximum(var, 0.0))


# ----------------------------------------------------------------------------- who wins a vote
def _log_fact(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _n_count_vectors_above(m: int, k: int, limit: int) -> bool:
    """Whether the vote vectors of ``k`` draws with replacement over ``m`` answers,
    ``C(k + m - 1, m - 1)`` of them, are more than ``limit`` (stops as soon as they are)."""
    count = 1
    for i in range(1, m):
        count = count * (k + i) // i
        if count > limit:
            return True
    return False


def _count_vectors(sizes: Sequence[int], k: int, replace: bool, limit: int) -> np.ndarray | None:
    """All (x_1..x_m) with sum k (0 <= x_a <= sizes[a] without replacement); None if over ``limit``."""
    m = len(sizes)
    if replace and _n_count_vectors_above(m, k, limit):
        return None  # before building ``k + 1`` candidates per answer
    rows = np.zeros((1, 0), dtype=np.int64)
    totals = np.zeros(1, dtype=np.int64)
    for a in range(m - 1):
        cap = k if replace else min(k, sizes[a])
        xs = np.arange(cap + 1, dtype=np.int64)
        new_tot = totals[:, None] + xs[None, :]
        keep = new_tot <= k
        r_idx, x_idx = np.nonzero(keep)
        if r_idx.size > limit:
            return None
        rows = np.concatenate([rows[r_idx], xs[x_idx][:, None]], axis=1)
        totals = new_tot[keep]
    last = k - totals
    ok = last >= 0 if replace else (last >= 0) & (last <= sizes[m - 1])
    return np.concatenate([rows[ok], last[ok][:, None]], axis=1)


def _enumerated_weights(sizes: tuple[int, ...], k: int, replace: bool, vectors: np.ndarray) -> np.ndarray:
    """Exact win chances from every vote vector: multinomial (hypergeometric) probabilities."""
    n = sum(sizes)
    # k <= n without replacement; with it, k + 1 <= the vectors enumerated (<= the limit)
    lf = _log_fact(max(n, k))
    sz = np.asarray(sizes, dtype=np.int64)
    if replace:
        logp = lf[k] - lf[vectors].sum(axis=1) + (vectors * np.log(sz / n)[None, :]).sum(axis=1)
    else:
        logp = (lf[sz][None, :] - lf[vectors] - lf[sz[None, :] - vectors]).sum(axis=1) - (
            lf[n] - lf[k] - lf[n - k]
        )
    prob = np.exp(logp)
    tied = vectors == vectors.max(axis=1, keepdims=True)
    weights = prob @ (tied / tied.sum(axis=1, keepdims=True))
    return weights / weights.sum()


def _sampled_weights(sizes: tuple[int, ...], k: int, replace: bool, seed: int) -> np.ndarray:
    """Win chances from :data:`MC_DRAWS` votes, whose counts are drawn directly (multinomial with
    replacement, multivariate hypergeometric without): the cost grows with the answers, not k."""
    rng = np.random.default_rng(seed)
    sz = np.asarray(sizes, dtype=np.int64)
    m, n = len(sizes), int(sz.sum())
    wins = np.zeros(m)
    per_chunk = max(1, (1 << 20) // m)
    done = 0
    while done < MC_DRAWS:
        b = min(per_chunk, MC_DRAWS - done)
        if replace:
            votes = rng.multinomial(k, sz / n, size=b)
        else:
            votes = rng.multivariate_hypergeometric(sz, k, size=b, method="marginals")
        tied = votes == votes.max(axis=1, keepdims=True)
        # uniform tie-break among the most voted
        wins += np.bincount(np.where(tied, rng.random((b, m)), -1.0).argmax(axis=1), minlength=m)
        done += b
    # Answers of equal size are exchangeable: average their estimates.
    weights = wins / wins.sum()
    for size in np.unique(sz).tolist():
        same = sz == size
        weights[same] = weights[same].mean()
    return weights


@functools.lru_cache(maxsize=4096)
def win_weights(sizes: tuple[int, ...], k: int, replace: bool, seed: int) -> tuple[np.ndarray, bool]:
    """P(answer a wins the k-draw vote), ties split evenly; exact when enumerable, else Monte Carlo.

    Parameters
    ----------
    sizes : tuple of int
        The answers' sample counts.
    k : int
        Draws per vote.
    replace : bool
        With replacement (verl's bootstrap) or without (distinct samples).
    seed : int
        Seed of the Monte Carlo fallback (beyond about 200,000 vote vectors).

    Returns
    -------
    weights : (m,) float64
    exact : bool

    Raises
    ------
    ValueError
        ``k`` of 2**63 or more with several answers (beyond the int64 counts of the draws).

    Examples
    --------
    >>> w, exact = win_weights((2, 1), 2, False, 0)
    >>> w.round(4).tolist(), exact
    ([0.6667, 0.3333], True)
    """
    if len(sizes) == 1:  # one answer wins every vote
        return np.ones(1), True
    if k > _MAX_COUNT:
        raise ValueError(f"k must be below 2**63 for maj@k; got {k}")
    vectors = _count_vectors(sizes, k, replace, _MAJ_ENUM_LIMIT)
    if vectors is not None:
        return _enumerated_weights(sizes, k, replace, vectors), True
    return _sampled_weights(sizes, k, replace, seed), False
