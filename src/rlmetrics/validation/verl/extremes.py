"""verl's bootstrap best@k and worst@k from rank counts, over all prompts at once.

The bootstrap max (min) of a prompt's values is the value of the highest (lowest) rank drawn, so
only the *counts* of each rank being the max matter. With ``2**n`` small they come from the
subset-sum table of the drawn position sets (:func:`~rlmetrics.validation.verl.draws.subset_table`,
``Z[A]`` = draws inside ``A``) looked up at each prompt's sorted prefixes: the draws whose max
rank is below ``r`` are ``Z[positions of the r smallest]``. Otherwise they come from the drawn
ranks, one row gather per draw slot over all prompts. Each statistic is then the weighted mean
and std of the sorted values under these integer counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from rlmetrics.validation.verl import draws

__all__ = ["BestWorst", "best_worst_stats", "rank_counts", "weighted_mean_std", "weighted_mean_std_blocks"]

# Largest number of samples per prompt for which the subset-sum table (2**n entries) is used.
_ZETA_MAX_N = 20
# Elements per block of the rank gathers (bounds temporary memory to tens of MB).
_BLOCK = 1 << 22
# Elements per block of the table lookups and weighted sums (temporaries stay in cache).
_CACHE_BLOCK = 1 << 15


class BestWorst(NamedTuple):
    """verl's bootstrap best@k and worst@k of each row: means and (population) stds, (Q,) each."""

    best_mean: np.ndarray
    best_std: np.ndarray
    worst_mean: np.ndarray
    worst_std: np.ndarray


class _Ranked(NamedTuple):
    """Rows sorted ascending and the bit sets of their sorted prefixes."""

    #: (Q, n) sorted values
    sorted: np.ndarray
    #: (Q, n + 1) int64, bit set of the positions of the r smallest values, r = 0..n
    prefix: np.ndarray
    #: (Q, n + 1) int64, its complement: positions of the n - r largest
    complement: np.ndarray


def _ranked(values: np.ndarray, order: np.ndarray) -> _Ranked:
    q, n = values.shape
    bits = np.left_shift(np.int64(1), order.astype(np.int64))
    prefix = np.zeros((q, n + 1), dtype=np.int64)
    np.cumsum(bits, axis=1, out=prefix[:, 1:])
    return _Ranked(np.take_along_axis(values, order, axis=1), prefix, ((1 << n) - 1) ^ prefix)


def _use_zeta(n: int, subset_size: int, n_bootstrap: int, q: int) -> bool:
    """Whether the counts come from the subset-sum table (else from the drawn ranks)."""
    zeta_cost = n * (1 << n) if n <= _ZETA_MAX_N else math.inf
    return zeta_cost <= 8 * n_bootstrap * subset_size * q  # table adds are ~8x cheaper than gathers


def weighted_mean_std(
    sorted_vals: np.ndarray, counts: np.ndarray, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std of each row's multiset: ``counts[q, r]`` copies of ``sorted_vals[q, r]``.

    Parameters
    ----------
    sorted_vals : (Q, n) float
    counts : (Q, n) int, each row summing to ``total``
    total : int

    Returns
    -------
    mean, std : (Q,) float64

    Examples
    --------
    >>> mean, std = weighted_mean_std(np.array([[0.0, 1.0]]), np.array([[1, 3]]), 4)
    >>> mean.tolist(), std.round(4).tolist()
    ([0.75], [0.433])
    """
    weights = counts.astype(np.float64)
    mean = np.einsum("qr,qr->q", weights, sorted_vals) / total
    dev = sorted_vals - mean[:, None]
    np.multiply(dev, dev, out=dev)
    var = np.einsum("qr,qr->q", weights, dev) / total
    return mean, np.sqrt(var)


def weighted_mean_std_blocks(
    vals: np.ndarray, counts: np.ndarray, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`weighted_mean_std` over blocks of rows (the same numbers; temporaries stay in cache)."""
    q, n = vals.shape
    mean, std = np.empty(q), np.empty(q)
    step = max(1, _CACHE_BLOCK // max(n, 1))
    for lo in range(0, q, step):
        mean[lo : lo + step], std[lo : lo + step] = weighted_mean_std(
            vals[lo : lo + step], counts[lo : lo + step], total
        )
    return mean, std


def rank_counts(
    values: np.ndarray, subset_size: int, n_bootstrap: int, seed: int, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted values and, per row, how many bootstrap draws have each rank as max and as min.

    Parameters
    ----------
    values : (Q, n) float64
        One row per prompt, all with ``n`` samples.
    subset_size, n_bootstrap, seed : int
        verl's bootstrap.
    order : (Q, n) int, optional
        ``np.argsort(values, axis=1, kind="stable")`` if already known.

    Returns
    -------
    sorted_vals : (Q, n) float64, ascending
    best_counts, worst_counts : (Q, n) int, each row summing to ``n_bootstrap``
    """
    q, n = values.shape
    if order is None:
        order = np.argsort(values, axis=1, kind="stable")
    if _use_zeta(n, subset_size, n_bootstrap, q):
        ranked = _ranked(values, order)
        table = draws.subset_table(n, subset_size, n_bootstrap, seed)
        best = np.diff(table[ranked.prefix], axis=1)  # draws whose max rank is r
        worst = -np.diff(table[ranked.complement], axis=1)  # draws whose min rank is r
        return ranked.sorted, best, worst
    best, worst = _gathered_counts(order, subset_size, n_bootstrap, seed)
    return np.take_along_axis(values, order, axis=1), best, worst


def _gathered_counts(
    order: np.ndarray, subset_size: int, n_bootstrap: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rank counts from the drawn ranks: max and min over the slots of each draw, counted."""
    q, n = order.shape
    idx = draws.indices(n, subset_size, n_bootstrap, seed)
    rank_dtype = np.uint8 if n <= 256 else np.int32
    ranks = np.empty((q, n), dtype=rank_dtype)
    np.put_along_axis(ranks, order, np.arange(n, dtype=rank_dtype)[None, :], axis=1)
    ranks_t = np.ascontiguousarray(ranks.T)  # (n, Q): a draw gathers whole rows
    best = np.zeros((q, n), dtype=np.int64)
    worst = np.zeros((q, n), dtype=np.int64)
    step = max(1, _BLOCK // max(q, 1))
    offsets = (np.arange(q, dtype=np.int64) * n)[None, :]
    for start in range(0, n_bootstrap, step):
        rows = idx[start : start + step]
        hi = ranks_t[rows[:, 0]].copy()
        lo = hi.copy()
        for slot in range(1, subset_size):
            g = ranks_t[rows[:, slot]]
            np.maximum(hi, g, out=hi)
            np.minimum(lo, g, out=lo)
        best += np.bincount((offsets + hi).ravel(), minlength=q * n).reshape(q, n)
        worst += np.bincount((offsets + lo).ravel(), minlength=q * n).reshape(q, n)
    return best, worst


def best_worst_stats(
    values: np.ndarray, ks: Sequence[int], n_bootstrap: int, seed: int
) -> dict[int, BestWorst]:
    """verl's bootstrap best@k and worst@k of every row of ``values``, for each ``k``.

    The numbers of :func:`rank_counts` then :func:`weighted_mean_std`; on the subset-sum path
    over blocks of rows small enough for every temporary to stay in cache, all ``k`` per block.

    Parameters
    ----------
    values : (Q, n) float64
        One row per prompt, in sample order.
    ks : sequence of int
    n_bootstrap, seed : int

    Returns
    -------
    dict of k to :class:`BestWorst`
    """
    q, n = values.shape
    draws.prefetch(n, list(ks), n_bootstrap, seed)  # every k's draws are a prefix of the largest's
    order = np.argsort(values, axis=1, kind="stable")
    out: dict[int, BestWorst] = {}
    zeta_ks = [k for k in ks if _use_zeta(n, k, n_bootstrap, q)]
    for k in ks:
        if k not in zeta_ks:
            sorted_vals, best, worst = rank_counts(values, k, n_bootstrap, seed, order=order)
            out[k] = BestWorst(
                *weighted_mean_std(sorted_vals, best, n_bootstrap),
                *weighted_mean_std(sorted_vals, worst, n_bootstrap),
            )
    if not zeta_ks:
        return out
    ranked = _ranked(values, order)
    tables = [draws.subset_table(n, k, n_bootstrap, seed) for k in zeta_ks]
    stats = {k: np.empty((4, q)) for k in zeta_ks}
    step = max(1, _CACHE_BLOCK // (n + 1))
    for lo in range(0, q, step):
        block = slice(lo, min(q, lo + step))
        sv, pre, com = ranked.sorted[block], ranked.prefix[block], ranked.complement[block]
        for k, table in zip(zeta_ks, tables):
            st = stats[k]
            best = np.diff(table[pre], axis=1)  # draws whose max rank is r
            worst = -np.diff(table[com], axis=1)  # draws whose min rank is r
            st[0, block], st[1, block] = weighted_mean_std(sv, best, n_bootstrap)
            st[2, block], st[3, block] = weighted_mean_std(sv, worst, n_bootstrap)
    for k in zeta_ks:
        out[k] = BestWorst(*stats[k])
    return out
