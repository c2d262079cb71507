"""verl's validation statistics (``process_validation_metrics``), same draws, vectorised.

verl 0.9.1 estimates best@k, worst@k and maj@k of every prompt with a 1000-draw bootstrap run
as a Python loop per prompt, variable and k, reseeding numpy's *global* RNG with ``seed`` before
every call. Because of that reseeding the bootstrap index matrix depends only on
``(n_samples, k, n_bootstrap, seed)``; here it is drawn once from a *local* legacy generator
reseeded with ``seed`` (the ``RandomState`` behind ``np.random.choice``, so the indices are the
same) and shared by every prompt with the same number of samples. ``choice`` takes the indices
one after another from the generator's stream, so the matrices of every ``k`` are prefixes of
one stream, drawn once at the largest ``k``.

* best@k / worst@k: the bootstrap max (min) of a prompt is the value of the highest (lowest)
  rank drawn. For each prompt only the *counts* of each rank being the max matter; with
  ``2**n`` small they come from a subset-sum (zeta) transform of the histogram of drawn
  position sets, ``Z[A] = #{draws inside A}``, looked up at each prompt's sorted prefixes;
  otherwise from the drawn ranks (one row gather per draw slot, over all prompts at once).
  With numba, one compiled pass per prompt ranks its values and reads the table for every k.
* maj@k: verl returns the value of the first occurrence, in the bootstrap sample, of the most
  voted prediction, ties going to the prediction that appears first in the sample. With the
  predictions of a prompt named by their first position, each (draw, prediction) gets the score
  ``count * 2**k + sum of 2**(k - 1 - first_slot)`` over its drawn samples, from one small matrix
  product over all prompts; the largest score is verl's winner and its highest bit the slot, hence
  the position, of the value verl returns (one or two draws: always the first slot; ``k > 47``: a
  per-position score instead). The counts of each position winning are shared by all variables.
  With numba installed the same scores are summed per prompt over all draws by a compiled
  kernel (:mod:`rlmetrics.validation.kernels`); it yields the same integer counts as the numpy
  path (``RLMETRICS_NO_NUMBA=1`` forces the latter). In :func:`process_validation_metrics` one
  kernel call computes every ``k`` on a background thread while the value columns are converted
  and best@k/worst@k computed; the prompt patterns and the data-independent draw tables are
  prepared (and cached per n, k, seed) before it starts, so that thread needs the GIL only to
  launch it. The prompts are split in chunks that the kernel claims one by one: once the
  calling thread is done with its own work it takes chunks from the other end, and the counts
  are complete when the two meet.
* A variable whose kept values equal an earlier one's (verl's ``reward`` next to ``score`` or
  ``acc``) reuses its metrics.

Only the means and standard deviations over the draws are needed, so each prompt's statistic is
the weighted mean/std of its sorted values under these integer counts (float64; the results
agree with verl's to about 1e-15).
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import operator
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from rlmetrics.validation import kernels as _kernels

__all__ = [
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "flatten_validation_metrics",
    "process_validation_metrics",
]

_N_BOOTSTRAP = 1000
# Elements per block in the vectorised kernels (bounds temporary memory to tens of MB).
_BLOCK = 1 << 22
# Largest number of samples per prompt for which the subset-sum table (2**n entries) is used.
_ZETA_MAX_N = 20
# Scores per block in the majority kernel (small enough to stay in cache).
_MAJ_BLOCK = 1 << 18
# Elements per block in the best/worst statistics (temporaries stay in cache).
_CACHE_BLOCK = 1 << 15


# ----------------------------------------------------------------------------- bootstrap draws
# One legacy generator, reseeded for every draw as verl reseeds the global one (``seed()`` costs
# ~1 us, a new ``RandomState`` ~100 us); the lock keeps reseeding and drawing together.
_RNG = np.random.RandomState(0)
_RNG_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):  # a child forked while another thread held the lock gets a free one

    def _new_rng_lock() -> None:
        global _RNG_LOCK
        _RNG_LOCK = threading.Lock()

    os.register_at_fork(after_in_child=_new_rng_lock)
# (n_data, seed) -> the longest stream of indices drawn so far (a few, most recent last)
_STREAMS: collections.OrderedDict[tuple[int, int], np.ndarray] = collections.OrderedDict()
_MAX_STREAMS = 16


def _index_stream(n_data: int, length: int, seed: int) -> np.ndarray:
    """The first ``length`` indices drawn after ``seed(seed)``, as ``choice(n_data, ...)`` draws them.

    ``choice(n_data, size=(b, k), replace=True)`` takes its ``b * k`` indices one after another from
    the generator's stream (``randint`` with one rejection-sampled 32-bit draw per index), so every
    ``k`` is a prefix of one stream: it is drawn once, at the longest length asked for.
    """
    key = (n_data, seed)
    with _RNG_LOCK:
        stream = _STREAMS.get(key)
        if stream is None or stream.shape[0] < length:
            _RNG.seed(seed)
            stream = _RNG.choice(n_data, size=length, replace=True)
            stream.setflags(write=False)
            _STREAMS[key] = stream
        _STREAMS.move_to_end(key)
        while len(_STREAMS) > _MAX_STREAMS:
            _STREAMS.popitem(last=False)
    return stream[:length]


def _prefetch_indices(n_data: int, ks: Sequence[int], n_bootstrap: int, seed: int) -> None:
    """Draw the stream once for the largest of ``ks`` (the others are prefixes of it)."""
    _index_stream(n_data, n_bootstrap * max(ks, default=0), seed)


@functools.lru_cache(maxsize=256)
def _indices_cached(n_data: int, subset_size: int, n_bootstrap: int, seed: int) -> np.ndarray:
    idx = _index_stream(n_data, n_bootstrap * subset_size, seed).reshape(n_bootstrap, subset_size)
    idx.setflags(write=False)
    return idx


def bootstrap_indices(
    n_data: int, subset_size: int, *, n_bootstrap: int = _N_BOOTSTRAP, seed: int = 42
) -> np.ndarray:
    """The bootstrap index matrix verl draws, without touching numpy's global RNG.

    verl calls ``np.random.seed(seed)`` then ``np.random.choice(n_data, size=(n_bootstrap,
    subset_size), replace=True)``; a local ``RandomState(seed)`` gives the same indices.

    Parameters
    ----------
    n_data : int
        Number of data points (> 0).
    subset_size : int
        Draws per bootstrap sample (>= 0).
    n_bootstrap : int, keyword-only
        Number of bootstrap samples.
    seed : int, keyword-only
        The seed verl passes to ``np.random.seed``.

    Returns
    -------
    numpy.ndarray of shape ``(n_bootstrap, subset_size)``, int
        Read-only (cached) index matrix.

    Examples
    --------
    >>> import numpy as np
    >>> idx = bootstrap_indices(5, 3, n_bootstrap=4, seed=42)
    >>> verl = np.random.RandomState(42)  # the generator np.random.seed(42) seeds, kept local here
    >>> bool((idx == verl.choice(5, size=(4, 3), replace=True)).all())
    True
    """
    for name, value, low in (
        ("n_data", n_data, 1),
        ("subset_size", subset_size, 0),
        ("n_bootstrap", n_bootstrap, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an integer; got {type(seed).__name__} {seed!r}")
    return _indices_cached(int(n_data), int(subset_size), int(n_bootstrap), int(seed))


@functools.lru_cache(maxsize=256)
def _subset_table(n_data: int, subset_size: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """``Z[A]`` = number of bootstrap rows whose drawn positions all lie in bit set ``A``."""
    idx = _indices_cached(n_data, subset_size, n_bootstrap, seed)
    masks = np.bitwise_or.reduce(np.left_shift(np.int64(1), idx.astype(np.int64)), axis=1)
    # int32 counts (at most n_bootstrap): half the cache footprint of the lookups
    table = np.bincount(masks, minlength=1 << n_data).astype(np.int32 if n_bootstrap < 2**31 else np.int64)
    kernel = _kernels.subset_sums_kernel()
    if kernel is not None:
        kernel(table, n_data)
        table.setflags(write=False)
        return table
    for bit in range(n_data):
        view = table.reshape(-1, 2, 1 << bit)
        view[:, 1, :] += view[:, 0, :]
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=32)
def _stacked_subset_tables(n: int, ks: tuple[int, ...], n_bootstrap: int, seed: int) -> np.ndarray:
    """:func:`_subset_table` of each ``k``, stacked (K, 2**n) for the best/worst kernel.

    With numba, built in one compiled pass (int16 counts when they fit: half the cache footprint
    of the kernel's lookups).
    """
    kernel = _kernels.draw_set_tables_kernel()
    if kernel is None:
        stacked = np.stack([_subset_table(n, k, n_bootstrap, seed) for k in ks])
    else:
        _prefetch_indices(n, ks, n_bootstrap, seed)
        idx = [_indices_cached(n, k, n_bootstrap, seed) for k in ks]
        starts = np.cumsum([0] + [a.size for a in idx[:-1]]).astype(np.int64)
        flat = np.concatenate([a.ravel() for a in idx]).astype(np.int64)
        count_t = (
            np.int16
            if n_bootstrap <= np.iinfo(np.int16).max
            else np.int32
            if n_bootstrap < 2**31
            else np.int64
        )
        stacked = np.zeros((len(ks), 1 << n), dtype=count_t)
        kernel(flat, np.asarray(ks, dtype=np.int64), starts, n_bootstrap, n, stacked)
    stacked.setflags(write=False)
    return stacked


def _use_zeta(n: int, subset_size: int, n_bootstrap: int, q: int) -> bool:
    """Whether best/worst counts come from the subset-sum table (else from the drawn ranks)."""
    zeta_cost = n * (1 << n) if n <= _ZETA_MAX_N else math.inf
    return zeta_cost <= 8 * n_bootstrap * subset_size * q  # table adds are ~8x cheaper than gathers


def _zeta_prep(order: np.ndarray, prep: dict[str, np.ndarray]) -> None:
    """Bit sets of each row's sorted prefixes (``prep['prefix']``) and their complements."""
    if "prefix" not in prep:
        q, n = order.shape
        bits = np.left_shift(np.int64(1), order.astype(np.int64))
        prefix = np.zeros((q, n + 1), dtype=np.int64)
        np.cumsum(bits, axis=1, out=prefix[:, 1:])
        prep["prefix"] = prefix
        prep["complement"] = ((1 << n) - 1) ^ prefix


def _rank_counts(
    values: np.ndarray,
    subset_size: int,
    n_bootstrap: int,
    seed: int,
    order: np.ndarray | None = None,
    prep: dict[str, np.ndarray] | None = None,
) -> tuple[Any, ...]:
    """Sorted values and, per row, how many bootstrap draws have each rank as max / as min.

    Parameters
    ----------
    values : (Q, n) float64
        One row per (prompt, variable), all with ``n`` samples.
    order : (Q, n) int, optional
        ``np.argsort(values, axis=1, kind="stable")`` if already known.
    prep : dict, optional
        Scratch space reused across calls on the same ``values`` (sorted values, prefix sets).

    Returns
    -------
    sorted_vals : (Q, n) float64, ascending
    best_counts, worst_counts : (Q, n) int, each row summing to ``n_bootstrap``
    """
    q, n = values.shape
    prep = {} if prep is None else prep
    if order is None:
        order = np.argsort(values, axis=1, kind="stable")
    if "sorted" not in prep:
        prep["sorted"] = np.take_along_axis(values, order, axis=1)
    sorted_vals = prep["sorted"]
    if _use_zeta(n, subset_size, n_bootstrap, q):
        table = _subset_table(n, subset_size, n_bootstrap, seed)
        _zeta_prep(order, prep)
        prefix = prep["prefix"]
        inside = table[prefix]  # rows whose max rank is < r, for r = 0..n
        best = np.diff(inside, axis=1)
        suffix = table[prep["complement"]]  # rows whose min rank is >= r
        worst = -np.diff(suffix, axis=1)
        return sorted_vals, best, worst
    # General case: ranks of each position, max/min over the drawn slots, then counted.
    idx = _indices_cached(n, subset_size, n_bootstrap, seed)
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
    return sorted_vals, best, worst


def _weighted_mean_std(
    sorted_vals: np.ndarray, counts: np.ndarray, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) std of the multiset with ``counts[q, r]`` copies of ``sorted_vals[q, r]``."""
    weights = counts.astype(np.float64)
    mean = np.einsum("qr,qr->q", weights, sorted_vals) / total
    dev = sorted_vals - mean[:, None]
    np.multiply(dev, dev, out=dev)
    var = np.einsum("qr,qr->q", weights, dev) / total
    return mean, np.sqrt(var)


def _best_worst_stats(
    values: np.ndarray, ks: Sequence[int], n_bootstrap: int, seed: int, order: np.ndarray | None = None
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per ``k``: bootstrap best@k mean/std and worst@k mean/std of every row of ``values``.

    The same numbers as :func:`_rank_counts` then :func:`_weighted_mean_std` (row by row). On the
    subset-sum path the numba kernel ranks each row and reads every ``k``'s table in one pass
    (``order`` is then not needed); without numba it runs over blocks of rows small enough for
    every temporary to stay in cache, all ``k`` per block.
    """
    q, n = values.shape
    prep: dict[str, np.ndarray] = {}
    out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    zeta_ks = []
    kernel = _kernels.best_worst_kernel()
    if order is None and (kernel is None or not all(_use_zeta(n, k, n_bootstrap, q) for k in ks)):
        order = np.argsort(values, axis=1, kind="stable")
    for k in ks:
        if _use_zeta(n, k, n_bootstrap, q):
            zeta_ks.append(k)
            continue
        sorted_vals, best, worst = _rank_counts(values, k, n_bootstrap, seed, order=order, prep=prep)
        out[k] = _weighted_mean_std(sorted_vals, best, n_bootstrap) + _weighted_mean_std(
            sorted_vals, worst, n_bootstrap
        )
    if not zeta_ks:
        return out
    if kernel is not None:
        stacked = _stacked_subset_tables(n, tuple(zeta_ks), n_bootstrap, seed)
        got = _kernels.best_worst_tables(kernel, values, stacked, n_bootstrap)
        for t, k in enumerate(zeta_ks):
            out[k] = (got[t, 0], got[t, 1], got[t, 2], got[t, 3])
        return out
    assert order is not None  # computed above whenever the kernel is absent
    if "sorted" not in prep:
        prep["sorted"] = np.take_along_axis(values, order, axis=1)
    _zeta_prep(order, prep)
    sorted_all, prefix, complement = prep["sorted"], prep["prefix"], prep["complement"]
    tables = [_subset_table(n, k, n_bootstrap, seed) for k in zeta_ks]
    stats = {k: np.empty((4, q)) for k in zeta_ks}
    step = max(1, _CACHE_BLOCK // (n + 1))
    for lo in range(0, q, step):
        hi = min(q, lo + step)
        sv, pre, com = sorted_all[lo:hi], prefix[lo:hi], complement[lo:hi]
        for k, table in zip(zeta_ks, tables):
            st = stats[k]
            best = np.diff(table[pre], axis=1)  # draws whose max rank is r
            worst = -np.diff(table[com], axis=1)  # draws whose min rank is r
            st[0, lo:hi], st[1, lo:hi] = _weighted_mean_std(sv, best, n_bootstrap)
            st[2, lo:hi], st[3, lo:hi] = _weighted_mean_std(sv, worst, n_bootstrap)
    for k in zeta_ks:
        st = stats[k]
        out[k] = (st[0], st[1], st[2], st[3])
    return out


def _weighted_mean_std_blocks(
    vals: np.ndarray, counts: np.ndarray, total: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_weighted_mean_std` over blocks of rows (same numbers; temporaries stay in cache)."""
    q, n = vals.shape
    mean, std = np.empty(q), np.empty(q)
    step = max(1, _CACHE_BLOCK // max(n, 1))
    for lo in range(0, q, step):
        mean[lo : lo + step], std[lo : lo + step] = _weighted_mean_std(
            vals[lo : lo + step], counts[lo : lo + step], total
        )
    return mean, std


def _local_codes(codes: np.ndarray) -> np.ndarray:
    """Per row, replace each code by the position of its first occurrence in the row."""
    q, n = codes.shape
    kernel = _kernels.local_codes_kernel()
    if kernel is not None:
        return kernel(np.ascontiguousarray(codes))  # no (q, n, n) temporary, no GIL held
    out = np.empty((q, n), dtype=np.int64)
    step = max(1, _BLOCK // max(n * n, 1))
    for start in range(0, q, step):
        c = codes[start : start + step]
        out[start : start + step] = np.argmax(c[:, :, None] == c[:, None, :], axis=1)
    return out


def _unique_rows(local: np.ndarray, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a matrix of first-occurrence codes and the row -> distinct-row index.

    Rows of up to 16 codes (each < 16) are packed into one 64-bit key (or ``keys``, packed
    already), longer ones compared as byte strings.
    """
    n = local.shape[1]
    if keys is None and 0 < n <= 16:
        shifts = np.arange(0, 4 * n, 4, dtype=np.uint64)
        keys = np.bitwise_or.reduce(local.astype(np.uint64) << shifts[None, :], axis=1)
    elif keys is None:
        small = np.ascontiguousarray(local.astype(np.uint8 if n <= 256 else np.int32))
        keys = small.view(np.dtype((np.void, small.dtype.itemsize * n))).ravel()
    _, first_idx, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return local[first_idx], inverse.reshape(-1)


def _majority_counts(
    local: np.ndarray,
    subset_size: int,
    n_bootstrap: int,
    seed: int,
    unique: tuple[np.ndarray, np.ndarray] | None = None,
    scratch: dict[str, Any] | None = None,
) -> np.ndarray:
    """How many bootstrap draws give each position as verl's majority-vote pick.

    Parameters
    ----------
    local : (P, n) int
        Per prompt, each position's prediction coded as the position of its first occurrence.
    unique : (patterns, inverse), optional
        ``_unique_rows(local)`` if already known.
    scratch : dict, optional
        Layout of those patterns kept across calls with other ``subset_size`` (numba path).

    Returns
    -------
    (P, n) int64 counts, each row summing to ``n_bootstrap``.
    """
    p_all, n = local.shape
    out = np.zeros((p_all, n), dtype=np.int64)
    if p_all == 0:
        return out
    if subset_size <= 2:
        # One or two draws: the first drawn answer always wins (alone, or first among a 1-1 tie).
        first = _indices_cached(n, subset_size, n_bootstrap, seed)[:, 0]
        out[:] = np.bincount(first, minlength=n)[None, :]
        return out
    counts_pat, inverse = _majority_counts_distinct(local, subset_size, n_bootstrap, seed, unique, scratch)
    return counts_pat[inverse].astype(np.int64)


def _majority_counts_distinct(
    local: np.ndarray,
    subset_size: int,
    n_bootstrap: int,
    seed: int,
    unique: tuple[np.ndarray, np.ndarray] | None = None,
    scratch: dict[str, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_majority_counts` as (counts of each distinct pattern (U, n), row -> pattern (P,))."""
    p_all, n = local.shape
    if p_all == 0:
        return np.zeros((0, n), dtype=np.int64), np.zeros(0, dtype=np.int64)
    if subset_size <= 2:
        # One or two draws: the first drawn answer always wins (alone, or first among a 1-1 tie).
        first = _indices_cached(n, subset_size, n_bootstrap, seed)[:, 0]
        return np.bincount(first, minlength=n)[None, :], np.zeros(p_all, dtype=np.int64)
    patterns, inverse = _unique_rows(local) if unique is None else unique
    if subset_size <= 47:
        counts_pat = _majority_counts_bits(patterns, subset_size, n_bootstrap, seed, scratch)
    else:
        counts_pat = _majority_counts_positions(patterns, subset_size, n_bootstrap, seed)
    # counts are at most n_bootstrap: the narrowest type keeps the (U, n) table in cache
    count_t = np.int16 if n_bootstrap <= np.iinfo(np.int16).max else np.int64
    return counts_pat.astype(count_t), inverse


def _draw_tables(n: int, k: int, n_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index matrix, per-row multiplicity of each position and first slot of each position (k if absent)."""
    idx = _indices_cached(n, k, n_bootstrap, seed)
    b_rows = np.arange(n_bootstrap)
    mult = np.bincount((b_rows[:, None] * n + idx).ravel(), minlength=n_bootstrap * n).reshape(n_bootstrap, n)
    first = np.full((n_bootstrap, n), k, dtype=np.int64)
    first[b_rows[:, None], idx[:, ::-1]] = np.arange(k - 1, -1, -1)[None, :]  # later writes win: first slot
    return idx, mult, first


def _matmul_single_thread(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in row blocks small enough for BLAS to stay on the calling thread.

    OpenBLAS runs products under 2**18 multiply-adds on one thread; larger ones wake its thread
    pool, whose spinning workers cost more than they save on these thin products (several times
    slower on a busy 2-core machine).
    """
    rows, inner = a.shape
    step = max(1, ((1 << 18) - 1) // max(inner * b.shape[1], 1))
    if step >= rows:
        return a @ b
    out = np.empty((rows, b.shape[1]), dtype=np.result_type(a, b))
    for start in range(0, rows, step):
        np.matmul(a[start : start + step], b, out=out[start : start + step])
    return out


@functools.lru_cache(maxsize=8)
def _top_bit_slot(k: int) -> np.ndarray:
    """``table[g]`` = the slot ``k - 1 - floor(log2 g)`` of the highest set bit of ``g`` (``g < 2**k``)."""
    table = np.zeros(1 << k, dtype=np.int8)
    for bit in range(k):
        table[1 << bit : 1 << (bit + 1)] = k - 1 - bit
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=64)
def _fold_draws(n: int, k: int, n_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The bootstrap index rows with identical rows (frequent for small ``n**k``) kept once.

    Returns (idx (R, k), weights (R,) counting the bootstrap draws each row stands for), or
    (all rows, ``None``) when folding would keep most of them.
    """
    idx = _indices_cached(n, k, n_bootstrap, seed)
    # With n**k >= 4 * n_bootstrap possible draws, over 70% of them are distinct in expectation:
    # not worth folding (the counts come out the same either way).
    if n**k < 4 * n_bootstrap:
        keys = idx.astype(np.int64) @ (n ** np.arange(k, dtype=np.int64))  # < 4 * n_bootstrap
        _, first_row, counts = np.unique(keys, return_index=True, return_counts=True)
        if first_row.shape[0] <= 0.7 * n_bootstrap:
            folded = idx[first_row]
            weights = counts.astype(np.int64)
            folded.setflags(write=False)
            weights.setflags(write=False)
            return folded, weights
    return idx, None


@functools.lru_cache(maxsize=64)
def _distinct_draws(
    n: int, k: int, n_bootstrap: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_draw_tables` of the rows of :func:`_fold_draws` (the numpy majority path).

    Returns (idx, mult, first, weights): weights count the bootstrap draws each row stands for.
    """
    idx, weight = _fold_draws(n, k, n_bootstrap, seed)
    b_rows = np.arange(idx.shape[0])
    mult = np.bincount((b_rows[:, None] * n + idx).ravel(), minlength=idx.shape[0] * n).reshape(-1, n)
    first = np.full((idx.shape[0], n), k, dtype=np.int64)
    first[b_rows[:, None], idx[:, ::-1]] = np.arange(k - 1, -1, -1)[None, :]  # later writes win: first slot
    out = (idx, mult, first, np.ones(idx.shape[0], dtype=np.int64) if weight is None else weight)
    for a in out:
        a.setflags(write=False)
    return out


@functools.lru_cache(maxsize=64)
def _majority_draws(n: int, ks: tuple[int, ...], n_bootstrap: int, seed: int) -> _kernels.MajorityDraws:
    """:func:`_validation_kernels.stack_draws` of every ``k`` in ``ks`` (cached: data-independent)."""
    _prefetch_indices(n, ks, n_bootstrap, seed)
    # k <= 2 needs only the first slot of every draw: no folding
    draws = [
        (_indices_cached(n, k, n_bootstrap, seed), None) if k <= 2 else _fold_draws(n, k, n_bootstrap, seed)
        for k in ks
    ]
    return _kernels.stack_draws(n, ks, draws)


def _clear_caches() -> None:
    """Forget every cached draw and table (benchmarks time "cold" calls with this)."""
    with _RNG_LOCK:
        _STREAMS.clear()
    for cached in (
        _indices_cached,
        _subset_table,
        _stacked_subset_tables,
        _fold_draws,
        _distinct_draws,
        _majority_draws,
        _top_bit_slot,
    ):
        cached.cache_clear()


def _majority_kernel() -> Any | None:
    """The numba majority kernel, or ``None`` (numba missing, or ``RLMETRICS_NO_NUMBA`` set)."""
    return _kernels.majority_kernel()


def _majority_counts_bits(
    patterns: np.ndarray, k: int, n_bootstrap: int, seed: int, scratch: dict[str, Any] | None = None
) -> np.ndarray:
    """Majority picks for ``k <= 47``: one product scores every (draw, prediction) exactly.

    ``score = count * 2**k + sum over drawn members of 2**(k - 1 - first_slot)``: the first-slot
    bits of different predictions are disjoint, so among equal counts the larger score is the
    prediction that appears first; its highest bit gives the slot, hence the position, of the pick.
    Identical draws (frequent for small ``k``) are scored once and weighted by their multiplicity.
    """
    n_pat, n = patterns.shape
    kernel = _majority_kernel()
    if kernel is not None:
        draws = _majority_draws(n, (k,), n_bootstrap, seed)
        return _kernels.majority_counts(kernel, patterns, draws, scratch)[0].astype(np.int64)
    idx, mult, first, weight = _distinct_draws(n, k, n_bootstrap, seed)
    weighted = idx.shape[0] < n_bootstrap
    n_rows = idx.shape[0]
    dtype = np.float32 if k <= 19 else np.float64
    int_t = np.int32 if k <= 19 else np.int64
    drawn = first < k
    bits = np.where(drawn, np.ldexp(1.0, np.where(drawn, k - 1 - first, 0)), 0.0)
    x_t = np.ascontiguousarray((mult * float(2**k) + bits).T, dtype=dtype)  # (n, rows)
    # slot_pos[t * rows + b] = position drawn in slot t of draw b
    slot_pos = np.ascontiguousarray(idx.T).astype(np.int32).ravel()
    rows = np.arange(n_rows, dtype=np.int32)[None, :]
    counts = np.zeros((n_pat, n), dtype=np.int64)
    # Per pattern, its predictions named by their first position, padded to the chunk's largest
    # number of predictions (padding rows score 0, below any drawn prediction's 2**k).
    is_code = patterns == np.arange(n)[None, :]
    n_codes = is_code.sum(axis=1)
    by_size = np.argsort(n_codes, kind="stable")
    code_pos = np.where(is_code, np.arange(n)[None, :], n)
    code_pos.sort(axis=1)  # first positions first, then n (padding)
    low_mask = (1 << k) - 1
    # table[g] = n_rows * (slot of the highest bit of g): the winner's first slot, pre-scaled
    table = (_top_bit_slot(k).astype(np.int32) * n_rows) if k <= 20 else None
    start = 0
    while start < n_pat:
        m_max = int(n_codes[by_size[start]])
        size = max(1, _MAJ_BLOCK // max(n_rows * m_max, 1))
        chunk = by_size[start : start + size]
        c = len(chunk)
        m_max = int(n_codes[chunk[-1]])
        onehot = (patterns[chunk][:, None, :] == code_pos[chunk, :m_max][:, :, None]).astype(dtype)
        score = _matmul_single_thread(onehot.reshape(-1, n), x_t).reshape(c, m_max, n_rows)
        top = score[:, 0, :] if m_max == 1 else score.max(axis=1)  # (c, rows)
        low = top.astype(int_t)
        low &= low_mask
        if table is not None:
            lin = table[low]
        else:
            lin = (k - np.frexp(low.astype(np.float64))[1]) * n_rows
        lin += rows
        pos = slot_pos[lin]  # (c, rows) winning positions
        pos += (np.arange(c, dtype=np.int32) * n)[:, None]
        if weighted:
            got = np.bincount(
                pos.ravel(), weights=np.broadcast_to(weight, pos.shape).ravel(), minlength=c * n
            )
        else:
            got = np.bincount(pos.ravel(), minlength=c * n)
        counts[chunk] = got.reshape(c, n).astype(np.int64)
        start += c
    return counts


def _majority_counts_positions(patterns: np.ndarray, k: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """Majority picks for any ``k``: max over positions of ``count(code) * (k + 1) - first_slot``.

    Scores are encoded as ``score * n + position`` so that the max also names the position.
    """
    n_pat, n = patterns.shape
    _, mult, first = _draw_tables(n, k, n_bootstrap, seed)
    exact32 = ((k + 1) * k + k + 1) * n < (1 << 24)
    dtype = np.float32 if exact32 else np.float64
    counts_t = np.ascontiguousarray((mult * float((k + 1) * n)).T, dtype=dtype)  # (n, B)
    # per position: its own index minus n * its first slot (k when not drawn), added after the product
    offset = (np.arange(n)[:, None] - n * first.T).astype(dtype)[:, None, :]  # (n, 1, B)
    step = max(1, _MAJ_BLOCK // max(n_bootstrap * n, 1))
    counts = np.zeros((n_pat, n), dtype=np.int64)
    for start in range(0, n_pat, step):
        pat = patterns[start : start + step]
        m = pat.shape[0]
        eq = (
            (pat[:, None, :] == pat[:, :, None]).transpose(1, 0, 2).reshape(n * m, n).astype(dtype)
        )  # (j, p), j'
        score = _matmul_single_thread(eq, counts_t).reshape(n, m, n_bootstrap)
        score += offset
        top = score.max(axis=0)  # (m, B)
        winner = np.rint(top).astype(np.int64) % n
        lin = np.arange(m, dtype=np.int64)[:, None] * n + winner
        counts[start : start + m] = np.bincount(lin.ravel(), minlength=m * n).reshape(m, n)
    return counts


# ----------------------------------------------------------------------------- verl drop-ins
def calc_maj_val(data: Sequence[Mapping[str, Any]], vote_key: str, val_key: str) -> Any:
    """Value of the first item whose ``vote_key`` is the most common (verl's ``calc_maj_val``).

    Ties go to the vote that appears first in ``data``.

    Parameters
    ----------
    data : sequence of mappings
        Each holds ``vote_key`` and ``val_key``.
    vote_key, val_key : str
        The keys of the vote and of the value to return.

    Returns
    -------
    The ``val_key`` value of the first item voting for the winner.

    Examples
    --------
    >>> calc_maj_val([{"pred": "A", "val": 0.9}, {"pred": "B", "val": 0.8}, {"pred": "A", "val": 0.7}],
    ...              vote_key="pred", val_key="val")
    0.9
    """
    if len(data) == 0:
        raise ValueError("data must hold at least one item to vote on; got an empty sequence")
    counts: dict[Any, int] = {}
    first_val: dict[Any, Any] = {}
    for i, item in enumerate(data):
        try:
            vote, val = item[vote_key], item[val_key]
        except (KeyError, TypeError, IndexError):
            keys = sorted(map(str, item.keys())) if hasattr(item, "keys") else type(item).__name__
            raise ValueError(
                f"data[{i}] must hold the keys {vote_key!r} and {val_key!r}; it holds {keys}"
            ) from None
        if vote in counts:
            counts[vote] += 1
        else:
            counts[vote] = 1
            first_val[vote] = val
    winner = max(counts, key=counts.__getitem__)
    return first_val[winner]


def _reducer_kind(fn: Any) -> tuple[str, Any]:
    """Classify a reduce function: ('max'|'min'|'mean', None), ('maj', (vote, val)) or ('other', None)."""
    if fn in (np.max, np.amax, max):
        return "max", None
    if fn in (np.min, np.amin, min):
        return "min", None
    if fn is np.mean:
        return "mean", None
    if isinstance(fn, functools.partial) and not fn.args and set(fn.keywords) == {"vote_key", "val_key"}:
        target = fn.func
        if target is calc_maj_val or getattr(target, "__name__", "") == "calc_maj_val":
            return "maj", (fn.keywords["vote_key"], fn.keywords["val_key"])
    return "other", None


def _numeric_vector(data: Sequence[Any]) -> np.ndarray | None:
    try:
        arr = np.asarray(data)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        return None
    return arr.astype(np.float64)


def bootstrap_metric(
    data: Sequence[Any],
    subset_size: int,
    reduce_fns: Sequence[Callable[[np.ndarray], float]],
    n_bootstrap: int = _N_BOOTSTRAP,
    seed: int = 42,
) -> list[tuple[float, float]]:
    """Bootstrap (mean, std) of reduce functions over resamples, identical to verl's.

    Draws ``n_bootstrap`` samples of ``subset_size`` items with replacement (the same indices as
    verl, from a local generator: numpy's global RNG is left alone) and returns, per reduce
    function, the mean and population std of its value over the samples. ``np.max``/``max``,
    ``np.min``/``min``, ``np.mean`` and ``functools.partial(calc_maj_val, vote_key=..,
    val_key=..)`` are computed vectorised; any other callable is called on each sample (an
    object array, as in verl).

    Parameters
    ----------
    data : sequence, length n > 0
        Numbers, or mappings for the majority vote.
    subset_size : int
        Items per bootstrap sample.
    reduce_fns : sequence of callables
        Each maps a sample (object array of shape ``(subset_size,)``) to a number.
    n_bootstrap : int
        Number of bootstrap samples.
    seed : int
        Seed of the draws (verl's default 42).

    Returns
    -------
    list of (mean, std) float tuples, one per reduce function.

    Examples
    --------
    >>> import numpy as np
    >>> [tuple(round(v, 4) for v in r) for r in bootstrap_metric([1, 2, 3, 4, 5], 3, [np.mean, np.max])]
    [(3.0087, 0.8167), (4.221, 0.9488)]
    """
    n_data = len(data)
    if n_data == 0:
        raise ValueError("data must hold at least one item to resample; got an empty sequence")
    idx = bootstrap_indices(n_data, subset_size, n_bootstrap=n_bootstrap, seed=seed)
    numeric: np.ndarray | None = None
    numeric_done = False
    results: list[tuple[float, float]] = []
    for fn in reduce_fns:
        kind, extra = _reducer_kind(fn)
        if kind in ("max", "min", "mean"):
            if not numeric_done:
                numeric, numeric_done = _numeric_vector(data), True
            if numeric is not None and subset_size > 0:
                if kind == "mean":
                    vals = numeric[idx].mean(axis=1)
                    results.append((float(np.mean(vals)), float(np.std(vals))))
                    continue
                sorted_vals, best, worst = _rank_counts(numeric[None, :], subset_size, n_bootstrap, int(seed))
                counts = best if kind == "max" else worst
                mean, std = _weighted_mean_std(sorted_vals, counts, n_bootstrap)
                results.append((float(mean[0]), float(std[0])))
                continue
        if kind == "maj" and subset_size > 0:
            vote_key, val_key = extra
            try:
                votes = [d[vote_key] for d in data]
                vals = _numeric_vector([d[val_key] for d in data])
                code_of: dict[Any, int] = {}
                codes = np.array([code_of.setdefault(v, len(code_of)) for v in votes], dtype=np.int64)
            except (KeyError, TypeError, IndexError):
                vals = None
            if vals is not None:
                local = _local_codes(codes[None, :])
                counts = _majority_counts(local, subset_size, n_bootstrap, int(seed))
                order = np.argsort(vals, kind="stable")
                mean, std = _weighted_mean_std(vals[order][None, :], counts[:, order], n_bootstrap)
                results.append((float(mean[0]), float(std[0])))
                continue
        # Generic path, exactly verl's loop.
        data_np = np.empty(n_data, dtype=object)
        data_np[:] = list(data)
        out = np.empty(n_bootstrap, dtype=np.float64)
        for b in range(n_bootstrap):
            out[b] = fn(data_np[idx[b]])
        results.append((float(np.mean(out)), float(np.std(out))))
    return results


# ----------------------------------------------------------------------------- factorising
def _factorize(items: Any, n: int, what: str) -> tuple[np.ndarray, dict[Any, int]]:
    """Codes ``0, 1, ...`` of hashable items in order of first appearance, and the item -> code dict.

    ``dict.setdefault`` is mapped over the items with a running counter (one C-level pass): each
    item gets the index of its first appearance, which is then ranked.
    """
    first_seen: dict[Any, int] = {}
    try:
        raw = np.fromiter(map(first_seen.setdefault, items, itertools.count()), dtype=np.int64, count=n)
    except TypeError as err:
        raise TypeError(f"{what} must hold hashable values ({err})") from None
    firsts = np.flatnonzero(raw == np.arange(n))
    rank = np.empty(n, dtype=np.int64)
    rank[firsts] = np.arange(firsts.shape[0])
    codes = rank[raw]
    # first_seen keeps insertion (= first appearance) order, so a key's code is its index there
    return codes, dict(zip(first_seen, range(len(first_seen))))


def _factorize_prompts(
    sources: list[Any], uids: list[Any], n: int
) -> tuple[np.ndarray, np.ndarray, list[Any], Callable[[], list[tuple[Any, Any]]]]:
    """Prompt codes of the ``(source, uid)`` pairs in order of first appearance.

    Returns the per-sample prompt codes, each prompt's source code (sources numbered in order of
    first appearance), the sources, and a function listing every prompt's ``(source, uid)`` key
    (built only when needed). When every uid belongs to one source (the usual case) the pairs are
    numbered like the uids, which are factorised alone (no tuple per sample or prompt); otherwise
    the pairs are factorised.
    """
    what = "data_sources and sample_uids"
    uid_codes, uid_of = _factorize(uids, n, what)
    try:
        distinct = set(sources)
    except TypeError as err:
        raise TypeError(f"{what} must hold hashable values ({err})") from None
    if len(distinct) == 1:  # one source (a set keeps the first of equal items, as a dict does)
        src_codes, src_code_of = np.zeros(n, dtype=np.int64), dict.fromkeys(distinct, 0)
    else:
        src_codes, src_code_of = _factorize(sources, n, what)
    src_of_uid = np.zeros(len(uid_of), dtype=np.int64)
    src_of_uid[uid_codes] = src_codes
    if np.array_equal(src_of_uid[uid_codes], src_codes):
        src_items = list(src_code_of)

        def uid_keys() -> list[tuple[Any, Any]]:
            return list(zip([src_items[c] for c in src_of_uid.tolist()], uid_of))

        return uid_codes, src_of_uid, src_items, uid_keys
    codes, pair_of = _factorize(zip(sources, uids), n, what)
    keys = list(pair_of)
    src_index: dict[Any, int] = {}
    prompt_src = np.asarray([src_index.setdefault(k[0], len(src_index)) for k in keys], dtype=np.int64)
    return codes, prompt_src, list(src_index), lambda: keys


# ----------------------------------------------------------------------------- columns
_NUMERIC_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


class _Column:
    """One ``infos_dict`` variable: float64 values, masks of None and of strings, narrow copy.

    ``narrow`` holds float32 values when every non-None value is a float32 (verl's ``np.mean`` then
    computes in float32); ``exotic`` marks mixes whose per-prompt dtype verl infers differently
    (those prompts take a per-prompt path for mean/std).
    """

    __slots__ = ("_items", "exotic", "is_none", "is_str", "narrow", "values")

    def __init__(self, col: Any, name: str, n: int, *, all_str: bool = False) -> None:
        self._items: list[Any] | None = None
        self.narrow: np.ndarray | None = None
        self.exotic = False
        if all_str:  # the caller has seen every value be a string (e.g. factorised predictions)
            self.values = np.zeros(n)
            self.is_none = np.zeros(n, dtype=bool)
            self.is_str = np.ones(n, dtype=bool)
            return
        if hasattr(col, "detach") and hasattr(col, "cpu"):  # torch tensor
            col = col.detach().cpu().numpy()
        if len(col) != n:
            raise ValueError(
                f"infos_dict[{name!r}] must have one value per sample ({n}, the length of data_sources); "
                f"got {len(col)}"
            )
        if isinstance(col, np.ndarray) and col.dtype.kind in "biuf":
            if col.ndim != 1:
                raise ValueError(f"infos_dict[{name!r}] must be one-dimensional; got shape {col.shape}")
            self.values = col.astype(np.float64)
            self.is_none = np.zeros(n, dtype=bool)
            self.is_str = np.zeros(n, dtype=bool)
            if col.dtype == np.float32:
                self.narrow = col
            elif col.dtype == np.float16:
                self.exotic = True
                self._items = list(col)
            return
        items = col.tolist() if isinstance(col, np.ndarray) else col if isinstance(col, list) else list(col)
        first_type = type(items[0]) if items else float
        if first_type is bool or first_type is int:
            # bytes() takes exactly the integers 0 .. 255 (bools among them) in one C pass; values
            # are what float64 conversion gives, and anything else raises and takes the paths below
            try:
                small = np.frombuffer(bytes(items), dtype=np.uint8)
            except (TypeError, ValueError):
                small = None
            if small is not None:
                self.values = small.astype(np.float64)
                self.is_none = np.zeros(n, dtype=bool)
                self.is_str = np.zeros(n, dtype=bool)
                return
        if first_type is bool:
            # numpy infers bool only when every item is a bool: one pass checks and converts
            try:
                as_bool = np.asarray(items)
            except (TypeError, ValueError):  # ragged items: the checks below name the culprit
                as_bool = np.zeros(0)
            if as_bool.dtype == np.bool_ and as_bool.shape == (n,):
                self.values = as_bool.astype(np.float64)
                self.is_none = np.zeros(n, dtype=bool)
                self.is_str = np.zeros(n, dtype=bool)
                return
        # one type throughout (the usual case) is checked by identity, cheaper than a set of types
        types = {first_type} if operator.countOf(map(type, items), first_type) == n else set(map(type, items))
        plain = {bool, int, float}
        if types <= plain:
            if types == {float}:
                self.values = np.fromiter(items, dtype=np.float64, count=n)
            else:
                self.values = np.asarray(items, dtype=np.float64) if items else np.zeros(0)
            self.is_none = np.zeros(n, dtype=bool)
            self.is_str = np.zeros(n, dtype=bool)
            return
        if types == {str}:  # a text column (e.g. predictions): nothing numeric to convert
            self.values = np.zeros(n)
            self.is_none = np.zeros(n, dtype=bool)
            self.is_str = np.ones(n, dtype=bool)
            return
        self.is_none = np.fromiter((v is None for v in items), dtype=bool, count=n)
        self.is_str = np.fromiter((isinstance(v, str) for v in items), dtype=bool, count=n)
        values = np.zeros(n, dtype=np.float64)
        numeric = ~(self.is_none | self.is_str)
        kept = [v for v, ok in zip(items, numeric.tolist()) if ok]
        bad = [v for v in kept if not isinstance(v, _NUMERIC_TYPES)]
        if bad:
            raise TypeError(
                f"infos_dict[{name!r}] must hold numbers, bools, strings or None; found "
                f"{type(bad[0]).__name__} {bad[0]!r}"
            )
        if kept:
            values[numeric] = np.asarray(kept, dtype=np.float64)
        self.values = values
        kinds = {type(v) for v in kept}
        if np.float32 in kinds or np.float16 in kinds:
            if kinds == {np.float32}:
                narrow = np.zeros(n, dtype=np.float32)
                narrow[numeric] = values[numeric]
                self.narrow = narrow
            else:
                self.exotic = True
        self._items = items if self.exotic else None


# ----------------------------------------------------------------------------- main entry
def _gen_ns(n_resps: int) -> list[int]:
    if n_resps <= 1:
        return []
    ns = []
    n = 2
    while n < n_resps:
        ns.append(n)
        n *= 2
    ns.append(n_resps)
    return ns


def _metric_names(n_resps: int, has_pred: bool) -> list[str]:
    names = [f"mean@{n_resps}"]
    if n_resps > 1:
        names.append(f"std@{n_resps}")
        for n in _gen_ns(n_resps):
            names += [f"best@{n}/mean", f"best@{n}/std", f"worst@{n}/mean", f"worst@{n}/std"]
            if has_pred:
                names += [f"maj@{n}/mean", f"maj@{n}/std"]
    return names


def _as_list(x: Any, name: str) -> list[Any]:
    if isinstance(x, str | bytes) or not hasattr(x, "__len__"):
        raise TypeError(f"{name} must be a sequence with one entry per sample; got {type(x).__name__}")
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu().numpy()
    if type(x) is list:  # no copy: a fresh million-item list costs a copy and cyclic-GC traversals
        return x
    return x.tolist() if isinstance(x, np.ndarray) else list(x)


def process_validation_metrics(
    data_sources: Sequence[Any] | np.ndarray,
    sample_uids: Sequence[Any] | np.ndarray,
    infos_dict: Mapping[str, Sequence[Any]],
    seed: int = 42,
    expected_acc_counts: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Validation metrics per data source and variable, identical to verl 0.9.1's.

    Groups samples by ``(data_source, uid)`` and, per prompt and numeric variable, computes
    ``mean@N`` and ``std@N`` over its ``N`` samples and, for ``k`` in 2, 4, 8, ... and ``N``,
    verl's bootstrap ``best@k/mean|std``, ``worst@k/mean|std`` and, when a ``pred`` variable
    exists, ``maj@k/mean|std``; then averages every metric over the prompts that have it.
    ``None`` values are dropped and string variables skipped, as verl does.

    Parameters
    ----------
    data_sources : sequence, length n
        Data source of each sample.
    sample_uids : sequence, length n
        Prompt id of each sample.
    infos_dict : mapping of str to sequence of length n
        Per-sample values (bool, int, float, str or None) of each variable.
    seed : int
        Seed of verl's bootstrap draws (numpy's global RNG is not touched).
    expected_acc_counts : mapping of (data_source, uid) to int, optional
        verl's failed-session padding: for sources that report ``acc``, each listed prompt's
        ``acc`` is padded with zeros up to the expected count, and ``acc_success_only`` keeps the
        observed values.

    Returns
    -------
    dict
        ``{data_source: {variable: {metric_name: value}}}`` with float values.

    Examples
    --------
    >>> out = process_validation_metrics(
    ...     ["math"] * 4, ["q1", "q1", "q2", "q2"],
    ...     {"acc": [1.0, 0.0, 1.0, 1.0], "pred": ["4", "5", "7", "7"]})
    >>> out["math"]["acc"]["mean@2"], out["math"]["acc"]["best@2/mean"]
    (0.75, 0.885)
    """
    sources = _as_list(data_sources, "data_sources")
    uids = _as_list(sample_uids, "sample_uids")
    n = len(sources)
    if len(uids) != n:
        raise ValueError(
            f"sample_uids must have one entry per sample ({n}, the length of data_sources); got {len(uids)}"
        )
    if not isinstance(infos_dict, Mapping):
        raise TypeError(
            f"infos_dict must be a mapping of variable name to values; got {type(infos_dict).__name__}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an integer; got {type(seed).__name__} {seed!r}")
    seed = int(seed)

    # 1. prompts, in order of first appearance (verl's nested defaultdict order).
    pid, src_of, src_names, prompt_keys = _factorize_prompts(sources, uids, n)
    n_observed = src_of.shape[0]

    # 2. sample order grouped by prompt (stable), sizes per prompt.
    order = np.argsort(pid, kind="stable")
    sizes = np.bincount(pid, minlength=n_observed)

    # The maj@k counts depend only on the predictions: with the numba kernel (threads, no GIL) they
    # are computed on a background thread while the columns below are converted.
    early_pred: tuple[np.ndarray, np.ndarray, bool] | None = None
    early_layouts: dict[int, _MajLayout] = {}
    maj_work: _MajorityWork | None = None
    maj_future: Future[None] | None = None
    if "pred" in infos_dict and _majority_kernel() is not None:
        try:
            early_pred = _pred_codes(infos_dict["pred"], pid, order, n, n_observed)
        except (TypeError, ValueError):
            early_pred = None  # raised again below, after the checks verl's order puts first
        if early_pred is not None:
            # layouts and tables here (numpy, holding the GIL); counts there (one kernel call, GIL released)
            early_layouts = _maj_layouts(early_pred[0], early_pred[1], sizes, seed)
            maj_work = _MajorityWork(early_layouts, seed)
            maj_future = _kernels.background().submit(maj_work.run)
            # hand the GIL over until the background thread is in its kernel (GIL released)
            maj_work.started.wait()
    columns: dict[str, _Column] = {}
    for name, raw in infos_dict.items():
        all_str = name == "pred" and early_pred is not None and early_pred[2]
        columns[name] = _Column(raw, name, n, all_str=all_str)
        if maj_work is not None and maj_work.spread:
            time.sleep(0)  # list conversions hold the GIL: let the pool's walkers start their kernels

    # Ragged variables: (prompt ids, float64 values, float32 values or None) in verl's list order.
    ragged: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]] = {}
    skipped_first_str: dict[str, np.ndarray] = {}
    pid_sorted = pid[order]  # ascending
    for name, col in columns.items():
        if col.is_none.any():
            keep = ~col.is_none[order]
            e_pid, e_idx = pid_sorted[keep], order[keep]
        else:  # shared, never written to
            e_pid, e_idx = pid_sorted, order
        e_str = col.is_str[e_idx]
        if e_str.any():
            # verl skips a prompt's variable when its first kept value is a string.
            first = np.ones(e_pid.shape[0], dtype=bool)
            first[1:] = e_pid[1:] != e_pid[:-1]
            str_first_prompts = e_pid[first & e_str]  # sorted and distinct (e_pid ascending)
            skipped = np.zeros(n_observed, dtype=bool)
            skipped[str_first_prompts] = True
            skip = skipped[e_pid]
            if (e_str & ~skip).any():
                bad = int(e_idx[e_str & ~skip][0])
                raise TypeError(
                    f"infos_dict[{name!r}] mixes numbers and strings within a prompt: sample {bad} is "
                    f"the string {infos_dict[name][bad]!r}"
                )
            e_pid, e_idx = e_pid[~skip], e_idx[~skip]
            skipped_first_str[name] = str_first_prompts
        narrow = col.narrow[e_idx] if col.narrow is not None else None
        ragged[name] = (e_pid, col.values[e_idx], narrow, e_idx)

    # 3. expected_acc_counts: verl's padding of failed sessions.
    var_names = list(columns)
    narrow_off: set[int] = set()  # prompts whose padded acc list verl averages in float64
    n_prompts = n_observed
    if expected_acc_counts and "acc" in columns:
        acc_col = columns["acc"]
        keys = prompt_keys()
        prompt_of = dict(zip(keys, range(len(keys))))
        src_of_prompt = [k[0] for k in keys]
        has_acc = np.zeros(n_observed, dtype=bool)
        has_acc[pid[~acc_col.is_none]] = True
        acc_sources = {src_of_prompt[p] for p in np.flatnonzero(has_acc).tolist()}
        e_pid, e_val, e_nar, e_idx = ragged["acc"]
        observed_count = np.bincount(pid[~acc_col.is_none], minlength=n_observed)
        pad_pids: list[int] = []
        pad_counts: list[int] = []
        listed: list[int] = []
        for (src, uid), expected in expected_acc_counts.items():
            if src not in acc_sources:
                continue
            p = prompt_of.get((src, uid))
            if p is None:
                p = len(keys)
                prompt_of[(src, uid)] = p
                keys.append((src, uid))
            listed.append(p)
            have = int(observed_count[p]) if p < n_observed else 0
            missing = max(int(expected) - have, 0)
            if missing:
                pad_pids.append(p)
                pad_counts.append(missing)
        listed_arr = np.unique(np.asarray(listed, dtype=np.int64))
        in_listed = np.isin(e_pid, listed_arr)
        # acc_success_only: the observed acc values of the listed prompts.
        ragged["acc_success_only"] = (
            e_pid[in_listed],
            e_val[in_listed],
            e_nar[in_listed] if e_nar is not None else None,
            e_idx[in_listed],
        )
        var_names.append("acc_success_only")
        if pad_pids:
            add_pid = np.repeat(np.asarray(pad_pids, dtype=np.int64), pad_counts)
            all_pid = np.concatenate([e_pid, add_pid])
            srt = np.argsort(all_pid, kind="stable")
            all_nar = None
            if e_nar is not None:
                all_nar = np.concatenate([e_nar, np.zeros(add_pid.shape[0], dtype=np.float32)])[srt]
                # Padded lists mix float32 values with Python 0.0: verl's mean then runs in float64.
                narrow_off.update(pad_pids)
            ragged["acc"] = (
                all_pid[srt],
                np.concatenate([e_val, np.zeros(add_pid.shape[0])])[srt],
                all_nar,
                np.concatenate([e_idx, np.full(add_pid.shape[0], -1)])[srt],
            )
        if len(keys) > n_observed:  # listed prompts never seen: their sources are known ones
            src_code = {src: i for i, src in enumerate(src_names)}
            added = [src_code[k[0]] for k in keys[n_observed:]]
            src_of = np.concatenate([src_of, np.asarray(added, dtype=np.int64)])
        n_prompts = len(keys)
    sizes = np.concatenate([sizes, np.zeros(n_prompts - n_observed, dtype=np.int64)])

    # 4. predictions: per prompt, valid when present with no None.
    pred_codes_sorted: np.ndarray | None = None
    pred_ok = np.zeros(n_prompts, dtype=bool)
    if "pred" in infos_dict:
        if early_pred is None:
            early_pred = _pred_codes(infos_dict["pred"], pid, order, n, n_observed)
        pred_codes_sorted = early_pred[0]
        pred_ok[:n_observed] = early_pred[1]

    maj_cache: dict[tuple[int, int], _MajCounts] = {}
    maj_stacks: dict[int, _MajStack] = {}
    layout_cache: dict[int, _MajLayout] = dict(early_layouts)

    def maj_stack_for(n_resps: int) -> _MajStack | None:
        """The background thread's counts of every k <= 47 of n_resps samples, if it ran."""
        nonlocal maj_future
        if maj_future is not None and maj_work is not None:
            maj_stacks.update(maj_work.finish(maj_future))
            maj_future = None
        return maj_stacks.get(n_resps)

    def maj_counts_for(n_resps: int, k: int) -> _MajCounts:
        """(prompt ids with valid preds and n_resps samples, distinct counts, prompt -> counts row)."""
        stack = maj_stack_for(n_resps)
        if stack is not None and k in stack[1]:
            return stack[0], stack[2][stack[1].index(k)], stack[3]
        key = (n_resps, k)
        if key not in maj_cache:
            assert pred_codes_sorted is not None
            if n_resps not in layout_cache:
                layout_cache[n_resps] = _maj_layout(
                    pred_codes_sorted, pred_ok[:n_observed], sizes, n_resps, seed
                )
            maj_cache[key] = _maj_counts_layout(layout_cache[n_resps], k, seed)
        return maj_cache[key]

    # 5. per variable: per-prompt metrics, grouped by number of values.
    # per (var): metric name -> (prompt ids, values)
    per_var: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]] = {}
    per_var_cfg: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    # (metrics of a variable, number of samples, prompts, values): maj@k, filled in last
    maj_todo: list[tuple[dict[str, Any], int, np.ndarray, np.ndarray]] = []
    done: list[str] = []  # variables computed so far (a copy of one reuses its metrics)
    for name in var_names:
        e_pid, e_val, e_nar, e_idx = ragged[name]
        count = np.bincount(e_pid, minlength=n_prompts)
        active = np.flatnonzero(count > 0)
        if active.size == 0:
            continue
        twin = _same_variable(name, done, ragged, columns)
        done.append(name)
        if twin is not None:  # e.g. verl's ``reward`` next to an identical ``score`` or ``acc``
            per_var[name] = per_var[twin]
            per_var_cfg[name] = per_var_cfg[twin]
            continue
        v_starts = np.zeros(n_prompts + 1, dtype=np.int64)
        np.cumsum(count, out=v_starts[1:])
        has_pred = pred_ok & (count == sizes)
        metrics: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for n_resps in np.unique(count[active]).tolist():
            prompts = active[count[active] == n_resps]
            pos = v_starts[prompts][:, None] + np.arange(n_resps)[None, :]
            vals = e_val[pos]
            narrow_rows = None
            if e_nar is not None:
                off = sorted(narrow_off) if name == "acc" else []
                narrow_rows = ~np.isin(prompts, np.asarray(off, dtype=np.int64))
            means, stds = _mean_std(vals, e_nar, narrow_rows, pos, columns.get(name), e_idx)
            metrics.setdefault(f"mean@{n_resps}", []).append((prompts, means))
            if n_resps <= 1:
                continue
            metrics.setdefault(f"std@{n_resps}", []).append((prompts, stds))
            pred_rows = has_pred[prompts]
            if pred_rows.any():
                maj_sel = prompts[pred_rows]
                maj_vals = vals[pred_rows]  # in sample order, as the majority counts
            bw_stats = _best_worst_stats(vals, _gen_ns(n_resps), _N_BOOTSTRAP, seed)
            for k in _gen_ns(n_resps):
                bm, bs, wm, ws = bw_stats[k]
                metrics.setdefault(f"best@{k}/mean", []).append((prompts, bm))
                metrics.setdefault(f"best@{k}/std", []).append((prompts, bs))
                metrics.setdefault(f"worst@{k}/mean", []).append((prompts, wm))
                metrics.setdefault(f"worst@{k}/std", []).append((prompts, ws))
            if pred_rows.any():  # after every variable's best/worst: maj@k may still be running
                maj_todo.append((metrics, n_resps, maj_sel, maj_vals))
        per_var[name] = metrics
        per_var_cfg[name] = (active, count[active], has_pred[active])
    # The means over prompts of every metric known so far, batched, while maj@k may still run.
    one_source = len(src_names) == 1
    means_of: dict[int, float] = {}
    if one_source:
        _batch_means(
            [parts[0][1] for m in per_var.values() for parts in m.values() if len(parts) == 1], means_of
        )
    weighted_kernel = _kernels.weighted_rows_kernel()
    for metrics, n_resps, maj_sel, maj_vals in maj_todo:  # same order of parts per metric
        ks = _gen_ns(n_resps)
        stack = maj_stack_for(n_resps)
        stats: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if stack is not None and weighted_kernel is not None:
            # every k of the stack in one pass
            maj_prompts, stack_ks, counts3, inverse = stack
            rows = _rows_of(maj_prompts, maj_sel)
            mm, ms = weighted_kernel(maj_vals, counts3, inverse, rows, float(_N_BOOTSTRAP))
            stats = {k: (mm[t], ms[t]) for t, k in enumerate(stack_ks)}
        for k in ks:
            if k not in stats:
                maj_prompts, distinct, inverse = maj_counts_for(n_resps, k)
                rows = _rows_of(maj_prompts, maj_sel)
                if weighted_kernel is not None:
                    mm, ms = weighted_kernel(maj_vals, distinct[None], inverse, rows, float(_N_BOOTSTRAP))
                    stats[k] = (mm[0], ms[0])
                else:
                    stats[k] = _weighted_mean_std_blocks(maj_vals, distinct[inverse[rows]], _N_BOOTSTRAP)
            mm_k, ms_k = stats[k]
            metrics.setdefault(f"maj@{k}/mean", []).append((maj_sel, mm_k))
            metrics.setdefault(f"maj@{k}/std", []).append((maj_sel, ms_k))
    if one_source:
        _batch_means(
            [
                v
                for metrics, *_ in maj_todo
                for m, parts in metrics.items()
                if m.startswith("maj@")
                if len(parts) == 1
                for _, v in parts
            ],
            means_of,
        )

    # 6. average over prompts, per source, in verl's key order.
    result: dict[str, dict[str, dict[str, float]]] = {}
    var_rank = {name: i for i, name in enumerate(var_names)}
    for s, src in enumerate(src_names):
        entries = []
        for name, (active, counts_a, hp) in per_var_cfg.items():
            in_src = src_of[active] == s
            if in_src.any():
                entries.append((int(active[in_src][0]), var_rank[name], name, counts_a[in_src], hp[in_src]))
        if not entries:
            continue
        src_out: dict[str, dict[str, float]] = {}
        for _, _, name, counts_s, hp_s in sorted(entries):
            # distinct (number of samples, has predictions) configurations, in first-prompt order
            cfg = counts_s.astype(np.int64) * 2 + hp_s
            _, first_at = np.unique(cfg, return_index=True)
            names: dict[str, None] = {}
            for i in np.sort(first_at).tolist():
                for m in _metric_names(int(counts_s[i]), bool(hp_s[i])):
                    names[m] = None
            var_out: dict[str, float] = {}
            for m in names:
                parts = per_var[name][m]
                if one_source and len(parts) == 1:  # every prompt, already in ascending order
                    v = parts[0][1]
                    got = means_of.get(id(v))
                    var_out[m] = got if got is not None else float(np.mean(v))
                    continue
                p_all = np.concatenate([p for p, _ in parts])
                v_all = np.concatenate([v for _, v in parts])
                sel = src_of[p_all] == s
                p_sel, v_sel = p_all[sel], v_all[sel]
                if p_sel.size > 1 and not bool(np.all(p_sel[1:] > p_sel[:-1])):
                    v_sel = v_sel[np.argsort(p_sel, kind="stable")]
                var_out[m] = float(np.mean(v_sel))
            src_out[name] = var_out
        result[src] = src_out
    return result


def _batch_means(arrays: Sequence[np.ndarray], out: dict[int, float]) -> None:
    """``out[id(a)] = np.mean(a)`` for every float64 vector (same sum and division, in a few passes).

    Vectors of one length are stacked and summed along their rows (numpy's pairwise sum of each
    contiguous row, as ``a.sum()``), instead of one ``np.mean`` call each.
    """
    by_len: dict[int, dict[int, np.ndarray]] = {}
    for a in arrays:
        if a.dtype == np.float64 and a.ndim == 1 and a.shape[0] and id(a) not in out:
            by_len.setdefault(a.shape[0], {})[id(a)] = a
    for length, group in by_len.items():
        sums = (np.stack(list(group.values())).sum(axis=1) / length).tolist()
        out.update(zip(group, sums))


def _rows_of(prompts: np.ndarray, selected: np.ndarray) -> np.ndarray:
    """Row of each of ``selected`` (sorted prompt ids, a subset of the sorted ``prompts``) in ``prompts``."""
    if prompts.shape == selected.shape and np.array_equal(prompts, selected):
        return np.arange(selected.shape[0])
    return np.searchsorted(prompts, selected)


def _pred_codes(
    pred: Any, pid: np.ndarray, order: np.ndarray, n: int, n_observed: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Prediction codes in grouped sample order (-1: None), per prompt whether it has no None,
    and whether every prediction is a string (checked on the distinct values only)."""
    pred_items = _as_list(pred, "infos_dict['pred']")
    if len(pred_items) != n:
        raise ValueError(f"infos_dict['pred'] must have one value per sample ({n}); got {len(pred_items)}")
    codes, code_of = _factorize(pred_items, n, "infos_dict['pred']")
    if None in code_of:
        codes[codes == code_of[None]] = -1
    has_none = np.bincount(pid[codes < 0], minlength=n_observed) > 0
    all_str = operator.countOf(map(type, code_of), str) == len(code_of)
    return codes[order], ~has_none[:n_observed], all_str


# prompts, local codes, their distinct rows and inverse, kernel scratch
_MajLayout = tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray], dict[str, Any]]


def _maj_layout(
    codes_sorted: np.ndarray, pred_ok: np.ndarray, sizes: np.ndarray, n_resps: int, seed: int
) -> _MajLayout:
    """The prompts with valid predictions and ``n_resps`` samples, and their prediction patterns."""
    prompts = np.flatnonzero(pred_ok & (sizes[: pred_ok.shape[0]] == n_resps))
    starts = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    keys_kernel = _kernels.pattern_keys_kernel()
    if keys_kernel is not None and 0 < n_resps <= 16:
        local, keys = keys_kernel(codes_sorted, starts, prompts, n_resps)
        unique = _unique_rows(local, keys)
    else:
        code_rows = codes_sorted[starts[prompts][:, None] + np.arange(n_resps)[None, :]]
        local = _local_codes(code_rows)
        unique = _unique_rows(local)
    scratch: dict[str, Any] = {}
    if _majority_kernel() is not None:
        _kernels.prepare_patterns(unique[0], scratch)
    return prompts, local, unique, scratch


# prompts, majority counts of their distinct patterns (U, n), prompt row -> pattern
_MajCounts = tuple[np.ndarray, np.ndarray, np.ndarray]


def _maj_counts_layout(layout: _MajLayout, k: int, seed: int) -> _MajCounts:
    prompts, local, unique, scratch = layout
    return (prompts, *_majority_counts_distinct(local, k, _N_BOOTSTRAP, seed, unique=unique, scratch=scratch))


def _maj_layouts(
    codes_sorted: np.ndarray, pred_ok: np.ndarray, sizes: np.ndarray, seed: int
) -> dict[int, _MajLayout]:
    """:func:`_maj_layout` of every number of samples (> 1) among prompts with valid predictions."""
    return {
        n_resps: _maj_layout(codes_sorted, pred_ok, sizes, n_resps, seed)
        for n_resps in np.unique(sizes[pred_ok]).tolist()
        if n_resps > 1
    }


# prompts, the k of the stack, majority counts (K, U, n) of their distinct patterns, prompt row -> pattern
_MajStack = tuple[np.ndarray, tuple[int, ...], np.ndarray, np.ndarray]


class _MajorityWork:
    """The kernel's maj@k counts of every ``k <= 47`` of each layout, shared by two threads.

    Built on the caller's thread (with the data-independent tables), :meth:`run` goes to the
    background thread, which needs the GIL only to start one kernel call per layout; the caller
    joins with :meth:`finish` once its own work is done, computing the chunks left from the back.
    ``k > 47`` is left to :func:`_maj_counts_layout`.
    """

    def __init__(self, layouts: Mapping[int, _MajLayout], seed: int) -> None:
        kernel = _majority_kernel()
        self._jobs = []
        for n_resps, layout in layouts.items():
            ks = tuple(k for k in _gen_ns(n_resps) if k <= _kernels.MAJORITY_MAX_K)
            prompts, _, (patterns, inverse), scratch = layout
            if ks and prompts.shape[0]:
                draws = _majority_draws(n_resps, ks, _N_BOOTSTRAP, seed)
                job = _kernels.MajorityJob(kernel, patterns, draws, scratch)
                self._jobs.append((n_resps, ks, prompts, inverse, job))

        self.started = threading.Event()
        # walkers on the shared pool too: they need the GIL for a moment to start
        self.spread = any(job.spread for *_, job in self._jobs)

    def run(self) -> None:
        self.started.set()  # the caller waits for this: a GIL hand-over without a sleep's timer slack
        for *_, job in self._jobs:
            job.work(forward=True)

    def finish(self, future: Future[None]) -> dict[int, _MajStack]:
        for *_, job in reversed(self._jobs):
            job.work(forward=False)
        future.result()
        return {n_resps: (prompts, ks, job.out, inverse) for n_resps, ks, prompts, inverse, job in self._jobs}


def _same_variable(
    name: str,
    done: list[str],
    ragged: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]],
    columns: Mapping[str, _Column],
) -> str | None:
    """An earlier variable with the same kept values per prompt (float64, no float32/exotic path)."""
    e_pid, e_val, e_nar, _ = ragged[name]
    col = columns.get(name)
    if e_nar is not None or col is None or col.exotic:
        return None
    for other in done:
        o_pid, o_val, o_nar, _ = ragged[other]
        o_col = columns.get(other)
        if o_nar is not None or o_col is None or o_col.exotic or o_pid.shape != e_pid.shape:
            continue
        if (o_pid is e_pid or np.array_equal(o_pid, e_pid)) and (
            np.array_equal(o_val, e_val)  # one pass; NaNs (never equal) need the slower check
            or (bool(np.isnan(e_val).any()) and np.array_equal(o_val, e_val, equal_nan=True))
        ):
            return other
    return None


def _mean_std(
    vals: np.ndarray,
    narrow: np.ndarray | None,
    narrow_rows: np.ndarray | None,
    pos: np.ndarray,
    column: _Column | None,
    e_idx: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``np.mean``/``np.std`` as verl computes them (rows of float32 values stay float32)."""
    means = np.mean(vals, axis=1)
    stds = np.std(vals, axis=1)
    if narrow is not None and narrow_rows is not None and narrow_rows.any():
        nv = narrow[pos[narrow_rows]]
        means[narrow_rows] = np.mean(nv, axis=1)
        stds[narrow_rows] = np.std(nv, axis=1)
    if column is not None and column.exotic and column._items is not None:
        # Mixed float32/float16/other scalars: verl's dtype depends on each prompt's list.
        items = column._items
        for r in range(vals.shape[0]):
            row = [items[i] if i >= 0 else 0.0 for i in e_idx[pos[r]].tolist()]
            means[r] = float(np.mean(row))
            stds[r] = float(np.std(row))
    return means, stds


def flatten_validation_metrics(
    metrics: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> dict[str, float]:
    """Logger keys ``val-core/{source}/{var}/{metric}`` and ``val-aux/...``, by verl's rule.

    A metric is *core* when its variable is the source's core variable (``acc`` if the source has
    it, else ``reward``), its name starts with ``mean``, ``maj`` or ``best``, and it is taken at
    the largest ``N`` of that variable; everything else is *aux*.

    Parameters
    ----------
    metrics : mapping
        The output of :func:`process_validation_metrics`.

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> flat = flatten_validation_metrics({"gsm8k": {"acc": {"mean@4": 0.5, "best@2/mean": 0.7,
    ...                                                      "best@4/mean": 0.8}}})
    >>> sorted(flat)
    ['val-aux/gsm8k/acc/best@2/mean', 'val-core/gsm8k/acc/best@4/mean', 'val-core/gsm8k/acc/mean@4']
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"metrics must be a nested mapping source -> variable -> metric; got {type(metrics).__name__}"
        )
    out: dict[str, float] = {}
    for source, var2metric in metrics.items():
        core_var = "acc" if "acc" in var2metric else "reward"
        for var_name, metric2val in var2metric.items():
            try:
                n_max = max(int(m.split("@")[-1].split("/")[0]) for m in metric2val)
            except ValueError:
                raise ValueError(
                    f"metrics[{source!r}][{var_name!r}] must hold verl metric names such as 'mean@4'; "
                    f"got {sorted(metric2val)}"
                ) from None
            for metric_name, value in metric2val.items():
                core = (
                    var_name == core_var
                    and metric_name.startswith(("mean", "maj", "best"))
                    and f"@{n_max}" in metric_name
                )
                section = "val-core" if core else "val-aux"
                out[f"{section}/{source}/{var_name}/{metric_name}"] = float(value)
    return out
