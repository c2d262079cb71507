"""Equivalence and non-inferiority: "B is no worse than A by more than a margin", not only "different".

A release check asks whether a new checkpoint B is no worse than the old A by more than
``margin`` (say one point of pass@1), which a test of no difference cannot answer: a large p-value
is no evidence of equality. :func:`margin_test` reads a
:class:`~rlmetrics.validation.comparison.paired.PairedDifference` (paired or Welch) and gives the
two one-sided t tests (TOST, Schuirmann 1987) against ``-margin`` and ``+margin`` on the same
standard error and degrees of freedom, and a verdict in words from the difference's interval:

* ``"better"``: the interval lies above 0;
* ``"worse"``: it lies below 0;
* ``"no worse than <margin>"``: it lies above ``-margin`` (B non-inferior), but holds 0;
* ``"inconclusive"``: it reaches below ``-margin`` and holds 0;
* ``"undefined"``: no interval (fewer than two prompts).

The interval is the two-sided one at the result's ``confidence``, so each bound is a one-sided
test at ``(1 - confidence) / 2`` (the usual convention for non-inferiority: 2.5% at 95%).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from rlmetrics.validation._args import check_scalar
from rlmetrics.validation.comparison.paired import PairedDifference

__all__ = ["MarginTest", "margin_test"]


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
    #: ``"better"``, ``"worse"``, ``"no worse than <margin>"``, ``"inconclusive"`` or ``"undefined"``
    verdict: str


def _one_sided(stat: float, df: float) -> float:
    """P(T >= stat) for Student's t on ``df`` degrees of freedom (``df`` inf: normal)."""
    from scipy import special

    return float(special.stdtr(df, -stat))


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
        With a zero standard error (every prompt's difference the same) the p-values are 0 or
        1; with an undefined one, NaN and the verdict ``"undefined"``.

    Raises
    ------
    TypeError
        ``result`` is not a ``PairedDifference``.
    ValueError
        ``margin`` not a finite number > 0.

    Examples
    --------
    >>> from rlmetrics.validation.comparison.paired import paired_difference
    >>> r = paired_difference([0.5, 0.75, 0.25, 1.0, 0.5, 0.75], [0.5, 0.75, 0.5, 1.0, 0.5, 0.5])
    >>> t = margin_test(r, 0.2)
    >>> round(r.ci_low, 3), round(r.ci_high, 3), t.verdict, round(t.p_noninferior, 3)
    (-0.166, 0.166, 'no worse than 0.2', 0.013)
    """
    if not isinstance(result, PairedDifference):
        raise TypeError(f"result must be a PairedDifference; got {type(result).__name__}")
    margin = check_scalar(margin, "margin", minimum=0.0)
    if not margin > 0.0:
        raise ValueError(f"margin must be > 0 (the difference that does not matter); got {margin!r}")
    diff, se, df = result.diff, result.se, result.df
    if math.isnan(se) or math.isnan(result.ci_low):
        nan = math.nan
        return MarginTest(margin, nan, nan, nan, "undefined")
    if se == 0.0:
        p_low, p_high = float(diff <= -margin), float(diff >= margin)
    else:
        p_low = _one_sided((diff + margin) / se, df)
        p_high = _one_sided((margin - diff) / se, df)
    return MarginTest(margin, p_low, p_high, max(p_low, p_high), _verdict(result, margin))


def _verdict(result: PairedDifference, margin: float) -> str:
    if result.ci_low > 0.0:
        return "better"
    if result.ci_high < 0.0:
        return "worse"
    if result.ci_low > -margin:
        return f"no worse than {margin:g}"
    return "inconclusive"
