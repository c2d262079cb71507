"""Shared statistics of the health rules: smoothing, frozen robust baselines, persistence.

* :func:`debiased_ema`: TensorBoard's smoothing of a curve, so that levels quoted in evidence
  match what users see there.
* :func:`frozen_baseline`: median and MAD of the first logged points of a run (optionally in log
  space, for heavy-tailed metrics such as gradient norms): the run's own early level, frozen so
  that a slow drift cannot carry the baseline along with it.
* :func:`rolling_baseline`: the median and MAD of the points just before each point, for rules
  about spikes over a running level.
* :func:`first_persistent`: the first window where a condition holds for ``k`` of ``n``
  consecutive logged points, and its onset (the first flagged point of that window).
* :func:`last_persistent`: the same, for a condition that still holds over the last ``n``
  points (a phase the run has not left), with the onset of that unbroken phase.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MAD_TO_SIGMA",
    "Baseline",
    "debiased_ema",
    "first_persistent",
    "frozen_baseline",
    "last_persistent",
    "noise_sigma",
    "rolling_baseline",
    "window_median",
]

#: MAD * 1.4826 estimates the standard deviation of normal data.
MAD_TO_SIGMA = 1.4826


def debiased_ema(values: np.ndarray, weight: float = 0.6) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average, debiased for its zero start.

    ``last = last * weight + (1 - weight) * x`` over the finite points, each divided by
    ``1 - weight**t`` (``t`` the number of finite points so far). As in TensorBoard, a
    non-finite point is shown as it is and left out of the average, and a constant series is
    returned unchanged.

    Parameters
    ----------
    values : array_like, shape (n,)
        The curve.
    weight : float
        TensorBoard's smoothing weight, in ``[0, 1)``; 0.6 is its default.

    Returns
    -------
    ndarray, shape (n,)

    Examples
    --------
    >>> debiased_ema([1.0, 2.0, float("nan"), 3.0], weight=0.5).round(4).tolist()
    [1.0, 1.6667, nan, 2.4286]
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"weight must be in [0, 1); got {weight!r}")
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    out = x.copy()
    if x.size == 0 or np.all(x == x[0]):
        return out
    from scipy.signal import lfilter

    finite = np.isfinite(x)
    kept = x[finite]
    # last = last * weight + (1 - weight) * x over the finite points is one first-order filter
    smoothed = lfilter([1.0 - weight], [1.0, -weight], kept)
    out[finite] = smoothed / (1.0 - weight ** np.arange(1, kept.size + 1, dtype=np.float64))
    return out


@dataclass(frozen=True)
class Baseline:
    """A run's early level: median and MAD of its first logged points.

    Attributes
    ----------
    median, mad : float
        In log space when ``log`` (then :attr:`level` is ``exp(median)``).
    log : bool
        Whether the statistics are of ``log(values)``.
    n : int
        Finite points it was computed from.
    last_index : int
        Index (into the series) of the last point of the baseline window.
    """

    median: float
    mad: float
    log: bool
    n: int
    last_index: int

    @property
    def level(self) -> float:
        """The baseline level in the metric's own units."""
        return float(np.exp(self.median)) if self.log else self.median

    def sigma(self, floor: float = 0.0) -> float:
        """Robust standard deviation (``MAD * 1.4826``), at least ``floor``."""
        return max(self.mad * MAD_TO_SIGMA, floor)

    def z(self, values: np.ndarray, *, floor: float = 1e-12) -> np.ndarray:
        """Robust z-scores of ``values`` (in log space when the baseline is)."""
        x = _transform(np.asarray(values, dtype=np.float64), self.log)
        return (x - self.median) / self.sigma(floor)


def _transform(x: np.ndarray, log: bool) -> np.ndarray:
    if not log:
        return x
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)


def frozen_baseline(values: np.ndarray, *, window: int, log: bool = False, skip: int = 0) -> Baseline | None:
    """Median and MAD of the first ``window`` finite points after the first ``skip``.

    Parameters
    ----------
    values : array_like, shape (n,)
        The series (NaN and inf are passed over; in log space, so are values <= 0).
    window : int
        Number of finite points the baseline is computed from.
    log : bool
        Compute the statistics of ``log(values)``.
    skip : int
        Points at the start to leave out (warm-up, compilation).

    Returns
    -------
    Baseline or None
        None when the series has fewer than ``window`` usable points.

    Examples
    --------
    >>> b = frozen_baseline([9.0, 1.0, 2.0, 3.0, 100.0], window=3, skip=1)
    >>> b.median, b.mad, b.last_index
    (2.0, 1.0, 3)
    """
    x = _transform(np.asarray(values, dtype=np.float64).reshape(-1), log)
    usable = np.flatnonzero(np.isfinite(x))
    usable = usable[usable >= skip][:window]
    if window < 1 or usable.size < window:
        return None
    sample = x[usable]
    median = float(np.median(sample))
    mad = float(np.median(np.abs(sample - median)))
    return Baseline(median=median, mad=mad, log=log, n=int(usable.size), last_index=int(usable[-1]))


def noise_sigma(values: np.ndarray) -> float:
    """Robust standard deviation of a series' point-to-point noise: MAD of its differences.

    ``MAD(diff(x)) * 1.4826 / sqrt(2)``: a slow trend barely moves it, unlike the spread of the
    values themselves. Non-finite points are dropped first; fewer than 3 points give 0.

    Examples
    --------
    >>> round(noise_sigma([0.0, 1.0, 0.0, 1.0, 0.0]), 4)
    1.0484
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    x = x[np.isfinite(x)]
    if x.size < 3:
        return 0.0
    d = np.diff(x)
    return float(np.median(np.abs(d - np.median(d))) * MAD_TO_SIGMA / np.sqrt(2.0))


def rolling_baseline(values: np.ndarray, *, window: int, log: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of the ``window`` points before each point (NaN for the first ``window``).

    Non-finite points count as missing (a window holding any has NaN statistics).

    Returns
    -------
    median, mad : ndarray, shape (n,)

    Examples
    --------
    >>> med, mad = rolling_baseline([1.0, 2.0, 3.0, 10.0], window=3)
    >>> med.tolist(), mad.tolist()
    ([nan, nan, nan, 2.0], [nan, nan, nan, 1.0])
    """
    x = _transform(np.asarray(values, dtype=np.float64).reshape(-1), log)
    median = np.full(x.shape, np.nan)
    mad = np.full(x.shape, np.nan)
    if window < 1 or x.size <= window:
        return median, mad
    windows = np.lib.stride_tricks.sliding_window_view(np.where(np.isfinite(x), x, np.nan), window)[:-1]
    med = _row_nanmedian(windows)
    median[window:] = med
    mad[window:] = _row_nanmedian(np.abs(windows - med[:, None]))
    return median, mad


def _row_nanmedian(rows: np.ndarray) -> np.ndarray:
    """``np.nanmedian(rows, axis=1)``: the rows without NaN by ``np.median`` (a partition, many
    times faster than nanmedian's masked arrays), only the others by ``nanmedian``."""
    if rows.shape[0] == 0:
        return np.zeros(0)
    holes = np.isnan(rows).any(axis=1)
    if not holes.any():
        return np.median(rows, axis=1)
    out = np.empty(rows.shape[0])
    out[~holes] = np.median(rows[~holes], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a window of only non-finite points: NaN
        out[holes] = np.nanmedian(rows[holes], axis=1)
    return out


def window_median(values: np.ndarray, *, window: int) -> np.ndarray:
    """Median of the ``window`` points ending at each point (NaN for the first ``window - 1``).

    Non-finite points are passed over (a window of only non-finite points gives NaN).

    Examples
    --------
    >>> window_median([1.0, 5.0, 2.0, 8.0], window=2).tolist()
    [nan, 3.0, 3.5, 5.0]
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    out = np.full(x.shape, np.nan)
    if window < 1 or x.size < window:
        return out
    windows = np.lib.stride_tricks.sliding_window_view(np.where(np.isfinite(x), x, np.nan), window)
    out[window - 1 :] = _row_nanmedian(windows)
    return out


def first_persistent(flags: np.ndarray, *, k: int, n: int, start: int = 0) -> tuple[int, int] | None:
    """The first window of ``n`` consecutive points (from ``start``) where ``k`` or more are flagged.

    Parameters
    ----------
    flags : array_like of bool, shape (m,)
        Whether the condition holds at each logged point.
    k, n : int
        ``k`` of the last ``n`` points (``1 <= k <= n``). Near the end of a series a window may
        be shorter than ``n``; it still needs ``k`` flagged points.
    start : int
        First index a window may start at.

    Returns
    -------
    (onset, end) or None
        ``onset``: index of the first flagged point of the first qualifying window; ``end``:
        the index where it first qualifies (its ``k``-th flagged point).

    Examples
    --------
    >>> first_persistent([0, 1, 0, 1, 1, 1, 0], k=3, n=4)
    (1, 4)
    >>> first_persistent([1, 0, 0, 1], k=2, n=3) is None
    True
    """
    if not 1 <= k <= n:
        raise ValueError(f"persistence needs 1 <= k <= n; got k={k}, n={n}")
    f = np.array(flags, dtype=bool).reshape(-1)
    f[: max(start, 0)] = False
    if f.size == 0:
        return None
    counts = np.convolve(f.astype(np.int64), np.ones(n, dtype=np.int64))[: f.size]
    hits = np.flatnonzero(counts >= k)
    if hits.size == 0:
        return None
    end = int(hits[0])
    window = np.flatnonzero(f[max(end - n + 1, 0) : end + 1])
    return max(end - n + 1, 0) + int(window[0]), end


def last_persistent(flags: np.ndarray, *, k: int, n: int) -> tuple[int, int] | None:
    """The unbroken stretch of ``k``-of-``n`` windows that reaches the last point, if there is one.

    A condition that held for a while and then stopped (a warm-up phase) gives None; one that
    still holds over the last ``n`` points gives the onset of the stretch of qualifying windows
    that ends there.

    Parameters
    ----------
    flags : array_like of bool, shape (m,)
        Whether the condition holds at each logged point.
    k, n : int
        ``k`` of the last ``n`` points (``1 <= k <= n``); a series shorter than ``n`` is one
        window, which still needs ``k`` flagged points.

    Returns
    -------
    (onset, end) or None
        ``onset``: index of the first flagged point of the earliest window of that stretch;
        ``end``: the last index, ``m - 1``.

    Examples
    --------
    >>> last_persistent([1, 1, 1, 0, 0, 0, 0, 1, 1, 1], k=3, n=4)
    (7, 9)
    >>> last_persistent([1, 1, 1, 1, 0, 0, 0, 0], k=3, n=4) is None
    True
    """
    if not 1 <= k <= n:
        raise ValueError(f"persistence needs 1 <= k <= n; got k={k}, n={n}")
    f = np.array(flags, dtype=bool).reshape(-1)
    if f.size == 0:
        return None
    counts = np.convolve(f.astype(np.int64), np.ones(n, dtype=np.int64))[: f.size]
    qualifies = counts >= k
    if not qualifies[-1]:
        return None
    broken = np.flatnonzero(~qualifies)
    first_end = int(broken[-1]) + 1 if broken.size else int(np.flatnonzero(qualifies)[0])
    lo = max(first_end - n + 1, 0)
    return lo + int(np.flatnonzero(f[lo : first_end + 1])[0]), int(f.size - 1)
