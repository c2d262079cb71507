"""Equivalence and non-inferiority: "B is no worse than A by more than a margin", not only "different".

A release check asks whether a new checkpoint B is no worse than the old A by more than
``margin`` (say one point of pass@1), which a test of no difference cannot answer: a large p-value
is no evidence of equality. :func:`margin_test` reads a
:class:`~rlmetrics.validation.comparison.paired.PairedDifference` (paired or Welch) and gives the
two one-sided tests (TOST, Schuirmann 1987) against ``-margin`` and ``+margin`` by interval
inclusion in the result's own interval method (``ci_method``: Newcombe's by default for rates,
Student's t on the standard error and degrees of freedom for a t interval, where they are the
two one-sided t tests), and a verdict in words from the difference's interval:

* ``"better"``: the interval lies above 0;
* ``"worse"``: it lies below 0;
* ``"equivalent within <margin>"``: it holds 0 and lies inside ``(-margin, +margin)`` (both one-sided
  tests reject: B and A differ by less than the margin either way);
* ``"no worse than <margin>"``: it holds 0 and lies above ``-margin`` but reaches ``+margin`` (B
  non-inferior);
* ``"inconclusive"``: it holds 0 and reaches ``-margin`` or below;
* ``"undefined"``: no interval (fewer than two prompts).

The first that applies is the verdict (:func:`margin_verdict`), so "better" and "worse" win over
"equivalent" when an interval lies on one side of 0 and inside the margin.
The interval is the two-sided one at the result's ``confidence``, so each bound is a one-sided
test at ``alpha = (1 - confidence) / 2`` (the usual convention for non-inferiority: 2.5% at 95%):
B is non-inferior iff the lower bound of the ``1 - 2 alpha`` interval (the one shown) is above
``-margin``, equivalent iff that interval lies inside ``(-margin, margin)``. Each one-sided
p-value is the least ``p`` whose one-sided ``1 - p`` bound (the bound of the ``1 - 2p``
interval) excludes the margin, so ``p_noninferior < alpha`` exactly when the verdict reads
non-inferior (or better), and the p-values agree with the interval shown whatever its method.
Near the edges that interval is not the inversion of the paired difference's own test (the
sign-flip test's p-value), which can disagree with it at the margin.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from rlmetrics.validation._args import check_scalar
from rlmetrics.validation.comparison.paired import PairedDifference

__all__ = ["VERDICTS", "MarginTest", "check_margin", "margin_test", "margin_verdict", "one_sided_bound"]

#: The verdicts, ``{margin}`` filled in by :func:`margin_verdict`.
VERDICTS = (
    "better",
    "worse",
    "equivalent within {margin}",
    "no worse than {margin}",
    "inconclusive",
    "undefined",
)


class MarginTest(NamedTuple):
    """The two one-sided tests of a difference ``B - A`` against ``-margin`` and ``+margin``."""

    #: the margin, > 0, in the metric's units
    margin: float
    #: p-value of H0 ``B - A <= -margin`` (small: B is no worse than A by more than the margin)
    p_noninferior: float
    #: p-value of H0 ``B - A >= +margin`` (small: B is no better than A by more than the margin)
    p_nonsuperior: float
    #: TOST p-value of H0 ``|B - A| >= margin``: the larger of the two
    p_equivalent: float
    #: one of :data:`VERDICTS` (see :func:`margin_verdict`)
    verdict: str


#: bisection steps of an inverted one-sided p-value (its precision: 2^-40 of the bracket)
_BISECTIONS = 40


def _one_sided(stat: float, df: float) -> float:
    """P(T >= stat) for Student's t on ``df`` degrees of freedom (``df`` inf: normal)."""
    from scipy import special

    return float(special.stdtr(df, -stat))


def one_sided_bound(result: PairedDifference, p: float, side: str) -> float:
    """The one-sided ``1 - p`` bound of ``B - A`` from ``result``'s interval method.

    ``side="lower"``: the lower bound of the two-sided ``1 - 2p`` interval for ``p < 1/2``, the
    upper bound of the ``2p - 1`` one above 1/2, ``diff`` at 1/2 (increasing in ``p`` for
    nested intervals); ``side="upper"`` the mirror image.
    """
    lower = side == "lower"
    if p == 0.5:
        return result.diff
    low, high = result.interval_at(1.0 - 2.0 * p if p < 0.5 else 2.0 * p - 1.0)
    return (low if lower else high) if p < 0.5 else (high if lower else low)


def _inverted_p(result: PairedDifference, margin: float, side: str) -> float:
    """The ``p`` at which the one-sided ``1 - p`` bound meets the margin, found by bisection.

    The least ``p`` whose bound excludes the margin where the bounds are nested over levels (as
    they are but at a correlation near 1 for Newcombe's; see
    :func:`~rlmetrics.validation.comparison.family.interval_at`). The bracket starts at
    ``alpha = (1 - confidence) / 2`` from the interval shown (``ci_low``/``ci_high``), so the
    p-value is below ``alpha`` exactly when that interval excludes the margin on that side.
    """

    def excludes(bound: float) -> bool:
        return bound > -margin if side == "lower" else bound < margin

    alpha = (1.0 - result.confidence) / 2.0
    lo, hi = (0.0, alpha) if excludes(result.ci_low if side == "lower" else result.ci_high) else (alpha, 1.0)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        if excludes(one_sided_bound(result, mid, side)):
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2.0


def margin_test(result: PairedDifference, margin: float) -> MarginTest:
    """Non-inferiority and equivalence of B to A within ``margin``, and a verdict in words.

    Parameters
    ----------
    result : PairedDifference
        From :func:`~rlmetrics.validation.comparison.paired.paired_difference` or
        :func:`~rlmetrics.validation.comparison.paired.unpaired_difference`.
    margin : float
        The difference that does not matter, > 0, in the metric's units (0.01: one point).

    Returns
    -------
    MarginTest
        The one-sided p-values by inclusion in ``result``'s own interval method (see the module
        docstring): for a t interval (``result.interval_from_se``) the one-sided t tests in
        closed form, with a zero standard error (every prompt's difference the same) 0 or 1;
        for another method (Newcombe's, the inverted sign-flip test's) by bisection over the
        level (to about 1e-12). With an undefined interval, NaN and the verdict ``"undefined"``.

    Raises
    ------
    TypeError
        ``result`` is not a ``PairedDifference``.
    ValueError
        ``margin`` not a finite number > 0.

    Examples
    --------
    >>> from rlmetrics.validation.comparison.paired import paired_difference
    >>> a, b = [0.5, 0.75, 0.25, 1.0, 0.5, 0.75], [0.5, 0.75, 0.5, 1.0, 0.5, 0.5]
    >>> r = paired_difference(a, b, test="t", interval="t")
    >>> t = margin_test(r, 0.2)
    >>> round(r.ci_low, 3), round(r.ci_high, 3), t.verdict, round(t.p_noninferior, 3)
    (-0.166, 0.166, 'equivalent within 0.2', 0.013)
    >>> margin_test(r, 0.16).verdict
    'inconclusive'
    >>> r = paired_difference(a, b)  # the default, Newcombe's interval: the tests follow it
    >>> t = margin_test(r, 0.16)
    >>> round(r.ci_low, 3), round(r.ci_high, 3), t.verdict, round(t.p_noninferior, 4)
    (-0.151, 0.163, 'no worse than 0.16', 0.0183)
    """
    if not isinstance(result, PairedDifference):
        raise TypeError(f"result must be a PairedDifference; got {type(result).__name__}")
    margin = check_margin(margin)
    diff, se, df = result.diff, result.se, result.df
    if math.isnan(se) or math.isnan(result.ci_low) or math.isnan(result.ci_high):
        nan = math.nan
        return MarginTest(margin, nan, nan, nan, "undefined")
    if not result.interval_from_se:
        p_low, p_high = _inverted_p(result, margin, "lower"), _inverted_p(result, margin, "upper")
    elif se == 0.0:
        p_low, p_high = float(diff <= -margin), float(diff >= margin)
    else:
        p_low = _one_sided((diff + margin) / se, df)
        p_high = _one_sided((margin - diff) / se, df)
    verdict = margin_verdict(result.ci_low, result.ci_high, margin)
    return MarginTest(margin, p_low, p_high, max(p_low, p_high), verdict)


def check_margin(margin: object, name: str = "margin") -> float:
    """``margin`` as a float > 0, or an error naming ``name``."""
    value = check_scalar(margin, name, minimum=0.0)
    if not value > 0.0:
        raise ValueError(f"{name} must be > 0 (the difference that does not matter); got {value!r}")
    return value


def margin_verdict(ci_low: float, ci_high: float, margin: float) -> str:
    """The verdict in words of an interval ``[ci_low, ci_high]`` of ``B - A`` against ``margin``.

    Parameters
    ----------
    ci_low, ci_high : float
        A two-sided interval of the difference (NaN: none).
    margin : float
        The difference that does not matter, > 0.

    Returns
    -------
    str
        The first of, in order: ``"undefined"`` (a NaN bound), ``"better"`` (``ci_low > 0``),
        ``"worse"`` (``ci_high < 0``), ``"equivalent within <margin>"`` (``-margin < ci_low`` and
        ``ci_high < margin``), ``"no worse than <margin>"`` (``ci_low > -margin``),
        ``"inconclusive"``.

    Examples
    --------
    >>> margin_verdict(-0.004, 0.006, 0.01), margin_verdict(-0.004, 0.02, 0.01)
    ('equivalent within 0.01', 'no worse than 0.01')
    >>> margin_verdict(0.001, 0.02, 0.01)
    'better'
    >>> margin_verdict(-0.03, 0.005, 0.01), margin_verdict(-0.03, -0.001, 0.01)
    ('inconclusive', 'worse')
    """
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "undefined"
    if ci_low > 0.0:
        return "better"
    if ci_high < 0.0:
        return "worse"
    if ci_low > -margin:
        return f"equivalent within {margin:g}" if ci_high < margin else f"no worse than {margin:g}"
    return "inconclusive"
