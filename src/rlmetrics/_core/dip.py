"""Hartigan's dip test of unimodality for a 1-D sample (Hartigan & Hartigan, 1985).

The dip of a distribution ``F`` is ``inf over unimodal G of sup_x |F(x) - G(x)|``: the distance
from ``F`` to the closest unimodal distribution function (one convex up to its mode and concave
after it, an atom at the mode allowed). It is 0 for a unimodal ``F``, at most 1/4 (two atoms of
one half each), at least ``1 / (2n)`` for a sample of ``n`` distinct points, and unchanged by
``x -> a x + b`` (``a != 0``).

How it is computed (Hartigan's descent, written here from the paper's description; O(n) hull
passes per step, a few steps). Let ``v_1 < ... < v_m`` be the distinct values, ``c_i = n F(v_i-)``
and ``d_i = n F(v_i)``. On the modal interval ``[v_low, v_high]`` (at first the whole range) take
the greatest convex minorant (GCM) of the points ``(v_i, c_i)`` and the least concave majorant
(LCM) of ``(v_i, d_i)``; where they are furthest apart, at ``v_k``, the GCM vertex at or left of
``k`` and the LCM vertex at or right of it are the next modal interval. Left of it the unimodal
``G`` is convex and must rise above no ``d_i`` by more than the band (``d_i - GCM_i``), right of it
it is concave (``LCM_i - c_i``); ``2 n dip`` is the largest such gap found, and the descent stops
when the two hulls of the modal interval are within it (a unimodal ``G`` fits there). A tie is an
atom of ``F``: the atom at the mode is free, every other one counts. The tests check the result
against a brute force from the definition (a linear programme per mode: the convex and concave
chains of ``G`` in the band ``[d_i - eps, c_i + eps]``, ``eps`` minimised), which it matches to
1e-14 on samples with and without ties; the ``diptest`` package (AS 217) agrees on samples without
ties, and differs on some with ties.

The p-value (:func:`dip_pvalue`) compares ``sqrt(n) * dip`` with its distribution for uniform
samples of the same ``n`` (the uniform is the least favourable unimodal null: Hartigan's
choice). That distribution is the table :data:`NULL_QUANTILES`, simulated once, seeded, by
:func:`simulate_null` (``NULL_REPS`` uniform samples per ``n``, seed ``NULL_SEED``; the test
suite recomputes rows of it); between the tabled ``n`` its quantiles are interpolated in
``log n``, beyond the largest ``n`` its row is used (``sqrt(n) * dip`` converges in
distribution as ``n`` grows). p-values are read off the tabled quantiles, interpolated
linearly: below the median they are coarse (0.5 to 1), and past the 0.999 quantile they are
reported as 0.001.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["NULL_PROBS", "NULL_QUANTILES", "NULL_REPS", "NULL_SEED", "dip", "dip_pvalue", "simulate_null"]

#: Seed and number of uniform samples per ``n`` behind :data:`NULL_QUANTILES`.
NULL_SEED, NULL_REPS = 20251206, 3000
#: The probabilities whose quantiles of ``sqrt(n) * dip`` under the uniform are tabled.
NULL_PROBS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.925, 0.95, 0.975, 0.99, 0.995, 0.999)
#: ``n`` -> the quantiles at :data:`NULL_PROBS` of ``sqrt(n) * dip`` of ``n`` uniform points
#: (:func:`simulate_null`).
NULL_QUANTILES: dict[int, tuple[float, ...]] = {
    4: (0.2500, 0.2500, 0.2648, 0.3126, 0.3432, 0.3745, 0.3927, 0.4159, 0.4419, 0.4609, 0.4723, 0.4815),
    6: (0.3016, 0.3231, 0.3452, 0.3656, 0.3762, 0.3876, 0.3949, 0.4026, 0.4248, 0.4683, 0.4956, 0.5276),
    8: (0.3145, 0.3282, 0.3415, 0.3598, 0.3809, 0.4016, 0.4148, 0.4308, 0.4597, 0.4838, 0.4960, 0.5192),
    12: (0.3136, 0.3334, 0.3536, 0.3801, 0.3948, 0.4178, 0.4319, 0.4530, 0.4780, 0.5113, 0.5325, 0.5646),
    16: (0.3265, 0.3436, 0.3646, 0.3916, 0.4088, 0.4291, 0.4453, 0.4658, 0.4923, 0.5283, 0.5468, 0.6197),
    24: (0.3319, 0.3515, 0.3722, 0.3980, 0.4172, 0.4400, 0.4580, 0.4773, 0.5107, 0.5408, 0.5615, 0.6082),
    32: (0.3368, 0.3553, 0.3744, 0.4023, 0.4213, 0.4456, 0.4630, 0.4822, 0.5161, 0.5640, 0.5902, 0.6212),
    48: (0.3428, 0.3624, 0.3837, 0.4094, 0.4303, 0.4589, 0.4757, 0.4993, 0.5390, 0.5880, 0.6240, 0.6805),
    64: (0.3487, 0.3687, 0.3918, 0.4210, 0.4374, 0.4610, 0.4787, 0.5038, 0.5357, 0.5872, 0.6177, 0.6823),
    96: (0.3540, 0.3747, 0.3950, 0.4263, 0.4454, 0.4692, 0.4879, 0.5101, 0.5451, 0.5931, 0.6155, 0.6774),
    128: (0.3569, 0.3756, 0.3997, 0.4288, 0.4474, 0.4744, 0.4890, 0.5122, 0.5498, 0.6014, 0.6499, 0.7222),
    192: (0.3626, 0.3826, 0.4065, 0.4354, 0.4558, 0.4804, 0.4951, 0.5196, 0.5636, 0.6078, 0.6302, 0.6675),
    256: (0.3638, 0.3817, 0.4056, 0.4324, 0.4506, 0.4757, 0.4911, 0.5170, 0.5499, 0.5915, 0.6348, 0.7026),
    384: (0.3676, 0.3877, 0.4101, 0.4409, 0.4617, 0.4857, 0.5005, 0.5243, 0.5570, 0.6045, 0.6395, 0.7209),
    512: (0.3674, 0.3885, 0.4114, 0.4393, 0.4623, 0.4848, 0.5035, 0.5300, 0.5639, 0.6017, 0.6345, 0.6892),
}


def _hull(x: np.ndarray, y: np.ndarray, *, lower: bool) -> np.ndarray:
    """The vertices (indices) of the lower (GCM) or upper (LCM) hull of ``(x, y)``, ``x`` increasing."""
    sign = 1.0 if lower else -1.0
    xs, ys = x.tolist(), y.tolist()  # Python floats: a loop over numpy scalars is several times slower
    hull: list[int] = []
    for i, (xi, yi) in enumerate(zip(xs, ys)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b on or beyond the chord from a to i: not a vertex
            if sign * ((ys[b] - ys[a]) * (xi - xs[a]) - (yi - ys[a]) * (xs[b] - xs[a])) >= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(hull)


def _twice_dip(v: np.ndarray, c: np.ndarray, d: np.ndarray) -> float:
    """``2 n dip`` from the distinct values ``v`` and the counts below (``c``) and up to (``d``)
    each: Hartigan's descent on the modal interval ``[low, high]``."""
    low, high, twice = 0, v.shape[0] - 1, 0.0
    while high > low:
        x, below, upto = v[low : high + 1], c[low : high + 1], d[low : high + 1]
        g, m = _hull(x, below, lower=True), _hull(x, upto, lower=False)
        gcm, lcm = np.interp(x, x[g], below[g]), np.interp(x, x[m], upto[m])
        k = int(np.argmax(lcm - gcm))
        if lcm[k] - gcm[k] <= twice:  # a unimodal G within twice / 2 fits the modal interval
            break
        left, right = int(g[g <= k].max()), int(m[m >= k].min())
        if left > 0:  # the convex part, left of the new modal interval
            twice = max(twice, float(np.max(upto[:left] - gcm[:left])))
        if right < high - low:  # the concave part, right of it
            twice = max(twice, float(np.max(lcm[right + 1 :] - below[right + 1 :])))
        if left == 0 and right == high - low:  # no narrower modal interval
            break
        low, high = low + left, low + right
    return twice


def dip(sample: Any) -> float:
    """Hartigan's dip of a 1-D sample: the sup distance from its empirical distribution function
    to the closest unimodal distribution function.

    Parameters
    ----------
    sample : array_like
        Finite real values, any order, ties allowed (a tie is an atom of the empirical
        distribution).

    Returns
    -------
    float
        In ``[0, 1/4]``: 0 for one point or one distinct value, ``1 / (2n)`` at least for ``n``
        distinct points; about 1/4 for two well-separated halves.

    Raises
    ------
    ValueError
        ``sample`` is empty, not 1-D, or has a NaN or an infinity.

    Examples
    --------
    >>> round(dip([0.0, 0.0, 1.0, 1.0]), 6)
    0.25
    >>> round(dip([0.0, 1.0, 2.0, 3.0]), 6)
    0.125
    """
    x = np.asarray(sample, dtype=np.float64)
    if x.ndim != 1 or x.shape[0] == 0:
        raise ValueError(f"sample must be a non-empty 1-D array; got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("sample must be finite; got a NaN or an infinity")
    values, counts = np.unique(x, return_counts=True)
    d = np.cumsum(counts).astype(np.float64)  # n F(v_i): counts, exact in float64
    return _twice_dip(values, d - counts, d) / (2.0 * x.shape[0])


def simulate_null(n: int, reps: int = NULL_REPS, seed: int = NULL_SEED) -> np.ndarray:
    """The quantiles at :data:`NULL_PROBS` of ``sqrt(n) * dip`` over ``reps`` uniform samples of
    size ``n`` drawn from ``np.random.default_rng([seed, n])`` (how :data:`NULL_QUANTILES` was made).

    Examples
    --------
    >>> simulate_null(6, reps=50, seed=0).shape
    (12,)
    """
    rng = np.random.default_rng([seed, n])
    stats = np.array([dip(rng.random(n)) for _ in range(reps)]) * math.sqrt(n)
    return np.quantile(stats, NULL_PROBS)


def _null_row(n: int) -> np.ndarray:
    """The tabled quantiles for ``n``, interpolated in ``log n`` between the tabled sizes."""
    sizes = np.array(sorted(NULL_QUANTILES))
    table = np.array([NULL_QUANTILES[int(s)] for s in sizes])
    where = np.clip(np.log(n), np.log(sizes[0]), np.log(sizes[-1]))
    return np.array([np.interp(where, np.log(sizes), table[:, k]) for k in range(table.shape[1])])


def dip_pvalue(sample: Any) -> tuple[float, float]:
    """The dip of ``sample`` and its p-value against uniform samples of the same size.

    Parameters
    ----------
    sample : array_like
        As :func:`dip`; at least 4 values (a smaller sample cannot reject).

    Returns
    -------
    (float, float)
        The dip, and ``P(dip of n uniform points >= it)`` from :data:`NULL_QUANTILES`: a small
        p-value rejects unimodality. Between 0.001 (past the tabled 0.999 quantile) and 1.

    Raises
    ------
    ValueError
        As :func:`dip`.

    Examples
    --------
    >>> value, p = dip_pvalue([0.0] * 20 + [1.0] * 20)
    >>> round(value, 6), p
    (0.25, 0.001)
    """
    value = dip(sample)
    n = np.asarray(sample).shape[0]
    if n < 4:
        return value, 1.0
    quantiles = np.concatenate(([0.0], _null_row(n)))
    probs = np.concatenate(([0.0], NULL_PROBS))
    cdf = float(np.interp(value * math.sqrt(n), quantiles, probs))
    return value, max(1.0 - cdf, 1.0 - NULL_PROBS[-1])
