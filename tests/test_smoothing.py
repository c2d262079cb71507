"""rlmetrics.health.smoothing: TensorBoard's EMA, frozen and rolling baselines, persistence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.health.smoothing import (
    MAD_TO_SIGMA,
    SeriesCache,
    _kth_deviation,
    _sorted_noise_sigma,
    debiased_ema,
    first_persistent,
    frozen_baseline,
    last_persistent,
    noise_sigma,
    rolling_baseline,
    series_median,
    window_counts,
    window_median,
)

values_with_gaps = st.lists(
    st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False),
        st.sampled_from([math.nan, math.inf, -math.inf]),
    ),
    max_size=40,
)


def tensorboard_smoothing(ys: list[float], weight: float) -> list[float]:
    """TensorBoard's line-chart smoothing, written as its TypeScript does it, point by point."""
    last = 0.0 if ys else math.nan
    num_accum = 0
    is_constant = all(y == ys[0] for y in ys)
    out = []
    for y in ys:
        if is_constant or not math.isfinite(y):
            out.append(y)
        else:
            last = last * weight + (1 - weight) * y
            num_accum += 1
            debias = 1 - weight**num_accum if weight != 1 else 1.0
            out.append(last / debias)
    return out


@settings(max_examples=200, deadline=None)
@given(values_with_gaps, st.floats(0.0, 0.99))
def test_debiased_ema_equals_tensorboard_formula(ys, weight):
    np.testing.assert_allclose(debiased_ema(ys, weight), tensorboard_smoothing(ys, weight), rtol=1e-12)


@pytest.mark.parametrize(
    ("ys", "expected"),
    [([], []), ([5.0], [5.0]), ([2.0, 2.0, 2.0], [2.0, 2.0, 2.0]), ([1.0, math.nan], [1.0, math.nan])],
    ids=["empty", "one", "constant", "trailing-nan"],
)
def test_debiased_ema_edges(ys, expected):
    np.testing.assert_array_equal(debiased_ema(ys), expected)


def test_debiased_ema_starts_at_the_first_value_and_weight_zero_is_identity():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0])
    assert debiased_ema(x)[0] == pytest.approx(3.0)  # debiasing removes the pull toward the zero start
    np.testing.assert_array_equal(debiased_ema(x, weight=0.0), x)


@pytest.mark.parametrize("weight", [-0.1, 1.0, 2.0], ids=["negative", "one", "two"])
def test_debiased_ema_rejects_weight_outside_unit_interval(weight):
    with pytest.raises(ValueError, match=r"weight must be in \[0, 1\)"):
        debiased_ema([1.0, 2.0], weight=weight)


def test_frozen_baseline_uses_the_first_finite_points_only():
    x = [math.nan, 1.0, 3.0, math.inf, 2.0, 100.0, 200.0]
    b = frozen_baseline(x, window=3)
    assert (b.median, b.mad, b.n, b.last_index, b.level) == (2.0, 1.0, 3, 4, 2.0)
    assert b.sigma() == pytest.approx(MAD_TO_SIGMA)
    np.testing.assert_allclose(b.z([2.0, 2.0 + MAD_TO_SIGMA]), [0.0, 1.0])


def test_frozen_baseline_in_log_space_skips_non_positive_and_warm_up():
    x = [50.0, 0.0, 1.0, 10.0, 100.0, 1e6]
    b = frozen_baseline(x, window=3, log=True, skip=1)
    assert b.level == pytest.approx(10.0)
    assert b.mad == pytest.approx(math.log(10.0))
    assert b.z([1000.0])[0] == pytest.approx(2.0 / MAD_TO_SIGMA)


@pytest.mark.parametrize("window", [0, 4], ids=["empty-window", "too-few-points"])
def test_frozen_baseline_is_none_without_enough_points(window):
    assert frozen_baseline([1.0, math.nan, 2.0, 3.0], window=window) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=0, max_size=30), st.integers(1, 6))
def test_rolling_baseline_equals_a_loop(xs, window):
    med, mad = rolling_baseline(xs, window=window)
    x = np.asarray(xs, dtype=np.float64)
    for i in range(x.size):
        if i < window:
            assert math.isnan(med[i]) and math.isnan(mad[i])
        else:
            ref = np.median(x[i - window : i])
            assert med[i] == pytest.approx(ref)
            assert mad[i] == pytest.approx(np.median(np.abs(x[i - window : i] - ref)))


def test_rolling_baseline_passes_over_nan():
    med, _ = rolling_baseline([1.0, math.nan, 3.0, 7.0], window=2)
    assert med[2] == 1.0 and med[3] == 3.0


@settings(max_examples=100, deadline=None)
@given(values_with_gaps, st.integers(1, 6))
def test_window_median_equals_a_loop(xs, window):
    got = window_median(xs, window=window)
    x = np.asarray(xs, dtype=np.float64)
    for i in range(x.size):
        part = x[max(i - window + 1, 0) : i + 1]
        part = part[np.isfinite(part)]
        if i < window - 1 or part.size == 0:
            assert math.isnan(got[i])
        else:
            assert got[i] == pytest.approx(np.median(part))


def brute_persistent(flags: list[bool], k: int, n: int, start: int) -> tuple[int, int] | None:
    f = [bool(x) and i >= start for i, x in enumerate(flags)]
    for end in range(len(f)):
        window = range(max(end - n + 1, 0), end + 1)
        if sum(f[i] for i in window) >= k:
            return next(i for i in window if f[i]), end
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), max_size=40), st.integers(1, 8), st.integers(0, 4), st.integers(0, 10))
def test_first_persistent_equals_brute_force(flags, k, extra, start):
    n = k + extra
    assert first_persistent(flags, k=k, n=n, start=start) == brute_persistent(flags, k, n, start)


def test_first_persistent_onset_is_the_first_flagged_point_of_the_window():
    flags = np.array([1, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1], dtype=bool)
    assert first_persistent(flags, k=4, n=5) == (6, 10)
    assert flags.sum() == 6  # the caller's array is left as it was
    assert first_persistent(flags, k=4, n=5, start=7) == (7, 11)


@pytest.mark.parametrize(("k", "n"), [(0, 3), (4, 3)], ids=["k-zero", "k-above-n"])
def test_first_persistent_rejects_bad_k_n(k, n):
    with pytest.raises(ValueError, match="1 <= k <= n"):
        first_persistent([True], k=k, n=n)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        last_persistent([True], k=k, n=n)


def brute_last_persistent(flags: list[bool], k: int, n: int) -> tuple[int, int] | None:
    def window(end: int) -> range:
        return range(max(end - n + 1, 0), end + 1)

    def qualifies(end: int) -> bool:
        return sum(bool(flags[i]) for i in window(end)) >= k

    last = len(flags) - 1
    if last < 0 or not qualifies(last):
        return None
    first_end = last
    while first_end > 0 and qualifies(first_end - 1):
        first_end -= 1
    return next(i for i in window(first_end) if flags[i]), last


@settings(max_examples=300, deadline=None)
@given(st.lists(st.booleans(), max_size=40), st.integers(1, 8), st.integers(0, 4))
def test_last_persistent_equals_brute_force(flags, k, extra):
    n = k + extra
    assert last_persistent(flags, k=k, n=n) == brute_last_persistent(flags, k, n)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], None),  # an early phase that ended
        ([1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1], (9, 11)),  # a phase that came back
        ([0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1], (2, 11)),  # one clear point does not break it
    ],
    ids=["ended", "came-back", "one-gap"],
)
def test_last_persistent_needs_the_condition_at_the_end(flags, expected):
    assert last_persistent(flags, k=3, n=4) == expected


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(-10.0, 10.0))
def test_noise_sigma_ignores_a_linear_trend(seed, slope):
    x = np.random.default_rng(seed).normal(0.0, 1.0, 50)
    trended = x + slope * np.arange(50)
    assert noise_sigma(trended) == pytest.approx(noise_sigma(x), abs=1e-9)


def test_noise_sigma_estimates_the_noise_of_normal_data():
    x = np.random.default_rng(0).normal(0.0, 0.3, 20_000)
    assert noise_sigma(x) == pytest.approx(0.3, rel=0.05)
    assert noise_sigma([1.0, math.nan]) == 0.0


# --- SeriesCache: a growing series, its new windows only, the same floats ---------------------


def _bits(a):
    """The exact bytes of a result (NaN payloads, signed zeros and all)."""
    return np.asarray(a, dtype=np.float64).tobytes()


def _statistics(x):
    """Every cached statistic of ``x``, with the parameters the rules use."""
    out = {}
    for w in (1, 3, 10, 20):
        out[f"median{w}"] = window_median(x, window=w)
    for w, log in ((3, False), (20, True), (20, False)):
        med, mad = rolling_baseline(x, window=w, log=log)
        out[f"rolling{w}{log}"] = np.concatenate([med, mad])
    for weight in (0.0, 0.3, 0.6):
        out[f"ema{weight}"] = debiased_ema(x, weight)
    out["noise"] = noise_sigma(x)
    return out


def _grown(x, cuts, cache):
    """The statistics of each prefix ``x[:c]``, computed with ``cache`` and without, as bytes."""
    with_cache, without = [], []
    for c in cuts:
        with cache.active():
            with_cache.append({k: _bits(v) for k, v in _statistics(x[:c]).items()})
        without.append({k: _bits(v) for k, v in _statistics(x[:c]).items()})
    return with_cache, without


gappy_points = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0]),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(gappy_points, min_size=1, max_size=240), st.lists(st.integers(1, 30), min_size=1, max_size=12)
)
def test_series_cache_gives_the_floats_of_a_whole_computation(xs, steps):
    x = np.asarray(xs, dtype=np.float64)
    cuts = np.minimum(np.cumsum(steps), x.size)
    with_cache, without = _grown(x, cuts, SeriesCache())
    assert with_cache == without


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_series_cache_extends_long_random_walks_with_gaps(seed):
    rng = np.random.default_rng(seed)
    x = np.abs(1.0 + np.cumsum(rng.normal(0.0, 0.05, 1500))) + 0.01
    x[rng.integers(0, x.size, 30)] = rng.choice([math.nan, math.inf, 0.0], 30)
    cuts = [1000, 1001, 1002, 1010, 1200, 1200, 1500]
    cache = SeriesCache()
    with_cache, without = _grown(x, cuts, cache)
    assert with_cache == without
    # every window statistic after the first cut was computed over the new points only (the EMA
    # too: 1000 points is past where its debiasing divides by 1; the noise from its sorted
    # differences), a prefix seen again is a hit
    assert cache.extended == 5 * (4 + 3 + 3 + 1) and cache.hits >= 4 + 3 + 3 + 1


def test_series_cache_results_are_read_only_views_never_written_again():
    cache = SeriesCache()
    x = np.arange(50.0)
    with cache.active():
        first = window_median(x, window=3)
        smoothed = debiased_ema(x)
        with pytest.raises(ValueError, match="read-only"):
            first[:] = -1.0  # a rule that writes into a result copies it first (reward_hacking does)
        before = _bits(first), _bits(smoothed)
        grown = window_median(np.arange(51.0), window=3)  # written after the points handed out
        grown_ema = debiased_ema(np.arange(51.0))
    assert (_bits(first), _bits(smoothed)) == before  # what was handed out did not change
    assert _bits(grown) == _bits(window_median(np.arange(51.0), window=3))
    assert _bits(grown_ema) == _bits(debiased_ema(np.arange(51.0)))
    assert window_median(x, window=3).flags.writeable  # without a cache: a fresh array


def test_series_cache_computes_a_rewritten_series_whole_and_drops_what_is_not_asked_for():
    cache = SeriesCache()
    x = np.linspace(0.0, 1.0, 100)
    with cache.active():
        window_median(x, window=5)
        noise_sigma(x)
    assert (cache.misses, len(cache)) == (2, 2)
    y = x.copy()
    y[10] = 7.0  # not a continuation: the run was rewritten before the new points
    with cache.active():
        got = window_median(np.append(y, 2.0), window=5)
    assert _bits(got) == _bits(window_median(np.append(y, 2.0), window=5))
    assert (cache.misses, cache.extended, len(cache)) == (3, 0, 1)  # the noise of x was not asked for


@settings(max_examples=200, deadline=None)
@given(values_with_gaps, st.integers(0, 6), st.booleans(), st.integers(0, 5))
def test_frozen_baseline_equals_the_statistics_of_the_first_usable_points(xs, window, log, skip):
    x = np.asarray(xs, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan) if log else x
    usable = np.flatnonzero(np.isfinite(t))
    usable = usable[usable >= skip][:window]
    got = frozen_baseline(x, window=window, log=log, skip=skip)
    if window < 1 or usable.size < window:
        assert got is None
    else:
        median = float(np.median(t[usable]))
        mad = float(np.median(np.abs(t[usable] - median)))
        assert (got.median, got.mad, got.n, got.last_index) == (median, mad, window, int(usable[-1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=60), st.integers(1, 12))
def test_window_counts_equals_a_convolution(flags, n):
    f = np.asarray(flags, dtype=bool)
    expected = np.convolve(f.astype(np.int64), np.ones(n, dtype=np.int64))[: f.size]
    np.testing.assert_array_equal(window_counts(f, n), expected)


# --- the medians of the hot paths: np.median's floats --------------------------------------------

tied_points = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e308, -1e308, 5e-324]),
    st.floats(-1e3, 1e3, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(tied_points, st.just(math.nan), st.just(math.inf)), min_size=1, max_size=41))
def test_series_median_is_np_median(xs):
    x = np.asarray(xs, dtype=np.float64)
    with np.errstate(all="ignore"):  # two middle points near the largest float: their sum overflows
        expected, got = float(np.median(x)), series_median(x)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(tied_points, min_size=1, max_size=30),
    st.one_of(tied_points, st.sampled_from([math.inf, -math.inf])),
    st.data(),
)
def test_kth_deviation_is_the_kth_of_the_sorted_deviations(xs, m, data):
    d = np.sort(np.asarray(xs, dtype=np.float64))
    k = data.draw(st.integers(1, d.size), label="k")
    with np.errstate(all="ignore"):  # deviations past the largest float overflow, both ways
        expected, got = np.sort(np.abs(d - m))[k - 1], _kth_deviation(d, m, k)
    assert _bits(got) == _bits(expected)


@settings(max_examples=300, deadline=None)
@given(st.lists(tied_points, min_size=3, max_size=40))
def test_noise_sigma_from_sorted_differences_is_the_same_float(xs):
    x = np.asarray(xs, dtype=np.float64)
    with np.errstate(all="ignore"):
        d = np.diff(x)
        if not np.isfinite(d).all():
            return  # overflowing differences: the cache computes those whole
        assert _bits(_sorted_noise_sigma(np.sort(d))) == _bits(noise_sigma(x))


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_series_cache_noise_of_a_series_with_many_ties(seed):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.choice([0.0, 0.0, 0.5, -0.5, 1.0], 400))  # many equal differences, zero MAD
    cuts = [200, 201, 202, 250, 251, 400]
    cache = SeriesCache()
    for c in cuts:
        with cache.active():
            got = noise_sigma(x[:c])
        assert _bits(got) == _bits(noise_sigma(x[:c]))
    assert cache.extended == len(cuts) - 1


def test_series_cache_frozen_baseline_of_a_grown_series_and_of_a_changed_start():
    rng = np.random.default_rng(0)
    x = np.abs(rng.normal(1.0, 0.3, 300))
    x[[2, 5]] = [math.nan, -1.0]  # passed over (and, in log space, the negative point)
    cache = SeriesCache()
    for c, log, skip in [(50, True, 0), (51, True, 0), (300, True, 0), (300, False, 3), (301, False, 3)]:
        y = np.append(x, 2.0)[:c]
        with cache.active():
            got = frozen_baseline(y, window=10, log=log, skip=skip)
        assert got == frozen_baseline(y, window=10, log=log, skip=skip)
    assert (cache.hits, cache.misses) == (3, 2)
    changed = x.copy()
    changed[4] = 7.0  # a point of the baseline window: computed again
    with cache.active():
        got = frozen_baseline(changed, window=10, log=True)
    assert got == frozen_baseline(changed, window=10, log=True) and cache.misses == 3
