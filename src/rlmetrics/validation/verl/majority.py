"""verl's bootstrap maj@k as counts: how many draws return each position's value.

verl's vote (``calc_maj_val``) returns, in each bootstrap draw, the value of the first drawn
sample whose prediction is the most common, ties going to the prediction drawn first. With the
predictions of a prompt named by their first position (a *pattern*), every (draw, prediction)
gets the exact integer score ``count * 2**k + sum of 2**(k - 1 - first_slot)`` over its drawn
samples: the first-slot bits of different predictions are disjoint, so the largest score is
verl's winner, and its highest low bit names the winner's first slot, hence the position whose
value verl returns. The scores of all patterns come from one matrix product per block. With one
or two draws, or a single prediction, the first drawn sample always wins; beyond 47 draws
(scores over 2**53) a per-position score is used instead. From 192 samples per prompt the
votes are counted from the drawn slots instead, in time that grows with ``k`` rather than
with ``n``. Prompts sharing a pattern share their counts.

The patterns are those of :class:`~rlmetrics.validation.exact.votes.Votes`, the vote counter
this shares with the exact maj@k (which weighs each answer by its exact chance to win instead
of counting verl's particular draws).
"""

from __future__ import annotations

import functools

import numpy as np

from rlmetrics.validation.exact.inputs import unique_rows
from rlmetrics.validation.verl import draws

__all__ = ["majority_counts", "majority_counts_distinct", "pattern_counts"]

# Largest k whose bit scores, up to (k + 1) * 2**k, are exact in float64.
_BITS_MAX_K = 47
# Largest k whose bit scores are exact in float32 (below 2**24).
_FLOAT32_MAX_K = 19
# Scores per block (small enough to stay in cache).
_MAJ_BLOCK = 1 << 15
# Slots per block of the slot counts (bounds their temporaries to tens of MB).
_ROW_BLOCK = 1 << 21
# Samples per prompt from which the slot counts are used: their cost grows with k, the
# others' with n * (predictions) (bit scores) or n**2 (position scores).
_SLOTS_MIN_N = 192


def majority_counts(local: np.ndarray, subset_size: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """How many bootstrap draws give each position as verl's majority-vote pick.

    Parameters
    ----------
    local : (P, n) int
        Per prompt, each position's prediction named by the position of its first occurrence.
    subset_size, n_bootstrap, seed : int
        verl's bootstrap.

    Returns
    -------
    (P, n) int64, each row summing to ``n_bootstrap``

    Examples
    --------
    >>> majority_counts(np.array([[0, 0, 2]]), 3, 1000, 42).sum(axis=1).tolist()
    [1000]
    """
    counts, inverse = majority_counts_distinct(local, subset_size, n_bootstrap, seed)
    return counts[inverse].astype(np.int64)


def majority_counts_distinct(
    local: np.ndarray, subset_size: int, n_bootstrap: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`majority_counts` of each distinct pattern, and each row's pattern.

    Returns
    -------
    counts : (U, n) int16 (int64 beyond 32767 draws)
    inverse : (P,) int64, row -> pattern
    """
    p_all, n = local.shape
    count_t = np.int16 if n_bootstrap <= np.iinfo(np.int16).max else np.int64
    if p_all == 0:
        return np.zeros((0, n), dtype=count_t), np.zeros(0, dtype=np.int64)
    if subset_size <= 2:
        # one or two draws: the first drawn answer always wins (alone, or first of a 1-1 tie)
        return pattern_counts(local[:1], subset_size, n_bootstrap, seed), np.zeros(p_all, dtype=np.int64)
    patterns, inverse = unique_rows(local)
    return pattern_counts(patterns, subset_size, n_bootstrap, seed), inverse


def pattern_counts(patterns: np.ndarray, subset_size: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """:func:`majority_counts` of distinct patterns (the rows of
    :func:`~rlmetrics.validation.exact.inputs.unique_rows`).

    Returns
    -------
    (U, n) int16 (int64 beyond 32767 draws)
    """
    u, n = patterns.shape
    count_t = np.int16 if n_bootstrap <= np.iinfo(np.int16).max else np.int64
    first = np.bincount(draws.indices(n, subset_size, n_bootstrap, seed)[:, 0], minlength=n).astype(count_t)
    if subset_size <= 2:
        return np.broadcast_to(first, (u, n))
    counts = np.empty((u, n), dtype=count_t)
    # one prediction: the first drawn sample always wins
    single = (patterns == 0).all(axis=1)
    counts[single] = first
    if not single.all():
        several = ~single
        if n >= _SLOTS_MIN_N:
            counts[several] = _counts_slots(patterns[several], subset_size, n_bootstrap, seed)
        elif subset_size <= _BITS_MAX_K:
            counts[several] = _counts_bits(patterns[several], subset_size, n_bootstrap, seed)
        else:
            counts[several] = _counts_positions(patterns[several], subset_size, n_bootstrap, seed)
    return counts


def _matmul_single_thread(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in row blocks small enough for BLAS to stay on the calling thread.

    OpenBLAS runs products under 2**18 multiply-adds on one thread; larger ones wake its thread
    pool, whose spinning workers cost more than they save on these thin products.
    """
    rows, inner = a.shape
    step = max(1, ((1 << 18) - 1) // max(inner * b.shape[1], 1))
    if step >= rows:
        return a @ b
    out = np.empty((rows, b.shape[1]), dtype=np.result_type(a, b))
    for start in range(0, rows, step):
        np.matmul(a[start : start + step], b, out=out[start : start + step])
    return out


@functools.lru_cache(maxsize=64)
def _scores_table(
    n: int, k: int, n_bootstrap: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per distinct draw, each position's score ``mult * 2**k + 2**(k - 1 - first_slot)``.

    Returns
    -------
    x_t : (n, R) float32 (float64 beyond k = 19)
    slot_pos : (k * R,) int32, the position drawn in slot ``t`` of draw ``r`` at ``t * R + r``
    weights : (R,) or None, as :func:`~rlmetrics.validation.verl.draws.fold_draws`
    """
    idx, mult, first, weights = draws.distinct_draws(n, k, n_bootstrap, seed)
    dtype = np.float32 if k <= _FLOAT32_MAX_K else np.float64
    drawn = first < k
    bits = np.where(drawn, np.ldexp(1.0, np.where(drawn, k - 1 - first, 0)), 0.0)
    x_t = np.ascontiguousarray((mult * float(2**k) + bits).T, dtype=dtype)
    slot_pos = np.ascontiguousarray(idx.T).astype(np.int32).ravel()
    x_t.setflags(write=False)
    slot_pos.setflags(write=False)
    return x_t, slot_pos, weights


def _winner_rows(low: np.ndarray, k: int, n_rows: int) -> np.ndarray:
    """``slot * n_rows + r`` of each winner, from its score's low part ``low`` (c, R)."""
    if k <= _FLOAT32_MAX_K:
        # floor(log2 low) is the float32 exponent of low (low >= 1 and exact below 2**24)
        lin = low.astype(np.float32).view(np.int32)
        lin >>= 23
        np.subtract(k - 1 + 127, lin, out=lin)
    else:
        lin = (k - np.frexp(low.astype(np.float64))[1]).astype(np.int64)
    lin *= n_rows
    lin += np.arange(n_rows, dtype=lin.dtype)[None, :]
    return lin


def _counts_bits(patterns: np.ndarray, k: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """Majority picks for ``k <= 47`` from the bit scores, one matrix product per block.

    Patterns are taken in blocks of equal-ish numbers of predictions ``m``; each block's
    ``(m, c, n)`` one-hot matrix of predictions times the ``(n, R)`` score table gives every
    (prediction, pattern, draw) score, and the max over predictions the winner.
    """
    n_pat, n = patterns.shape
    x_t, slot_pos, weights = _scores_table(n, k, n_bootstrap, seed)
    n_rows = x_t.shape[1]
    int_t = np.int32 if k <= _FLOAT32_MAX_K else np.int64
    low_mask = (1 << k) - 1
    is_code = patterns == np.arange(n)[None, :]
    n_codes = is_code.sum(axis=1)
    # each pattern's predictions by first position
    code_pos = np.where(is_code, np.arange(n)[None, :], n)
    code_pos.sort(axis=1)
    counts = np.zeros((n_pat, n), dtype=np.int64)
    for m in np.unique(n_codes).tolist():
        group = np.flatnonzero(n_codes == m)
        size = max(1, _MAJ_BLOCK // (n_rows * m))
        for lo in range(0, group.shape[0], size):
            chunk = group[lo : lo + size]
            c = chunk.shape[0]
            onehot = (patterns[chunk][None, :, :] == code_pos[chunk, :m].T[:, :, None]).astype(x_t.dtype)
            score = _matmul_single_thread(onehot.reshape(m * c, n), x_t).reshape(m, c, n_rows)
            top = np.maximum.reduce(score, axis=0) if m > 1 else score[0]
            low = top.astype(int_t)
            low &= low_mask
            pos = np.take(slot_pos, _winner_rows(low, k, n_rows))
            pos += (np.arange(c, dtype=np.int32) * n)[:, None]
            if weights is None:
                got = np.bincount(pos.ravel(), minlength=c * n)
            else:
                flat_w = np.broadcast_to(weights, pos.shape).ravel()
                got = np.bincount(pos.ravel(), weights=flat_w, minlength=c * n)
            counts[chunk] = got.reshape(c, n)
    return counts


def _counts_positions(patterns: np.ndarray, k: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """Majority picks for any ``k``: max over positions of ``count(code) * (k + 1) - first_slot``.

    Scores are encoded as ``score * n + position`` so that the max also names the position.
    """
    n_pat, n = patterns.shape
    _, mult, first = draws.draw_tables(n, k, n_bootstrap, seed)
    exact32 = ((k + 1) * k + k + 1) * n < (1 << 24)
    dtype = np.float32 if exact32 else np.float64
    counts_t = np.ascontiguousarray((mult * float((k + 1) * n)).T, dtype=dtype)  # (n, B)
    # per position: its own index minus n * its first slot (k when not drawn)
    offset = (np.arange(n)[:, None] - n * first.T).astype(dtype)[:, None, :]  # (n, 1, B)
    step = max(1, _MAJ_BLOCK // max(n_bootstrap * n, 1))
    counts = np.zeros((n_pat, n), dtype=np.int64)
    for start in range(0, n_pat, step):
        pat = patterns[start : start + step]
        m = pat.shape[0]
        eq = (pat[:, None, :] == pat[:, :, None]).transpose(1, 0, 2).reshape(n * m, n).astype(dtype)
        score = _matmul_single_thread(eq, counts_t).reshape(n, m, n_bootstrap)
        score += offset
        top = score.max(axis=0)  # (m, B)
        winner = np.rint(top).astype(np.int64) % n
        lin = np.arange(m, dtype=np.int64)[:, None] * n + winner
        counts[start : start + m] = np.bincount(lin.ravel(), minlength=m * n).reshape(m, n)
    return counts


def _counts_slots(patterns: np.ndarray, k: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """Majority picks for any ``k`` from the drawn slots: O(k + m) per (pattern, draw).

    Each pattern's predictions are renumbered ``0 .. m - 1``; per (pattern, draw) row the votes
    of each prediction and its first slot give the score ``votes * (k + 1) - first_slot``,
    whose max is verl's winner (more votes win; among equal votes the earlier first slot), and
    the position in the winner's first slot is the one verl returns. Rows are taken in blocks
    of a few million slots, so memory does not grow with ``n``.
    """
    n_pat, n = patterns.shape
    idx = draws.indices(n, k, n_bootstrap, seed)
    # a prediction named by its first position -> its rank among the pattern's predictions
    rank = np.cumsum(patterns == np.arange(n)[None, :], axis=1) - 1
    dense = np.take_along_axis(rank, patterns, axis=1)
    m_of = rank[:, -1] + 1
    counts = np.zeros(n_pat * n, dtype=np.int64)
    slots_desc = np.arange(k - 1, -1, -1, dtype=np.int64)
    for m in np.unique(m_of).tolist():
        group = np.flatnonzero(m_of == m)
        n_rows = group.shape[0] * n_bootstrap
        step = max(1, _ROW_BLOCK // (k + m))
        for start in range(0, n_rows, step):
            rows = np.arange(start, min(start + step, n_rows), dtype=np.int64)
            pat, draw = group[rows // n_bootstrap], rows % n_bootstrap
            drawn = idx[draw]  # (r, k) positions
            codes = dense[pat[:, None], drawn]  # (r, k) predictions
            r = rows.shape[0]
            local_row = np.arange(r, dtype=np.int64)[:, None]
            votes = np.bincount((local_row * m + codes).ravel(), minlength=r * m).reshape(r, m)
            first = np.full((r, m), k, dtype=np.int64)
            first[local_row, codes[:, ::-1]] = slots_desc  # the last write, the first slot, wins
            winner = np.argmax(votes * (k + 1) - first, axis=1)
            slot = first[np.arange(r), winner]
            pos = drawn[np.arange(r), slot]
            counts += np.bincount(pat * n + pos, minlength=n_pat * n)
    return counts.reshape(n_pat, n)
