"""rlmetrics.policy.staleness: against a brute-force loop per lag bucket, merges of micro-batches,
torch against numpy, peers' names, argument errors, empty batches, and across gloo ranks."""

from __future__ import annotations

import math
import os
import pickle
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import Stats, compute_staleness_metrics, staleness_statistics
from rlmetrics import keys as K
from rlmetrics.errors import UndefinedMetricWarning
from rlmetrics.policy.staleness import LAG_BUCKETS, PEER_KEYS

P = K.STALENESS_PREFIX


# --- the brute-force reference ----------------------------------------------------------------


def _bucket(lag: int) -> str:
    """The bucket of a lag, written out (the fixed edges 0, 1, 2, 3-4, 5-8, >8)."""
    if lag <= 2:
        return str(lag)
    if lag <= 4:
        return "3_4"
    if lag <= 8:
        return "5_8"
    return "9_plus"


def brute(case: dict, threshold: float = 2.0) -> dict:
    """The metrics, one sample and one token at a time in Python floats (``threshold``: the
    importance-weight truncation threshold)."""
    cur, v, m = case["current_version"], case["versions"], case.get("response_mask")
    per_token = v.ndim == 2
    samples = []
    for i in range(v.shape[0]):
        toks = [int(v[i, j]) for j in range(v.shape[1]) if m[i, j]] if per_token else [int(v[i])]
        row = {"old": min(toks), "new": max(toks)}
        if "newest_versions" in case:
            row["new"] = int(case["newest_versions"][i])
        if m is not None:
            sel = [j for j in range(m.shape[1]) if m[i, j]]
            row["ntok"] = len(sel)
            row["toklag"] = sum(cur - int(v[i, j]) if per_token else cur - int(v[i]) for j in sel)
            if "old_log_probs" in case:
                lrs = [
                    min(
                        max(float(case["old_log_probs"][i, j]) - float(case["rollout_log_probs"][i, j]), -20),
                        20,
                    )
                    for j in sel
                ]
                row["k3"] = sum(math.exp(x) - 1 - x for x in lrs)
                row["w"], row["wu"] = sum(math.exp(x) for x in lrs), len(sel)
                row["whigh"] = sum(math.exp(x) > threshold for x in lrs)
                row["wmax"] = max(math.exp(x) for x in lrs)
            row["len"] = float(len(sel))
        if "response_lengths" in case:
            row["len"] = float(case["response_lengths"][i])
        if "rewards" in case:
            row["r"] = float(case["rewards"][i])
        samples.append(row)
    n = len(samples)
    lags = [cur - s["old"] for s in samples]
    news = [cur - s["new"] for s in samples]
    spans = [s["new"] - s["old"] + 1 for s in samples]
    out = {
        K.STALENESS_NUM_SAMPLES: float(n),
        K.STALENESS_LAG_MEAN: sum(lags) / n,
        K.STALENESS_LAG_MAX: max(lags),
        K.STALENESS_LAG_MIN: min(lags),
        K.STALENESS_LAG_NEWEST_MEAN: sum(news) / n,
        K.STALENESS_LAG_NEWEST_MAX: max(news),
        K.STALENESS_LAG_NEWEST_MIN: min(news),
        K.STALENESS_SPANS_MEAN: sum(spans) / n,
        K.STALENESS_SPANS_MAX: max(spans),
        K.STALENESS_SPANS_MIN: min(spans),
        K.STALENESS_MULTI_VERSION_SHARE: sum(s > 1 for s in spans) / n,
    }
    if m is not None:
        out[K.STALENESS_TOKEN_LAG_MEAN] = sum(s["toklag"] for s in samples) / sum(s["ntok"] for s in samples)
    for label, _, _ in LAG_BUCKETS:
        group = [s for s, lag in zip(samples, lags) if _bucket(lag) == label]
        out[K.staleness_bucket(label, K.STALENESS_BUCKET_SHARE)] = len(group) / n
        if not group:
            continue
        if "w" in samples[0]:
            wu = sum(s["wu"] for s in group)
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_MEAN)] = (
                sum(s["w"] for s in group) / wu
            )
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_K3_KL)] = sum(s["k3"] for s in group) / wu
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH)] = (
                sum(s["whigh"] for s in group) / wu
            )
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_MAX)] = max(s["wmax"] for s in group)
        for field, stat in (("r", K.STALENESS_BUCKET_REWARD_MEAN), ("len", K.STALENESS_BUCKET_LENGTH_MEAN)):
            if field in samples[0]:
                out[K.staleness_bucket(label, stat)] = sum(s[field] for s in group) / len(group)
    for field, key in (("r", K.STALENESS_TRAINED_REWARD_MEAN), ("len", K.STALENESS_TRAINED_LENGTH_MEAN)):
        if field in samples[0]:
            out[key] = sum(s[field] for s in samples) / n
    _brute_times(case, out)
    _brute_dropped(case, samples, out)
    return out


def _brute_times(case: dict, out: dict) -> None:
    pairs = (
        ("start_times", "enqueue_times", K.STALENESS_AGE_IN_FLIGHT_MEAN, K.STALENESS_AGE_IN_FLIGHT_MAX),
        ("enqueue_times", "dequeue_times", K.STALENESS_AGE_IN_QUEUE_MEAN, K.STALENESS_AGE_IN_QUEUE_MAX),
        ("enqueue_times", "train_time", K.STALENESS_AGE_MEAN, K.STALENESS_AGE_MAX),
    )
    for early, late, mean_key, max_key in pairs:
        if early in case and late in case:
            t1 = case[late]
            ages = [
                (float(t1) if np.ndim(t1) == 0 else float(t1[i])) - float(t0)
                for i, t0 in enumerate(case[early])
            ]
            out[mean_key], out[max_key] = sum(ages) / len(ages), max(ages)


def _brute_dropped(case: dict, samples: list, out: dict) -> None:
    if "dropped_versions" not in case:
        return
    cur, n = case["current_version"], len(samples)
    dl = [cur - int(x) for x in case["dropped_versions"]]
    d = len(dl)
    out[K.STALENESS_DROPPED_COUNT] = float(d)
    out[K.STALENESS_DROPPED_SHARE] = d / (n + d)
    if d:
        out[K.STALENESS_DROPPED_LAG_MEAN] = sum(dl) / d
        out[K.STALENESS_DROPPED_LAG_MAX], out[K.STALENESS_DROPPED_LAG_MIN] = max(dl), min(dl)
    for name, field, dkey, gkey in (
        ("dropped_lengths", "len", K.STALENESS_DROPPED_LENGTH_MEAN, K.STALENESS_GENERATED_LENGTH_MEAN),
        ("dropped_rewards", "r", K.STALENESS_DROPPED_REWARD_MEAN, K.STALENESS_GENERATED_REWARD_MEAN),
    ):
        if name in case:
            vals = [float(x) for x in case[name]]
            if d:
                out[dkey] = sum(vals) / d
            if field in samples[0]:
                out[gkey] = (sum(s[field] for s in samples) + sum(vals)) / (n + d)


def make_case(seed: int, n: int, width: int, *, per_token: bool, extras: bool, lag_scale: int = 6) -> dict:
    """A random batch: versions up to ``~2 * lag_scale`` behind, masks with a token in every row."""
    rng = np.random.default_rng(seed)
    cur = int(rng.integers(12, 40))
    mask = rng.random((n, width)) < 0.6
    mask[np.arange(n), rng.integers(0, width, size=n)] = True
    oldest = cur - rng.integers(0, 2 * lag_scale + 1, size=n)
    case: dict = {"current_version": cur, "response_mask": mask.astype(np.int64)}
    if per_token:
        # partial rollouts: versions grow along a row, by 0 or 1 per token, never past cur
        steps = (rng.random((n, width)) < 0.3).astype(np.int64)
        case["versions"] = np.minimum(oldest[:, None] + np.cumsum(steps, axis=1) - steps[:, :1], cur)
    else:
        case["versions"] = oldest
        case["newest_versions"] = np.minimum(oldest + rng.integers(0, 3, size=n), cur)
    if extras:
        case["old_log_probs"] = -rng.exponential(1.0, size=(n, width))
        # a spread of 0.4 puts about 4% of the token ratios above the default threshold 2.0
        case["rollout_log_probs"] = case["old_log_probs"] + rng.normal(0, 0.4, size=(n, width))
        case["rewards"] = rng.normal(size=n)
        case["start_times"] = rng.uniform(0, 100, size=n)
        case["enqueue_times"] = case["start_times"] + rng.exponential(5.0, size=n)
        case["dequeue_times"] = case["enqueue_times"] + rng.exponential(2.0, size=n)
        case["train_time"] = float(case["dequeue_times"].max() + 1.0)
        d = int(rng.integers(0, 4))
        case["dropped_versions"] = cur - rng.integers(4, 15, size=d)
        case["dropped_lengths"] = rng.integers(1, 50, size=d).astype(np.float64)
        case["dropped_rewards"] = rng.normal(size=d)
    return case


def call(case: dict, **options) -> dict:
    kwargs = {k: v for k, v in case.items() if k != "versions"}
    return compute_staleness_metrics(case["versions"], **kwargs, **options)


def assert_close(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12, nan_ok=True), key


# --- against brute force ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(1, 9),
    width=st.integers(1, 6),
    per_token=st.booleans(),
    extras=st.booleans(),
)
def test_metrics_equal_brute_force_per_lag_bucket(seed, n, width, per_token, extras):
    case = make_case(seed, n, width, per_token=per_token, extras=extras)
    assert_close(call(case), brute(case))


@pytest.mark.parametrize(
    "form",
    ["per-sample-no-mask", "per-sample-weights", "per-token-weights", "explicit-lengths"],
    ids=["per-sample-no-mask", "per-sample-weights", "per-token-weights", "explicit-lengths"],
)
def test_weights_and_lengths_forms_equal_brute_force(form):
    case = make_case(3, 12, 5, per_token=form == "per-token-weights", extras=False, lag_scale=3)
    rng = np.random.default_rng(9)
    if form == "per-sample-no-mask":
        del case["response_mask"]
        want = brute(case)
    elif form == "explicit-lengths":
        case["response_lengths"] = rng.integers(0, 30, size=12).astype(np.float64)
        want = brute(case)
    else:
        shape = (12,) if form == "per-sample-weights" else (12, 5)
        case["importance_weights"] = rng.uniform(0.2, 3.0, size=shape)
        want = brute(case)
        w, m = case["importance_weights"], case["response_mask"].astype(bool)
        lag = case["current_version"] - (
            case["versions"] if w.ndim == 1 else np.where(m, case["versions"], 99).min(1)
        )
        for label, _, _ in LAG_BUCKETS:
            rows = np.array([_bucket(int(x)) == label for x in lag])
            if rows.any():
                num = w[rows].sum() if w.ndim == 1 else (w * m)[rows].sum()
                den = rows.sum() if w.ndim == 1 else m[rows].sum()
                want[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_MEAN)] = num / den
                selected = w[rows] if w.ndim == 1 else w[rows][m[rows]]  # the bucket's weights
                high = K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH)
                want[high] = sum(float(x) > 2.0 for x in selected) / den
                want[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_MAX)] = max(map(float, selected))
    assert_close(call(case), want)


#: The forms of rollout_is_threshold (as the mismatch family and verl's config take them) and
#: the upper bound each gives.
THRESHOLD_FORMS = [
    lambda t: t,
    lambda t: str(t),
    lambda t: f"{t / 4}_{t}",  # IcePop's lower_upper: only the upper bound counts here
    lambda t: (t / 4, t),
]


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(1, 9),
    per_token=st.booleans(),
    threshold=st.floats(1.05, 3.0),
    form=st.sampled_from(range(len(THRESHOLD_FORMS))),
)
def test_clipped_share_and_max_weight_per_bucket_equal_brute_force(seed, n, per_token, threshold, form):
    case = make_case(seed, n, 5, per_token=per_token, extras=True)
    got = call(case, rollout_is_threshold=THRESHOLD_FORMS[form](threshold))
    assert_close(got, brute(case, threshold=threshold))


def test_clipped_share_and_max_weight_of_a_known_batch():
    versions = np.array([9, 9, 8, 5])  # lags 0, 0, 1, 4
    weights = np.array([[1.0, 2.5, 0.5], [3.0, 1.0, 7.0], [2.0, 2.1, 0.1], [0.2, 0.3, 9.0]])
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 1, 0]])  # the 7.0 and the 9.0 are padding
    m = compute_staleness_metrics(versions, current_version=9, response_mask=mask, importance_weights=weights)
    share, top = K.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH, K.STALENESS_BUCKET_IS_WEIGHT_MAX
    assert m[K.staleness_bucket("0", share)] == 2 / 5 and m[K.staleness_bucket("0", top)] == 3.0
    # 2.0 itself is not above the threshold (strict, as verl's fraction_high)
    assert m[K.staleness_bucket("1", share)] == 1 / 3 and m[K.staleness_bucket("1", top)] == 2.1
    assert m[K.staleness_bucket("3_4", share)] == 0.0 and m[K.staleness_bucket("3_4", top)] == 0.3
    assert K.staleness_bucket("2", share) not in m  # an empty bucket reports no cost
    low = compute_staleness_metrics(
        versions, current_version=9, response_mask=mask, importance_weights=weights, rollout_is_threshold=0.25
    )
    assert low[K.staleness_bucket("3_4", share)] == 0.5


def test_a_known_batch_reads_as_documented():
    versions = np.array([[7, 7, 8], [5, 6, 0], [8, 8, 8], [0, 0, 0]])
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0]])
    m = compute_staleness_metrics(versions, current_version=8, response_mask=mask)
    # oldest-token lags 1, 3, 0, 8; newest-token lags 0, 2, 0, 8; spans 2, 2, 1, 1
    assert m[K.STALENESS_LAG_MEAN] == 3.0 and m[K.STALENESS_LAG_MAX] == 8.0 and m[K.STALENESS_LAG_MIN] == 0.0
    assert m[K.STALENESS_LAG_NEWEST_MEAN] == 2.5
    assert m[K.STALENESS_SPANS_MAX] == 2.0 and m[K.STALENESS_MULTI_VERSION_SHARE] == 0.5
    shares = [m[K.staleness_bucket(label, K.STALENESS_BUCKET_SHARE)] for label in K.STALENESS_LAG_BUCKETS]
    assert shares == [0.25, 0.25, 0.0, 0.25, 0.25, 0.0]
    assert m[K.STALENESS_TOKEN_LAG_MEAN] == pytest.approx((1 + 1 + 0 + 3 + 2 + 0 + 0 + 0 + 8) / 9)


# --- merges, torch, batches, options ----------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 12), per_token=st.booleans(), data=st.data())
def test_merged_micro_batches_equal_the_whole(seed, n, per_token, data):
    case = make_case(seed, n, 4, per_token=per_token, extras=True)
    cut = data.draw(st.integers(0, n), label="cut")  # one part may be empty

    def part(rows: slice, with_dropped: bool) -> dict:
        p = {k: (v[rows] if isinstance(v, np.ndarray) and k not in dropped else v) for k, v in case.items()}
        for k in dropped:
            p[k] = case[k] if with_dropped else case[k][:0]
        return p

    dropped = ("dropped_versions", "dropped_lengths", "dropped_rewards")
    parts = [part(slice(0, cut), True), part(slice(cut, n), False)]
    stats = [
        staleness_statistics(p["versions"], **{k: v for k, v in p.items() if k != "versions"}) for p in parts
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndefinedMetricWarning)  # the merge is not empty
        assert_close(Stats.merge(*stats).finalize(), call(case))


def test_torch_cpu_equals_numpy():
    torch = pytest.importorskip("torch")
    case = make_case(5, 10, 6, per_token=True, extras=True)
    tcase = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in case.items()}
    tcase["response_mask"] = tcase["response_mask"].bool()
    tcase["old_log_probs"] = tcase["old_log_probs"].float()
    tcase["rollout_log_probs"] = tcase["rollout_log_probs"].float()
    got, want = call(tcase), call(case)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), key


def test_torch_on_the_device_path_equals_numpy(monkeypatch):
    """CPU tensors through the path CUDA tensors take (torch ops, not numpy views)."""
    torch = pytest.importorskip("torch")
    from rlmetrics._core import array

    monkeypatch.setattr(array, "_CPU_TENSORS_AS_NUMPY", False)
    case = make_case(6, 8, 5, per_token=True, extras=True)
    tcase = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in case.items()}
    stats = staleness_statistics(tcase["versions"], **{k: v for k, v in tcase.items() if k != "versions"})
    assert isinstance(stats.sums, torch.Tensor)
    assert_close(stats.finalize(), call(case))


def test_batch_input_reads_versions_and_mask():
    case = make_case(7, 6, 4, per_token=True, extras=False)
    batch = {"policy_versions": case["versions"], "response_mask": case["response_mask"]}
    got = compute_staleness_metrics(batch, current_version=case["current_version"])
    assert_close(got, call(case))
    other = compute_staleness_metrics(
        {"v": case["versions"][:, 0]}, current_version=case["current_version"], versions_key="v"
    )
    assert other[K.STALENESS_NUM_SAMPLES] == 6.0


def test_float_versions_holding_whole_numbers_equal_integers():
    case = make_case(8, 7, 3, per_token=True, extras=False)
    floats = dict(
        case, versions=np.where(case["response_mask"] == 1, case["versions"], np.nan).astype(np.float32)
    )
    assert_close(call(floats), call(case))


@pytest.mark.parametrize("peer", sorted(PEER_KEYS), ids=sorted(PEER_KEYS))
def test_peer_names_carry_the_same_values(peer):
    case = make_case(11, 9, 4, per_token=True, extras=True)
    case["dropped_versions"] = case["current_version"] - np.array([5, 9])
    case["dropped_lengths"], case["dropped_rewards"] = np.array([3.0, 4.0]), np.array([0.0, 1.0])
    ours = call(case)
    got = call(case, peer_names=(peer,), prefix="off/")
    for peer_key, our_key in PEER_KEYS[peer]:
        assert got[peer_key] == ours[our_key], peer_key
        assert got["off/" + our_key.removeprefix(P)] == ours[our_key]
    assert len(got) == len(ours) + len(PEER_KEYS[peer])


@pytest.mark.parametrize("peer", sorted(PEER_KEYS), ids=sorted(PEER_KEYS))
def test_a_history_under_a_peers_names_feeds_the_lag_signal(peer):
    """Steps logged under the peer's names alone: the health rules read the lag from them."""
    from rlmetrics.health.signals import resolve

    steps = [make_case(20 + i, 6, 4, per_token=True, extras=False) for i in range(4)]
    logged = [call(case, peer_names=(peer,)) for case in steps]
    theirs = {peer_key for peer_key, _ in PEER_KEYS[peer] if peer_key in logged[0]}  # no drops logged
    history = {key: (np.arange(len(logged)), np.array([m[key] for m in logged])) for key in theirs}
    found = resolve(history, "staleness_lag")
    assert found is not None and found.key in theirs
    assert found.values.tolist() == [m[K.STALENESS_LAG_MEAN] for m in logged]


#: The lag under names rlmetrics does not write but the health rules read: NeMo-RL's
#: avg_trajectory_age (bare and as its loggers write it) and AReaL's token-mean lag.
LAG_ONLY_NAMES = [K.NEMO_RL_AVG_TRAJECTORY_AGE, "train/" + K.NEMO_RL_AVG_TRAJECTORY_AGE]
LAG_ONLY_NAMES.append(K.AREAL_SAMPLE_STALENESS_THETA_AVG)


@pytest.mark.parametrize("key", LAG_ONLY_NAMES, ids=LAG_ONLY_NAMES)
def test_a_lag_growing_under_nemo_rl_or_areal_names_is_found(key):
    """300 steps of a lag 2 with batch noise, growing 1/20 of a version a step from step 150:
    staleness_growth reads it under the peer's name; a flat lag raises nothing."""
    from rlmetrics.health.rules import diagnose

    t = np.arange(300, dtype=np.float64)
    flat = np.maximum(2.0 + np.random.default_rng(0).normal(0.0, 0.15, t.size), 0.0)
    found = diagnose({key: (t, flat + 0.05 * np.maximum(t - 150.0, 0.0))}, kinds=["staleness_growth"])
    (finding,) = [f for f in found.findings if f.kind == "staleness_growth"]
    assert finding.metric == (key,) and abs(finding.step - 150) <= 5
    assert diagnose({key: (t, flat)}, kinds=["staleness_growth"]).findings == ()


def test_empty_batch_gives_nan_with_a_warning():
    with pytest.warns(UndefinedMetricWarning, match="no trained sample"):
        m = compute_staleness_metrics(
            np.zeros((0,), dtype=np.int64), current_version=3, dropped_versions=np.array([1, 2])
        )
    assert math.isnan(m[K.STALENESS_LAG_MEAN]) and math.isnan(m[K.staleness_bucket("0", "share")])
    assert m[K.STALENESS_NUM_SAMPLES] == 0.0 and m[K.STALENESS_DROPPED_SHARE] == 1.0
    assert m[K.STALENESS_DROPPED_LAG_MEAN] == 1.5


def test_the_global_rngs_are_untouched():
    torch = pytest.importorskip("torch")
    np_state = np.random.get_state()[1].copy()  # noqa: NPY002 - the global state must stay untouched
    torch_state = torch.random.get_rng_state().clone()
    call(make_case(12, 8, 4, per_token=True, extras=True))
    assert (np.random.get_state()[1] == np_state).all()  # noqa: NPY002
    assert torch.equal(torch.random.get_rng_state(), torch_state)


V = np.array([3, 4])
M = np.ones((2, 3), dtype=np.int64)


@pytest.mark.parametrize(
    ("versions", "kwargs", "exc", "match"),
    [
        (V, {"current_version": 3}, ValueError, r"versions holds version 4, newer than current_version=3"),
        (V, {"current_version": -1}, ValueError, r"current_version must be an integer >= 0"),
        (V, {"current_version": 4.0}, TypeError, r"current_version must be an integer"),
        (np.array([True, False]), {"current_version": 4}, TypeError, r"versions must hold integer"),
        (np.array([1.5, 2.0]), {"current_version": 4}, ValueError, r"versions must hold whole numbers"),
        (
            np.zeros((2, 3, 1)),
            {"current_version": 4},
            ValueError,
            r"versions must have shape \(B,\) or \(B, R\)",
        ),
        ([3, 4], {"current_version": 4}, TypeError, r"batch_or_arrays must be"),
        (np.zeros((2, 3)), {"current_version": 4}, ValueError, r"need response_mask"),
        (
            np.zeros((2, 3)),
            {"current_version": 4, "response_mask": np.array([[1, 0, 0], [0, 0, 0]])},
            ValueError,
            r"response_mask selects no token in row 1",
        ),
        (
            np.zeros((2, 3)),
            {"current_version": 4, "response_mask": np.full((2, 3), 2)},
            ValueError,
            r"response_mask must hold only 0 and 1",
        ),
        (
            V,
            {"current_version": 5, "newest_versions": np.array([3, 6])},
            ValueError,
            r"newest_versions holds version 6",
        ),
        (
            V,
            {"current_version": 5, "newest_versions": np.array([2, 4])},
            ValueError,
            r"newest_versions must be >=",
        ),
        (V, {"current_version": 5, "rewards": np.zeros(3)}, ValueError, r"rewards must have shape \(2,\)"),
        (
            V,
            {"current_version": 5, "rewards": np.array([0.0, np.nan])},
            ValueError,
            r"rewards must be finite",
        ),
        (
            V,
            {"current_version": 5, "response_lengths": np.array([-1.0, 2])},
            ValueError,
            r"response_lengths must be >= 0",
        ),
        (
            V,
            {"current_version": 5, "importance_weights": np.zeros((2, 3))},
            ValueError,
            r"needs response_mask",
        ),
        (
            V,
            {"current_version": 5, "importance_weights": np.array([1.0, -0.5])},
            ValueError,
            r"importance_weights must be finite and >= 0",
        ),
        (
            V,
            {"current_version": 5, "importance_weights": np.ones(3)},
            ValueError,
            r"importance_weights must have shape \(2,\)",
        ),
        (V, {"current_version": 5, "old_log_probs": np.zeros((2, 3))}, ValueError, r"must be given together"),
        (
            V,
            {
                "current_version": 5,
                "response_mask": M,
                "old_log_probs": np.zeros((2, 2)),
                "rollout_log_probs": M,
            },
            ValueError,
            r"old_log_probs and response_mask must have the same shape",
        ),
        (
            V,
            {
                "current_version": 5,
                "enqueue_times": np.array([5.0, 1.0]),
                "dequeue_times": np.array([4.0, 2.0]),
            },
            ValueError,
            r"dequeue_times must not precede enqueue_times",
        ),
        (
            V,
            {"current_version": 5, "enqueue_times": np.zeros(2), "train_time": "now"},
            TypeError,
            r"train_time",
        ),
        (
            V,
            {"current_version": 5, "enqueue_times": np.full(2, 1.7e9, dtype=np.float32)},
            ValueError,
            r"enqueue_times are float32 values of 1.7e\+09 s: too coarse",
        ),
        (
            V,
            {"current_version": 5, "dropped_versions": np.array([6])},
            ValueError,
            r"dropped_versions holds version 6",
        ),
        (
            V,
            {
                "current_version": 5,
                "dropped_versions": np.array([1]),
                "dropped_lengths": np.array([1.0, 2.0]),
            },
            ValueError,
            r"dropped_\* arrays must be 1-D of one length",
        ),
        (
            V,
            {"current_version": 5, "importance_weights": np.ones(2), "rollout_is_threshold": 0.0},
            ValueError,
            r"rollout_is_threshold upper bound must be finite and > 0",
        ),
        (
            V,
            {"current_version": 5, "rollout_is_threshold": "high"},
            ValueError,
            r"rollout_is_threshold must look like '2.0' or '0.5_2.0'",
        ),
        (
            V,
            {"current_version": 5, "rollout_is_threshold": True},
            TypeError,
            r"rollout_is_threshold must be a number",
        ),
        (V, {"current_version": 5, "peer_names": ("wandb",)}, ValueError, r"peer_names holds unknown peers"),
        (V, {"current_version": 5, "peer_names": 3}, TypeError, r"peer_names must be a sequence"),
        (V, {"current_version": 5, "prefix": 1}, TypeError, r"prefix must be a string"),
        (
            V,
            {"current_version": 5, "rewards": np.array(["a", "b"])},
            TypeError,
            r"rewards must hold real numbers",
        ),
    ],
    ids=[
        "negative-lag",
        "negative-current",
        "float-current",
        "bool-versions",
        "fractional-versions",
        "3d-versions",
        "list-versions",
        "token-versions-without-mask",
        "row-without-token",
        "non-binary-mask",
        "newest-newer-than-current",
        "newest-before-oldest",
        "rewards-shape",
        "rewards-nan",
        "negative-length",
        "token-weights-without-mask",
        "negative-weight",
        "weights-shape",
        "one-log-prob",
        "log-prob-shape",
        "dequeue-before-enqueue",
        "train-time-string",
        "float32-epoch-times",
        "dropped-newer",
        "dropped-lengths-differ",
        "threshold-zero",
        "threshold-string",
        "threshold-bool",
        "unknown-peer",
        "peer-names-int",
        "prefix-int",
        "string-rewards",
    ],
)
def test_bad_input_raises_naming_the_argument(versions, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        compute_staleness_metrics(versions, **kwargs)


def test_merging_statistics_of_different_inputs_refuses():
    a = staleness_statistics(np.array([1, 2]), current_version=3)
    b = staleness_statistics(np.array([1, 2]), current_version=3, rewards=np.zeros(2))
    with pytest.raises(ValueError, match="cannot merge 'staleness' statistics"):
        Stats.merge(a, b)
    w = np.array([1.0, 3.0])
    c = staleness_statistics(np.array([1, 2]), current_version=3, importance_weights=w)
    d = staleness_statistics(
        np.array([1, 2]), current_version=3, importance_weights=w, rollout_is_threshold=5
    )
    with pytest.raises(ValueError, match="cannot merge 'staleness' statistics"):
        Stats.merge(c, d)  # shares above two different thresholds do not add


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 12), per_token=st.booleans(), data=st.data())
def test_merged_clipped_shares_and_max_weights_equal_the_whole(seed, n, per_token, data):
    """Per-sample weights and a low threshold (many weights above it), cut into three parts."""
    case = make_case(seed, n, 4, per_token=per_token, extras=False)
    case["importance_weights"] = np.random.default_rng(seed).lognormal(0.0, 0.6, size=n)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), min_size=2, max_size=2), label="cuts"))
    parts = [slice(0, cuts[0]), slice(cuts[0], cuts[1]), slice(cuts[1], n)]  # some may be empty
    opts = {"rollout_is_threshold": 1.2}
    stats = [
        staleness_statistics(
            case["versions"][rows],
            **{k: v[rows] if isinstance(v, np.ndarray) else v for k, v in case.items() if k != "versions"},
            **opts,
        )
        for rows in parts
    ]
    want = call(case, **opts)
    assert any(k.endswith(K.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH) for k in want)
    assert_close(Stats.merge(*stats).finalize(), want)


# --- across gloo ranks ------------------------------------------------------------------------

SHARDS = [5, 0, 7]  # three ranks, one empty shard
LAGS = [0, 3, 9]  # each rank's versions lag by a different amount


def rank_case(rank: int) -> dict:
    """Rank ``rank``'s shard: per-token versions about ``LAGS[rank]`` behind version 30."""
    case = make_case(100 + rank, max(SHARDS[rank], 1), 4, per_token=True, extras=True, lag_scale=1)
    shift = LAGS[rank]
    case["current_version"], case["train_time"] = 30, 1000.0
    case["versions"] = np.minimum(case["versions"] - case["versions"].max() + 30 - shift, 30)
    case["dropped_versions"] = np.minimum(case["dropped_versions"] - case["dropped_versions"].max() + 30, 30)
    return {k: (v[: SHARDS[rank]] if isinstance(v, np.ndarray) else v) for k, v in case.items()}


def whole_case() -> dict:
    parts = [rank_case(r) for r in range(len(SHARDS))]
    return {
        k: (np.concatenate([p[k] for p in parts]) if isinstance(parts[0][k], np.ndarray) else parts[0][k])
        for k in parts[0]
    }


def _worker(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=20)
    )
    try:
        case = rank_case(rank)
        res = {"metrics": call(case, process_group=dist.group.WORLD, peer_names=("verl", "slime"))}
        stats = staleness_statistics(case["versions"], **{k: v for k, v in case.items() if k != "versions"})
        res["stats"] = stats.all_reduce(dist.group.WORLD).finalize()
        bad = dict(case, current_version=29) if rank == 2 else case  # rank 2 sees versions newer than 29
        try:
            call(bad, process_group=dist.group.WORLD)
            res["error"] = None
        except ValueError as err:
            res["error"] = str(err)
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(res, fh)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # leave before gloo's teardown (see tests/test_distributed.py)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as tmp

    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_staleness import _worker as worker  # the same function, under an importable name

    out = tmp_path_factory.mktemp("staleness_gloo")
    ctx = tmp.spawn(worker, args=(3, str(out / "store"), str(out)), nprocs=3, join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            pytest.fail("the 3 gloo ranks did not finish within 120 s (hang)")
    assert torch is not None
    results = []
    for r in range(3):
        with open(out / f"rank{r}.pkl", "rb") as fh:
            results.append(pickle.load(fh))
    return results


def test_gloo_ranks_with_different_lags_equal_the_whole(ranks):
    whole = whole_case()
    want = call(whole, peer_names=("verl", "slime"))
    assert want[K.STALENESS_LAG_MAX] >= LAGS[-1]  # the ranks' lags do differ
    for res in ranks:
        assert_close_tol(res["metrics"], want)
        assert_close_tol(res["stats"], call(whole))


def test_gloo_a_bad_rank_makes_every_rank_raise(ranks):
    errors = [res["error"] for res in ranks]
    assert errors[0] is not None and len(set(errors)) == 1
    assert "rank 2" in errors[0] and "newer than current_version=29" in errors[0]


def assert_close_tol(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-9, nan_ok=True), key


def test_verl_dataproto_with_versions_in_non_tensor_batch(request):
    torch = pytest.importorskip("torch")
    pytest.importorskip("verl")
    data_proto = request.getfixturevalue("data_proto")
    case = make_case(13, 6, 4, per_token=False, extras=False)
    batch = data_proto.from_dict(
        tensors={"response_mask": torch.from_numpy(case["response_mask"])},
        non_tensors={"policy_versions": case["versions"]},
    )
    got = compute_staleness_metrics(
        batch,
        current_version=case["current_version"],
        response_mask=batch.batch["response_mask"],
        newest_versions=torch.from_numpy(case["newest_versions"]),
    )
    assert_close(got, call(case))


@pytest.mark.parametrize(
    ("lags", "want"),
    [
        pytest.param(
            [0, 1, 2, 3, 4, 5, 8, 9, 40],
            ["0", "1", "2", "3_4", "3_4", "5_8", "5_8", "9_plus", "9_plus"],
            id="edges",
        ),
        pytest.param(np.array([], dtype=np.int64), [], id="empty"),
    ],
)
def test_lag_bucket_labels_are_the_buckets_of_the_family(lags, want):
    from rlmetrics.policy.staleness import lag_bucket_labels

    torch = pytest.importorskip("torch")
    assert lag_bucket_labels(lags).tolist() == want
    assert lag_bucket_labels(torch.tensor(np.asarray(lags, dtype=np.int64))).tolist() == want
    assert [_bucket(int(x)) for x in lags] == want


@pytest.mark.parametrize(
    ("lags", "exc", "match"),
    [
        pytest.param([0, -1], ValueError, "lags must be >= 0", id="negative"),
        pytest.param([0.5], TypeError, "lags must be a 1-d array of integers", id="float"),
        pytest.param([[1, 2]], TypeError, "lags must be a 1-d array of integers", id="2d"),
    ],
)
def test_lag_bucket_labels_refuse_bad_lags(lags, exc, match):
    from rlmetrics.policy.staleness import lag_bucket_labels

    with pytest.raises(exc, match=match):
        lag_bucket_labels(lags)


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_the_mismatch_family_by_lag_bucket_agrees_with_the_buckets_cost(seed):
    """Every mismatch metric per lag bucket (group_by=lag_bucket_labels): its k3 KL is the
    staleness family's per-bucket k3 KL on the same tokens."""
    from rlmetrics.policy.mismatch import compute_rollout_mismatch_metrics
    from rlmetrics.policy.staleness import lag_bucket_labels

    case = make_case(seed, 40, 7, per_token=False, extras=True)
    ours = call(case)
    lags = case["current_version"] - case["versions"]
    by_lag = compute_rollout_mismatch_metrics(
        case["old_log_probs"],
        case["rollout_log_probs"],
        case["response_mask"],
        group_by=lag_bucket_labels(lags),
        group_name="lag",
    )
    present = {_bucket(int(x)) for x in lags}
    for label in present:
        key = K.category_key(K.ROLLOUT_CORR_K3_KL, "lag", label)
        assert by_lag[key] == pytest.approx(
            ours[K.staleness_bucket(label, K.STALENESS_BUCKET_K3_KL)], rel=1e-9
        )
    assert {k.split("/")[1] for k in by_lag if k.startswith("by_lag/")} == present
