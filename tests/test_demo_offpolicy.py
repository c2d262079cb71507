"""The demo's off-policy run (``DemoConfig(off_policy_lag=N)``): a queue of past rollouts between
the generator and the trainer. Asserted over 3 seeds, what holds on any machine: the lag reads 0
on-policy and exactly N once the queue is full, and the rollout/training mismatch grows with it.
A growing queue (``off_policy_growth``) and a bounded one (``max_staleness``) give the lags and
drops of a brute-force queue (their schedule follows no number drawn, so one seed shows it)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from rlmetrics import keys as K
from rlmetrics.demo.run import DemoConfig, run_demo

#: Trains a model: CI runs these once more under a second CPU kernel family (.ci/run).
pytestmark = pytest.mark.trains

SEEDS = (0, 1, 2)
LAGS = (0, 2, 4, 8)
#: Short runs (~1 s each on one core): a small policy from random weights with a high learning
#: rate, so that four updates move it well past the bfloat16 rollout's precision gap.
SHORT = {
    "steps": 8,
    "n_prompts": 4,
    "group_size": 4,
    "val_every": 100,
    "val_prompts": 4,
    "val_samples": 2,
    "warm_start_steps": 0,
    "lr": 3e-3,
    "d_model": 32,
    "n_layers": 1,
}
#: Seeds (of 3) in which the mismatch at lag 4 must exceed that at lag 2, and that at lag 8 the one
#: at lag 2 (4 > 0 and 8 > 0 must hold in all: the policy's drift over 4 updates is orders of
#: magnitude above the precision gap of lag 0).
LAG4_OVER_LAG2_SEEDS = 2


def config(seed: int, lag: int) -> DemoConfig:
    """A short run; at lag 8, four more steps, so that the queue is full for four of them."""
    steps = SHORT["steps"] + max(lag - 4, 0)
    return DemoConfig(seed=seed, off_policy_lag=lag, **{**SHORT, "steps": steps})


def rows_of(result: Any) -> list[dict[str, float]]:
    """The training steps' rows of a run's metrics.jsonl (step 0 is the validation before training)."""
    rows = [json.loads(line) for line in result.jsonl_path.read_text().splitlines()]
    return [r for r in rows if r["step"] >= 1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[tuple[int, int], list[dict[str, float]]]:
    """(seed, lag) -> the rows of a short GRPO run."""
    pytest.importorskip("torch")
    out = {}
    for seed in SEEDS:
        for lag in LAGS:
            cfg = config(seed, lag)
            out[seed, lag] = rows_of(run_demo(cfg, out_dir=tmp_path_factory.mktemp(f"s{seed}_lag{lag}")))
    return out


def full(rows: list[dict[str, float]], lag: int) -> list[dict[str, float]]:
    """The steps that train on a full queue (step > lag)."""
    return [r for r in rows if r["step"] > lag]


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_on_policy_the_lag_reads_zero(runs, seed):
    rows = runs[seed, 0]
    assert len(rows) == SHORT["steps"]
    for key in (K.STALENESS_LAG_MEAN, K.STALENESS_LAG_MAX, K.STALENESS_LAG_MIN, K.STALENESS_TOKEN_LAG_MEAN):
        assert [r[key] for r in rows] == [0.0] * len(rows), key
    assert all(r[K.staleness_bucket("0", K.STALENESS_BUCKET_SHARE)] == 1.0 for r in rows)


@pytest.mark.parametrize("lag", LAGS[1:], ids=[f"lag{n}" for n in LAGS[1:]])
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_the_lag_ramps_and_reads_n_once_the_queue_is_full(runs, seed, lag):
    rows = runs[seed, lag]
    # the generator fills the queue with N + 1 rollouts of version 0: lags 0, 1, ..., N, then N
    assert [r[K.STALENESS_LAG_MEAN] for r in rows] == [float(min(r["step"] - 1, lag)) for r in rows]
    for r in full(rows, lag):
        assert r[K.STALENESS_LAG_MEAN] == r[K.STALENESS_LAG_MAX] == r[K.STALENESS_LAG_MIN] == lag
        assert r[K.STALENESS_SPANS_MAX] == 1.0 and r[K.STALENESS_MULTI_VERSION_SHARE] == 0.0
        assert r[K.STALENESS_NUM_SAMPLES] == SHORT["n_prompts"] * SHORT["group_size"]


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_the_lag_bucket_holds_the_batch_and_its_cost(runs, seed):
    rows = full(runs[seed, 4], 4)
    bucket = "3_4"
    for r in rows:
        assert r[K.staleness_bucket(bucket, K.STALENESS_BUCKET_SHARE)] == 1.0
        assert r[K.staleness_bucket("0", K.STALENESS_BUCKET_SHARE)] == 0.0
        # the bucket's k3 KL is the rollout/training mismatch family's, on the same tokens
        assert r[K.staleness_bucket(bucket, K.STALENESS_BUCKET_K3_KL)] == pytest.approx(
            r[K.ROLLOUT_CORR_K3_KL], rel=1e-5
        )
        assert math.isfinite(r[K.staleness_bucket(bucket, K.STALENESS_BUCKET_IS_WEIGHT_MEAN)])
        # the samples trained on are the batch the data metrics describe
        assert r[K.STALENESS_TRAINED_REWARD_MEAN] == pytest.approx(r[K.SCORE_MEAN], rel=1e-6)
        assert r[K.STALENESS_TRAINED_LENGTH_MEAN] == pytest.approx(r[K.RESPONSE_LENGTH_MEAN], rel=1e-6)


def mismatch(rows: list[dict[str, float]], lag: int) -> tuple[float, float]:
    """Mean k3 KL and mean spread (std) of the token IS weights over the full-queue steps."""
    steps = full(rows, lag)
    return (
        float(np.mean([r[K.ROLLOUT_CORR_K3_KL] for r in steps])),
        float(np.mean([r[K.ROLLOUT_CORR_IS_STD] for r in steps])),
    )


@pytest.mark.parametrize("lag", (4, 8), ids=["lag4", "lag8"])
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_the_mismatch_at_a_lag_exceeds_the_on_policy_one(runs, seed, lag):
    kl0, spread0 = mismatch(runs[seed, 0], 0)
    kl, spread = mismatch(runs[seed, lag], lag)
    assert kl > kl0 and spread > spread0


@pytest.mark.parametrize("lag", (4, 8), ids=["lag4", "lag8"])
def test_the_mismatch_grows_from_lag_2_in_most_seeds(runs, lag):
    grows = [mismatch(runs[s, lag], lag)[0] > mismatch(runs[s, 2], 2)[0] for s in SEEDS]
    assert sum(grows) >= LAG4_OVER_LAG2_SEEDS, grows


def test_ppo_trains_off_policy(tmp_path):
    """The critic's path (values, GAE) on a queued rollout."""
    pytest.importorskip("torch")
    cfg = DemoConfig(algo="ppo", off_policy_lag=2, **(SHORT | {"steps": 4}))
    rows = rows_of(run_demo(cfg, out_dir=tmp_path))
    assert [r[K.STALENESS_LAG_MAX] for r in rows] == [0.0, 1.0, 2.0, 2.0]
    assert all(math.isfinite(r[K.CRITIC_VF_LOSS]) for r in rows)


def queue_reference(steps: int, lag: int, growth: float, bound: int | None) -> tuple[list[int], list[int]]:
    """Brute force of the documented queue: the lag trained on and the rollouts dropped, per step.

    A list of the versions of the queued rollouts: ``lag + 1`` of version 0 at step 1, then one
    plus ``floor(growth * (t - 1)) - floor(growth * (t - 2))`` of version ``t - 1`` at step ``t``;
    those staler than ``bound`` dropped, then the oldest trained on."""
    queue: list[int] = []
    lags, drops = [], []
    for t in range(1, steps + 1):
        version = t - 1
        queue += [version] * (
            lag + 1 if t == 1 else 1 + math.floor(growth * (t - 1)) - math.floor(growth * (t - 2))
        )
        kept = [v for v in queue if bound is None or version - v <= bound]
        drops.append(len(queue) - len(kept))
        lags.append(version - kept[0])
        queue = kept[1:]
    return lags, drops


#: Growing and bounded queues (``off_policy_growth``, ``max_staleness``): (lag, growth, bound).
QUEUES = {
    "outruns": (2, 1.0, None),
    "outruns-slowly": (0, 0.25, None),
    "outruns-bounded": (2, 1.0, 4),
    "bound-unreached": (2, 0.0, 2),
}
QUEUE_STEPS = 12


@pytest.fixture(scope="module")
def queued(tmp_path_factory) -> dict[str, list[dict[str, float]]]:
    """setting -> the rows of a 12-step run (seed 0: the queue's schedule follows no number drawn)."""
    pytest.importorskip("torch")
    out = {}
    for name, (lag, growth, bound) in QUEUES.items():
        cfg = DemoConfig(
            off_policy_lag=lag,
            off_policy_growth=growth,
            max_staleness=bound,
            **(SHORT | {"steps": QUEUE_STEPS}),
        )
        out[name] = rows_of(run_demo(cfg, out_dir=tmp_path_factory.mktemp(name)))
    return out


@pytest.mark.parametrize("name", sorted(QUEUES), ids=sorted(QUEUES))
def test_a_growing_or_bounded_queue_gives_the_lag_and_drops_of_the_reference(queued, name):
    lag, growth, bound = QUEUES[name]
    lags, drops = queue_reference(QUEUE_STEPS, lag, growth, bound)
    rows = queued[name]
    assert [r[K.STALENESS_LAG_MEAN] for r in rows] == [float(x) for x in lags]
    assert [r[K.STALENESS_LAG_MAX] for r in rows] == [float(x) for x in lags]
    if bound is None:
        assert not any(K.STALENESS_DROPPED_COUNT in r for r in rows)
        return
    batch = SHORT["n_prompts"] * SHORT["group_size"]
    assert [r[K.STALENESS_DROPPED_COUNT] for r in rows] == [float(batch * d) for d in drops]
    assert [r[K.STALENESS_DROPPED_SHARE] for r in rows] == [d / (d + 1) for d in drops]
    for r in rows:
        if r[K.STALENESS_DROPPED_COUNT] == 0:
            assert r[K.STALENESS_GENERATED_LENGTH_MEAN] == r[K.STALENESS_TRAINED_LENGTH_MEAN]
            continue
        # what was dropped was staler than the bound; the trained lag is within it
        assert r[K.STALENESS_DROPPED_LAG_MIN] > bound >= r[K.STALENESS_LAG_MAX]
        n, d = batch, r[K.STALENESS_DROPPED_COUNT]
        for trained, dropped, generated in (
            (
                K.STALENESS_TRAINED_LENGTH_MEAN,
                K.STALENESS_DROPPED_LENGTH_MEAN,
                K.STALENESS_GENERATED_LENGTH_MEAN,
            ),
            (
                K.STALENESS_TRAINED_REWARD_MEAN,
                K.STALENESS_DROPPED_REWARD_MEAN,
                K.STALENESS_GENERATED_REWARD_MEAN,
            ),
        ):
            assert r[generated] == pytest.approx((n * r[trained] + d * r[dropped]) / (n + d), rel=1e-12)


def test_the_lag_of_a_generator_one_rollout_ahead_a_step_grows_half_a_version_a_step(queued):
    """``g / (1 + g)`` versions a step (the module docstring), at ``g = 1`` a half."""
    lags = [r[K.STALENESS_LAG_MEAN] for r in queued["outruns"]]
    assert lags[-1] - lags[-9] == 4.0


def test_a_bounded_queue_drops_the_surplus(queued):
    """At ``g = 1`` bounded: the lag stops at the bound, half of what is generated is dropped."""
    rows = queued["outruns-bounded"][-4:]
    assert [r[K.STALENESS_LAG_MEAN] for r in rows] == [4.0] * 4
    assert [r[K.STALENESS_DROPPED_SHARE] for r in rows] == [0.5] * 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"off_policy_growth": -0.5}, "off_policy_growth must be a finite number >= 0; got -0.5"),
        ({"off_policy_growth": math.inf}, "off_policy_growth must be a finite number >= 0; got inf"),
        ({"off_policy_growth": True}, "off_policy_growth must be a finite number >= 0; got True"),
        ({"max_staleness": -1}, "max_staleness must be an integer >= 0; got -1"),
        (
            {"off_policy_lag": 4, "max_staleness": 3},
            r"max_staleness must be >= off_policy_lag \(4\), or None; got 3",
        ),
    ],
    ids=["negative-growth", "infinite-growth", "bool-growth", "negative-bound", "bound-below-lag"],
)
def test_a_bad_growth_or_bound_is_refused_naming_it(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DemoConfig(**kwargs)


@pytest.mark.parametrize(
    ("lag", "exc", "match"),
    [
        (-1, ValueError, "off_policy_lag must be an integer >= 0; got -1"),
        (1.5, TypeError, "off_policy_lag must be an integer >= 0; got float 1.5"),
        (True, TypeError, "off_policy_lag must be an integer >= 0; got bool True"),
    ],
    ids=["negative", "float", "bool"],
)
def test_a_bad_lag_is_refused_naming_it(lag, exc, match):
    with pytest.raises(exc, match=match):
        DemoConfig(off_policy_lag=lag)
