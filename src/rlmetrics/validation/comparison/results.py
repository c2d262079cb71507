"""The results of comparing two evaluations: each table's comparison and the family it was adjusted over.

The types :mod:`~rlmetrics.validation.comparison.family` fills in and
:mod:`~rlmetrics.validation.comparison.tables` returns, here below both so that neither imports
the other: :class:`TableComparison` (re-exported by ``tables``), :class:`Family` and
:class:`Adjusted` (re-exported by ``family``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlmetrics.validation.comparison.curves import CurveComparison
from rlmetrics.validation.comparison.equivalence import MarginTest
from rlmetrics.validation.comparison.paired import PairedDifference
from rlmetrics.validation.exact.intervals import IntervalTable

__all__ = ["Adjusted", "Family", "TableComparison"]


@dataclass(frozen=True)
class Family:
    """The family a set of comparisons was adjusted over."""

    #: ``"holm"``, ``"bh"`` or ``"none"``
    method: str
    #: distinct comparisons with a p-value
    size: int
    #: the unadjusted intervals' level (``1 - alpha``)
    confidence: float
    #: the per-comparison level of the adjusted intervals
    level: float
    #: what the adjusted intervals are
    interval: str


@dataclass(frozen=True)
class Adjusted:
    """One metric's difference as the family sees it."""

    #: adjusted p-value (NaN: not in the family)
    p_value: float
    #: the interval at :attr:`Family.level`
    ci_low: float
    ci_high: float
    #: with a margin: :func:`~rlmetrics.validation.comparison.equivalence.margin_verdict` of that interval
    verdict: str | None = None


@dataclass(frozen=True)
class TableComparison:
    """B against A for one data source and variable."""

    source: str
    variable: str
    #: prompts in both runs (``None`` when compared from summaries)
    n_matched: int | None
    n_only_a: int | None
    n_only_b: int | None
    #: metric name -> difference of B minus A
    metrics: dict[str, PairedDifference]
    #: pass@k of both runs for k = 1 .. the fewest samples of a matched prompt (0/1 variables)
    curve: CurveComparison | None
    #: each run's own pass@k curve over the matched prompts, with pointwise (Wilson) intervals
    curve_a: IntervalTable | None = None
    curve_b: IntervalTable | None = None
    #: the family every comparison of the call was adjusted over
    family: Family | None = None
    #: metric name -> its adjusted p-value, interval (and verdict)
    adjusted: dict[str, Adjusted] = field(default_factory=dict)
    #: metric name -> the two one-sided tests against the margin (with ``margin=``)
    margins: dict[str, MarginTest] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (numbers, lists, strings) for JSON."""
        out: dict[str, Any] = {
            "source": self.source,
            "variable": self.variable,
            "n_matched": self.n_matched,
            "n_only_a": self.n_only_a,
            "n_only_b": self.n_only_b,
            "metrics": {name: _public(d) for name, d in self.metrics.items()},
            "curve": None if self.curve is None else _plain(vars(self.curve)),
            "curve_a": None if self.curve_a is None else _plain(self.curve_a._asdict()),
            "curve_b": None if self.curve_b is None else _plain(self.curve_b._asdict()),
            "family": None if self.family is None else vars(self.family),
            "adjusted": {name: vars(x) for name, x in self.adjusted.items()},
            "margins": {name: t._asdict() for name, t in self.margins.items()},
        }
        return out


def _public(d: PairedDifference) -> dict[str, Any]:
    """A difference's public fields as plain data (``ci_method`` among them; the data kept for
    :meth:`~rlmetrics.validation.comparison.paired.PairedDifference.interval_at` left out)."""
    return {k: _plain(v) for k, v in vars(d).items() if not k.startswith("_")}


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj.item() if isinstance(obj, np.generic) else obj
