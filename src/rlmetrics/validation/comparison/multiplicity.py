"""p-values adjusted for a family of comparisons (many benchmarks, many k, many metrics at once).

Twenty benchmarks times ten k values compared at 5% each find a "significant" difference by
chance alone. :func:`adjust_p_values` adjusts a family's p-values so that a threshold on them
controls an error rate of the whole family:

``"holm"`` (default)
    Holm's step-down (1979): the family-wise error rate, the chance of even one false
    difference, at most the threshold; uniformly more powerful than Bonferroni, valid under any
    dependence between the comparisons.
``"bh"``
    Benjamini-Hochberg's step-up (1995): the false discovery rate, the expected share of false
    differences among those declared, at most the threshold, for independent or positively
    dependent comparisons (the metrics of one evaluation usually are).

Plain numpy, sorted once: O(m log m).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ADJUST_METHODS", "adjust_p_values"]

#: The adjustments, the default first.
ADJUST_METHODS = ("holm", "bh")


def adjust_p_values(p_values: Any, *, method: str = "holm") -> np.ndarray:
    """Adjusted p-values of a family of comparisons.

    Parameters
    ----------
    p_values : array_like of float, shape (m,)
        The family's unadjusted p-values, in [0, 1]; NaN (a comparison that has none) is left
        out of the family and stays NaN.
    method : {"holm", "bh"}, keyword-only
        Holm (family-wise error rate) or Benjamini-Hochberg (false discovery rate); see the
        module docstring.

    Returns
    -------
    numpy.ndarray of float, shape (m,)
        In the order given, each at least its unadjusted value and at most 1. A comparison is
        declared at level ``alpha`` for the family when its adjusted p-value is ``<= alpha``.

    Raises
    ------
    ValueError
        ``p_values`` not 1-D, or a value outside [0, 1]; an unknown ``method``.
    TypeError
        ``p_values`` not numbers.

    Examples
    --------
    >>> adjust_p_values([0.01, 0.04, 0.03, 0.005]).tolist()
    [0.03, 0.06, 0.06, 0.02]
    >>> adjust_p_values([0.01, 0.04, 0.03, 0.005], method="bh").tolist()
    [0.02, 0.04, 0.04, 0.02]
    """
    if method not in ADJUST_METHODS:
        raise ValueError(f"method must be one of {', '.join(ADJUST_METHODS)}; got {method!r}")
    arr = np.asarray(p_values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"p_values must hold numbers; got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise ValueError(f"p_values must be 1-D (one p-value per comparison); got shape {arr.shape}")
    known = ~np.isnan(arr)
    if np.any((arr[known] < 0.0) | (arr[known] > 1.0)):
        bad = arr[known][(arr[known] < 0.0) | (arr[known] > 1.0)][0]
        raise ValueError(f"p_values must be in [0, 1] (NaN: no p-value); got {float(bad)!r}")
    out = np.full(arr.shape, np.nan)
    p = arr[known]
    m = p.size
    if m == 0:
        return out
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    rank = np.arange(1, m + 1, dtype=np.float64)
    if method == "holm":
        # step-down: (m - i + 1) p_(i), made non-decreasing from the smallest p-value up
        adjusted = np.maximum.accumulate(np.minimum((m - rank + 1.0) * ranked, 1.0))
    else:
        # step-up: m p_(i) / i, made non-decreasing from the largest p-value down
        adjusted = np.minimum.accumulate(np.minimum(m * ranked / rank, 1.0)[::-1])[::-1]
    back = np.empty(m)
    back[order] = np.maximum(adjusted, ranked)
    out[known] = back
    return out
