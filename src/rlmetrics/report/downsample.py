"""Long series thinned for drawing: the extremes of each bucket, and the bucket means for smoothing.

A panel is a few hundred pixels wide, so a series of 10,000 points is drawn from its extremes:
the points are split into ``buckets`` runs of consecutive points (bucket ``k`` holds points
``floor(k n / buckets)`` up to the next bucket's first), and each bucket keeps its lowest and
highest finite point (and its first non-finite one, so that a gap stays a gap). Every point
kept is a raw point, with its own step and value, so hovering shows what was logged, and every
spike survives, which a stride or an average would lose. The smoothing slider of the page needs
the whole series; it gets each bucket's mean and count of finite points, over which
TensorBoard's debiased EMA is run with the weight raised to the bucket's count (exact when a
bucket's points are equal, and close whenever the EMA's time constant, ``1 / (1 - weight)``
points, spans more than a bucket or so).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Thinned", "thin"]


class Thinned(NamedTuple):
    """A series thinned to its bucket extremes.

    Attributes
    ----------
    keep : ndarray of int64, shape (m,)
        Increasing indices into the series of the points to draw (``m <= 3 * buckets``).
    ends : ndarray of int64, shape (buckets,)
        Index of each bucket's last point.
    means : ndarray of float64, shape (buckets,)
        Mean of each bucket's finite values (NaN for a bucket without one).
    counts : ndarray of int64, shape (buckets,)
        Finite values in each bucket.
    """

    keep: np.ndarray
    ends: np.ndarray
    means: np.ndarray
    counts: np.ndarray


def _first_per_bucket(mask: np.ndarray, bucket_of: np.ndarray) -> np.ndarray:
    hits = np.flatnonzero(mask)
    _, first = np.unique(bucket_of[hits], return_index=True)
    return hits[first]


def thin(values: np.ndarray, *, buckets: int) -> Thinned:
    """Keep, per bucket of consecutive points, the lowest and highest finite point.

    Parameters
    ----------
    values : array_like, shape (n,)
        The series (NaN and infinities allowed), ``n >= buckets``.
    buckets : int, keyword-only
        Number of buckets, at least 1.

    Returns
    -------
    Thinned

    Examples
    --------
    >>> t = thin([3.0, 1.0, 2.0, 9.0, 4.0, 5.0], buckets=2)
    >>> t.keep.tolist(), t.ends.tolist(), t.means.tolist(), t.counts.tolist()
    ([0, 1, 3, 4], [2, 5], [2.0, 6.0], [3, 3])
    >>> thin(list(range(10)), buckets=4).ends.tolist()
    [1, 4, 6, 9]
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if not isinstance(buckets, int | np.integer) or isinstance(buckets, bool) or buckets < 1:
        raise ValueError(f"buckets must be an integer >= 1; got {buckets!r}")
    if x.size < buckets:
        raise ValueError(f"values: expected at least buckets={buckets} points; got {x.size}")
    # bucket k holds the points floor(k n / buckets) .. floor((k + 1) n / buckets) - 1: integer
    # arithmetic, which the page's script repeats exactly
    edges = np.arange(buckets + 1, dtype=np.int64) * x.size // buckets
    starts, sizes = edges[:-1], np.diff(edges)
    bucket_of = np.repeat(np.arange(buckets), sizes)
    finite = np.isfinite(x)
    low = np.where(finite, x, np.inf)
    high = np.where(finite, x, -np.inf)
    mins = np.minimum.reduceat(low, starts)
    maxs = np.maximum.reduceat(high, starts)
    # a bucket without a finite value keeps its first point (non-finite: drawn as a gap)
    keep = [
        _first_per_bucket(low == mins[bucket_of], bucket_of),
        _first_per_bucket(high == maxs[bucket_of], bucket_of),
    ]
    if not finite.all():
        keep.append(_first_per_bucket(~finite, bucket_of))
    counts = np.add.reduceat(finite.astype(np.int64), starts)
    sums = np.add.reduceat(np.where(finite, x, 0.0), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return Thinned(np.unique(np.concatenate(keep)), edges[1:] - 1, means, counts)
