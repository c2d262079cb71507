"""Rollout / training mismatch: importance ratios, KL, perplexities and chi-squared, verl's keys.

The training engine (FSDP/Megatron, ``old_log_probs``) and the inference engine (vLLM/SGLang,
``rollout_log_probs``) score the same sampled tokens slightly differently. With the log ratio
``l_t = old_t - rollout_t`` and the ratio ``rho_t = exp(l_t)``, this module reports verl 0.9.1's
``rollout_corr/`` metrics (``compute_rollout_correction_and_rejection_mask`` without rejection
sampling, and ``compute_offpolicy_metrics``), with the same values, plus the Pearson correlation
of the two engines' token probabilities and the absolute effective sample size.

Every metric is a function of sums, maxima and minima over tokens and sequences
(:func:`rollout_mismatch_statistics`), so shards merge exactly. Each is reduced from per-row
values (a row's token sums, its sequence quantities), so that with ``group_by=`` (each row's
label: verl's ``data_source``, an environment) the same statistics are kept per category by
segment reductions of those rows (:mod:`rlmetrics.training.categories`): every metric per
category, equal to the plain metrics of the category's rows alone, under
:func:`rlmetrics.keys.category_key` (``by_data_source/gsm8k/rollout_corr/k3_kl``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    as_float,
    check_same_shape,
    cpu_block_rows,
    describe,
    is_array,
    mask_and_invalid_count,
    prepare_arrays,
)
from rlmetrics._core.batch import BatchView
from rlmetrics._core.checks import check_real_dtype, row_mean, warn_undefined
from rlmetrics._core.stats import (
    Stats,
    check_prefix,
    invalid_mask_field,
    metrics_from,
    stand_in_statistics,
    with_prefix,
)
from rlmetrics.training.categories import (
    DEFAULT_MAX_CATEGORIES,
    Columns,
    Group,
    category_entries,
    check_max_categories,
    finalize_with_categories,
    resolve_groups,
    with_entries,
)

__all__ = ["compute_rollout_mismatch_metrics", "parse_is_threshold", "rollout_mismatch_statistics"]

_MASK = "response_mask"
_NAMES = ("old_log_probs", "rollout_log_probs", "response_mask")
SAFETY_BOUND = 20.0  # verl clamps log ratios to [-20, 20] before exponentiating


def parse_is_threshold(threshold: Any) -> tuple[float, float | None]:
    """``(upper, lower or None)`` from ``2.0``, ``"2.0"``, ``"0.5_2.0"`` (IcePop) or ``(0.5, 2.0)``."""
    if isinstance(threshold, bool):
        raise TypeError("rollout_is_threshold must be a number, a 'lower_upper' string or a pair; got bool")
    lower: float | None
    if isinstance(threshold, tuple | list):
        if len(threshold) != 2:
            raise ValueError(f"rollout_is_threshold as a pair must be (lower, upper); got {threshold!r}")
        bad = [
            v
            for v in threshold
            if isinstance(v, bool | str | bytes) or not isinstance(v, int | float | np.number)
        ]
        if bad:
            raise TypeError(f"rollout_is_threshold as a pair must hold two numbers; got {threshold!r}")
        lower, upper = float(threshold[0]), float(threshold[1])
    elif isinstance(threshold, str):
        spec = threshold.strip()
        try:
            if "_" in spec:
                lo, hi = spec.split("_", 1)
                lower, upper = float(lo), float(hi)
            else:
                lower, upper = None, float(spec)
        except ValueError:
            raise ValueError(
                f"rollout_is_threshold must look like '2.0' or '0.5_2.0'; got {threshold!r}"
            ) from None
    elif isinstance(threshold, int | float | np.integer | np.floating) and not isinstance(
        threshold, np.bool_
    ):
        lower, upper = None, float(threshold)
    else:
        raise TypeError(
            "rollout_is_threshold must be a number, a 'lower_upper' string or a pair; "
            f"got {type(threshold).__name__}"
        )
    if not (math.isfinite(upper) and upper > 0):
        raise ValueError(f"rollout_is_threshold upper bound must be finite and > 0; got {upper}")
    if lower is not None and not (math.isfinite(lower) and 0 < lower <= upper):
        raise ValueError(f"rollout_is_threshold lower bound must be in (0, upper={upper}]; got {lower}")
    return upper, lower


class _Block(NamedTuple):
    """One row block: log-probabilities in the work dtype, its mask, and what every part reads."""

    o: Any
    r: Any
    m: Any
    #: zeros like ``o``; token counts per row; log ratios (0 outside the mask); ``exp`` of them clamped
    zero: Any
    cnt: Any
    lr: Any
    rho: Any


def _checked_inputs(*given: Any) -> tuple[Any, list[Any], Any, bool]:
    """``prepare_arrays`` of the three inputs, checked: arrays, real dtypes, one ``(B, R)`` shape."""
    for name, x in zip(_NAMES, given):
        if not is_array(x):
            raise TypeError(f"{name} must be a numpy array or a torch tensor; got {type(x).__name__}")
    xp, (old, roll, mask_raw), device, on_cpu = prepare_arrays(list(given), list(_NAMES))
    check_real_dtype(old, "old_log_probs")
    check_real_dtype(roll, "rollout_log_probs")
    if old.ndim != 2:
        raise ValueError(f"old_log_probs must have shape (B, R); got {describe(given[0])}")
    check_same_shape(roll, old, "rollout_log_probs", "old_log_probs")
    check_same_shape(mask_raw, old, "response_mask", "old_log_probs")
    return xp, [old, roll, mask_raw], device, on_cpu


#: Per-row statistics of a row block: ``(sums, maxima, minima)`` by name, each ``(rows,)``
#: (float64 for the sums). A plain statistic is the sum, maximum or minimum of its row values.
Rows = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def _accumulate(xp: Any, totals: tuple[dict[str, Any], ...], rows: Rows) -> None:
    """Add a block's row sums to ``totals[0]``, its row maxima and minima to ``totals[1]`` and ``[2]``."""
    total_s, total_x, total_n = totals
    for k, v in rows[0].items():
        s = xp.sum(v)
        total_s[k] = total_s[k] + s if k in total_s else s
    for k, v in rows[1].items():
        hi = xp.max(v)
        total_x[k] = xp.maximum(total_x[k], hi) if k in total_x else hi
    for k, v in rows[2].items():
        lo = xp.min(v)
        total_n[k] = xp.minimum(total_n[k], lo) if k in total_n else lo


def _block_rows(
    xp: Any, o: Any, r: Any, m: Any, mode: str | None, upper: float, lower: float, icepop: bool
) -> Rows:
    """Per-row sums / maxima / minima of one row block (``(rows,)`` arrays, float64)."""
    zero = xp.zeros_like(o)
    cnt = xp.sum(xp.astype(m, o.dtype), axis=-1)
    lr = xp.where(m, o - r, zero)
    lr_c = xp.clip(lr, min=-SAFETY_BOUND, max=SAFETY_BOUND)
    b = _Block(o, r, m, zero, cnt, lr, xp.exp(lr_c))
    out: Rows = ({}, {}, {})
    _token_sums(xp, out[0], b)
    seq_lr = xp.sum(lr, axis=-1)
    seq_lr_c = xp.clip(seq_lr, min=-SAFETY_BOUND, max=SAFETY_BOUND)
    _sequence_sums(xp, out, b, seq_lr_c)
    if mode is None:
        return out
    if mode == "token":
        raw = xp.where(m, b.rho, zero)
    else:
        seq_rho = xp.exp(seq_lr_c)
        raw = xp.where(m, xp.broadcast_to(seq_rho[:, None], o.shape), zero)
        sums, maxes, mins = out
        f64 = xp.float64
        log_up, log_lo = math.log(upper), math.log(lower)
        sums["high_rows"] = xp.astype(seq_lr > log_up, f64)
        sums["low_rows"] = xp.astype(seq_lr < log_lo, f64)
        maxes["seq_lr"] = mins["seq_lr"] = xp.astype(seq_lr, f64)
    _weight_sums(xp, out, b, raw, mode, (upper, lower, icepop))
    return out


def _masked_sum(xp: Any, x: Any, b: _Block) -> Any:
    """Masked row sums of ``x`` (in ``x``'s dtype, then float64), ``(rows,)``."""
    return xp.astype(xp.sum(xp.where(b.m, x, b.zero), axis=-1), xp.float64)


def _token_sums(xp: Any, sums: dict[str, Any], b: _Block) -> None:
    """Token count, k1 / k3 KL, token chi-squared and the Pearson sums of the probabilities."""
    f64 = xp.float64
    sums["n_tok"] = xp.astype(b.cnt, f64)
    sums["kl"] = -xp.astype(xp.sum(b.lr, axis=-1), f64)
    sums["k3"] = _masked_sum(xp, xp.expm1(b.lr) - b.lr, b)
    sums["chi2_tok"] = _masked_sum(xp, b.rho * b.rho, b)
    # Pearson correlation of the probabilities, float64 products.
    p_old = xp.where(b.m, xp.exp(xp.astype(b.o, f64)), 0.0)
    p_roll = xp.where(b.m, xp.exp(xp.astype(b.r, f64)), 0.0)
    sums["px"], sums["py"] = xp.sum(p_old, axis=-1), xp.sum(p_roll, axis=-1)
    sums["pxx"], sums["pyy"] = xp.sum(p_old * p_old, axis=-1), xp.sum(p_roll * p_roll, axis=-1)
    sums["pxy"] = xp.sum(p_old * p_roll, axis=-1)


def _sequence_sums(xp: Any, out: Rows, b: _Block, seq_lr_c: Any) -> None:
    """Perplexities, their log difference and ratio, and the sequence chi-squared (verl averages
    over every row, a row without tokens counting as 0)."""
    sums, maxes, mins = out
    f64 = xp.float64
    mean_old = row_mean(xp, xp.sum(xp.where(b.m, b.o, b.zero), axis=-1), b.cnt)
    mean_roll = row_mean(xp, xp.sum(xp.where(b.m, b.r, b.zero), axis=-1), b.cnt)
    diff = mean_roll - mean_old
    diff64 = xp.astype(diff, f64)
    sums["train_ppl"] = xp.astype(xp.exp(-mean_old), f64)
    sums["train_log_ppl"] = -xp.astype(mean_old, f64)
    sums["roll_ppl"] = xp.astype(xp.exp(-mean_roll), f64)
    sums["roll_log_ppl"] = -xp.astype(mean_roll, f64)
    sums["diff"], sums["abs_diff"] = diff64, xp.abs(diff64)
    sums["ppl_ratio"] = xp.astype(xp.exp(diff), f64)
    sums["chi2_seq"] = xp.astype(xp.exp(2.0 * seq_lr_c), f64)
    maxes["diff"] = mins["diff"] = diff64


def _weight_sums(
    xp: Any,
    out: Rows,
    b: _Block,
    raw: Any,
    mode: str,
    bounds: tuple[float, float, bool],
) -> None:
    """The IS weights (truncated, or zeroed outside the IcePop band): sums, moments about 1,
    fractions out of bounds and extremes, per token and per sequence."""
    sums, maxes, mins = out
    upper, lower, icepop = bounds
    f64 = xp.float64
    if icepop:
        keep = (raw >= lower) & (raw <= upper)
        w = xp.where(keep, raw, b.zero)
        sums["oob"] = _masked_sum(xp, xp.astype(~keep, b.o.dtype), b)
    else:
        w = xp.clip(raw, max=upper)
    wc = xp.clip(w, min=0.0, max=upper)
    sums["w"] = _masked_sum(xp, w, b)
    sums["wc"] = _masked_sum(xp, wc, b)
    sums["wc2"] = _masked_sum(xp, wc * wc, b)
    # Second moments about 1, where IS weights gather: no cancellation in the stds (float32 sums of
    # w**2 ~ 1 would lose the spread below ~1e-3).
    dev = wc - 1.0
    sums["wd"] = _masked_sum(xp, dev, b)
    sums["wd2"] = _masked_sum(xp, dev * dev, b)
    if mode == "token":
        sums["high_tok"] = _masked_sum(xp, xp.astype(raw > upper, b.o.dtype), b)
        sums["low_tok"] = _masked_sum(xp, xp.astype(raw < lower, b.o.dtype), b)
        maxes["w"], mins["w"] = _masked_extremes(xp, w, b.m)
    seq_w = xp.astype(row_mean(xp, xp.sum(w, axis=-1), b.cnt), f64)
    seq_raw = row_mean(xp, xp.sum(raw, axis=-1), b.cnt)
    sums["seq_w"] = seq_w
    seq_dev = seq_w - 1.0
    sums["seq_d"], sums["seq_d2"] = seq_dev, seq_dev * seq_dev
    sums["seq_high"] = xp.astype(seq_raw > upper, f64)
    sums["seq_low"] = xp.astype(seq_raw < lower, f64)
    maxes["seq_w"] = mins["seq_w"] = seq_w


def _masked_extremes(xp: Any, x: Any, m: Any) -> tuple[Any, Any]:
    """Row (max, min) of ``x`` where ``m``, float64 ``(rows,)``; -inf / inf where nothing is selected."""
    f64 = xp.float64
    if x.shape[-1] == 0:  # zero-width responses: max over an empty array has no identity
        device = getattr(x, "device", None)
        shape = (x.shape[0],)
        return (
            xp.full(shape, -math.inf, dtype=f64, device=device),
            xp.full(shape, math.inf, dtype=f64, device=device),
        )
    hi = xp.astype(xp.max(xp.where(m, x, -math.inf), axis=-1), f64)
    return hi, xp.astype(xp.min(xp.where(m, x, math.inf), axis=-1), f64)


def rollout_mismatch_statistics(
    old_log_probs: Any,
    rollout_log_probs: Any,
    response_mask: Any,
    *,
    rollout_is: str | None = "token",
    rollout_is_threshold: Any = 2.0,
    prefix: str = K.ROLLOUT_CORR_PREFIX,
    group_by: Any = None,
    group_name: str | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
) -> Stats:
    """Mergeable sums / maxima / minima behind :func:`compute_rollout_mismatch_metrics`.

    Arguments as :func:`compute_rollout_mismatch_metrics`; the result stays on the inputs'
    device (CPU tensors are read through numpy) until
    :meth:`~rlmetrics._core.stats.Stats.finalize`. A batch without rows gives the statistics
    of nothing (finalising them alone raises, as for a mask that selects no token). With
    ``group_by=`` every statistic is also kept per category (segment sums, maxima and minima of
    the per-row statistics, :mod:`rlmetrics.training.categories`), so parts and ranks that saw
    different categories merge exactly.
    """
    if rollout_is not in ("token", "sequence", None):
        raise ValueError(f"rollout_is must be 'token', 'sequence' or None; got {rollout_is!r}")
    upper, lower_spec = parse_is_threshold(rollout_is_threshold)
    icepop = lower_spec is not None
    lower = lower_spec if lower_spec is not None else 1.0 / upper
    options: dict[str, Any] = {
        "rollout_is": rollout_is,
        "upper": upper,
        "lower": lower,
        "icepop": icepop,
        "prefix": check_prefix(prefix),
    }
    xp, (old, roll, mask_raw), device, on_cpu = _checked_inputs(
        old_log_probs, rollout_log_probs, response_mask
    )
    n_rows = old.shape[0]
    groups = _groups(group_by, group_name, max_categories, n_rows, options)
    if n_rows == 0:
        arrays = dict(zip(_NAMES, (old, roll, mask_raw)))
        empty = stand_in_statistics(
            rollout_mismatch_statistics,
            arrays,
            {"response_mask"},
            rollout_is=rollout_is,
            rollout_is_threshold=rollout_is_threshold,
            prefix=prefix,
        )
        return dataclasses.replace(empty, options=options)
    mask, n_invalid = mask_and_invalid_count(mask_raw, _MASK)
    # An all-zero mask is found from the token count after the one host copy (no sync here).
    totals, rows = _reduce_blocks(xp, (old, roll, mask), options, on_cpu, keep_rows=groups is not None)
    total_s, total_x, total_n = totals
    total_s["n_rows"] = float(n_rows)
    total_s[invalid_mask_field(_MASK)] = 0.0 if n_invalid is None else n_invalid
    stats = Stats.pack(
        "mismatch", total_s, total_x, total_n, finaliser=_finalize, options=options, xp=xp, device=device
    )
    if groups is None or rows is None:
        return stats
    rows[0]["n_rows"] = 1.0
    columns = Columns(*rows)
    return with_entries(stats, *category_entries(groups, columns, rows[0]["n_tok"]))


def _groups(
    group_by: Any, group_name: Any, max_categories: Any, n_rows: int, options: dict[str, Any]
) -> list[Group] | None:
    """The grouping of ``group_by=`` (``None`` without it), its options added to ``options``."""
    if group_by is None:
        if group_name is not None:
            raise ValueError("group_name= names the group of group_by=; pass group_by= too")
        check_max_categories(max_categories)
        return None
    if isinstance(group_by, str | bytes):
        raise TypeError(
            f"group_by must be the labels, one per row (the mismatch metrics take arrays, not a batch); "
            f"got the string {group_by!r}: pass the column itself, e.g. batch.non_tensor_batch[{group_by!r}]"
        )
    name = "group" if group_name is None else group_name
    limit = check_max_categories(max_categories)
    groups = resolve_groups(BatchView({}), n_rows, group_by=group_by, group_name=name, max_categories=limit)
    options.update(group_by=name, max_categories=limit)
    return groups


def _reduce_blocks(
    xp: Any, arrays: tuple[Any, Any, Any], options: Mapping[str, Any], on_cpu: bool, *, keep_rows: bool
) -> tuple[Rows, Rows | None]:
    """The plain statistics, block by block, and (``keep_rows``) every row's, ``(B,)`` each."""
    old, roll, mask = arrays
    n_rows, width = old.shape
    work = xp.float64 if (old.dtype == xp.float64 or roll.dtype == xp.float64) else xp.float32
    step = cpu_block_rows(n_rows, width, on_cpu)
    totals: Rows = ({}, {}, {})
    kept: list[Rows] = []
    upper, lower, icepop = options["upper"], options["lower"], options["icepop"]
    for start in range(0, n_rows, step):
        rows = slice(start, start + step)
        o = xp.astype(as_float(old[rows, ...], xp), work)
        r = xp.astype(as_float(roll[rows, ...], xp), work)
        block = _block_rows(xp, o, r, mask[rows, ...], options["rollout_is"], upper, lower, icepop)
        _accumulate(xp, totals, block)
        if keep_rows:
            kept.append(block)
    if not keep_rows:
        return totals, None
    if len(kept) == 1:
        return totals, kept[0]
    joined: Rows = tuple(  # type: ignore[assignment]
        {k: xp.concat([b[i][k] for b in kept]) for k in kept[0][i]} for i in range(3)
    )
    return totals, joined


def _finalize(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """The metric dictionary from the host statistics (and each category's, with ``group_by=``)."""
    if "max_categories" in options:
        return finalize_with_categories(
            (s, hi, lo),
            _finalize,
            {k: options[k] for k in _PLAIN_OPTIONS},
            count="n_rows",
            max_categories=options["max_categories"],
            per_category=_finalize_category,
        )
    mode = options["rollout_is"]
    n, rows = s["n_tok"], s["n_rows"]
    if n == 0:
        raise ValueError(
            "response_mask must select at least one token; none is selected "
            "(in this batch, or on any rank with process_group=)"
        )
    if math.isnan(s["kl"]) or math.isnan(s["train_log_ppl"]):
        raise ValueError("old_log_probs or rollout_log_probs hold NaN at tokens selected by response_mask")
    out = {} if mode is None else _weight_metrics(s, hi, lo, options)
    out[K.ROLLOUT_CORR_TRAINING_PPL] = s["train_ppl"] / rows
    out[K.ROLLOUT_CORR_TRAINING_LOG_PPL] = s["train_log_ppl"] / rows
    out[K.ROLLOUT_CORR_KL] = s["kl"] / n
    out[K.ROLLOUT_CORR_K3_KL] = s["k3"] / n
    out[K.ROLLOUT_CORR_ROLLOUT_PPL] = s["roll_ppl"] / rows
    out[K.ROLLOUT_CORR_ROLLOUT_LOG_PPL] = s["roll_log_ppl"] / rows
    out[K.ROLLOUT_CORR_LOG_PPL_DIFF] = s["diff"] / rows
    out[K.ROLLOUT_CORR_LOG_PPL_ABS_DIFF] = s["abs_diff"] / rows
    out[K.ROLLOUT_CORR_LOG_PPL_DIFF_MAX], out[K.ROLLOUT_CORR_LOG_PPL_DIFF_MIN] = hi["diff"], lo["diff"]
    out[K.ROLLOUT_CORR_PPL_RATIO] = s["ppl_ratio"] / rows
    out[K.ROLLOUT_CORR_CHI2_TOKEN] = s["chi2_tok"] / n - 1.0
    out[K.ROLLOUT_CORR_CHI2_SEQ] = s["chi2_seq"] / rows - 1.0
    out[K.ROLLOUT_CORR_PROBS_PEARSON_CORR] = _pearson(s)
    return with_prefix(out, K.ROLLOUT_CORR_PREFIX, options["prefix"])


#: The options of the plain statistics (``group_by=`` adds ``group_by`` and ``max_categories``).
_PLAIN_OPTIONS = ("rollout_is", "upper", "lower", "icepop", "prefix")


def _finalize_category(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """One category's metrics; none for a category whose rows select no token (every response
    empty), whose token means are undefined."""
    return {} if s["n_tok"] == 0 else _finalize(s, hi, lo, options)


def _weight_metrics(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """The importance-weight metrics (``rollout_is*``) from the host statistics."""
    mode = options["rollout_is"]
    n, rows = s["n_tok"], s["n_rows"]
    out: dict[str, float] = {}
    out[K.ROLLOUT_CORR_IS_MEAN] = s["w"] / n
    if mode == "token":
        out[K.ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH] = s["high_tok"] / n
        out[K.ROLLOUT_CORR_IS_RATIO_FRACTION_LOW] = s["low_tok"] / n
        out[K.ROLLOUT_CORR_IS_MAX], out[K.ROLLOUT_CORR_IS_MIN] = hi["w"], lo["w"]
    else:
        out[K.ROLLOUT_CORR_IS_MAX] = math.exp(min(hi["seq_lr"], SAFETY_BOUND))
        out[K.ROLLOUT_CORR_IS_MIN] = math.exp(lo["seq_lr"]) if lo["seq_lr"] > -745 else 0.0
        out[K.ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH] = s["high_rows"] / rows
        out[K.ROLLOUT_CORR_IS_RATIO_FRACTION_LOW] = s["low_rows"] / rows
    mean_c, mean_c2 = s["wc"] / n, s["wc2"] / n
    mean_d = s["wd"] / n
    out[K.ROLLOUT_CORR_IS_STD] = math.sqrt(max(s["wd2"] / n - mean_d * mean_d, 0.0)) if n > 1 else 0.0
    if s["wc2"] > 0:
        out[K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE] = mean_c * mean_c / mean_c2
        out[K.ROLLOUT_CORR_IS_ESS_TOKENS] = s["wc"] * s["wc"] / s["wc2"]
    else:
        msg = "every applied IS weight is 0: the effective sample size is undefined (NaN)"
        out[K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE] = warn_undefined(msg, stacklevel=None)
        out[K.ROLLOUT_CORR_IS_ESS_TOKENS] = math.nan
    out[K.ROLLOUT_CORR_IS_SEQ_MEAN] = s["seq_w"] / rows
    if rows > 1:
        var = max(s["seq_d2"] - s["seq_d"] ** 2 / rows, 0.0) / (rows - 1)
        out[K.ROLLOUT_CORR_IS_SEQ_STD] = math.sqrt(var)
    else:
        out[K.ROLLOUT_CORR_IS_SEQ_STD] = 0.0
    out[K.ROLLOUT_CORR_IS_SEQ_MAX], out[K.ROLLOUT_CORR_IS_SEQ_MIN] = hi["seq_w"], lo["seq_w"]
    out[K.ROLLOUT_CORR_IS_SEQ_MAX_DEVIATION] = max(abs(hi["seq_w"] - 1.0), abs(lo["seq_w"] - 1.0))
    out[K.ROLLOUT_CORR_IS_SEQ_FRACTION_HIGH] = s["seq_high"] / rows
    out[K.ROLLOUT_CORR_IS_SEQ_FRACTION_LOW] = s["seq_low"] / rows
    if options["icepop"]:
        out[K.ROLLOUT_CORR_IS_OOB_RATIO] = s["oob"] / n
    return out


def _pearson(s: dict[str, float]) -> float:
    n = s["n_tok"]
    cov = s["pxy"] - s["px"] * s["py"] / n
    var_x = s["pxx"] - s["px"] ** 2 / n
    var_y = s["pyy"] - s["py"] ** 2 / n
    if n < 2 or var_x <= 0 or var_y <= 0:
        return warn_undefined(
            "the Pearson correlation of the probabilities is undefined (fewer than 2 tokens or a constant "
            "probability): NaN",
            stacklevel=None,
        )
    return max(-1.0, min(1.0, cov / math.sqrt(var_x * var_y)))


@metrics_from(rollout_mismatch_statistics)
def compute_rollout_mismatch_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    old_log_probs: Any,
    rollout_log_probs: Any,
    response_mask: Any,
    *,
    rollout_is: str | None = "token",
    rollout_is_threshold: Any = 2.0,
    prefix: str = K.ROLLOUT_CORR_PREFIX,
    group_by: Any = None,
    group_name: str | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    process_group: Any = None,
) -> dict[str, float]:
    """Importance-ratio, KL, perplexity and chi-squared diagnostics of the rollout/training mismatch.

    With ``rollout_is`` and ``rollout_is_threshold`` as in verl's rollout-correction config, the
    keys and values are those of verl 0.9.1's ``compute_rollout_correction_and_rejection_mask``
    (no rejection sampling, no batch normalisation).

    Parameters
    ----------
    old_log_probs : array of shape ``(B, R)``
        Log-probabilities of the sampled tokens under the training engine (numpy or torch).
    rollout_log_probs : array of shape ``(B, R)``
        The same under the inference engine.
    response_mask : array of shape ``(B, R)``
        Bool or 0/1; must select at least one token.
    rollout_is : {"token", "sequence", None}, keyword-only
        Importance weights per token (``rho_t``) or per sequence (``prod_t rho_t``); ``None``
        reports only the KL / perplexity / chi-squared metrics.
    rollout_is_threshold : float, str or (float, float), keyword-only
        Upper bound (weights truncated to it; the low fraction uses ``1 / upper``), or
        ``"lower_upper"`` / ``(lower, upper)`` for IcePop (weights outside zeroed).
    prefix : str, keyword-only
        Prepended to every key (default ``"rollout_corr/"``).
    group_by : array of shape (B,), optional, keyword-only
        Also report every metric per category: each row's label (verl's
        ``non_tensor_batch["data_source"]``, an environment's name; strings, numbers or
        booleans, numpy, torch or a list). Category ``c``'s metrics are those of its rows alone,
        under ``keys.category_key(key, group, c)``
        (``by_data_source/gsm8k/rollout_corr/k3_kl``; ``/``, spaces and other separators
        ``%XX``-escaped). The plain keys stay as they are, bit for bit. Every metric is kept
        per category: each is a sum, maximum or minimum over the category's tokens or rows, so
        the gap, KL, perplexities, chi-squared, IS weights, the truncated shares and the ESS of
        one environment are its own. A category whose rows select no token reports no key.
        A column name is refused (these metrics take arrays, not a batch).
    group_name : str, optional, keyword-only
        The group's name in the keys (default ``"group"``; pass ``"data_source"``).
    max_categories : int, keyword-only
        At most this many categories (default 64): the least frequent are reported together
        as ``<other>`` (key token ``%other``), with one ``RLMetricsWarning``. As for
        :func:`~rlmetrics.compute_data_metrics`: applied when the metrics are finalised, to
        the union of merged parts and ranks (the most rows there stay, ties by name), so any
        split gives the metrics of the whole batch; beyond
        ``training.categories.EXACT_CATEGORIES`` categories in one call the rest are folded
        already, with a warning that merged per-category metrics are then approximate.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' batches: one tiny
        agreement collective, then two packed all-reduces (a rank with an empty shard still
        takes part). A rank whose input is bad makes every rank raise the same error, naming
        that rank; ranks with different options raise the same ``ValueError``, naming them.
        Ranks (and merged parts) that saw different categories reduce the union of their
        categories, agreed in the same step.

    Returns
    -------
    dict[str, float]
        ``rollout_is_{mean,std,max,min,eff_sample_size,ratio_fraction_high,ratio_fraction_low}``,
        ``rollout_is_seq_{mean,std,max,min,max_deviation,fraction_high,fraction_low}`` (and
        ``rollout_is_oob_ratio`` for IcePop); ``training_ppl``, ``training_log_ppl``, ``kl``
        (k1, ``E[rollout - old]``), ``k3_kl`` (``E[rho - 1 - log rho]`` >= 0), ``rollout_ppl``,
        ``rollout_log_ppl``, ``log_ppl_diff``, ``log_ppl_abs_diff``, ``log_ppl_diff_max``,
        ``log_ppl_diff_min``, ``ppl_ratio``, ``chi2_token``, ``chi2_seq``: verl's names and values.
        Added: ``rollout_is_ess_tokens`` (``(sum w)^2 / sum w^2``, in ``[1, n_tokens]``) and
        ``probs_pearson_corr`` (Pearson correlation of ``exp(old)`` and ``exp(rollout)`` over
        the tokens; NaN with an ``UndefinedMetricWarning`` when undefined). As in verl, sequence means
        count a row without tokens as 0 and ``rollout_is_eff_sample_size`` is the ESS *fraction*
        ``(E w)^2 / E w^2`` in ``(0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> old = np.log(np.array([[0.5, 0.25], [0.8, 0.1]]))
    >>> roll = np.log(np.array([[0.5, 0.4], [0.4, 0.1]]))
    >>> m = compute_rollout_mismatch_metrics(old, roll, np.array([[1, 1], [1, 0]]))
    >>> round(m["rollout_corr/rollout_is_mean"], 6), m["rollout_corr/rollout_is_ratio_fraction_high"]
    (1.208333, 0.0)
    >>> round(m["rollout_corr/kl"], 6), round(m["rollout_corr/k3_kl"], 6)
    (-0.074381, 0.133952)
    """
    ...  # @metrics_from computes: the statistics, their all-reduce, finalize
