"""Policy entropy of a batch's responses (verl's ``actor/entropy``), per category and per outcome.

verl logs ``actor/entropy``: the token entropies of the responses (from the old-log-prob pass)
aggregated by the actor's ``loss_agg_mode`` (``agg_loss``). :func:`entropy_statistics` reduces a
batch to per-row sums (each response's token count and entropy sum), so that the aggregation
merges across micro-batches and ranks exactly and, with ``group_by=`` and ``outcome=``, is kept
per category and for the correct and the incorrect responses (the keys of
:func:`rlmetrics.keys.category_key`: ``by_outcome/correct/actor/entropy``), each equal to the plain
metric of that category's responses alone. The entropies come token by token ``(B, R)`` or as
each response's mean over its tokens ``(B,)`` (what the verl patch keeps, verl dropping the token
entropies before its data metrics run); both give every aggregation exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    as_float,
    check_finite_scalar,
    describe,
    mask_and_invalid_count,
    prepare_arrays,
)
from rlmetrics._core.batch import BatchView
from rlmetrics._core.checks import check_real_dtype, warn_undefined
from rlmetrics._core.stats import Stats, check_prefix, invalid_mask_field, metrics_from, with_prefix
from rlmetrics.training.categories import (
    DEFAULT_MAX_CATEGORIES,
    Columns,
    category_entries,
    check_max_categories,
    finalize_with_categories,
    resolve_groups,
    with_entries,
)

__all__ = ["LOSS_AGG_MODES", "compute_entropy_metrics", "entropy_statistics"]

_MASK = "response_mask"
#: verl's ``loss_agg_mode`` values (``verl.trainer.ppo.core_algos.agg_loss``, verl 0.9.1).
LOSS_AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "seq-mean-token-mean",
)
#: The options of the plain statistics (the grouping adds ``group_by``, ``outcome``, ``max_categories``).
_PLAIN_OPTIONS = ("loss_agg_mode", "loss_scale_factor", "prefix")


def _checked_inputs(entropys: Any, response_mask: Any) -> tuple[Any, Any, Any, Any, Any]:
    """``(xp, device, entropys, boolean mask, invalid-mask count)``: ``(B, R)`` or ``(B,)``
    entropies, a ``(B, R)`` mask."""
    xp, (ent, mask_raw), device, _ = prepare_arrays([entropys, response_mask], ["entropys", _MASK])
    check_real_dtype(ent, "entropys")
    if mask_raw.ndim != 2:
        raise ValueError(f"response_mask must have shape (B, R); got {describe(response_mask)}")
    if tuple(ent.shape) not in (tuple(mask_raw.shape), tuple(mask_raw.shape[:1])):
        raise ValueError(
            f"entropys must have the shape of response_mask {tuple(mask_raw.shape)} (token entropies) or "
            f"({mask_raw.shape[0]},) (each response's mean); got {describe(entropys)}"
        )
    mask, n_invalid = mask_and_invalid_count(mask_raw, _MASK)
    return xp, device, ent, mask, n_invalid


def _row_sums(xp: Any, ent: Any, mask: Any) -> tuple[Any, Any]:
    """Each row's token count and entropy sum over its masked tokens (float64, ``(B,)``)."""
    f64 = xp.float64
    n_tok = xp.sum(xp.astype(mask, f64), axis=-1)
    ent = xp.astype(as_float(ent, xp), f64)
    if ent.ndim == 2:
        return n_tok, xp.sum(xp.where(mask, ent, xp.zeros_like(ent)), axis=-1)
    # a row's mean times its count (a row without tokens holds nothing, whatever its mean says)
    return n_tok, xp.where(n_tok > 0, ent * n_tok, xp.zeros_like(n_tok))


def entropy_statistics(
    entropys: Any,
    response_mask: Any,
    *,
    loss_agg_mode: str = "token-mean",
    loss_scale_factor: float | None = None,
    prefix: str = K.PPO_PREFIX,
    group_by: Any = None,
    group_name: str | None = None,
    outcome: Any = None,
    score_threshold: float | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
) -> Stats:
    """Mergeable sums behind :func:`compute_entropy_metrics` (arguments as there).

    Holds the token count, the entropy sum, the non-empty responses and the sum of their means
    (plain and, with ``group_by=`` / ``outcome=``, per category), and the mask's width (a maximum:
    ``seq-mean-token-sum-norm``'s horizon), so every aggregation finalises after merging.

    Examples
    --------
    >>> import numpy as np
    >>> mask = np.array([[1, 1, 0], [1, 0, 0]])
    >>> a = entropy_statistics(np.array([[1.0, 2.0, 9.0], [4.0, 0.0, 0.0]]), mask)
    >>> b = entropy_statistics(np.array([2.0, 4.0]), mask)  # each response's mean
    >>> a.finalize()["actor/entropy"], a.merge(b).finalize()["actor/entropy"]
    (2.3333333333333335, 2.5)
    """
    options = _options(loss_agg_mode, loss_scale_factor, prefix)
    xp, device, ent, mask, n_invalid = _checked_inputs(entropys, response_mask)
    n_tok, h_sum = _row_sums(xp, ent, mask)
    has = n_tok > 0
    zeros = xp.zeros_like(n_tok)
    h_mean = xp.where(has, h_sum / xp.where(has, n_tok, xp.ones_like(n_tok)), zeros)
    rows: dict[str, Any] = {
        "n_rows": 1.0,
        "n_tok": n_tok,
        "h_sum": h_sum,
        "n_seq": xp.astype(has, xp.float64),
    }
    rows["h_seq_mean"] = h_mean
    sums = {name: (float(n_tok.shape[0]) if name == "n_rows" else xp.sum(v)) for name, v in rows.items()}
    sums[invalid_mask_field(_MASK)] = 0.0 if n_invalid is None else n_invalid
    groups = None
    if group_by is not None or outcome is not None:  # the grouping's options join the others
        groups = _groups(
            n_tok.shape[0], group_by, group_name, outcome, score_threshold, max_categories, options
        )
    elif group_name is not None or score_threshold is not None:
        raise ValueError("group_name= needs group_by=, score_threshold= needs outcome=")
    else:
        check_max_categories(max_categories)
    width = float(mask.shape[-1])
    stats = Stats.pack(
        "entropy", sums, {"width": width}, {}, finaliser=_finalize, options=options, xp=xp, device=device
    )
    if groups is None:
        return stats
    return with_entries(stats, *category_entries(groups, Columns(rows, {"width": width}, {}), n_tok))


def _options(loss_agg_mode: Any, loss_scale_factor: Any, prefix: Any) -> dict[str, Any]:
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"loss_agg_mode must be one of {', '.join(LOSS_AGG_MODES)}; got {loss_agg_mode!r}")
    scale = None
    if loss_scale_factor is not None:
        scale = check_finite_scalar(loss_scale_factor, "loss_scale_factor", positive=True)
    return {"loss_agg_mode": loss_agg_mode, "loss_scale_factor": scale, "prefix": check_prefix(prefix)}


def _groups(
    n_rows: int,
    group_by: Any,
    group_name: Any,
    outcome: Any,
    score_threshold: Any,
    max_categories: Any,
    options: dict[str, Any],
) -> list[Any]:
    """The groupings of ``group_by=`` and ``outcome=``, their options added to ``options``."""
    if isinstance(group_by, str | bytes):
        raise TypeError(
            f"group_by must be the labels, one per row (the entropy metrics take arrays, not a batch); "
            f"got the string {group_by!r}: pass the column itself, e.g. batch.non_tensor_batch[{group_by!r}]"
        )
    if group_by is None and group_name is not None:
        raise ValueError("group_name= names the group of group_by=; pass group_by= too")
    if outcome is None and score_threshold is not None:
        raise ValueError("score_threshold= applies to outcome=; pass outcome= too")
    name = None if group_by is None else ("group" if group_name is None else group_name)
    limit = check_max_categories(max_categories)
    view = BatchView({})
    if outcome is not None and score_threshold is None:
        view = BatchView({"acc": _host_outcome(outcome, n_rows)})
    groups = resolve_groups(
        view,
        n_rows,
        group_by=group_by,
        group_name=name,
        max_categories=limit,
        split_by_outcome=outcome is not None,
        score_threshold=score_threshold,
        seq_score=None if score_threshold is None else _host_outcome(outcome, n_rows),
    )
    options.update(group_by=name, outcome=outcome is not None, max_categories=limit)
    return groups


def _host_outcome(outcome: Any, n_rows: int) -> np.ndarray:
    """``outcome=`` as a 1-d host array of ``n_rows`` numbers or booleans (a named error else)."""
    arr = outcome.detach().cpu().numpy() if hasattr(outcome, "detach") else np.asarray(outcome)
    if arr.shape != (n_rows,) or arr.dtype.kind not in "biuf":
        raise ValueError(
            f"outcome must hold one number or bool per row ({n_rows},); got {arr.dtype} {arr.shape}"
        )
    return arr


def _finalize(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """The metric dictionary from the host statistics (and each category's, when grouped)."""
    if "max_categories" in options:
        return finalize_with_categories(
            (s, hi, lo),
            _finalize,
            {k: options[k] for k in _PLAIN_OPTIONS},
            count="n_rows",
            max_categories=options["max_categories"],
            per_category=_finalize_category,
        )
    mode = options["loss_agg_mode"]
    if mode == "token-sum":
        value = s["h_sum"]
    elif mode == "token-mean":
        value = s["h_sum"] / s["n_tok"] if s["n_tok"] > 0 else _undefined("response_mask selects no token")
    elif s["n_seq"] == 0:
        value = _undefined("no response has a token under response_mask")
    elif mode == "seq-mean-token-mean":
        value = s["h_seq_mean"] / s["n_seq"]
    else:
        value = s["h_sum"] / s["n_seq"]
        if mode == "seq-mean-token-sum-norm":
            value /= options["loss_scale_factor"] or hi["width"]
    return with_prefix({K.ACTOR_ENTROPY: value}, K.PPO_PREFIX, options["prefix"])


def _undefined(why: str) -> float:
    return warn_undefined(
        f"the entropy is undefined: {why} (in this batch, or on any rank): NaN", stacklevel=None
    )


def _finalize_category(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """One category's metrics; none for a category whose responses select no token."""
    return {} if s["n_tok"] == 0 else _finalize(s, hi, lo, options)


@metrics_from(entropy_statistics)
def compute_entropy_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    entropys: Any,
    response_mask: Any,
    *,
    loss_agg_mode: str = "token-mean",
    loss_scale_factor: float | None = None,
    prefix: str = K.PPO_PREFIX,
    group_by: Any = None,
    group_name: str | None = None,
    outcome: Any = None,
    score_threshold: float | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    process_group: Any = None,
) -> dict[str, float]:
    """The policy entropy of the responses (verl's ``actor/entropy``), per category and per outcome.

    Parameters
    ----------
    entropys : array of shape ``(B, R)`` or ``(B,)``
        Each response token's entropy (verl's ``entropys``, from
        :func:`~rlmetrics.entropy_from_logits`), or each response's mean entropy over the tokens
        ``response_mask`` selects (a row without tokens is ignored, whatever it holds). numpy or
        torch (CPU or CUDA).
    response_mask : array of shape ``(B, R)``
        Bool or 0/1: the response tokens.
    loss_agg_mode : str, keyword-only
        verl's aggregation (``agg_loss``, one data-parallel rank holding the whole batch, as
        verl's trainer computes ``actor/entropy``): ``"token-mean"`` (default, the mean over all
        tokens), ``"token-sum"``, ``"seq-mean-token-sum"``, ``"seq-mean-token-sum-norm"`` (divided
        by ``loss_scale_factor``, else by the mask's width ``R``), ``"seq-mean-token-mean"`` (the
        mean over responses with tokens of each one's mean).
    loss_scale_factor : float, optional, keyword-only
        verl's ``actor.loss_scale_factor`` (``seq-mean-token-sum-norm`` only).
    prefix : str, keyword-only
        Replaces ``actor/`` in the key.
    group_by : array of shape (B,), optional, keyword-only
        Also report the entropy per category: each row's label (verl's ``data_source``),
        under ``keys.category_key(key, group, c)`` (``by_data_source/gsm8k/actor/entropy``),
        equal to the entropy of the category's rows alone. A column name is refused.
    group_name : str, optional, keyword-only
        The group's name in the keys (default ``"group"``).
    outcome : array of shape (B,), optional, keyword-only
        Also report the entropy of the correct and of the incorrect responses
        (``by_outcome/correct/actor/entropy``, ``by_outcome/incorrect/...``): each row's ``acc``
        (bool or number; correct where ``> 0.5``, as ``compute_data_metrics(split_by_outcome=True)``)
        or, with ``score_threshold=``, its score.
    score_threshold : float, optional, keyword-only
        Correct where ``outcome >= score_threshold`` (``outcome`` then holds scores).
    max_categories : int, keyword-only
        As :func:`~rlmetrics.compute_data_metrics`: the least frequent categories beyond it
        reported together as ``<other>``, decided on the union of merged parts and ranks.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        Every rank gets the metrics of the union of the ranks' batches (categories agreed first).

    Returns
    -------
    dict[str, float]
        ``actor/entropy`` (NaN with an ``UndefinedMetricWarning`` when no token is selected),
        and its per-category keys; a category without tokens reports none.

    Examples
    --------
    >>> import numpy as np
    >>> ent = np.array([[0.5, 0.7], [2.0, 0.0]])
    >>> mask = np.array([[1, 1], [1, 0]])
    >>> m = compute_entropy_metrics(ent, mask, outcome=np.array([1.0, 0.0]))
    >>> m["by_outcome/correct/actor/entropy"], m["by_outcome/incorrect/actor/entropy"]
    (0.6, 2.0)
    """
    ...  # @metrics_from computes: the statistics, their all-reduce, finalize
