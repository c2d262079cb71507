"""policy.entropy: verl's ``actor/entropy`` per loss_agg_mode, per category and per outcome."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from rlmetrics import keys as K
from rlmetrics.errors import UndefinedMetricWarning
from rlmetrics.policy.entropy import LOSS_AGG_MODES, compute_entropy_metrics, entropy_statistics

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

TOL = 1e-5  # verl aggregates in float32, rlmetrics in float64


def _batch(seed: int, b: int = 12, r: int = 9, empty_row: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ent = rng.gamma(2.0, 0.5, size=(b, r))
    mask = (rng.random((b, r)) < 0.7).astype(np.int64)
    mask[:, 0] = 1
    if empty_row:
        mask[3] = 0
    return ent, mask


def _verl(ent: np.ndarray, mask: np.ndarray, mode: str, scale: float | None = None) -> float:
    return float(
        core_algos.agg_loss(
            loss_mat=torch.as_tensor(ent, dtype=torch.float32),
            loss_mask=torch.as_tensor(mask, dtype=torch.float32),
            loss_agg_mode=mode,
            loss_scale_factor=scale,
        )
    )


def _row_means(ent: np.ndarray, mask: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return (ent * mask).sum(-1) / mask.sum(-1)  # NaN for a row without tokens


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("form", ["tokens", "row-means"])
def test_equals_verl_agg_loss(mode: str, form: str) -> None:
    ent, mask = _batch(0)
    given = ent if form == "tokens" else _row_means(ent, mask)
    got = compute_entropy_metrics(given, mask, loss_agg_mode=mode)[K.ACTOR_ENTROPY]
    assert got == pytest.approx(_verl(ent, mask, mode), rel=TOL)


def test_loss_scale_factor_and_torch_input() -> None:
    ent, mask = _batch(1)
    got = compute_entropy_metrics(
        torch.as_tensor(ent),
        torch.as_tensor(mask),
        loss_agg_mode="seq-mean-token-sum-norm",
        loss_scale_factor=4,
    )
    assert got[K.ACTOR_ENTROPY] == pytest.approx(_verl(ent, mask, "seq-mean-token-sum-norm", 4.0), rel=TOL)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("form", ["tokens", "row-means"])
def test_outcome_and_group_split_equal_each_subset_alone(mode: str, form: str) -> None:
    ent, mask = _batch(2)
    acc = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1], dtype=np.float64)
    sources = np.array(list("aabbccabcabc"), dtype=object)
    given = ent if form == "tokens" else _row_means(ent, mask)
    m = compute_entropy_metrics(
        given, mask, loss_agg_mode=mode, outcome=acc, group_by=sources, group_name="data_source"
    )
    subsets = {
        K.category_key(K.ACTOR_ENTROPY, K.OUTCOME_GROUP, K.OUTCOME_CORRECT): acc > 0.5,
        K.category_key(K.ACTOR_ENTROPY, K.OUTCOME_GROUP, K.OUTCOME_INCORRECT): acc <= 0.5,
        **{K.category_key(K.ACTOR_ENTROPY, "data_source", c): sources == c for c in "abc"},
    }
    for key, rows in subsets.items():
        # the horizon of -norm is the batch's width either way: the subset keeps the columns
        assert m[key] == pytest.approx(_verl(ent[rows], mask[rows], mode), rel=TOL), key
    assert m[K.ACTOR_ENTROPY] == pytest.approx(_verl(ent, mask, mode), rel=TOL)


def test_score_threshold_splits_on_the_score() -> None:
    ent, mask = _batch(3, empty_row=False)
    score = np.linspace(-1.0, 1.0, ent.shape[0])
    m = compute_entropy_metrics(ent, mask, outcome=score, score_threshold=0.25)
    correct = score >= 0.25
    key = K.category_key(K.ACTOR_ENTROPY, K.OUTCOME_GROUP, K.OUTCOME_CORRECT)
    assert m[key] == pytest.approx(_verl(ent[correct], mask[correct], "token-mean"), rel=TOL)


@pytest.mark.parametrize("cut", [1, 5, 11], ids=["cut-1", "cut-5", "cut-11"])
def test_merged_parts_with_different_categories_equal_the_whole(cut: int) -> None:
    ent, mask = _batch(4)
    acc = np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1], dtype=bool)  # the first part: all correct
    whole = entropy_statistics(ent, mask, outcome=acc, loss_agg_mode="seq-mean-token-mean").finalize()
    parts = [
        entropy_statistics(ent[s], mask[s], outcome=acc[s], loss_agg_mode="seq-mean-token-mean")
        for s in (slice(0, cut), slice(cut, None))
    ]
    merged = parts[0].merge(parts[1]).finalize()
    assert merged.keys() == whole.keys()
    for key, value in whole.items():
        assert merged[key] == pytest.approx(value, rel=1e-12), key


def test_category_without_tokens_reports_nothing() -> None:
    ent, mask = _batch(5, b=4, empty_row=False)
    mask[2:] = 0
    m = compute_entropy_metrics(ent, mask, outcome=np.array([1, 1, 0, 0]))
    assert K.category_key(K.ACTOR_ENTROPY, K.OUTCOME_GROUP, K.OUTCOME_INCORRECT) not in m
    assert m[K.category_key(K.ACTOR_ENTROPY, K.OUTCOME_GROUP, K.OUTCOME_CORRECT)] == m[K.ACTOR_ENTROPY]


def test_no_token_is_nan_with_a_warning() -> None:
    ent, mask = _batch(6, b=2, empty_row=False)
    with pytest.warns(UndefinedMetricWarning, match="selects no token"):
        m = compute_entropy_metrics(ent, np.zeros_like(mask))
    assert np.isnan(m[K.ACTOR_ENTROPY])


def test_prefix() -> None:
    ent, mask = _batch(7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = compute_entropy_metrics(ent, mask, prefix="train/", outcome=np.ones(ent.shape[0]))
    assert set(m) == {"train/entropy", K.category_key("train/entropy", K.OUTCOME_GROUP, K.OUTCOME_CORRECT)}


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"loss_agg_mode": "mean"}, ValueError, "loss_agg_mode must be one of"),
        ({"entropys": np.ones((12, 2))}, ValueError, "entropys must have the shape of response_mask"),
        ({"response_mask": np.ones(12)}, ValueError, r"response_mask must have shape \(B, R\)"),
        ({"group_by": "data_source"}, TypeError, "group_by must be the labels"),
        ({"group_name": "x"}, ValueError, "group_name= needs group_by="),
        ({"score_threshold": 0.5}, ValueError, "score_threshold= needs outcome="),
        ({"outcome": np.ones(3)}, ValueError, r"outcome must hold one number or bool per row \(12,\)"),
        ({"outcome": np.array(["a"] * 12)}, ValueError, "outcome must hold one number or bool per row"),
        ({"loss_scale_factor": 0.0}, ValueError, "loss_scale_factor"),
        ({"response_mask": np.full((12, 9), 2)}, ValueError, "response_mask must hold only 0 and 1"),
    ],
    ids=[
        "mode",
        "entropy-shape",
        "mask-1d",
        "column-name",
        "name-without-group",
        "threshold-without-outcome",
        "outcome-length",
        "outcome-text",
        "scale",
        "mask-values",
    ],
)
def test_errors(kwargs: dict, exc: type[Exception], match: str) -> None:
    ent, mask = _batch(8)
    args = {"entropys": ent, "response_mask": mask, **kwargs}
    with pytest.raises(exc, match=match):
        compute_entropy_metrics(args.pop("entropys"), args.pop("response_mask"), **args)
