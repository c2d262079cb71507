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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MAD_TO_SIGMA",
    "Baseline",
    "SeriesCache",
    "debiased_ema",
    "first_persistent",
    "frozen_baseline",
    "last_persistent",
    "noise_sigma",
    "rolling_baseline",
    "series_median",
    "window_counts",
    "window_median",
]

#: MAD * 1.4826 estimates the standard deviation of normal data.
MAD_TO_SIGMA = 1.4826


def series_median(values: np.ndarray) -> float:
    """``float(np.median(values))`` of a 1-d array, several times faster, the same float.

    ``np.median`` partitions at the middle and at the end (for its NaN check), with a few
    calls around it; one partition at the middle gives the same middle points (an array holding
    a NaN is left to ``np.median``). A signed zero may come back with the other sign where the
    middle points are zeros of both signs (``np.median`` leaves that to its partition as well).

    Examples
    --------
    >>> series_median(np.array([3.0, 1.0, 2.0, 10.0]))
    2.5
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    n = x.size
    if n == 0 or np.isnan(x).any():
        return float(np.median(x))
    half = n // 2
    part = np.partition(x, half)
    if n % 2:
        return float(part[half])
    # the mean of the two middle points, as np.median takes it (a sum of the two, halved)
    return float(np.add.reduce(np.array([part[:half].max(), part[half]])) / 2)


def _median_rows(rows: np.ndarray) -> np.ndarray:
    """``np.median(rows, axis=1)`` of rows without NaN: short rows sorted (several times faster
    than ``np.median``'s partition at the middle and at the end), the same floats."""
    half = rows.shape[1] // 2
    ordered = np.sort(rows, axis=1)
    if rows.shape[1] % 2:
        return ordered[:, half]
    return np.mean(ordered[:, half - 1 : half + 1], axis=1)


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
    if x.size == 0 or np.all(x == x[0]):
        return x.copy()
    cache = _ACTIVE.get()
    if cache is None:
        return _ema(x, weight)[0]
    x = np.ascontiguousarray(x)
    entries, kept = cache._lookup(_key("ema", x, weight), x)
    if kept is not None and kept.n == x.size:
        cache.hits += 1
    # the kept points' smoothing is the start of this one's; the debiasing divides by exactly 1 from
    # the point where weight**t is below 2**-60 on: past it, the new points are filtered on alone
    elif kept is not None and kept.state is not None and weight ** (kept.state[0] + 1) < 2.0**-60:
        out_new, state = _ema(x[kept.n :], weight, start=kept.state)
        kept.grow(x[kept.n :], (out_new,), state)
        cache.extended += 1
    else:
        out, state = _ema(x, weight)
        cache.misses += 1
        cache._keep(entries, kept, kept := _Entry(x, (out,), state))
    kept.used = True
    return kept.outputs()[0]


def _ema(
    x: np.ndarray, weight: float, *, start: tuple[int, float] | None = None
) -> tuple[np.ndarray, tuple[int, float] | None]:
    """The debiased EMA of a series that is not constant, and its state after the last point (the
    finite points filtered, the last filtered value); ``start``: go on from that state."""
    from scipy.signal import lfilter

    out = x.copy()
    finite = np.isfinite(x)
    kept = x[finite]
    count, last = start if start is not None else (0, 0.0)
    if kept.size == 0:
        return out, (count, last) if start is not None else None
    # last = last * weight + (1 - weight) * x over the finite points is one first-order filter
    if start is None:
        smoothed = lfilter([1.0 - weight], [1.0, -weight], kept)
        out[finite] = smoothed / (1.0 - weight ** np.arange(1, kept.size + 1, dtype=np.float64))
    else:  # the filter's state after ``last`` is its feedback term: weight * last
        smoothed, _ = lfilter([1.0 - weight], [1.0, -weight], kept, zi=[last * weight])
        out[finite] = smoothed  # 1 - weight**t is 1 here
    return out, (count + int(kept.size), float(smoothed[-1]))


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
    raw = np.asarray(values, dtype=np.float64).reshape(-1)
    if window < 1:
        return None
    cache = _ACTIVE.get()
    if cache is None:
        return _frozen_baseline(raw, window, log, skip)
    # the baseline of a series is that of its points up to the baseline's last: a series that
    # starts with those points (the run grown) has the same
    entries, kept = cache._lookup(_key("frozen", raw, window, log, skip), raw)
    if kept is not None:
        cache.hits += 1
        kept.used = True
        return kept.out[0]  # type: ignore[no-any-return]
    found = _frozen_baseline(raw, window, log, skip)
    if found is not None:
        cache.misses += 1
        entries.append(_Entry(raw[: found.last_index + 1], (found,)))
    return found


def _frozen_baseline(raw: np.ndarray, window: int, log: bool, skip: int) -> Baseline | None:
    end = min(raw.size, max(skip, 0) + window)
    while True:  # the points up to the baseline's last are read, not the whole run
        x = _transform(raw[:end], log)
        usable = np.flatnonzero(np.isfinite(x))
        usable = usable[usable >= skip][:window]
        if usable.size >= window or end == raw.size:
            break
        end = min(raw.size, 2 * end + 16)
    if usable.size < window:
        return None
    sample = x[usable]
    median = series_median(sample)
    mad = series_median(np.abs(sample - median))
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
    cache = _ACTIVE.get()
    if cache is None:
        return _noise_sigma(x)
    entries, kept = cache._lookup(_key("noise", x), x)
    new = np.sort(np.diff(x[kept.n - 1 :])) if kept is not None and kept.n < x.size else None
    if kept is not None and kept.n == x.size:
        cache.hits += 1
    elif kept is not None and kept.state is not None and new is not None and np.isfinite(new).all():
        # the kept differences (sorted) with the new ones put in their places: two medians of the
        # sorted differences, the second by a search, instead of two partitions of the whole series
        d = np.insert(kept.state, np.searchsorted(kept.state, new), new)
        kept.grow(x[kept.n :], (_sorted_noise_sigma(d),), d)
        cache.extended += 1
    else:
        d = np.diff(x)
        cache.misses += 1
        cache._keep(
            entries, kept, kept := _Entry(x, (_noise_sigma(x),), np.sort(d) if np.isfinite(d).all() else None)
        )
    kept.used = True
    return float(kept.out[0])


def _noise_sigma(x: np.ndarray) -> float:
    d = np.diff(x)
    return float(series_median(np.abs(d - series_median(d))) * MAD_TO_SIGMA / np.sqrt(2.0))


def _sorted_noise_sigma(d: np.ndarray) -> float:
    """:func:`_noise_sigma` from the differences sorted (finite, 2 at least): the same float."""
    n, half = d.size, d.size // 2
    if n % 2:
        m = float(d[half])
        mad = _kth_deviation(d, m, half + 1)
    else:  # the two middle points summed and halved, as series_median does
        m = float(np.add.reduce(np.array([d[half - 1], d[half]])) / 2)
        mad = float(np.add.reduce(np.array([_kth_deviation(d, m, half), _kth_deviation(d, m, half + 1)])) / 2)
    return float(mad * MAD_TO_SIGMA / np.sqrt(2.0))


def _kth_deviation(d: np.ndarray, m: float, k: int) -> float:
    """The ``k``-th smallest (from 1) of ``|d - m|`` for ``d`` sorted, by a binary search.

    ``|d - m|`` falls, then rises along ``d``: its ``k`` smallest are ``k`` consecutive points,
    and the ``k``-th smallest is the least, over the windows of ``k`` points, of the larger of
    its two ends' deviations, ``max(m - d[lo], d[lo + k - 1] - m)`` (a rounded ``m - d`` is
    exactly ``-(d - m)``): the search finds where the first stops being the larger.
    """
    lo, hi = 0, d.size - k + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if m - d[mid] <= d[mid + k - 1] - m:
            hi = mid
        else:
            lo = mid + 1
    ends = ([d[lo + k - 1] - m] if lo <= d.size - k else []) + ([m - d[lo - 1]] if lo >= 1 else [])
    return abs(float(min(ends)))  # abs: a deviation, never -0.0


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
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if window < 1 or x.size <= window:
        return np.full(x.shape, np.nan), np.full(x.shape, np.nan)
    # the log of each point is taken in the computation: of the new windows only, with a cache
    compute = lambda y: _rolling(_transform(y, log), window)  # noqa: E731
    median, mad = _cached_windows("rolling", x, window, compute, window, log)
    return median, mad


def _rolling(x: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    median = np.full(x.shape, np.nan)
    mad = np.full(x.shape, np.nan)
    if x.size <= window:
        return median, mad
    windows = np.lib.stride_tricks.sliding_window_view(np.where(np.isfinite(x), x, np.nan), window)[:-1]
    med = _row_nanmedian(windows)
    median[window:] = med
    mad[window:] = _row_nanmedian(np.abs(windows - med[:, None]))
    return median, mad


def _row_nanmedian(rows: np.ndarray) -> np.ndarray:
    """``np.nanmedian(rows, axis=1)``: the rows without NaN sorted (:func:`_median_rows`, many
    times faster than nanmedian's masked arrays), only the others by ``nanmedian``."""
    if rows.shape[0] == 0:
        return np.zeros(0)
    holes = np.isnan(rows).any(axis=1)
    if not holes.any():
        return _median_rows(rows)
    out = np.empty(rows.shape[0])
    out[~holes] = _median_rows(rows[~holes])
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
    if window < 1 or x.size < window:
        return np.full(x.shape, np.nan)
    return _cached_windows("median", x, window - 1, lambda y: (_window_median(y, window),), window)[0]


def _window_median(x: np.ndarray, window: int) -> np.ndarray:
    out = np.full(x.shape, np.nan)
    if x.size < window:
        return out
    windows = np.lib.stride_tricks.sliding_window_view(np.where(np.isfinite(x), x, np.nan), window)
    out[window - 1 :] = _row_nanmedian(windows)
    return out


def window_counts(flags: np.ndarray, n: int) -> np.ndarray:
    """How many of the ``n`` points ending at each point are flagged (fewer points at the start).

    Examples
    --------
    >>> window_counts(np.array([1, 0, 1, 1, 0], dtype=bool), 3).tolist()
    [1, 1, 2, 2, 2]
    """
    total = np.cumsum(np.asarray(flags, dtype=np.int64).reshape(-1))
    total[n:] -= total[:-n].copy()
    return total


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
    f = np.asarray(flags, dtype=bool).reshape(-1)[max(start, 0) :]
    if np.count_nonzero(f) < k:
        return None
    # a window first holds k flagged points at the k-th of k flagged points within n points: the
    # first j where flagged[j + k - 1] - flagged[j] < n (the window's first flagged point is
    # flagged[j]: one before it would have made an earlier window qualify)
    flagged = np.flatnonzero(f)
    hits = np.flatnonzero(flagged[k - 1 :] - flagged[: flagged.size - k + 1] < n)
    if hits.size == 0:
        return None
    j, offset = int(hits[0]), max(start, 0)
    return offset + int(flagged[j]), offset + int(flagged[j + k - 1])


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
    counts = window_counts(f, n)
    qualifies = counts >= k
    if not qualifies[-1]:
        return None
    broken = np.flatnonzero(~qualifies)
    first_end = int(broken[-1]) + 1 if broken.size else int(np.flatnonzero(qualifies)[0])
    lo = max(first_end - n + 1, 0)
    return lo + int(np.flatnonzero(f[lo : first_end + 1])[0]), int(f.size - 1)


# --- the cache of a followed run ---------------------------------------------------------------


def _with_room(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` at the start of a buffer an eighth larger (room for new points)."""
    buffer = np.empty(a.size + a.size // 8 + 64, dtype=a.dtype)
    buffer[: a.size] = a
    return buffer


def _appended(buffer: np.ndarray, n: int, new: np.ndarray) -> np.ndarray:
    """``buffer`` holding ``n`` points, with ``new`` written after them (a larger buffer when full)."""
    if n + new.size > buffer.size:
        buffer = _with_room(np.concatenate([buffer[:n], new]))
    else:
        buffer[n : n + new.size] = new
    return buffer


class _Entry:
    """One computation kept: its input (the first ``n`` points of the buffer ``x``), outputs (an
    array of the input's length is kept in a buffer like ``x``) and state.

    Outputs are handed out as read-only views of their first ``n`` points, and the entry grows
    by writing after them: a point once handed out is never written again.
    """

    __slots__ = ("n", "out", "state", "used", "x")

    def __init__(self, x: np.ndarray, out: tuple[Any, ...], state: Any = None) -> None:
        self.n, self.x = x.size, _with_room(x)
        self.out: tuple[Any, ...] = tuple(_with_room(o) if isinstance(o, np.ndarray) else o for o in out)
        self.state, self.used = state, True

    def input(self) -> np.ndarray:
        """The points computed over."""
        return self.x[: self.n]

    def outputs(self) -> tuple[Any, ...]:
        """The outputs, arrays as read-only views."""
        return tuple(_read_only(o[: self.n]) if isinstance(o, np.ndarray) else o for o in self.out)

    def grow(self, new: np.ndarray, out_new: tuple[Any, ...], state: Any = None) -> None:
        """Append ``new`` input points and their outputs (an array: its points; else the new value)."""
        self.x = _appended(self.x, self.n, new)
        self.out = tuple(
            _appended(o, self.n, t) if isinstance(o, np.ndarray) else t
            for o, t in zip(self.out, out_new, strict=True)
        )
        self.n, self.state = self.n + new.size, state


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class SeriesCache:
    """The window statistics computed over one run, kept so that the next diagnosis of the grown
    run computes them over its new points only.

    While :meth:`active` (``diagnose(..., cache=)`` makes it so), :func:`window_median`,
    :func:`rolling_baseline`, :func:`debiased_ema`, :func:`noise_sigma` and
    :func:`frozen_baseline` look their input up here. Each point of a window statistic depends
    only on the points of its window, so when an input kept here is, bit for bit, the start of
    the new input (a run that grew), the kept outputs stand for that start and only the windows
    that reach the new points are computed, written after the kept ones (buffers with room to
    grow: no copy of the whole series); an input seen whole (the same series read by several
    rules) is answered from here. The noise keeps the series' differences sorted and puts the
    new ones in their places (its two medians then cost a search each); a frozen baseline is
    that of any series starting with the points it was computed from. The results are the very
    floats a computation without the cache gives; an input that is not a continuation (a
    series rewritten from the start) is computed whole. Arrays come back as read-only views
    (a caller that writes into one copies it first).

    A computation not asked for by a diagnosis is dropped at its end: the cache holds what one
    diagnosis of the run computes (a few series of the run's length).

    Examples
    --------
    >>> cache = SeriesCache()
    >>> with cache.active():
    ...     a = window_median(np.arange(6.0), window=3)
    ...     b = window_median(np.arange(7.0), window=3)  # the windows of the 7th point only
    >>> b.tolist()[2:]
    [1.0, 2.0, 3.0, 4.0, 5.0]
    >>> cache.hits, cache.extended, cache.misses
    (0, 1, 1)
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], list[_Entry]] = {}
        self.hits = 0  # inputs answered whole from the cache
        self.extended = 0  # inputs that continued a kept one: computed over their new points
        self.misses = 0  # inputs computed whole

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    @contextmanager
    def active(self) -> Iterator[SeriesCache]:
        """Use this cache for the computations in the ``with`` block; then drop the kept ones it
        did not ask for."""
        for entries in self._entries.values():
            for entry in entries:
                entry.used = False
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)
            for key in list(self._entries):
                kept = [e for e in self._entries[key] if e.used]
                if kept:
                    self._entries[key] = kept
                else:
                    del self._entries[key]

    def _lookup(self, key: tuple[Any, ...], x: np.ndarray) -> tuple[list[_Entry], _Entry | None]:
        """The entries under ``key`` and the longest one whose input starts ``x``, bit for bit."""
        entries = self._entries.setdefault(key, [])
        best = None
        bits = x.view(np.int64)
        for entry in entries:
            m = entry.n
            if m <= x.size and (best is None or m > best.n):
                if np.array_equal(entry.input().view(np.int64), bits[:m]):
                    best = entry
        return entries, best

    def _keep(self, entries: list[_Entry], replaced: _Entry | None, entry: _Entry) -> None:
        if replaced is not None and replaced.n < entry.n:
            entries.remove(replaced)  # the longer input stands for the shorter one from now on
        entries.append(entry)


_ACTIVE: ContextVar[SeriesCache | None] = ContextVar("rlmetrics_series_cache", default=None)
_FINGERPRINT = 4  # leading values that file an input in the cache (the rest is compared on lookup)


def _key(name: str, x: np.ndarray, *params: Any) -> tuple[Any, ...]:
    return (name, *params, x[:_FINGERPRINT].tobytes())


def _cached_windows(
    name: str,
    x: np.ndarray,
    reach: int,
    compute: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    *params: Any,
) -> tuple[np.ndarray, ...]:
    """``compute(x)`` (arrays of x's shape whose point ``i`` depends on ``x[i - reach : i + 1]``
    only), from the active cache where it holds ``x`` or its start."""
    cache = _ACTIVE.get()
    if cache is None or x.size <= reach:
        return compute(x)
    x = np.ascontiguousarray(x)
    entries, kept = cache._lookup(_key(name, x, *params), x)
    if kept is not None and kept.n == x.size:
        cache.hits += 1
    elif kept is not None and kept.n > reach:
        m = kept.n
        kept.grow(x[m:], tuple(t[reach:] for t in compute(x[m - reach :])))
        cache.extended += 1
    else:
        cache.misses += 1
        cache._keep(entries, kept, kept := _Entry(x, compute(x)))
    kept.used = True
    return kept.outputs()
