"""Optional numba kernels for the bootstrap statistics of :mod:`rlmetrics.validation.bootstrap`.

**best@k / worst@k** (:func:`best_worst_kernel`): per prompt row, the bootstrap draws whose best
(worst) sample has rank ``r`` are read off the subset-sum table of the draws (``Z[A]``: draws
whose positions all lie in bit set ``A``) at the row's sorted prefixes (complements), and their
weighted mean and std taken, for every ``k``, in one pass with nothing but the row in cache.

**maj@k** (:func:`majority_kernel`):

For every prompt (a pattern of predictions, each named by the position of its first occurrence)
and every bootstrap draw, verl's majority vote picks the most common prediction, ties going to
the one that appears first in the draw, and returns the value at that prediction's first slot.
With ``k <= 47`` draws per sample the pick is the argmax of an exact integer score per
prediction, ``count * 2**k + sum of 2**(k - 1 - first_slot)`` over its drawn positions (see
``_majority_counts_bits``), and the highest bit of the winner's low part names its first slot.
The kernel sums the per-position scores of each prediction over all draws in contiguous
(vectorised) loops, instead of the numpy path's matrix product and full-size temporaries. Only
integer counts come out, so the numpy path gives identical numbers. The scores of every ``k``
are stacked (:func:`stack_draws`, int16 / int32 / int64 by ``k``) so that one call covers them
all, and the patterns are cut in chunks that the threads calling :meth:`MajorityJob.work`
claim one at a time (from either end, without locks; a chunk claimed twice at once is computed
twice, with identical results).

**Helpers**: first-occurrence codes of prediction rows (:func:`local_codes_kernel`,
:func:`pattern_keys_kernel`), the subset sums (zeta transform) behind the best/worst tables
(:func:`subset_sums_kernel`, :func:`draw_set_tables_kernel`), and the weighted mean/std of
values under per-pattern counts (:func:`weighted_rows_kernel`).

Every kernel releases the GIL; large calls spread rows over the shared thread pool. Sums of
products of floats may be reassociated by the compiler (vectorised; results move by ~1e-16
relative, NaN and inf keep their meaning). Set ``RLMETRICS_NO_NUMBA=1`` to force the numpy paths.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from rlmetrics._core.threads import N_THREADS, background, pool

__all__ = [
    "MAJORITY_MAX_K",
    "MajorityDraws",
    "MajorityJob",
    "background",
    "best_worst_kernel",
    "best_worst_tables",
    "draw_set_tables_kernel",
    "local_codes_kernel",
    "majority_counts",
    "majority_kernel",
    "pattern_keys_kernel",
    "prepare_patterns",
    "stack_draws",
    "subset_sums_kernel",
    "weighted_rows_kernel",
]

# Fewer (pattern x draw) pairs than this run on the calling thread.
_THREAD_MIN_WORK = 1 << 22


@cache
def _compiled() -> tuple[Any, ...] | None:
    if os.environ.get("RLMETRICS_NO_NUMBA"):
        return None
    try:
        from rlmetrics.validation import kernels_jit as jit
    except ImportError:  # numba missing
        return None
    return (
        jit.majority_all,
        jit.best_worst,
        jit.local_codes,
        jit.dense_codes,
        jit.weighted_rows,
        jit.subset_sums,
        jit.majority_tables,
        jit.pattern_keys,
        jit.draw_set_tables,
    )


def _pick(index: int) -> Any | None:
    """Kernel ``index`` of :func:`_compiled`, or ``None`` when numba is missing or disabled."""
    compiled = _compiled()
    return None if compiled is None else compiled[index]


def majority_kernel() -> Any | None:
    """The compiled maj@k kernel, or ``None`` when numba is missing or disabled."""
    return _pick(0)


def best_worst_kernel() -> Any | None:
    """The compiled best@k/worst@k kernel, or ``None`` when numba is missing or disabled."""
    return _pick(1)


def local_codes_kernel() -> Any | None:
    """``kernel(codes (Q, n) int) -> (Q, n) int64`` first-occurrence positions, or ``None``."""
    return _pick(2)


def weighted_rows_kernel() -> Any | None:
    """``kernel(vals (Q, n), counts (T, U, n), inverse (P,), rows (Q,), total) -> (mean, std)``, each
    (T, Q), or ``None``.

    Row ``i`` of ``vals`` is weighted by ``counts[t, inverse[rows[i]]]`` (distinct count rows shared
    by many prompts are never expanded).
    """
    return _pick(4)


def pattern_keys_kernel() -> Any | None:
    """``kernel(codes (S,), starts (P + 1,), prompts (Q,), n) -> (local (Q, n) int64, keys (Q,) uint64)``,
    or ``None``: first-occurrence codes of each prompt's ``n`` codes, packed 4 bits a position when
    ``n <= 16``."""
    return _pick(7)


def draw_set_tables_kernel() -> Any | None:
    """``kernel(flat, ks, starts, n_rows, n, out (K, 2**n))``: every ``k``'s subset-sum table of its
    draws, in place, or ``None``."""
    return _pick(8)


def subset_sums_kernel() -> Any | None:
    """``kernel(table (2**n,), n)``: in-place sums over subsets (the zeta transform), or ``None``."""
    return _pick(5)


#: Rows (prompts x variables) below which the best/worst kernel runs on the calling thread.
_BEST_WORST_THREAD_ROWS = 16384


def best_worst_tables(kernel: Any, values: np.ndarray, tables: np.ndarray, total: int) -> np.ndarray:
    """best@k / worst@k means and stds of every row, for every subset-sum table, with the kernel.

    Parameters
    ----------
    values : (Q, n) float64
        One row per prompt, in sample order (sorted in the kernel).
    tables : (K, 2**n) int
        Subset-sum table of the bootstrap draws, one per ``k``.
    total : int
        Bootstrap draws per table.

    Returns
    -------
    (K, 4, Q) float64: best mean, best std, worst mean, worst std.
    """
    q = values.shape[0]
    values = np.ascontiguousarray(values, dtype=np.float64)
    out = np.empty((tables.shape[0], 4, q), dtype=np.float64)
    if q < _BEST_WORST_THREAD_ROWS or N_THREADS == 1:
        kernel(values, tables, float(total), 0, q, out)
        return out
    bounds = np.linspace(0, q, N_THREADS + 1).astype(np.int64).tolist()
    futures = [
        pool().submit(kernel, values, tables, float(total), lo, hi, out)
        for lo, hi in itertools.pairwise(bounds)
    ]
    for f in futures:
        f.result()
    return out


class MajorityDraws(NamedTuple):
    """The data-independent maj@k inputs of every ``k`` of one ``n``, stacked for one kernel call.

    Draw ``r`` of ``ks[t]`` is column ``cols[t] + r`` of the score table of its width
    (``kinds[t]``: 0 int16, 1 int32, 2 int64; the narrowest holding ``(k + 1) * 2**k - 1``), its
    slots start at ``slot_at[t] + r * k`` in ``slot_flat``, its weight (the number of bootstrap
    draws it stands for) is ``weights[weight_at[t] + r]``, or 1 when ``weight_at[t] < 0``.
    ``singles[t]``: weighted count of draws whose first slot is each position.
    """

    ks: np.ndarray
    kinds: np.ndarray
    cols: np.ndarray
    rows: np.ndarray
    slot_at: np.ndarray
    weight_at: np.ndarray
    tab16: np.ndarray
    tab32: np.ndarray
    tab64: np.ndarray
    slot_flat: np.ndarray
    weights: np.ndarray
    singles: np.ndarray


#: Largest ``k`` the majority kernel takes (its scores, up to ``(k + 1) * 2**k``, fit int64).
MAJORITY_MAX_K = 47


def stack_draws(
    n: int, ks: Sequence[int], draws: Sequence[tuple[np.ndarray, np.ndarray | None]]
) -> MajorityDraws:
    """:class:`MajorityDraws` of ``draws[t] = (idx (R, k), weights (R,) or None for all 1)``, ``k = ks[t]``.

    ``1 <= k <= MAJORITY_MAX_K``; ``n`` is the number of samples the indices are drawn from.
    ``k <= 2`` keeps only the first slot's counts (the first drawn answer always wins).
    """
    tables = _pick(6)
    assert tables is not None, "stack_draws needs numba"
    kinds, cols, rows, slot_at, weight_at = [], [], [], [], []
    parts: dict[int, list[np.ndarray]] = {0: [], 1: [], 2: []}
    width = {0: 0, 1: 0, 2: 0}
    slot_parts, weight_parts, singles = [], [], []
    n_slots = n_weights = 0
    slot_t = np.uint8 if n <= 256 else np.int32
    for k, (idx, w) in zip(ks, draws):
        if not 1 <= k <= MAJORITY_MAX_K:
            raise ValueError(f"k must be in 1 .. {MAJORITY_MAX_K} for the majority kernel; got {k}")
        bound = (k + 1) << k
        kind = 0 if bound <= np.iinfo(np.int16).max else 1 if bound <= np.iinfo(np.int32).max else 2
        # k <= 2: the kernel takes the first slot's counts (singles), no table
        n_rows = idx.shape[0] if k > 2 else 0
        scores = np.zeros((n + 1, n_rows), dtype=(np.int16, np.int32, np.int64)[kind])
        slots = np.empty(n_rows * k, dtype=slot_t)
        if n_rows:
            tables(np.ascontiguousarray(idx, dtype=np.int64), k, scores, slots)
        kinds.append(kind)
        rows.append(n_rows)
        cols.append(width[kind])
        width[kind] += n_rows
        parts[kind].append(scores)
        slot_at.append(n_slots)
        n_slots += n_rows * k
        slot_parts.append(slots)
        if w is None:
            weight_at.append(-1)
            singles.append(np.bincount(idx[:, 0], minlength=n))
        else:
            weight_at.append(n_weights)
            n_weights += n_rows
            weight_parts.append(np.asarray(w[:n_rows], dtype=np.int64))
            singles.append(np.bincount(idx[:, 0], weights=w, minlength=n).astype(np.int64))

    def stacked(kind: int) -> np.ndarray:
        if not parts[kind]:
            return np.zeros((n + 1, 0), dtype=(np.int16, np.int32, np.int64)[kind])
        return np.ascontiguousarray(np.concatenate(parts[kind], axis=1))

    def ints(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    out = MajorityDraws(
        ints(list(ks)),
        ints(kinds),
        ints(cols),
        ints(rows),
        ints(slot_at),
        ints(weight_at),
        stacked(0),
        stacked(1),
        stacked(2),
        np.concatenate(slot_parts) if slot_parts else np.zeros(0, dtype=slot_t),
        np.concatenate(weight_parts) if weight_parts else np.zeros(0, dtype=np.int64),
        np.stack(singles).astype(np.int64) if singles else np.zeros((0, n), dtype=np.int64),
    )
    for a in out:
        a.setflags(write=False)
    return out


def prepare_patterns(patterns: np.ndarray, scratch: dict[str, Any]) -> None:
    """Fill ``scratch`` with the ``k``-free kernel layout of ``patterns`` (first-occurrence codes):
    ``dense[p, j]``, the rank of position j's prediction among the pattern's, and ``n_codes``."""
    if "dense" in scratch:
        return
    scratch["dense"], scratch["n_codes"] = _pick(3)(np.ascontiguousarray(patterns))  # type: ignore[misc]


#: Patterns per chunk of the majority kernel's shared work list.
_MAJ_CHUNK = 16


class MajorityJob:
    """The maj@k counts of ``patterns`` for every ``k`` of ``draws``, computed by whoever calls :meth:`work`.

    Threads calling ``work()`` take chunks of patterns from a shared list (the background thread
    from the front, the caller from the back once its own work is done), so the counts are ready
    as soon as the two meet. :attr:`out` is complete when every call has returned.
    """

    def __init__(
        self, kernel: Any, patterns: np.ndarray, draws: MajorityDraws, scratch: dict[str, Any]
    ) -> None:
        n_pat, n = patterns.shape
        prepare_patterns(patterns, scratch)
        self._kernel = kernel
        self._args = (scratch["dense"], scratch["n_codes"], *draws)
        self.chunk = max(1, _MAJ_CHUNK)
        self.claim = np.zeros(-(-n_pat // self.chunk), dtype=np.int8)
        total = int(draws.singles.sum(axis=1).max(initial=0))
        count_t = np.int16 if total <= np.iinfo(np.int16).max else np.int64
        self.out = np.empty((draws.ks.shape[0], n_pat, n), dtype=count_t)
        work = n_pat * int(draws.rows.sum())
        #: whether :meth:`work` from the front spreads over :func:`pool` (large inputs)
        self.spread = work >= _THREAD_MIN_WORK and N_THREADS > 1 and self.claim.shape[0] > 1

    def work(self, forward: bool = True) -> int:
        """Compute unclaimed chunks from the front (``forward``) or the back; the number done.

        From the front, large inputs are spread over :func:`pool` (one walker per thread, each
        starting at its share).
        """
        n_chunks = self.claim.shape[0]
        if not forward:
            return int(self._kernel(*self._args, self.claim, self.chunk, n_chunks - 1, -1, self.out))
        n_walkers = min(N_THREADS, n_chunks) if self.spread else 1
        starts = [(i * n_chunks) // n_walkers for i in range(n_walkers)]

        def walk(first: int) -> int:
            return int(self._kernel(*self._args, self.claim, self.chunk, first, 1, self.out))

        futures = [pool().submit(walk, s) for s in starts[1:]]
        done = walk(starts[0])
        return done + sum(int(f.result()) for f in futures)


def majority_counts(
    kernel: Any, patterns: np.ndarray, draws: MajorityDraws, scratch: dict[str, Any] | None = None
) -> np.ndarray:
    """Majority-pick counts ``(K, n_patterns, n)`` of every ``k`` of ``draws`` with the compiled kernel.

    Parameters
    ----------
    kernel
        :func:`majority_kernel`'s function.
    patterns : (P, n) int
        Per pattern, each position's prediction named by its first position.
    draws
        :func:`stack_draws` of the ``k`` wanted, drawn from ``n`` samples.
    scratch : dict, optional
        :func:`prepare_patterns` of ``patterns``, reused across calls (filled here if empty).

    Returns
    -------
    (K, P, n) int16 when every count fits (at most the total weight of a ``k``'s draws), else int64.
    Large inputs are split over :func:`pool`.
    """
    job = MajorityJob(kernel, patterns, draws, {} if scratch is None else scratch)
    job.work()
    return job.out
