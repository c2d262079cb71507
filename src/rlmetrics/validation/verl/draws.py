"""verl's bootstrap draws, drawn once and shared, and the data-independent tables built on them.

verl reseeds numpy's *global* RNG with ``seed`` before every ``bootstrap_metric`` call, so its
index matrix depends only on ``(n_samples, k, n_bootstrap, seed)``. Here it comes from a *local*
legacy generator seeded with ``seed`` (the ``RandomState`` behind ``np.random.choice``: the same
indices) and is cached, shared by every prompt, variable and call with the same numbers.
``choice(n, size=(b, k))`` takes its ``b * k`` indices one after another from the generator's
stream, so the matrices of every ``k`` are prefixes of one stream, drawn once at the longest.
"""

from __future__ import annotations

import collections
import functools

import numpy as np

__all__ = [
    "clear_caches",
    "distinct_draws",
    "draw_tables",
    "fold_draws",
    "indices",
    "prefetch",
    "subset_table",
    "top_bit_slot",
]

# (n_data, seed) -> the longest stream of indices drawn so far (the most recent last)
_STREAMS: collections.OrderedDict[tuple[int, int], np.ndarray] = collections.OrderedDict()
_MAX_STREAMS = 16


def _index_stream(n_data: int, length: int, seed: int) -> np.ndarray:
    """The first ``length`` indices ``RandomState(seed).choice(n_data, ...)`` draws."""
    key = (n_data, seed)
    stream = _STREAMS.get(key)
    if stream is None or stream.shape[0] < length:
        stream = np.random.RandomState(seed).choice(n_data, size=length, replace=True)
        stream.setflags(write=False)
        _STREAMS[key] = stream
    _STREAMS.move_to_end(key)
    while len(_STREAMS) > _MAX_STREAMS:
        _STREAMS.popitem(last=False)
    return stream[:length]


def prefetch(n_data: int, ks: list[int], n_bootstrap: int, seed: int) -> None:
    """Draw the stream once for the largest of ``ks`` (the others are prefixes of it)."""
    _index_stream(n_data, n_bootstrap * max(ks, default=0), seed)


@functools.lru_cache(maxsize=256)
def indices(n_data: int, subset_size: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """Read-only ``(n_bootstrap, subset_size)`` matrix of verl's bootstrap indices.

    Examples
    --------
    >>> idx = indices(5, 3, 4, 42)
    >>> bool((idx == np.random.RandomState(42).choice(5, size=(4, 3))).all())
    True
    """
    idx = _index_stream(n_data, n_bootstrap * subset_size, seed).reshape(n_bootstrap, subset_size)
    idx.setflags(write=False)
    return idx


@functools.lru_cache(maxsize=256)
def subset_table(n_data: int, subset_size: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """``Z[A]``: the number of bootstrap draws whose positions all lie in the bit set ``A``.

    The histogram of the drawn position sets, summed over subsets (the zeta transform: one
    pass per bit). int32 counts: half the cache footprint of the lookups.

    Returns
    -------
    (2**n_data,) int32 (int64 beyond 2**31 draws), read-only
    """
    idx = indices(n_data, subset_size, n_bootstrap, seed)
    masks = np.bitwise_or.reduce(np.left_shift(np.int64(1), idx.astype(np.int64)), axis=1)
    count_t = np.int32 if n_bootstrap < 2**31 else np.int64
    table = np.bincount(masks, minlength=1 << n_data).astype(count_t)
    for bit in range(n_data):
        view = table.reshape(-1, 2, 1 << bit)
        view[:, 1, :] += view[:, 0, :]
    table.setflags(write=False)
    return table


def draw_tables(n: int, k: int, n_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index matrix, each draw's multiplicity of each position, and each position's first slot.

    Returns
    -------
    idx : (B, k) int
    mult : (B, n) int64
    first : (B, n) int64, ``k`` where the position is not drawn
    """
    idx = indices(n, k, n_bootstrap, seed)
    return idx, *_mult_first(idx, n, k)


def _mult_first(idx: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(idx.shape[0])
    mult = np.bincount((rows[:, None] * n + idx).ravel(), minlength=idx.shape[0] * n).reshape(-1, n)
    first = np.full((idx.shape[0], n), k, dtype=np.int64)
    first[rows[:, None], idx[:, ::-1]] = np.arange(k - 1, -1, -1)[None, :]  # later writes win: first slot
    return mult, first


@functools.lru_cache(maxsize=64)
def fold_draws(n: int, k: int, n_bootstrap: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The bootstrap index rows with identical rows (frequent for small ``n**k``) kept once.

    Returns
    -------
    idx : (R, k) int
    weights : (R,) int64, the number of draws each row stands for; None when not folded (most
        rows are distinct)
    """
    idx = indices(n, k, n_bootstrap, seed)
    # With n**k >= 4 * n_bootstrap possible draws, over 70% of them are distinct in expectation
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
def distinct_draws(
    n: int, k: int, n_bootstrap: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`draw_tables` of the rows of :func:`fold_draws`.

    Returns
    -------
    idx : (R, k), mult : (R, n), first : (R, n)
        As :func:`draw_tables`, one row per distinct draw.
    weights : (R,) int64 or None
        As :func:`fold_draws`.
    """
    idx, weights = fold_draws(n, k, n_bootstrap, seed)
    mult, first = _mult_first(idx, n, k)
    for a in (mult, first):
        a.setflags(write=False)
    return idx, mult, first, weights


@functools.lru_cache(maxsize=8)
def top_bit_slot(k: int) -> np.ndarray:
    """``table[g]``: the slot ``k - 1 - floor(log2 g)`` of the highest set bit of ``g < 2**k``."""
    table = np.zeros(1 << k, dtype=np.int8)
    for bit in range(k):
        table[1 << bit : 1 << (bit + 1)] = k - 1 - bit
    table.setflags(write=False)
    return table


def clear_caches() -> None:
    """Forget every cached draw and table (a cold call draws them again)."""
    _STREAMS.clear()
    for cached in (indices, subset_table, fold_draws, distinct_draws, top_bit_slot):
        cached.cache_clear()
