"""Confidence intervals for means over prompts that stay honest at small evals and at the edges.

A validation metric is a mean over prompts of a per-prompt estimate (the prompt's accuracy over
its samples, its unbiased pass@k ...); its standard error is taken over prompts, never over the
pooled samples (Miller 2024, eq. 1), and over clusters of prompts when prompts share one (eq. 4).
Four intervals, named by ``method``:

``"wilson-edge"`` (default)
    ``"wilson"`` adjusted near 0 and 1, where prompts' difficulty is U-shaped (most prompts
    always or never solved) and the few prompts that carry a mean near an edge are often absent
    from an evaluation. Two changes: (1) the prompts' spread, as a share ``r`` of the widest
    possible ``p (1 - p)``, is shrunk toward that widest case with the weight of
    :data:`EDGE_PRIOR` (2) prompts, against the prompts that are off the nearer edge
    (``r' = (off r + 2) / (off + 2)``, ``n_eff = units / r'``), so a handful of prompts just off
    the edge no longer makes the interval several times narrower than none would; (2) at an effective count
    ``p n_eff`` (or ``(1 - p) n_eff``) of 3 or fewer, the bound toward that edge is widened to
    the exact Poisson one (Brown, Cai and DasGupta 2001's fix of Wilson at 1-3 successes).
``"wilson"``
    For estimates in [0, 1]: the Wilson score interval on the effective number of prompts
    ``n_eff = m (1 - m) / SE^2`` (bounded below by the number of prompts or clusters, the value
    for 0/1 prompts, and above by ``max_n_eff``, the number of samples). It stays inside [0, 1]
    and is not zero-width at 0 or 1, where the normal interval under-covers badly at a few dozen
    prompts (Bowyer et al. 2025). When every prompt is at 0 (or every one at 1) the spread of
    the prompts is unknown, and the most cautious value, one trial per prompt, is used.
    Estimates outside [0, 1] get the ``"t"`` interval under both Wilson methods (the method
    reported says so).
``"t"``
    ``m +/- t * SE`` with ``t`` the Student quantile on ``units - 1`` degrees of freedom.
``"bootstrap"``
    Percentile interval of the mean over ``n_boot`` resamples of prompts (of whole clusters when
    given), never of samples inside a prompt (that biases pass@k: Bowyer et al. 2025).

Coverage of the population's value, simulated (``bench/bench_coverage.py``, 2000 evaluations a
cell; solve rates ``Beta(c m, c (1 - m))``, 8 samples a prompt; 30-1000 prompts, mean rates
0.01-0.99; mean@8, pass@4, pass@8, pass^4, maj@4; ``tests/test_coverage.py`` checks a subset):

==================================  ===========  =================  ==================
difficulty                          method       lowest coverage    cells below 0.93
==================================  ===========  =================  ==================
U-shaped (c = 1), 180 cells         wilson-edge  0.926              1
..                                  wilson       0.770              39
..                                  t            0.036              ..
concentrated (c = 10), 4 samples    wilson-edge  0.952              0
uneven (c = 2), 16 samples          wilson-edge  0.944              0
..                                  wilson       0.863              ..
==================================  ===========  =================  ==================

Limits: the price is caution at the edges: where a cell expects only a few prompts off the edge
(30-100 prompts at a mean of 0.01-0.05 or 0.95-0.99) ``"wilson-edge"`` covers 0.97-1.0 (no
interval that is not randomised can cover 0.95 there: the evaluation takes a handful of values).
Where most prompts are off the edge it equals ``"wilson"`` up to a factor ``(off + 2) / off``
on the spread's share.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rlmetrics._core.checks import check_int, check_seed
from rlmetrics.validation._args import check_cluster_codes, check_level

__all__ = [
    "CI_METHODS",
    "DEFAULT_CI",
    "EDGE_PRIOR",
    "Interval",
    "IntervalTable",
    "column_intervals",
    "mean_interval",
    "standard_errors",
    "wilson_interval",
]

#: The interval methods (in the order they were added; the default is :data:`DEFAULT_CI`).
CI_METHODS = ("wilson", "t", "bootstrap", "wilson-edge")
#: The default interval.
DEFAULT_CI = "wilson-edge"
#: Prompts off the nearer edge that ``"wilson-edge"``'s prior on the spread weighs as
#: (chosen by the simulation of ``bench/bench_coverage.py``: 1 leaves cells below 0.91, 3 is
#: more conservative at the edges for no gain).
EDGE_PRIOR = 2.0

# Resampled means held at once by the bootstrap (bounds its weight matrix to ~32 MB).
_BOOT_CHUNK_ELEMENTS = 1 << 22


class Interval(NamedTuple):
    """A mean over prompts with its standard error and confidence interval."""

    value: float
    se: float
    ci_low: float
    ci_high: float
    #: the method actually used (``"t"`` where Wilson does not apply)
    method: str
    #: prompts the mean covers
    n_prompts: int
    #: clusters of those prompts (``None`` without clusters)
    n_clusters: int | None = None


class IntervalTable(NamedTuple):
    """:class:`Interval` fields for the M columns of a (P, M) table, as arrays of shape (M,)."""

    value: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    method: list[str]
    n_prompts: np.ndarray
    n_clusters: np.ndarray | None

    def row(self, j: int) -> Interval:
        """The :class:`Interval` of column ``j``."""
        return Interval(
            float(self.value[j]),
            float(self.se[j]),
            float(self.ci_low[j]),
            float(self.ci_high[j]),
            self.method[j],
            int(self.n_prompts[j]),
            None if self.n_clusters is None else int(self.n_clusters[j]),
        )


def _z(confidence: float) -> float:
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(
    p: Any, n: Any, *, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray] | tuple[float, float]:
    """Wilson score interval of a proportion ``p`` observed on ``n`` trials (vectorised).

    Parameters
    ----------
    p : float or array
        Observed proportions in [0, 1].
    n : float or array
        Trials (or effective trials), > 0; broadcast against ``p``.
    confidence : float, keyword-only
        Level of the interval.

    Returns
    -------
    (low, high)
        Floats for scalar input, arrays otherwise.

    Examples
    --------
    >>> lo, hi = wilson_interval(0.0, 30)
    >>> round(lo, 4), round(hi, 4)
    (0.0, 0.1135)
    >>> [round(v, 4) for v in wilson_interval(0.5, 100)]
    [0.4038, 0.5962]
    """
    confidence = check_level(confidence, "confidence")
    p_arr, n_arr = np.asarray(p, dtype=np.float64), np.asarray(n, dtype=np.float64)
    if np.any((p_arr < 0) | (p_arr > 1)) or np.any(np.isnan(p_arr)):
        raise ValueError(f"p must be proportions in [0, 1]; got {p!r}")
    if np.any(~(n_arr > 0)):
        raise ValueError(f"n must be > 0; got {n!r}")
    z2 = _z(confidence) ** 2
    denom = 1.0 + z2 / n_arr
    centre = (p_arr + z2 / (2.0 * n_arr)) / denom
    half = np.sqrt(z2 * (p_arr * (1.0 - p_arr) / n_arr + z2 / (4.0 * n_arr * n_arr))) / denom
    low, high = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    # exact at the edges (the formula leaves ~1e-17 there)
    low, high = np.where(p_arr == 0.0, 0.0, low), np.where(p_arr == 1.0, 1.0, high)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


def _units(present: np.ndarray, clusters: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Prompts per column, and clusters per column (``None`` without clusters)."""
    n = present.sum(axis=0)
    if clusters is None:
        return n, None
    g = int(clusters.max(initial=-1)) + 1
    per_cluster = np.zeros((g, present.shape[1]))
    np.add.at(per_cluster, clusters, present.astype(np.float64))
    return n, (per_cluster > 0).sum(axis=0)


def standard_errors(
    filled: np.ndarray, present: np.ndarray, mean: np.ndarray, n: np.ndarray, clusters: np.ndarray | None
) -> np.ndarray:
    """SE of each column's mean over its present prompts: ``s / sqrt(P)``, or the clustered form.

    The clustered variance (Miller 2024, eq. 4) is ``sum_c (sum_{i in c} (x_i - m))^2 / P^2``
    (with the small-sample factor ``G / (G - 1)``), so one cluster per prompt gives ``s^2 / P``.
    """
    dev = np.where(present, filled - mean, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if clusters is None:
            var = (dev * dev).sum(axis=0) / (n - 1) / n
        else:
            g = int(clusters.max(initial=-1)) + 1
            sums = np.zeros((g, filled.shape[1]))
            np.add.at(sums, clusters, dev)
            used = np.zeros((g, filled.shape[1]), dtype=bool)
            np.logical_or.at(used, clusters, present)
            n_g = used.sum(axis=0)
            var = (sums * sums).sum(axis=0) / (n * n) * n_g / (n_g - 1)
    return np.sqrt(np.where(n >= 2, var, np.nan))


def column_intervals(
    values: Any,
    *,
    method: str = DEFAULT_CI,
    confidence: float = 0.95,
    clusters: Any = None,
    max_n_eff: Any = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> IntervalTable:
    """Mean, standard error and interval of each column of a prompts x metrics table.

    Parameters
    ----------
    values : array of shape (P, M)
        Per-prompt estimates, one column per metric; NaN where a metric is undefined for a
        prompt (that prompt is left out of that column).
    method : {"wilson-edge", "wilson", "t", "bootstrap"}, keyword-only
        See the module docstring.
    confidence : float, keyword-only
        Level of the intervals.
    clusters : array of P ints, optional, keyword-only
        Cluster of each prompt (codes ``0 .. G-1``): clustered standard errors, ``G - 1``
        degrees of freedom, whole clusters resampled.
    max_n_eff : float or array of shape (M,), optional, keyword-only
        Upper bound of Wilson's effective number of trials per column (the number of samples
        behind it); default unbounded.
    n_boot : int, keyword-only
        Bootstrap resamples.
    seed : int, keyword-only
        Seed of the bootstrap (its own generator; the global one is not touched).

    Returns
    -------
    IntervalTable
        Arrays of shape (M,); NaN standard error and interval for columns with fewer than two
        prompts (the value still given).

    Examples
    --------
    >>> t = column_intervals([[0.0, 1.0], [0.0, 0.5], [0.0, 1.0]])
    >>> t.value.tolist(), t.method
    ([0.0, 0.8333333333333334], ['wilson-edge', 'wilson-edge'])
    >>> [round(float(v), 3) for v in (t.ci_low[0], t.ci_high[0])]
    [0.0, 0.561]
    """
    if method not in CI_METHODS:
        raise ValueError(f"method must be one of {', '.join(CI_METHODS)}; got {method!r}")
    confidence = check_level(confidence, "confidence")
    seed = check_seed(seed)  # checked whatever the method: a bad seed is a caller's bug either way
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"values must be a (prompts, metrics) table; got shape {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError("values must be finite (NaN marks an undefined entry); got inf")
    codes = None
    if clusters is not None:
        codes = np.asarray(clusters)
        if codes.shape != (arr.shape[0],) or codes.dtype.kind not in "iu" or (codes < 0).any():
            raise ValueError(
                f"clusters must be {arr.shape[0]} integer codes >= 0 (one per prompt); "
                f"got shape {codes.shape}, dtype {codes.dtype}"
            )
        codes = codes.astype(np.intp)
    present = ~np.isnan(arr)
    filled = np.where(present, arr, 0.0)
    n, n_g = _units(present, codes)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(axis=0) / n
    se = standard_errors(filled, present, mean, n, codes)
    units = n if n_g is None else n_g
    m = arr.shape[1]
    if method == "bootstrap":
        n_boot = check_int(n_boot, "n_boot", minimum=10)
        low, high = _bootstrap(filled, present, codes, confidence, n_boot, seed)
        methods = ["bootstrap"] * m
    else:
        cols = _Columns(filled, present, mean, se, units)
        low, high, methods = _analytic(cols, method, confidence, max_n_eff)
    undefined = ~(units >= 2)
    low, high = np.where(undefined, np.nan, low), np.where(undefined, np.nan, high)
    return IntervalTable(mean, se, low, high, methods, n.astype(np.int64), None if n_g is None else n_g)


class _Columns(NamedTuple):
    """A (P, M) table's columns as :func:`column_intervals` has reduced them."""

    #: (P, M) values, 0 where missing
    filled: np.ndarray
    #: (P, M) whether each value is present
    present: np.ndarray
    #: (M,) mean and standard error of each column
    mean: np.ndarray
    se: np.ndarray
    #: (M,) prompts (or clusters) behind each column
    units: np.ndarray


def _analytic(
    cols: _Columns, method: str, confidence: float, max_n_eff: Any
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Wilson-on-effective-n (plain or edge-adjusted) where the column is in [0, 1], else t."""
    filled, present, mean, se, units = cols
    m = filled.shape[1]
    bounded = ((filled >= 0.0) & (filled <= 1.0) | ~present).all(axis=0) & (units >= 1)
    use_wilson = bounded if method != "t" else np.zeros(m, dtype=bool)
    low, high = np.full(m, np.nan), np.full(m, np.nan)
    if use_wilson.any():
        p = np.clip(mean[use_wilson], 0.0, 1.0)
        u = units[use_wilson].astype(np.float64)
        cap = np.broadcast_to(np.inf if max_n_eff is None else np.asarray(max_n_eff, np.float64), (m,))
        cap = np.maximum(cap[use_wilson], u)
        if method == "wilson":
            n_eff = _plain_n_eff(p, se[use_wilson], u, cap)
            low[use_wilson], high[use_wilson] = wilson_interval(p, n_eff, confidence=confidence)
        else:
            off = _off_edge(filled[:, use_wilson], present[:, use_wilson], p)
            n_eff = _edge_n_eff(p, se[use_wilson], u, cap, off)
            low[use_wilson], high[use_wilson] = _edge_bounds(p, n_eff, confidence)
    use_t = ~use_wilson
    if use_t.any():
        from scipy.special import stdtrit

        df = np.maximum(units[use_t] - 1, 1).astype(np.float64)
        half = stdtrit(df, 0.5 + confidence / 2.0) * se[use_t]
        low[use_t], high[use_t] = mean[use_t] - half, mean[use_t] + half
    return low, high, [method if w else "t" for w in use_wilson.tolist()]


def _plain_n_eff(p: np.ndarray, se: np.ndarray, u: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """``p (1 - p) / SE^2`` within ``[units, cap]``; one trial per unit at 0 or 1 (``"wilson"``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = p * (1.0 - p) / (se * se)
    # at 0 or 1 the prompts' spread is unknown: one trial per prompt (the widest case)
    n_eff = np.where(np.isfinite(n_eff), n_eff, np.where((p == 0) | (p == 1), u, cap))
    n_eff = np.clip(n_eff, u, cap)
    return np.maximum(np.where(np.isfinite(n_eff), n_eff, u), 1.0)


def _off_edge(filled: np.ndarray, present: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(M,) prompts strictly inside (0, 1) on the side of the nearer edge: above 0 when the
    mean is at most 1/2, below 1 otherwise (the prompts that tell the spread near that edge)."""
    low_side = p <= 0.5
    return np.where(low_side, ((filled > 0.0) & present).sum(axis=0), ((filled < 1.0) & present).sum(axis=0))


def _edge_n_eff(p: np.ndarray, se: np.ndarray, u: np.ndarray, cap: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Effective n of ``"wilson-edge"``: the observed spread shrunk toward the widest one.

    ``r = u / n_eff`` is the prompts' observed variance over the widest possible at that mean
    (``p (1 - p)``, all prompts at 0 or 1: ``r = 1``). It is estimated from the ``off``
    prompts away from the nearer edge, so it is shrunk toward 1 with the weight of
    ``EDGE_PRIOR`` such prompts: ``r' = (off r + EDGE_PRIOR) / (off + EDGE_PRIOR)``. With many
    such prompts nothing changes; with a few, the interval barely narrows because they left
    the edge (300 prompts at 0 and a lone pass^4 of 1/70: the plain upper bound drops from
    0.0126 to 0.0017, this one to 0.0086).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        r = u * se * se / (p * (1.0 - p))
    r = np.where(np.isfinite(r), r, 1.0)  # at 0 or 1 (or a single unit): the widest case
    r = (off * r + EDGE_PRIOR) / (off + EDGE_PRIOR)
    with np.errstate(divide="ignore"):
        n_eff = u / r
    return np.maximum(np.clip(n_eff, u, cap), 1.0)


def _edge_bounds(p: np.ndarray, n_eff: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's bounds, widened to the exact Poisson bound of an effective count of 3 or fewer.

    Wilson's lower bound is too high at 1-3 successes (Brown, Cai and DasGupta 2001, who replace
    it by the Poisson one); here the count is ``x = p n_eff`` (and ``n_eff - x`` failures for
    the upper bound), and the bound is the lower of the two, ``gammaincinv(x, alpha / 2) / n_eff``.
    """
    low, high = wilson_interval(p, n_eff, confidence=confidence)
    small = np.where(n_eff > 50.0, 3.0, 2.0) * (1.0 + 1e-9)  # 0.03 * 100 is 3.0000000000000004
    x, y = p * n_eff, (1.0 - p) * n_eff
    near_low, near_high = (x > 0) & (x <= small), (y > 0) & (y <= small)
    if not (near_low.any() or near_high.any()):
        return np.asarray(low), np.asarray(high)  # scipy only imported where a count is small
    from scipy.special import gammaincinv

    half_alpha = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        pois_low = gammaincinv(np.maximum(x, 1e-300), half_alpha) / n_eff
        pois_high = 1.0 - gammaincinv(np.maximum(y, 1e-300), half_alpha) / n_eff
    low = np.where(near_low, np.minimum(low, pois_low), low)
    high = np.where(near_high, np.maximum(high, pois_high), high)
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def _bootstrap(
    filled: np.ndarray,
    present: np.ndarray,
    clusters: np.ndarray | None,
    confidence: float,
    n_boot: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the column means over resampled prompts (or clusters)."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        sums, counts = filled, present.astype(np.float64)
    else:
        g = int(clusters.max(initial=-1)) + 1
        sums = np.zeros((g, filled.shape[1]))
        counts = np.zeros((g, filled.shape[1]))
        np.add.at(sums, clusters, filled)
        np.add.at(counts, clusters, present.astype(np.float64))
    units = sums.shape[0]
    means = np.empty((n_boot, filled.shape[1]))
    chunk = max(1, _BOOT_CHUNK_ELEMENTS // max(units, 1))
    uniform = np.full(units, 1.0 / units)
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        weights = rng.multinomial(units, uniform, size=stop - start).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            means[start:stop] = (weights @ sums) / (weights @ counts)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore"):
        low, high = np.nanquantile(means, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return low, high


def mean_interval(
    values: Sequence[float] | np.ndarray,
    *,
    method: str = DEFAULT_CI,
    confidence: float = 0.95,
    clusters: Any = None,
    max_n_eff: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
    """Mean over prompts of one per-prompt estimate, with its standard error and interval.

    Parameters
    ----------
    values : sequence of P floats
        One estimate per prompt (NaN: left out).
    method, confidence, clusters, max_n_eff, n_boot, seed
        As in :func:`column_intervals`; ``clusters`` may hold any hashable labels here.

    Returns
    -------
    Interval

    Examples
    --------
    >>> iv = mean_interval([1, 1, 0, 1, 1, 1, 1, 1, 1, 1])
    >>> round(iv.value, 2), round(iv.ci_low, 3), round(iv.ci_high, 3), iv.method
    (0.9, 0.596, 0.997, 'wilson-edge')

    One failure: the upper bound is the exact (Poisson) one, not Wilson's 0.982:

    >>> round(mean_interval([1, 1, 0, 1, 1, 1, 1, 1, 1, 1], method="wilson").ci_high, 3)
    0.982
    >>> mean_interval([2.0, 4.0, 6.0], method="t").ci_high > 6
    True
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"values must be one estimate per prompt (1-D); got shape {arr.shape}")
    codes = None if clusters is None else check_cluster_codes(clusters, arr.shape[0])[0]
    table = column_intervals(
        arr[:, None],
        method=method,
        confidence=confidence,
        clusters=codes,
        max_n_eff=max_n_eff,
        n_boot=n_boot,
        seed=seed,
    )
    return table.row(0)
