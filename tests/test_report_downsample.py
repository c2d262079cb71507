"""Tests of rlmetrics.report.downsample: long series thinned to each bucket's extremes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.health.smoothing import debiased_ema
from rlmetrics.report.downsample import thin

# --- thinning ----------------------------------------------------------------------------------------


_series = st.lists(
    st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf)), min_size=1, max_size=300
)


@settings(max_examples=150, deadline=None)
@given(values=_series, buckets=st.integers(1, 40))
def test_thin_keeps_each_buckets_extremes(values, buckets):
    x = np.asarray(values)
    if x.size < buckets:
        with pytest.raises(ValueError, match="at least buckets"):
            thin(x, buckets=buckets)
        return
    t = thin(x, buckets=buckets)
    assert t.keep.tolist() == sorted(set(t.keep.tolist())) and len(t.keep) <= 3 * buckets
    bounds = [(k * x.size // buckets, (k + 1) * x.size // buckets) for k in range(buckets)]
    assert t.ends.tolist() == [b - 1 for _, b in bounds]
    kept = set(t.keep.tolist())
    for k, (lo, hi) in enumerate(bounds):  # a loop over each bucket, the reference
        chunk = x[lo:hi]
        fin = [v for v in chunk if math.isfinite(v)]
        assert t.counts[k] == len(fin)
        if fin:
            assert t.means[k] == pytest.approx(sum(fin) / len(fin), rel=1e-12, abs=1e-9)
            for want in (min(fin), max(fin)):
                assert lo + chunk.tolist().index(want) in kept  # the first point at the extreme
        else:
            assert np.isnan(t.means[k]) and lo in kept
        if len(fin) < len(chunk):
            assert any(not math.isfinite(x[i]) for i in kept if lo <= i < hi)  # the gap survives
        assert sum(lo <= i < hi for i in kept) <= 3


def test_thin_errors():
    with pytest.raises(ValueError, match="buckets must be an integer >= 1; got 0"):
        thin([1.0, 2.0], buckets=0)
    with pytest.raises(ValueError, match="expected at least buckets=3 points; got 2"):
        thin([1.0, 2.0], buckets=3)


def _bucket_ema(means, counts, w):
    """The page's smoothing of a thinned series (its script's emaBuckets), in Python."""
    last, n, out = 0.0, 0, []
    for m, c in zip(means, counts):
        last = last * w**c + (1 - w**c) * m
        n += c
        out.append(last / (1 - w**n))
    return np.asarray(out)


@pytest.mark.parametrize("w", [0.3, 0.6, 0.9, 0.99])
def test_the_bucket_ema_is_the_ema_of_every_point_when_buckets_are_flat(w):
    rng = np.random.default_rng(3)
    levels = rng.normal(size=50)
    x = np.repeat(levels, 20)  # 50 flat buckets of 20 points
    t = thin(x, buckets=50)
    np.testing.assert_allclose(_bucket_ema(t.means, t.counts, w), debiased_ema(x, w)[t.ends], rtol=1e-10)
