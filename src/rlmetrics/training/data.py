"""Batch data metrics: verl's ``compute_data_metrics``, computed as mergeable sufficient statistics.

:func:`data_statistics` reduces a batch to a :class:`~rlmetrics._core.stats.Stats` of sums,
maxima and minima on the batch's device; :meth:`~rlmetrics._core.stats.Stats.finalize` turns
it into verl's dictionary with one host transfer (verl calls ``.item()`` about thirty times).
The statistics of micro-batches merge, and those of data-parallel ranks all-reduce, exactly:
:func:`compute_data_metrics` with ``process_group=`` gives the metrics of the union of shards.

Two engines compute the same statistics:

* the fused numba kernel (``pip install 'rlmetrics[fast]'``), for numpy arrays and CPU
  tensors of at least :data:`~rlmetrics._core.kernels.FUSED_MIN_ELEMENTS` token entries: one
  pass per row over every input (token statistics, score and reward sums, lengths);
* the array-API path for every other input: numpy (CPU tensors are viewed as numpy) in
  cache-sized row blocks, torch on its device (CUDA) in whole-tensor operations.

With ``group_by=`` (a label column such as verl's ``data_source``, or labels) and the outcome
split (``split_by_outcome=`` / ``score_threshold=``) the same statistics are also kept per
category, as extra entries of the same ``Stats`` (segment reductions of the per-row quantities,
:mod:`rlmetrics.training.categories`): the plain keys stay bit-identical, each category's keys
(``by_data_source/gsm8k/critic/score/mean``, :func:`rlmetrics.keys.category_key`) equal the
plain metrics of its samples alone, and parts or ranks with different categories merge exactly.

Centred second moments (behind ``critic/vf_explained_var``) are exact per row (the kernel
centres on the row's first valid value, the array-API path on the row mean) and combined over
rows with Chan's formula. Across batches they add: the statistics keep ``M2`` and
``S**2 / n`` so that ``M2_all = sum(M2_i) + sum(S_i**2 / n_i) - S_all**2 / n_all``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    array_namespace,
    as_float,
    check_same_shape,
    cpu_block_rows,
    describe,
    host_view,
    is_torch_array,
    mask_and_invalid_count,
    raise_invalid_mask,
)
from rlmetrics._core.batch import BatchView, as_batch
from rlmetrics._core.checks import check_int, check_real_dtype, warn_undefined
from rlmetrics._core.kernels import (
    FUSED_MIN_ELEMENTS,
    ROW_SUM_FIELDS,
    float_keys_to_values,
    token_rows_kernel,
)
from rlmetrics._core.lengths import attention_split, prompt_response_lengths, response_width
from rlmetrics._core.stats import ANY, Stats, invalid_mask_field, metrics_from
from rlmetrics.training.categories import (
    DEFAULT_MAX_CATEGORIES,
    Columns,
    category_entries,
    check_max_categories,
    finalize_with_categories,
    resolve_groups,
    with_entries,
)

__all__ = ["compute_data_metrics", "data_statistics"]

_RESPONSE_MASK = "batch['response_mask']"
_ATTENTION_MASK = "batch['attention_mask']"

# Names of the statistics, by how they merge. The order is the layout of the packed vectors.
SUM_FIELDS = (
    "n_samples",
    "n_non_aborted",
    "score_sum",
    "reward_sum",
    "n_tokens",
    "adv_sum",
    "ret_sum",
    "ret_m2",
    "ret_sq_over_n",
    "val_sum",
    "diff_sum",
    "diff_m2",
    "diff_sq_over_n",
    "resp_len_sum",
    "resp_len_clipped",
    "na_resp_len_sum",
    "na_resp_len_clipped",
    "prompt_len_sum",
    "prompt_len_clipped",
    "n_turns",
    "turns_sum",
    "n_tool_calls",
    "tool_calls_sum",
    invalid_mask_field(_RESPONSE_MASK),
    invalid_mask_field(_ATTENTION_MASK),
)
EXTREME_FIELDS = (
    "score",
    "reward",
    "adv",
    "ret",
    "val",
    "resp_len",
    "na_resp_len",
    "prompt_len",
    "turns",
    "tool_calls",
)

# Per-sample non-tensor inputs that add metrics when present (verl's non_tensor_batch).
_OPTIONAL_KEYS = ("__num_turns__", "tool_call_counts")

# Tensors the metrics read; CPU tensors among them are viewed as numpy arrays.
_DATA_KEYS = (
    "token_level_scores",
    "token_level_rewards",
    "advantages",
    "returns",
    "values",
    "response_mask",
    "attention_mask",
    "prompts",
    "responses",
    "prompt_length",
    "response_length",
)


def _combine_rows(xp: Any, n: Any, total: Any, m2: Any) -> tuple[Any, Any]:
    """``(M2, S**2 / N)`` of the union of rows, from per-row counts, sums and centred M2 (Chan).

    ``M2 = sum(M2_r) + sum(n_r * (mean_r - mean)**2)``: the deviations of the row means are
    taken directly, so a large common offset does not swamp the spread.
    """
    n_all = xp.sum(n)
    s_all = xp.sum(total)
    has_all = n_all > 0
    safe_all = xp.where(has_all, n_all, xp.ones_like(n_all))
    mean = s_all / safe_all
    has = n > 0
    row_mean = xp.where(has, total / xp.where(has, n, xp.ones_like(n)), mean)
    dev = row_mean - mean
    m2_all = xp.sum(m2) + xp.sum(n * dev * dev)
    zero = xp.zeros_like(n_all)
    return xp.where(has_all, m2_all, zero), xp.where(has_all, s_all * s_all / safe_all, zero)


def _tokens_array_api(
    xp: Any, floats: list[Any], mask: Any, use_critic: bool, on_cpu: bool, per_row: bool = False
) -> tuple[dict[str, Any], list[Any], list[Any], list[Any] | None]:
    """Per-row token sums and centred M2 (two passes per row), and the extremes, with ``xp``.

    ``mask`` is boolean. On the CPU the rows go in cache-sized blocks; on an accelerator all at
    once. Masked-out slots are selected away, so a NaN there never leaks in. With ``per_row``
    (``group_by=``) the extremes are taken per row, and also returned, as ``(B,)`` maxima and
    minima of each value tensor. A select costs
    several times a multiply on scattered masks, so each value tensor is selected once; the
    extremes come from the selected values and one shared offset per block (``+0.0`` or
    ``-0.0`` inside the mask, which keeps every value and the sign of a zero, ``inf`` outside),
    and the centring from the float mask.
    """
    f64 = xp.float64
    work = floats[0].dtype
    n_rows, width = mask.shape
    step = cpu_block_rows(n_rows, width, on_cpu)
    columns: dict[str, list[Any]] = {name: [] for name in ROW_SUM_FIELDS if name != "n_invalid"}
    n_values = len(floats)
    device = floats[0].device if is_torch_array(floats[0]) else None

    def scalar(value: float, dtype: Any) -> Any:
        return xp.asarray(value, dtype=dtype, device=device)

    zero, minus_zero, inf = scalar(0.0, work), scalar(-0.0, work), scalar(math.inf, work)
    maxes = [scalar(-math.inf, f64)] * 3
    mins = [scalar(math.inf, f64)] * 3
    row_ext: list[list[Any]] = [[] for _ in range(2 * n_values)]
    for start in range(0, n_rows, step):
        rows = slice(start, start + step)
        m = mask[rows, ...]
        m64 = xp.astype(m, f64)
        n = xp.sum(m64, axis=-1)
        safe = xp.where(n > 0, n, xp.ones_like(n))
        selected = [xp.where(m, x[rows, ...], zero) for x in floats]
        totals = [xp.sum(x, axis=-1, dtype=f64) for x in selected]
        below = xp.where(m, zero, inf)  # x - below: x inside the mask, -inf outside
        above = xp.where(m, minus_zero, inf)  # x + above: x inside the mask, +inf outside
        for c in range(n_values if width else 0):  # zero-width responses: no token, no extreme
            if per_row:
                row_ext[2 * c].append(xp.astype(xp.max(selected[c] - below, axis=-1), f64))
                row_ext[2 * c + 1].append(xp.astype(xp.min(selected[c] + above, axis=-1), f64))
                maxes[c] = xp.maximum(maxes[c], xp.max(row_ext[2 * c][-1]))
                mins[c] = xp.minimum(mins[c], xp.min(row_ext[2 * c + 1][-1]))
                continue
            maxes[c] = xp.maximum(maxes[c], xp.astype(xp.max(selected[c] - below), f64))
            mins[c] = xp.minimum(mins[c], xp.astype(xp.min(selected[c] + above), f64))
        ret64 = xp.astype(selected[1], f64)
        dev = ret64 - (totals[1] / safe)[:, None] * m64  # 0 outside the mask
        columns["n"].append(n)
        columns["adv_sum"].append(totals[0])
        columns["ret_sum"].append(totals[1])
        columns["ret_m2"].append(xp.vecdot(dev, dev, axis=-1))
        if use_critic:
            diff = ret64 - xp.astype(selected[2], f64)  # exact in float64
            diff_sum = xp.sum(diff, axis=-1)
            dev = diff - (diff_sum / safe)[:, None] * m64
            columns["val_sum"].append(totals[2])
            columns["diff_sum"].append(diff_sum)
            columns["diff_m2"].append(xp.vecdot(dev, dev, axis=-1))
    table = {k: xp.concat(v) if v else None for k, v in columns.items()}
    if not per_row:
        return table, maxes, mins, None
    empty = [xp.full((n_rows,), (-1) ** c * -math.inf, dtype=f64, device=device) for c in range(2)]
    rows_ext = [xp.concat(v) if v and width else empty[c % 2] for c, v in enumerate(row_ext)]
    return table, maxes, mins, rows_ext


def _tokens_fused(
    kernel: Any,
    floats: list[np.ndarray],
    mask: np.ndarray,
    use_critic: bool,
    extras: tuple[np.ndarray, np.ndarray, np.ndarray, int],
) -> tuple[dict[str, Any], list[float], list[float], float, np.ndarray, np.ndarray]:
    """Per-row token sums and M2, extremes, invalid-mask count, the per-row sequence table and
    the per-row order-preserving keys of the extremes (``(B, 6)``: max, min of each tensor).

    ``extras`` = (scores, rewards, attention_mask, split); zero-width arrays skip them.
    """
    adv, ret = floats[0], floats[1]
    val = floats[2] if use_critic else ret
    dtype = adv.dtype
    int_type = np.int32 if dtype.itemsize == 4 else np.int64
    bits = [
        x.view(int_type) if x.flags.c_contiguous else np.ascontiguousarray(x).view(int_type)
        for x in (adv, ret, val)
    ]
    magnitude = (1 << (8 * dtype.itemsize - 1)) - 1
    scores, rewards, attention, split = extras
    sums, keys, seq = kernel(
        adv, ret, val, *bits, mask, use_critic, magnitude, scores, rewards, attention, split
    )
    table = {name: sums[:, c] for c, name in enumerate(ROW_SUM_FIELDS)}
    has = table["n"] > 0
    maxes, mins = [-math.inf] * 3, [math.inf] * 3
    if has.any():
        hi = float_keys_to_values(keys[has].max(axis=0), dtype)
        lo = float_keys_to_values(keys[has].min(axis=0), dtype)
        for c in range(len(floats)):
            # A NaN's key lies beyond the infinities' (above for a positive sign bit, below for
            # a negative one): one among the valid values shows in the max or the min, and then
            # both are NaN, as torch and numpy give.
            top, bottom = float(hi[2 * c]), float(lo[2 * c + 1])
            nan = math.isnan(top) or math.isnan(bottom)
            maxes[c] = math.nan if nan else top
            mins[c] = math.nan if nan else bottom
    if not use_critic:
        table["val_sum"] = table["diff_sum"] = table["diff_m2"] = None
    return table, maxes, mins, float(table.pop("n_invalid").sum()), seq, keys


def _seq_stats(xp: Any, x: Any, keep: Any) -> tuple[Any, Any, Any]:
    """(sum, max, min) of ``x`` over ``keep`` as float64 0-d arrays (max=-inf, min=inf if empty)."""
    x64 = xp.astype(x, xp.float64)
    total = xp.sum(xp.where(keep, x64, xp.zeros_like(x64)))
    hi = xp.max(xp.where(keep, x64, xp.full_like(x64, -math.inf)))
    lo = xp.min(xp.where(keep, x64, xp.full_like(x64, math.inf)))
    return total, hi, lo


def _host_count_stats(values: Any, name: str, n_rows: int) -> tuple[float, float, float, float]:
    """(n, sum, max, min) of a per-sample host array such as ``__num_turns__`` (zeros and
    infinities if absent); it must be 1-d, numeric and hold one entry per row."""
    arr = _host_count_array(values, name, n_rows)
    if arr is None or arr.size == 0:
        return 0.0, 0.0, -math.inf, math.inf
    return float(arr.size), float(arr.sum(dtype=np.float64)), float(arr.max()), float(arr.min())


def _host_count_array(values: Any, name: str, n_rows: int) -> np.ndarray | None:
    """A per-sample host array such as ``__num_turns__``, checked (``None`` if absent)."""
    if values is None:
        return None
    where = f"batch.non_tensor_batch[{name!r}]"
    if is_torch_array(values):
        values = values.detach().cpu().numpy()
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):  # ragged nesting
        raise TypeError(
            f"{where} must be a 1-d array of numbers, one per sample; got a ragged sequence"
        ) from None
    if arr.ndim != 1:
        raise ValueError(
            f"{where} must be a 1-d array of numbers, one per sample; got shape {arr.shape}"
            + (" (nested)" if arr.ndim > 1 else "")
        )
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{where} must hold numbers; got dtype {arr.dtype}") from None
    if arr.shape[0] != n_rows:
        raise ValueError(f"{where} must hold one entry per sample ({n_rows}); got {arr.shape[0]} entries")
    return arr


def _host_views(view: BatchView) -> BatchView:
    """The batch with CPU torch tensors seen as numpy arrays (see ``host_view``).

    A key the metrics read that holds something other than an array (a string, ``None``, a
    list, an object array) is refused here, never skipped: a skipped ``response_mask`` would
    silently be derived from ``attention_mask`` instead.
    """
    for key in _DATA_KEYS:
        if not view.has(key) and key in view.non_tensors:
            value = view.non_tensors[key]
            got = describe(value) if hasattr(value, "dtype") else f"{type(value).__name__} {_short(value)}"
            raise TypeError(f"batch[{key!r}] must be a numpy array or a torch tensor of numbers; got {got}")
    tensors = {key: host_view(view.tensor(key)) for key in _DATA_KEYS if view.has(key)}
    return BatchView(tensors=tensors, non_tensors=view.non_tensors, meta_info=view.meta_info, arg=view.arg)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _limit(value: Any, name: str) -> int | None:
    """A clip limit: ``None`` or an integer >= 1."""
    return None if value is None else check_int(value, name, minimum=1)


def data_statistics(
    batch: Any,
    use_critic: bool = True,
    *,
    max_response_length: int | None = None,
    max_prompt_length: int | None = None,
    group_by: Any = None,
    group_name: str | None = None,
    split_by_outcome: bool = False,
    score_threshold: float | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
) -> Stats:
    """Sufficient statistics of :func:`compute_data_metrics` for one batch (or shard, or micro-batch).

    See :func:`compute_data_metrics` for the arguments. The result stays on the batch's device
    until :meth:`~rlmetrics._core.stats.Stats.finalize`; statistics of several batches merge
    (``Stats.merge(a, b)``) or all-reduce (``stats.all_reduce(group)``) into those of their
    union. A batch without rows gives the statistics of nothing.

    Examples
    --------
    >>> import numpy as np
    >>> def batch(scores):
    ...     s = np.array(scores, dtype=np.float32)[:, None]
    ...     ones = np.ones_like(s)
    ...     return {"token_level_scores": s, "token_level_rewards": s, "advantages": s,
    ...             "returns": s, "response_mask": ones, "attention_mask": np.ones((len(s), 2)),
    ...             "prompts": ones, "responses": ones}
    >>> a, b = data_statistics(batch([1.0, 2.0]), False), data_statistics(batch([6.0]), False)
    >>> m = a.merge(b).finalize()
    >>> m["critic/score/mean"], m["critic/score/max"]
    (3.0, 6.0)
    """
    if not isinstance(use_critic, bool | np.bool_):
        raise TypeError(f"use_critic must be a bool; got {type(use_critic).__name__} {use_critic!r}")
    max_response_length = _limit(max_response_length, "max_response_length")
    max_prompt_length = _limit(max_prompt_length, "max_prompt_length")
    raw = as_batch(batch)
    view = _host_views(raw)
    options = {
        "use_critic": bool(use_critic),
        "max_response_length": max_response_length,
        "max_prompt_length": max_prompt_length,
    }
    grouped = group_by is not None or split_by_outcome is not False or score_threshold is not None
    if grouped:  # the grouping options join the others (ranks and merged parts must share them)
        options.update(
            _grouping_options(group_by, group_name, split_by_outcome, score_threshold, max_categories)
        )
    inputs = _read_inputs(view, use_critic)
    counts = [_host_count_stats(view.non_tensor(k), k, inputs.n_rows) for k in _OPTIONAL_KEYS]
    if inputs.n_rows == 0:
        return _empty(inputs.xp, inputs.device, options)
    rows = _row_pass(view, inputs, use_critic, per_row=grouped)
    if rows.prompt_len.shape[0] != inputs.n_rows:
        raise ValueError(
            f"prompt/response lengths have {rows.prompt_len.shape[0]} rows, the token tensors {inputs.n_rows}"
        )
    sums, maxes, mins = _batch_sums(
        view, inputs, rows, use_critic, max_response_length, max_prompt_length, counts
    )
    stats = Stats.pack(
        "data",
        dict(zip(SUM_FIELDS, sums)),
        dict(zip(EXTREME_FIELDS, maxes)),
        dict(zip(EXTREME_FIELDS, mins)),
        finaliser=_finalize,
        options=options,
        xp=inputs.xp,
        device=inputs.device,
    )
    if not grouped:
        return stats
    groups = resolve_groups(
        raw,  # every column, not only those the metrics read
        inputs.n_rows,
        group_by=group_by,
        group_name=group_name,
        split_by_outcome=split_by_outcome,
        score_threshold=score_threshold,
        seq_score=rows.seq_score,
        max_categories=check_max_categories(max_categories),
    )
    columns = _category_columns(view, inputs, rows, use_critic, max_response_length, max_prompt_length)
    return with_entries(stats, *category_entries(groups, columns, rows.response_len))


def _grouping_options(
    group_by: Any, group_name: Any, split_by_outcome: Any, score_threshold: Any, max_categories: Any
) -> dict[str, Any]:
    """The options of ``group_by=`` and the outcome split, checked (what ranks must share)."""
    if group_name is not None:
        K.category_key("", group_name, "")  # a TypeError / ValueError naming the group name
    if group_by is not None and not isinstance(group_by, str) and not hasattr(group_by, "__len__"):
        got = f"{type(group_by).__name__} {group_by!r}"
        raise TypeError(f"group_by must be a column name or an array of labels; got {got}")
    name = group_name or (group_by if isinstance(group_by, str) else None if group_by is None else "group")
    return {
        "group_by": name,
        "split_by_outcome": bool(split_by_outcome),
        "score_threshold": score_threshold,
        "max_categories": check_max_categories(max_categories),
    }


def _category_columns(
    view: BatchView,
    inputs: _Inputs,
    rows: _Rows,
    use_critic: bool,
    max_response_length: int | None,
    max_prompt_length: int | None,
) -> Columns:
    """The per-row quantities behind each statistic, for the per-category entries."""
    xp, table = inputs.xp, rows.table
    f64 = xp.float64
    response_len, prompt_len = xp.astype(rows.response_len, f64), xp.astype(rows.prompt_len, f64)
    na = response_len != 0
    na64 = xp.astype(na, f64)
    resp_clipped, prompt_clipped = _clipped(view, rows, max_response_length, max_prompt_length)
    score, reward = xp.astype(rows.seq_score, f64), xp.astype(rows.seq_reward, f64)
    zeros = xp.zeros_like(response_len)
    inf = xp.full_like(response_len, math.inf)
    sums: dict[str, Any] = {
        "n_samples": 1.0,
        "n_non_aborted": na64,
        "score_sum": xp.where(na, score, zeros),
        "reward_sum": xp.where(na, reward, zeros),
        "n_tokens": table["n"],
        "adv_sum": table["adv_sum"],
        "ret_sum": table["ret_sum"],
        "resp_len_sum": response_len,
        "resp_len_clipped": xp.astype(resp_clipped, f64),
        "na_resp_len_sum": xp.where(na, response_len, zeros),
        "na_resp_len_clipped": xp.astype(na & resp_clipped, f64),
        "prompt_len_sum": prompt_len,
        "prompt_len_clipped": xp.astype(prompt_clipped, f64),
    }
    ext = rows.row_ext or []
    maxes: dict[str, Any] = {
        "score": xp.where(na, score, -inf),
        "reward": xp.where(na, reward, -inf),
        "adv": ext[0],
        "ret": ext[2],
        "resp_len": response_len,
        "na_resp_len": xp.where(na, response_len, -inf),
        "prompt_len": prompt_len,
    }
    mins: dict[str, Any] = {
        "score": xp.where(na, score, inf),
        "reward": xp.where(na, reward, inf),
        "adv": ext[1],
        "ret": ext[3],
        "resp_len": response_len,
        "na_resp_len": xp.where(na, response_len, inf),
        "prompt_len": prompt_len,
    }
    moments = [("ret_m2", "ret_sq_over_n", table["n"], table["ret_sum"], table["ret_m2"])]
    if use_critic:
        sums.update(val_sum=table["val_sum"], diff_sum=table["diff_sum"])
        maxes["val"], mins["val"] = ext[4], ext[5]
        moments.append(("diff_m2", "diff_sq_over_n", table["n"], table["diff_sum"], table["diff_m2"]))
    _count_columns(view, inputs, sums, maxes, mins)
    return Columns(sums, maxes, mins, moments)


def _count_columns(
    view: BatchView, inputs: _Inputs, sums: dict[str, Any], maxes: dict[str, Any], mins: dict[str, Any]
) -> None:
    """``__num_turns__`` and ``tool_call_counts`` per row, on the batch's device, when present."""
    for key, (n_name, s_name, e_name) in zip(
        _OPTIONAL_KEYS, (("n_turns", "turns_sum", "turns"), ("n_tool_calls", "tool_calls_sum", "tool_calls"))
    ):
        arr = _host_count_array(view.non_tensor(key), key, inputs.n_rows)
        if arr is None:  # the statistics of nothing, as the plain entries hold
            sums[n_name], sums[s_name], maxes[e_name], mins[e_name] = 0.0, 0.0, -math.inf, math.inf
            continue
        col = inputs.xp.asarray(arr.astype(np.float64), device=inputs.device)
        sums[n_name], sums[s_name] = 1.0, col
        maxes[e_name] = mins[e_name] = col


class _Inputs(NamedTuple):
    """The batch's tensors, checked: token tensors in one float dtype (>= float32)."""

    xp: Any
    #: advantages, returns[, values], each (B, R)
    floats: list[Any]
    scores: Any
    rewards: Any
    #: (B, R), as given (bool, integer or float 0/1)
    response_mask: Any
    n_rows: int
    device: Any


def _read_inputs(view: BatchView, use_critic: bool) -> _Inputs:
    """Fetch and check the tensors (names, shapes, one namespace); raise naming the bad one."""
    scores = view.tensor("token_level_scores")
    rewards = view.tensor("token_level_rewards")
    advantages = view.tensor("advantages")
    returns = view.tensor("returns")
    xp = array_namespace(scores, rewards, advantages, returns)
    for name, x in (
        ("token_level_scores", scores),
        ("token_level_rewards", rewards),
        ("advantages", advantages),
        ("returns", returns),
    ):
        check_real_dtype(x, f"batch[{name!r}]")
    if advantages.ndim != 2:
        raise ValueError(f"batch['advantages'] must have shape (B, R); got {describe(advantages)}")
    n_rows = advantages.shape[0]
    if view.has("response_mask"):
        response_mask = view.tensor("response_mask")
    else:
        width = response_width(view)
        response_mask = view.tensor("attention_mask", why="response_mask is derived from it")[:, -width:]
    token_tensors = [advantages, returns]
    names = ["advantages", "returns"]
    if use_critic:
        values = view.tensor("values", why="use_critic=True")
        check_real_dtype(values, "batch['values']")
        token_tensors.append(values)
        names.append("values")
    for name, x in zip(names, token_tensors):
        check_same_shape(x, response_mask, f"batch[{name!r}]", _RESPONSE_MASK)
    for name, x in (("token_level_scores", scores), ("token_level_rewards", rewards)):
        if x.ndim != 2 or x.shape[0] != n_rows:
            raise ValueError(
                f"batch[{name!r}] must have shape (B, R) with B = {n_rows} rows like batch['advantages']; "
                f"got {describe(x)}"
            )
    device = advantages.device if is_torch_array(advantages) else None
    floats = [as_float(x, xp) for x in token_tensors]
    work = xp.float64 if any(x.dtype == xp.float64 for x in floats) else xp.float32
    floats = [xp.astype(x, work) if x.dtype != work else x for x in floats]
    return _Inputs(xp, floats, scores, rewards, response_mask, n_rows, device)


class _Rows(NamedTuple):
    """Per-row results of the token pass, and the token extremes."""

    #: per-row token sums by name (``n``, ``adv_sum``, ``ret_sum``, ``ret_m2`` ...), each (B,)
    table: Mapping[str, Any]
    tok_hi: list[Any]
    tok_lo: list[Any]
    #: entries of the response / attention masks other than 0/1 (0 when checked on the host)
    mask_invalid: Any
    attention_invalid: Any
    #: (B,) each
    prompt_len: Any
    response_len: Any
    seq_score: Any
    seq_reward: Any
    #: with ``group_by=``: per-row (max, min) of advantages, returns[, values], each (B,)
    row_ext: list[Any] | None = None


def _row_extremes_from_keys(keys: np.ndarray, n: np.ndarray, dtype: Any, n_values: int) -> list[Any]:
    """Per-row (max, min) of each value tensor from the fused kernel's keys (NaN rows: both NaN)."""
    values = float_keys_to_values(keys, dtype).astype(np.float64)
    has = n > 0
    out: list[Any] = []
    for c in range(n_values):
        hi, lo = values[:, 2 * c].copy(), values[:, 2 * c + 1].copy()
        nan = np.isnan(hi) | np.isnan(lo)
        hi[nan] = lo[nan] = math.nan
        hi[~has], lo[~has] = -math.inf, math.inf
        out += [hi, lo]
    return out


def _row_pass(view: BatchView, inputs: _Inputs, use_critic: bool, per_row: bool = False) -> _Rows:
    """Token statistics, score/reward sums and lengths per row: the fused kernel where it pays
    (numpy inputs of at least ``FUSED_MIN_ELEMENTS`` tokens, numba installed), else the array API."""
    xp, mask, n_rows = inputs.xp, inputs.response_mask, inputs.n_rows
    on_host = isinstance(mask, np.ndarray)
    kernel = token_rows_kernel() if on_host and mask.size >= FUSED_MIN_ELEMENTS else None
    if kernel is not None and mask.dtype.kind in "biuf":
        given_lengths = view.has("prompt_length") and view.has("response_length")
        if given_lengths:
            prompt_len, response_len, _ = prompt_response_lengths(view)
            attention, split = np.zeros((n_rows, 0), dtype=np.int8), 0
        else:
            attention, split = _checked_attention(view, n_rows)
        extras = (as_float(inputs.scores, xp), as_float(inputs.rewards, xp), attention, split)
        table, tok_hi, tok_lo, mask_invalid, seq, keys = _tokens_fused(
            kernel, inputs.floats, mask, use_critic, extras
        )
        row_ext = (
            _row_extremes_from_keys(keys, table["n"], inputs.floats[0].dtype, len(inputs.floats))
            if per_row
            else None
        )
        if mask_invalid:
            raise_invalid_mask(mask, _RESPONSE_MASK)
        if not given_lengths:
            if seq[:, 4].any():
                raise_invalid_mask(attention, _ATTENTION_MASK)
            prompt_len, response_len = seq[:, 2], seq[:, 3]
        return _Rows(table, tok_hi, tok_lo, 0.0, 0.0, prompt_len, response_len, seq[:, 0], seq[:, 1], row_ext)
    # numpy masks are checked here (an error naming a bad value); torch ones on their device.
    as_bool, n_invalid = mask_and_invalid_count(mask, _RESPONSE_MASK)
    table, tok_hi, tok_lo, row_ext = _tokens_array_api(
        xp, inputs.floats, as_bool, use_critic, on_host, per_row
    )
    prompt_len, response_len, n_att = prompt_response_lengths(view)
    return _Rows(
        table,
        tok_hi,
        tok_lo,
        0.0 if n_invalid is None else n_invalid,
        0.0 if n_att is None else n_att,
        prompt_len,
        response_len,
        xp.sum(as_float(inputs.scores, xp), axis=-1, dtype=xp.float64),
        xp.sum(as_float(inputs.rewards, xp), axis=-1, dtype=xp.float64),
        row_ext,
    )


def _batch_sums(
    view: BatchView,
    inputs: _Inputs,
    rows: _Rows,
    use_critic: bool,
    max_response_length: int | None,
    max_prompt_length: int | None,
    counts: list[tuple[float, float, float, float]],
) -> tuple[list[Any], list[Any], list[Any]]:
    """The batch's sums (:data:`SUM_FIELDS` order), maxima and minima (:data:`EXTREME_FIELDS`).

    ``counts``: (n, sum, max, min) of ``__num_turns__`` and ``tool_call_counts``."""
    xp, table = inputs.xp, rows.table
    f64 = xp.float64
    ret_m2, ret_sq_n = _combine_rows(xp, table["n"], table["ret_sum"], table["ret_m2"])
    val_s, diff_s, diff_m2, diff_sq_n = _critic_sums(xp, table, use_critic)
    prompt_len, response_len = rows.prompt_len, rows.response_len
    non_aborted = response_len != 0
    everyone = xp.ones_like(non_aborted)
    resp_clipped, prompt_clipped = _clipped(view, rows, max_response_length, max_prompt_length)

    def count(b: Any) -> Any:
        return xp.astype(xp.count_nonzero(b), f64)

    score_s, score_hi, score_lo = _seq_stats(xp, rows.seq_score, non_aborted)
    reward_s, reward_hi, reward_lo = _seq_stats(xp, rows.seq_reward, non_aborted)
    resp_s, resp_hi, resp_lo = _seq_stats(xp, response_len, everyone)
    na_s, na_hi, na_lo = _seq_stats(xp, response_len, non_aborted)
    prompt_s, prompt_hi, prompt_lo = _seq_stats(xp, prompt_len, everyone)
    turns, tools = counts
    sums = [
        float(inputs.n_rows),
        count(non_aborted),
        score_s,
        reward_s,
        xp.sum(table["n"]),
        xp.sum(table["adv_sum"]),
        xp.sum(table["ret_sum"]),
        ret_m2,
        ret_sq_n,
        val_s,
        diff_s,
        diff_m2,
        diff_sq_n,
        resp_s,
        count(resp_clipped),
        na_s,
        count(non_aborted & resp_clipped),
        prompt_s,
        count(prompt_clipped),
        turns[0],
        turns[1],
        tools[0],
        tools[1],
        rows.mask_invalid,
        rows.attention_invalid,
    ]
    maxes = [score_hi, reward_hi, *rows.tok_hi, resp_hi, na_hi, prompt_hi, turns[2], tools[2]]
    mins = [score_lo, reward_lo, *rows.tok_lo, resp_lo, na_lo, prompt_lo, turns[3], tools[3]]
    return sums, maxes, mins


def _critic_sums(xp: Any, table: Mapping[str, Any], use_critic: bool) -> tuple[Any, Any, Any, Any]:
    """Sums of the values and of ``returns - values``, and the latter's M2 and ``S**2 / n``."""
    if not use_critic:
        return 0.0, 0.0, 0.0, 0.0
    diff_m2, diff_sq_n = _combine_rows(xp, table["n"], table["diff_sum"], table["diff_m2"])
    return xp.sum(table["val_sum"]), xp.sum(table["diff_sum"]), diff_m2, diff_sq_n


def _clipped(
    view: BatchView, rows: _Rows, max_response_length: int | None, max_prompt_length: int | None
) -> tuple[Any, Any]:
    """Which responses and prompts count as clipped: equal to the padded width (verl), or at
    least the configured limit."""
    response_len, prompt_len = rows.response_len, rows.prompt_len
    if max_response_length is None:
        resp_clipped = response_len == float(response_width(view))
    else:
        resp_clipped = response_len >= float(max_response_length)
    if max_prompt_length is None:
        width = view.tensor("prompts", why="its width is the prompt clip limit").shape[-1]
        prompt_clipped = prompt_len == float(width)
    else:
        prompt_clipped = prompt_len >= float(max_prompt_length)
    return resp_clipped, prompt_clipped


def _checked_attention(view: BatchView, n_rows: int) -> tuple[np.ndarray, int]:
    """The attention mask and its prompt/response split, for the fused kernel (validated)."""
    attention, split = attention_split(view)
    if attention.dtype.kind not in "biuf":
        raise TypeError(f"{_ATTENTION_MASK} must be a bool or 0/1 integer mask; got {describe(attention)}")
    if attention.shape[0] != n_rows:
        raise ValueError(
            f"prompt/response lengths have {attention.shape[0]} rows, the token tensors {n_rows}"
        )
    return attention, split


def _empty(xp: Any, device: Any, options: Mapping[str, Any]) -> Stats:
    """Statistics of a batch with no rows: zero sums, -inf maxima, +inf minima."""
    return Stats.pack(
        "data",
        dict.fromkeys(SUM_FIELDS, 0.0),
        dict.fromkeys(EXTREME_FIELDS, -math.inf),
        dict.fromkeys(EXTREME_FIELDS, math.inf),
        finaliser=_finalize,
        options=options,
        xp=xp,
        device=device,
    )


def _finalize(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """verl's metric dictionary from the host statistics (and each category's, with ``group_by=``)."""
    if "max_categories" in options:
        return finalize_with_categories(
            (s, hi, lo),
            _finalize,
            {"use_critic": options["use_critic"]},
            count="n_samples",
            max_categories=options["max_categories"],
        )
    n, n_na, n_tok = s["n_samples"], s["n_non_aborted"], s["n_tokens"]
    if n == 0:
        raise ValueError(
            "batch is empty: advantages has 0 rows (on every rank, with process_group=); "
            "metrics need at least one sample"
        )
    mean = _mean

    def ext(name: str, count: float) -> tuple[float, float]:
        return _extremes(hi, lo, name, count)

    _warn_empty_sets(n_na, n_tok)
    m: dict[str, float] = {}
    for (k_mean, k_max, k_min), name, total, count in (
        ((K.SCORE_MEAN, K.SCORE_MAX, K.SCORE_MIN), "score", s["score_sum"], n_na),
        ((K.REWARDS_MEAN, K.REWARDS_MAX, K.REWARDS_MIN), "reward", s["reward_sum"], n_na),
        ((K.ADV_MEAN, K.ADV_MAX, K.ADV_MIN), "adv", s["adv_sum"], n_tok),
        ((K.RETURNS_MEAN, K.RETURNS_MAX, K.RETURNS_MIN), "ret", s["ret_sum"], n_tok),
    ):
        m[k_mean] = mean(total, count)
        m[k_max], m[k_min] = ext(name, count)
    if options["use_critic"]:
        m[K.VALUES_MEAN] = mean(s["val_sum"], n_tok)
        m[K.VALUES_MAX], m[K.VALUES_MIN] = ext("val", n_tok)
        m[K.VF_EXPLAINED_VAR] = _explained_variance(s)
    m.update(_length_metrics(s, hi, lo))
    m.update(_count_metrics(s, hi, lo))
    return m


def _warn_empty_sets(n_na: float, n_tok: float) -> None:
    """The ``UndefinedMetricWarning`` of every set that is empty (aborted samples, zero mask)."""
    if n_na == 0:
        warn_undefined(
            "every sample is aborted (response length 0): score, reward and non-aborted length "
            "metrics are NaN",
            stacklevel=None,
        )
    if n_tok == 0:
        warn_undefined(
            "response_mask is all zero: advantage, return and value metrics are NaN", stacklevel=None
        )


def _mean(total: float, count: float) -> float:
    """``total / count``; NaN for an empty set."""
    return total / count if count > 0 else math.nan


def _extremes(hi: dict[str, float], lo: dict[str, float], name: str, count: float) -> tuple[float, float]:
    """``(max, min)`` of ``name``; NaNs for an empty set."""
    return (hi[name], lo[name]) if count > 0 else (math.nan, math.nan)


def _length_metrics(s: dict[str, float], hi: dict[str, float], lo: dict[str, float]) -> dict[str, float]:
    """Response and prompt lengths: means, extremes, clip ratios, the aborted ratio."""
    n, n_na = s["n_samples"], s["n_non_aborted"]
    mean = _mean

    def ext(name: str, count: float) -> tuple[float, float]:
        return _extremes(hi, lo, name, count)

    m: dict[str, float] = {}
    m[K.RESPONSE_LENGTH_MEAN] = mean(s["resp_len_sum"], n)
    m[K.RESPONSE_LENGTH_MAX], m[K.RESPONSE_LENGTH_MIN] = ext("resp_len", n)
    m[K.RESPONSE_LENGTH_CLIP_RATIO] = mean(s["resp_len_clipped"], n)
    m[K.RESPONSE_LENGTH_NON_ABORTED_MEAN] = mean(s["na_resp_len_sum"], n_na)
    m[K.RESPONSE_LENGTH_NON_ABORTED_MAX], m[K.RESPONSE_LENGTH_NON_ABORTED_MIN] = ext("na_resp_len", n_na)
    m[K.RESPONSE_LENGTH_NON_ABORTED_CLIP_RATIO] = mean(s["na_resp_len_clipped"], n_na)
    m[K.RESPONSE_ABORTED_RATIO] = mean(n - n_na, n)
    m[K.PROMPT_LENGTH_MEAN] = mean(s["prompt_len_sum"], n)
    m[K.PROMPT_LENGTH_MAX], m[K.PROMPT_LENGTH_MIN] = ext("prompt_len", n)
    m[K.PROMPT_LENGTH_CLIP_RATIO] = mean(s["prompt_len_clipped"], n)
    return m


def _count_metrics(s: dict[str, float], hi: dict[str, float], lo: dict[str, float]) -> dict[str, float]:
    """``num_turns/*`` and ``tool_call_counts/*`` when every sample carries them, none when none does."""
    n, mean = s["n_samples"], _mean
    m: dict[str, float] = {}
    # verl reports them when the batch carries them, for every sample: statistics of batches with
    # and without them (micro-batches merged, or ranks) would describe only part of the samples.
    for key, count in (("__num_turns__", s["n_turns"]), ("tool_call_counts", s["n_tool_calls"])):
        if 0 < count < n:
            raise ValueError(
                f"batch.non_tensor_batch[{key!r}] is given for {count:g} of {n:g} samples: some merged "
                "batches (or, with process_group=, some ranks) lack it; pass it with every batch or none"
            )
    if s["n_turns"] > 0:
        m[K.NUM_TURNS_MIN], m[K.NUM_TURNS_MAX] = lo["turns"], hi["turns"]
        m[K.NUM_TURNS_MEAN] = mean(s["turns_sum"], s["n_turns"])
    if s["n_tool_calls"] > 0:
        m[K.TOOL_CALL_COUNTS_MIN], m[K.TOOL_CALL_COUNTS_MAX] = lo["tool_calls"], hi["tool_calls"]
        m[K.TOOL_CALL_COUNTS_MEAN] = mean(s["tool_calls_sum"], s["n_tool_calls"])
    return m


def _explained_variance(s: dict[str, float]) -> float:
    """verl's ``1 - Var(returns - values) / (Var(returns) + 1e-5)``, unbiased variances."""
    n = s["n_tokens"]
    if n <= 1:  # torch.var of one element is NaN (n - 1 = 0), so is verl's ratio
        return math.nan
    # M2 of the union (Chan): sum(M2_i) + sum(S_i**2 / n_i) - S**2 / n. The bracket is exactly 0
    # for one batch; merged batches add their between-batch spread.
    var_ret = max(s["ret_m2"] + (s["ret_sq_over_n"] - s["ret_sum"] ** 2 / n), 0.0) / (n - 1)
    var_diff = max(s["diff_m2"] + (s["diff_sq_over_n"] - s["diff_sum"] ** 2 / n), 0.0) / (n - 1)
    return 1.0 - var_diff / (var_ret + 1e-5)


def _optional_keys(batch: Any) -> dict[str, Any]:
    """The optional non-tensor keys the ranks must share; an empty shard matches any set."""
    view = as_batch(batch)
    empty = view.tensor("advantages").shape[0] == 0
    keys = tuple(k for k in _OPTIONAL_KEYS if k in view.non_tensors)
    return {"optional non-tensor keys": ANY if empty else keys}


@metrics_from(data_statistics, agree_on=_optional_keys)
def compute_data_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    batch: Any,
    use_critic: bool = True,
    *,
    max_response_length: int | None = None,
    max_prompt_length: int | None = None,
    group_by: Any = None,
    group_name: str | None = None,
    split_by_outcome: bool = False,
    score_threshold: float | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    process_group: Any = None,
) -> dict[str, float]:
    """Reward, advantage, return, value and length statistics of a training batch.

    Same keys and values as ``verl.trainer.ppo.metric_utils.compute_data_metrics``. The keys
    are verl's fixed names in several groups (``critic/``, ``response_length/`` ...), so there
    is no ``prefix=``.

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        Needs ``token_level_scores``, ``token_level_rewards``, ``advantages``, ``returns``
        (and ``values`` when ``use_critic``), all ``(B, R)``; ``response_mask`` ``(B, R)`` (else
        the last ``R`` columns of ``attention_mask``); ``prompts`` ``(B, P)``, ``responses``
        ``(B, R)`` and ``attention_mask`` ``(B, P + R)``, or ``prompt_length`` and
        ``response_length`` ``(B,)``. Optional non-tensor ``__num_turns__`` and
        ``tool_call_counts`` (1-d, one number per sample). numpy or torch (CPU or CUDA), any
        real dtype (statistics are computed in at least float32, sums in float64; complex
        tensors are refused); masks bool or 0/1 integers.
    use_critic : bool
        Also report ``critic/values/*`` and ``critic/vf_explained_var``.
    max_response_length, max_prompt_length : int, optional, keyword-only
        Count a response (prompt) as clipped when its length reaches this configured limit
        (an integer >= 1).
        Default: equal to the padded width, as verl does (with dynamic padding verl's clip
        ratio can then never read 0).
    group_by : str or array of shape (B,), optional, keyword-only
        Also report every metric per category: the name of a per-sample label column of the
        batch (``"data_source"`` in verl's non-tensor batch, any column of a dict or
        TensorDict), or the labels themselves (strings, numbers, booleans). Category ``c``'s
        metrics are those of its samples alone, under ``keys.category_key(key, group, c)``
        (``by_data_source/gsm8k/critic/score/mean``; ``/``, spaces and other separators
        ``%XX``-escaped). The plain keys stay as they are.
    group_name : str, optional, keyword-only
        The group's name in the keys (default: the column's name, ``"group"`` for labels).
    split_by_outcome : bool, keyword-only
        Also report every metric for the correct and the incorrect samples
        (``by_outcome/correct/...``, ``by_outcome/incorrect/...``), by ``acc`` in the batch
        (correct where ``acc > 0.5``).
    score_threshold : float, optional, keyword-only
        Split by outcome on the score instead: correct where the sample's score (its sum of
        ``token_level_scores``) is at least this.
    max_categories : int, keyword-only
        At most this many categories per group (default 64): the least frequent are reported
        together as ``<other>`` (key token ``%other``), with one ``RLMetricsWarning``. Applied
        when the metrics are finalised, to the union of merged parts and ranks (the most
        samples there stay, ties by name): the statistics keep every category exactly, so any
        split gives the metrics of the whole batch. A hard cap of
        ``training.categories.EXACT_CATEGORIES`` (4096, or ``max_categories`` when larger)
        categories per call bounds the statistics' size; beyond it the call folds the rest
        already, with a warning that merged per-category metrics are then approximate.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' batches: one tiny
        agreement collective, then two packed all-reduces (a rank with an empty shard still
        takes part). A rank whose input is bad makes every rank raise the same error, naming
        that rank (``"rank 2: batch is missing the tensor 'values' (use_critic=True) ..."``);
        ranks with different ``use_critic``, limits, or optional keys raise the same
        ``ValueError`` naming what differs. Ranks (and merged parts) that saw different
        categories reduce the union of their categories, agreed in the same step.

    Returns
    -------
    dict[str, float]
        ``critic/score|rewards|advantages|returns|values/{mean,max,min}``,
        ``critic/vf_explained_var``, ``response_length/{mean,max,min,clip_ratio}``,
        ``response_length_non_aborted/*``, ``response/aborted_ratio``,
        ``prompt_length/{mean,max,min,clip_ratio}``, and ``num_turns/*`` and
        ``tool_call_counts/*`` when present. A statistic over an empty set (every response
        aborted, an all-zero mask) is NaN with an ``UndefinedMetricWarning``.
    """
    ...  # @metrics_from computes: the statistics, their all-reduce, finalize
