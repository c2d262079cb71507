"""The family's adjusted intervals (a property over random tables, a hand computation)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

_rates = st.integers(0, 8).map(lambda c: c / 8)
_table = st.lists(st.tuples(_rates, _rates), min_size=3, max_size=30)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(_table, min_size=1, max_size=4),
    st.sampled_from(["holm", "bh", "none"]),
    st.sampled_from(["newcombe", "t", "inverted"]),
    st.sampled_from([0.01, 0.05]),
)
def test_adjusted_interval_holds_the_unadjusted_one(tables, method, interval, margin):
    """Property over random tables of per-prompt rates: each adjusted interval is the metric's own
    interval method at the family's level (recomputed here from the data by paired_difference at
    that confidence), joined with the unadjusted one, so it is never narrower; its verdict is
    that interval's; the unadjusted margin tests agree with the interval shown."""
    from rlmetrics.validation.comparison.equivalence import margin_verdict
    from rlmetrics.validation.comparison.family import adjust_comparisons
    from rlmetrics.validation.comparison.paired import paired_difference
    from rlmetrics.validation.comparison.results import TableComparison

    data = [tuple(np.array(x) for x in zip(*t, strict=True)) for t in tables]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        metrics = {f"m{i}": paired_difference(a, b, interval=interval) for i, (a, b) in enumerate(data)}
        (c,) = adjust_comparisons(
            [TableComparison("s", "acc", None, None, None, metrics, None)], method=method, margin=margin
        )
    level = c.family.level
    assert level >= 0.95
    for i, (a, b) in enumerate(data):
        r, adj = metrics[f"m{i}"], c.adjusted[f"m{i}"]
        assert adj.ci_low <= r.ci_low and adj.ci_high >= r.ci_high
        fresh = paired_difference(a, b, interval=interval, confidence=level)
        assert adj.ci_low == pytest.approx(min(fresh.ci_low, r.ci_low), rel=1e-12, abs=1e-15)
        assert adj.ci_high == pytest.approx(max(fresh.ci_high, r.ci_high), rel=1e-12, abs=1e-15)
        assert adj.verdict == margin_verdict(adj.ci_low, adj.ci_high, margin)
        t = c.margins[f"m{i}"]
        assert (t.p_noninferior < 0.025) == (r.ci_low > -margin) and t.verdict == margin_verdict(
            r.ci_low, r.ci_high, margin
        )


def test_adjusted_newcombe_interval_by_hand():
    """Holm over three metrics: the adjusted interval is Newcombe's at 1 - 0.05 / 3, computed here
    from the runs' own wilson-edge intervals at that level (method 10 written out)."""
    from rlmetrics.validation.comparison.family import adjust_comparisons
    from rlmetrics.validation.comparison.paired import paired_difference
    from rlmetrics.validation.comparison.results import TableComparison
    from rlmetrics.validation.exact.intervals import mean_interval

    rng = np.random.default_rng(12)
    runs = []
    for _ in range(3):
        rates = rng.beta(0.5, 0.5, 40)
        runs.append((rng.binomial(8, rates) / 8, rng.binomial(8, np.clip(rates + 0.05, 0, 1)) / 8))
    metrics = {f"m{i}": paired_difference(a, b) for i, (a, b) in enumerate(runs)}
    (c,) = adjust_comparisons([TableComparison("s", "acc", None, None, None, metrics, None)])
    level = 1 - 0.05 / 3
    assert c.family.level == pytest.approx(level) and c.family.size == 3
    for i, (a, b) in enumerate(runs):
        ia, ib = mean_interval(a, confidence=level), mean_interval(b, confidence=level)
        r = float(np.corrcoef(a, b)[0, 1])
        d = ib.value - ia.value
        dl, ua = ib.value - ib.ci_low, ia.ci_high - ia.value
        ub, la = ib.ci_high - ib.value, ia.value - ia.ci_low
        low = d - math.sqrt(dl**2 - 2 * r * dl * ua + ua**2)
        high = d + math.sqrt(ub**2 - 2 * r * ub * la + la**2)
        adj = c.adjusted[f"m{i}"]
        assert (adj.ci_low, adj.ci_high) == pytest.approx((low, high), rel=1e-12)
        assert adj.ci_low < metrics[f"m{i}"].ci_low and adj.ci_high > metrics[f"m{i}"].ci_high
