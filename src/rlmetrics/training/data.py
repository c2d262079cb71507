"""Batch data metrics: verl's ``compute_data_metrics``, computed as mergeable sufficient statistics.

Every statistic is first reduced to a sum, a max or a min (:class:`DataStats`), which

* reach the host in one transfer per call (verl calls ``.item()`` about thirty times), and
* merge exactly across data-parallel ranks: three all-reduces (sum, max, min) give the metrics
  of the union of the shards (see ``process_group=``).

Token tensors are scanned in row blocks small enough to stay in the CPU cache, so that the
several reductions each tensor needs (sum, max, min, sum of squares) cost about one read of it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    array_namespace,
    as_float,
    check_same_shape,
    describe,
    is_torch_array,
    mask_and_invalid_count,
    raise_invalid_mask,
    vectors_to_host,
)
from rlmetrics._core.batch import BatchView, as_batch
from rlmetrics._core.kernels import ROW_SUM_FIELDS, float_keys_to_values, token_rows_kernel
from rlmetrics._core.lengths import attention_split, prompt_response_lengths, response_width
from rlmetrics._core.threads import map_row_blocks, pool

__all__ = ["DataStats", "compute_data_metrics", "data_statistics", "finalize_data_metrics"]

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
    "n_invalid_mask_entries",
    "n_invalid_attention_entries",
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


@dataclass
class DataStats:
    """Sufficient statistics of a batch's data metrics.

    Attributes
    ----------
    sums : array of shape ``(len(SUM_FIELDS),)``, float64
        Counts and sums; merge by addition.
    maxes, mins : arrays of shape ``(len(EXTREME_FIELDS),)``, float64
        Extremes (``-inf``/``+inf`` when empty); merge by max/min.
    """

    sums: Any
    maxes: Any
    mins: Any

    def to_host(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The three vectors as numpy float64 arrays, in one device-to-host copy."""
        sums, maxes, mins = vectors_to_host(self.sums, self.maxes, self.mins)
        return sums, maxes, mins

    @classmethod
    def merge(cls, parts: list[DataStats]) -> DataStats:
        """Statistics of the union of the batches that ``parts`` describe (host arrays)."""
        hosts = [p.to_host() for p in parts]
        return cls(
            sums=np.sum([h[0] for h in hosts], axis=0),
            maxes=np.max([h[1] for h in hosts], axis=0),
            mins=np.min([h[2] for h in hosts], axis=0),
        )


# Elements per block when scanning token tensors on the CPU: a float32 block of each tensor and
# its temporaries stay in L2, and blocks are spread over a few threads (numpy releases the GIL).
_BLOCK_ELEMENTS = 1 << 18

# Layout of one block's token statistics.
_TOKEN_SUMS = (
    "n",
    "adv_sum",
    "ret_sum",
    "val_sum",
    "diff_sum",
    "ret_m2",
    "ret_sq_over_n",
    "diff_m2",
    "diff_sq_over_n",
)
_TOKEN_EXTREMES = ("adv", "ret", "val")


def _centred(xp: Any, masked: Any, mask_f: Any, total: Any, n: Any, shift: Any) -> tuple[Any, Any]:
    """(M2, S**2/n) of the masked values: M2 is the sum of squared deviations from their mean.

    ``masked`` holds the values where the mask is set and 0 elsewhere; the squares are taken
    about ``shift``, one of the values, which avoids the cancellation of a raw sum of squares.
    Both results merge across blocks and ranks by addition:
    ``M2_all = sum(M2_i) + sum(S_i**2/n_i) - S_all**2/n_all`` (Chan et al.).
    """
    f64 = xp.float64
    # In float64: the difference of two float32 values is then exact.
    centred = xp.astype(masked, f64) - xp.astype(shift, f64) * xp.astype(mask_f, f64)
    s_c = xp.sum(xp.astype(xp.sum(centred, axis=-1), f64))
    sq = xp.sum(xp.astype(xp.sum(centred * centred, axis=-1), f64))
    safe_n = xp.where(n > 0, n, xp.ones_like(n))
    m2 = xp.where(n > 0, sq - s_c * s_c / safe_n, xp.zeros_like(n))
    return m2, xp.where(n > 0, total * total / safe_n, xp.zeros_like(n))


def _token_block(
    xp: Any, tensors: list[Any], mask: Any, mask_f: Any, use_critic: bool, *, exact: bool
) -> tuple[list, list, list]:
    """Token statistics of one block of rows: (sums in ``_TOKEN_SUMS`` order, maxes, mins).

    With ``exact=False``, branch-free kernels whose cost does not depend on the mask's pattern
    (numpy's masked ``where`` is slow on scattered masks): the values times the float mask give
    the masked sums, and blending the masked-out slots with one valid value
    (``x * m + v * (1 - m)``) gives max and min -- exact unless a masked-out slot holds inf or
    NaN. ``exact=True`` selects with ``where`` instead (the accelerator path, and the numpy
    retry when the fast pass saw non-finite values).
    """
    f64 = xp.float64
    row_counts = xp.sum(mask_f, axis=-1)
    n = xp.sum(xp.astype(row_counts, f64))
    # One valid position (any position when there is none: the results are then unused).
    row = xp.argmax(xp.astype(row_counts > 0, xp.int8))
    col = xp.argmax(mask_f[row, ...])
    inverse = 1 - mask_f
    masked, sums, hi, lo = [], [], [], []
    for x in tensors:
        fill = x[row, col]
        if exact:
            xm = xp.where(mask, x, xp.zeros_like(fill))
            blended = xp.where(mask, x, fill)
        else:
            xm = x * mask_f
            blended = xm + fill * inverse
        masked.append(xm)
        sums.append(xp.sum(xp.sum(xm, axis=-1, dtype=f64)))
        hi.append(xp.astype(xp.max(blended), f64))
        lo.append(xp.astype(xp.min(blended), f64))
    ret_m2, ret_sq_n = _centred(xp, masked[1], mask_f, sums[1], n, tensors[1][row, col])
    zero = xp.zeros_like(n)
    if use_critic:
        diff = xp.astype(masked[1], f64) - xp.astype(masked[2], f64)  # exact in float64
        diff_sum = xp.sum(xp.astype(xp.sum(diff, axis=-1), f64))
        diff_m2, diff_sq_n = _centred(xp, diff, mask_f, diff_sum, n, diff[row, col])
        val_sum = sums[2]
    else:
        val_sum = diff_sum = diff_m2 = diff_sq_n = zero
        hi.append(xp.asarray(-math.inf, dtype=f64))
        lo.append(xp.asarray(math.inf, dtype=f64))
    return [n, sums[0], sums[1], val_sum, diff_sum, ret_m2, ret_sq_n, diff_m2, diff_sq_n], hi, lo


def _chan_merge(ns: np.ndarray, sums: np.ndarray, m2s: np.ndarray) -> tuple[float, float]:
    """Merge per-part (n, sum, M2) into (M2, S**2/N) without cancellation (Chan et al.).

    ``M2 = sum(M2_i) + sum(n_i * (mean_i - mean)**2)``: the deviations of the part means are
    taken directly, so a large common offset does not swamp the spread.
    """
    total_n = float(ns.sum())
    if total_n == 0:
        return 0.0, 0.0
    total = float(sums.sum())
    mean = total / total_n
    has = ns > 0
    part_means = np.where(has, sums / np.where(has, ns, 1.0), mean)
    m2 = float(m2s.sum() + np.sum(ns * (part_means - mean) ** 2))
    return m2, total * total / total_n


def _merge_token_blocks(parts: list[tuple[list, list, list]]) -> tuple[list[float], list[float], list[float]]:
    """Combine host blocks: sums add, extremes max/min; empty blocks contribute nothing."""
    table = np.array([[float(v) for v in p[0]] for p in parts])
    sums = table.sum(axis=0)
    col = dict(zip(_TOKEN_SUMS, table.T))
    sums[_TOKEN_SUMS.index("ret_m2")], sums[_TOKEN_SUMS.index("ret_sq_over_n")] = _chan_merge(
        col["n"], col["ret_sum"], col["ret_m2"]
    )
    sums[_TOKEN_SUMS.index("diff_m2")], sums[_TOKEN_SUMS.index("diff_sq_over_n")] = _chan_merge(
        col["n"], col["diff_sum"], col["diff_m2"]
    )
    keep = [p for p in parts if float(p[0][0]) > 0]
    maxes = np.max([[float(v) for v in p[1]] for p in keep], axis=0) if keep else np.full(3, -np.inf)
    mins = np.min([[float(v) for v in p[2]] for p in keep], axis=0) if keep else np.full(3, np.inf)
    return list(sums), list(maxes), list(mins)


def _token_stats_host(
    tensors: list[np.ndarray], mask: np.ndarray, use_critic: bool
) -> tuple[list, list, list]:
    """Token statistics of numpy arrays: the fused numba kernel, else numpy in threaded row blocks.

    Returns (sums in ``_TOKEN_SUMS`` order plus the invalid-mask count, maxes, mins).
    """
    kernel = token_rows_kernel()
    if kernel is not None:
        return _token_stats_fused(kernel, tensors, mask, use_critic)
    mask, _ = mask_and_invalid_count(mask, "batch['response_mask']")  # numpy: checked here
    n_rows, width = mask.shape
    step = max(1, _BLOCK_ELEMENTS // max(width, 1))
    work = tensors[0].dtype

    def run(start: int) -> tuple[list, list, list]:
        rows = slice(start, start + step)
        m = mask[rows]
        return _token_block(np, [x[rows] for x in tensors], m, m.astype(work), use_critic, exact=exact)

    starts = range(0, n_rows, step)
    exact = False
    parts = [run(0)] if len(starts) == 1 else list(pool().map(run, starts))
    sums, maxes, mins = _merge_token_blocks(parts)
    if not all(map(math.isfinite, [*sums, *maxes[: len(tensors)], *mins[: len(tensors)]])) and sums[0] > 0:
        # inf/NaN somewhere: the multiply/blend pass is not exact there; select with where instead.
        exact = True
        parts = [run(0)] if len(starts) == 1 else list(pool().map(run, starts))
        sums, maxes, mins = _merge_token_blocks(parts)
    return [*sums, 0.0], maxes, mins


def _token_stats_fused(
    kernel: Any,
    tensors: list[np.ndarray],
    mask: np.ndarray,
    use_critic: bool,
    extras: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None = None,
) -> tuple:
    """Token statistics from the fused per-row kernel, combined over rows in float64.

    ``extras`` = (scores, rewards, attention_mask, split) adds the per-row sequence table
    (:data:`ROW_SEQ_FIELDS`) as a fourth result, computed in the same pass.
    """
    if mask.dtype.kind not in "biuf":
        raise TypeError(f"batch['response_mask'] must be a bool or 0/1 integer mask; got {describe(mask)}")
    adv, ret = tensors[0], tensors[1]
    val = tensors[2] if use_critic else ret
    dtype = adv.dtype
    int_type = np.int32 if dtype.itemsize == 4 else np.int64
    bits = [
        x.view(int_type) if x.flags.c_contiguous else np.ascontiguousarray(x).view(int_type)
        for x in (adv, ret, val)
    ]
    sign_shift = 8 * dtype.itemsize - 1
    magnitude = (1 << sign_shift) - 1
    n_rows = mask.shape[0]
    nothing = np.zeros((n_rows, 0), dtype=np.float32)
    scores, rewards, attention, split = extras if extras is not None else (nothing, nothing, nothing, 0)
    sums, keys, seq = map_row_blocks(
        lambda sl: kernel(
            adv[sl],
            ret[sl],
            val[sl],
            bits[0][sl],
            bits[1][sl],
            bits[2][sl],
            mask[sl],
            use_critic,
            sign_shift,
            magnitude,
            scores[sl],
            rewards[sl],
            attention[sl],
            split,
        ),
        mask.shape,
    )
    col = dict(zip(ROW_SUM_FIELDS, sums.T))
    n_i = col["n"]
    has = n_i > 0
    ret_m2, ret_sq_n = _chan_merge(n_i, col["ret_sum"], col["ret_m2"])
    diff_m2, diff_sq_n = _chan_merge(n_i, col["diff_sum"], col["diff_m2"]) if use_critic else (0.0, 0.0)
    totals = {name: float(col[f"{name}_sum"].sum()) for name in ("adv", "ret", "val", "diff")}
    names = ["adv", "ret", "val"] if use_critic else ["adv", "ret"]
    maxes, mins = [-math.inf] * 3, [math.inf] * 3
    if has.any():
        hi = float_keys_to_values(keys[has].max(axis=0), dtype)
        lo = float_keys_to_values(keys[has].min(axis=0), dtype)
        for c, name in enumerate(names):
            nan = math.isnan(totals[name])  # a NaN among the valid values: NaN extremes, as torch gives
            maxes[c] = math.nan if nan else float(hi[2 * c])
            mins[c] = math.nan if nan else float(lo[2 * c + 1])
    out = [
        float(n_i.sum()),
        totals["adv"],
        totals["ret"],
        totals["val"] if use_critic else 0.0,
        totals["diff"] if use_critic else 0.0,
        ret_m2,
        ret_sq_n,
        diff_m2,
        diff_sq_n,
        float(col["n_invalid"].sum()),
    ]
    if extras is not None:
        return out, maxes, mins, seq
    return out, maxes, mins


def _fused_rows(
    kernel: Any,
    view: BatchView,
    floats: list[np.ndarray],
    response_mask: np.ndarray,
    scores: np.ndarray,
    rewards: np.ndarray,
    use_critic: bool,
) -> tuple:
    """Everything per row in one kernel pass: token statistics, score/reward sums, lengths."""
    n_rows = response_mask.shape[0]
    given_lengths = view.has("prompt_length") and view.has("response_length")
    if given_lengths:
        prompt_len, response_len, _ = prompt_response_lengths(view)
        attention, split = np.zeros((n_rows, 0), dtype=np.int8), 0
    else:
        attention, split = attention_split(view)
        if attention.dtype.kind not in "biuf":
            raise TypeError(
                f"batch['attention_mask'] must be a bool or 0/1 integer mask; got {describe(attention)}"
            )
        if attention.shape[0] != n_rows:
            raise ValueError(
                f"prompt/response lengths have {attention.shape[0]} rows, the token tensors {n_rows}"
            )
    sums, maxes, mins, seq = _token_stats_fused(
        kernel, floats, response_mask, use_critic, (scores, rewards, attention, split)
    )
    if not given_lengths:
        if seq[:, 4].any():
            raise_invalid_mask(attention, "batch['attention_mask']")
        prompt_len, response_len = seq[:, 2], seq[:, 3]
    return sums, maxes, mins, seq[:, 0], seq[:, 1], prompt_len, response_len


def _seq_stats(xp: Any, x: Any, keep: Any) -> tuple[Any, Any, Any]:
    """(sum, max, min) of ``x`` over ``keep`` as float64 0-d arrays (max=-inf, min=inf if empty)."""
    x64 = xp.astype(x, xp.float64)
    total = xp.sum(xp.where(keep, x64, xp.zeros_like(x64)))
    hi = xp.max(xp.where(keep, x64, xp.full_like(x64, -math.inf)))
    lo = xp.min(xp.where(keep, x64, xp.full_like(x64, math.inf)))
    return total, hi, lo


def _host_count_stats(values: Any, name: str) -> tuple[float, float, float, float]:
    """(n, sum, max, min) of a host array such as ``__num_turns__`` (zeros and infinities if absent)."""
    if values is None:
        return 0.0, 0.0, -math.inf, math.inf
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"batch.non_tensor_batch[{name!r}] must hold numbers; got dtype {arr.dtype}"
            ) from None
    if arr.size == 0:
        return 0.0, 0.0, -math.inf, math.inf
    return float(arr.size), float(arr.sum(dtype=np.float64)), float(arr.max()), float(arr.min())


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


# CPU torch tensors go through the host kernels (zero-copy numpy views). Tests turn this off to
# run the array-API path, the one CUDA tensors take, on the CPU.
_CPU_TORCH_VIA_NUMPY = True


def _cpu_view(view: BatchView) -> BatchView:
    """The batch with CPU torch tensors seen as numpy arrays (zero-copy; bf16/fp16 -> float32,
    as numpy float16 arrays).

    The CPU kernels are numpy's, spread over threads; CUDA tensors stay where they are.
    """
    if not _CPU_TORCH_VIA_NUMPY:
        return view
    converted: dict[str, Any] = {}
    for key in _DATA_KEYS:
        if not view.has(key):
            continue
        x = view.tensor(key)
        if is_torch_array(x) and x.device.type == "cpu":
            import torch

            x = x.detach()
            if x.dtype in (torch.bfloat16, torch.float16):
                x = x.float()
            x = x.numpy()
        elif isinstance(x, np.ndarray) and x.dtype == np.float16:
            x = x.astype(np.float32)  # statistics in at least float32 (and numba has no float16)
        converted[key] = x
    return BatchView(tensors=converted, non_tensors=view.non_tensors, meta_info=view.meta_info, arg=view.arg)


def data_statistics(
    batch: Any,
    use_critic: bool = True,
    *,
    max_response_length: int | None = None,
    max_prompt_length: int | None = None,
) -> DataStats:
    """Sufficient statistics of :func:`compute_data_metrics` for one batch (or one shard).

    See :func:`compute_data_metrics` for the arguments. The result stays on the batch's device
    until :meth:`DataStats.to_host`.
    """
    view = _cpu_view(as_batch(batch))
    scores = view.tensor("token_level_scores")
    rewards = view.tensor("token_level_rewards")
    advantages = view.tensor("advantages")
    returns = view.tensor("returns")
    xp = array_namespace(scores, rewards, advantages, returns)
    if advantages.ndim != 2:
        raise ValueError(f"batch['advantages'] must have shape (B, R); got {describe(advantages)}")
    n_rows = advantages.shape[0]
    if n_rows == 0:
        raise ValueError("batch is empty: advantages has 0 rows; metrics need at least one sample")
    if view.has("response_mask"):
        response_mask = view.tensor("response_mask")
    else:
        width = response_width(view)
        response_mask = view.tensor("attention_mask", why="response_mask is derived from it")[:, -width:]
    token_tensors = [advantages, returns]
    names = ["advantages", "returns"]
    if use_critic:
        token_tensors.append(view.tensor("values", why="use_critic=True"))
        names.append("values")
    for name, x in zip(names, token_tensors):
        check_same_shape(x, response_mask, f"batch[{name!r}]", "batch['response_mask']")
    for name, x in (("token_level_scores", scores), ("token_level_rewards", rewards)):
        if x.ndim != 2 or x.shape[0] != n_rows:
            raise ValueError(
                f"batch[{name!r}] must have shape (B, R) with B = {n_rows} rows like batch['advantages']; "
                f"got {describe(x)}"
            )
    if is_torch_array(response_mask):
        mask, mask_invalid = mask_and_invalid_count(response_mask, "batch['response_mask']")

    # Token-level inputs in a common float dtype (>= float32).
    floats = [as_float(x, xp) for x in token_tensors]
    work = xp.float64 if any(x.dtype == xp.float64 for x in floats) else xp.float32
    floats = [xp.astype(x, work) if x.dtype != work else x for x in floats]
    kernel = None if is_torch_array(response_mask) else token_rows_kernel()
    if kernel is not None and response_mask.dtype.kind in "biuf":
        # One fused pass per row over every input: token statistics, score/reward sums, lengths.
        tok_sums, tok_hi, tok_lo, seq_score, seq_reward, prompt_len, response_len = _fused_rows(
            kernel, view, floats, response_mask, as_float(scores, xp), as_float(rewards, xp), use_critic
        )
        attention_invalid = None
        mask_invalid = tok_sums.pop()
    else:
        prompt_len, response_len, attention_invalid = prompt_response_lengths(view)
        seq_score = xp.sum(as_float(scores, xp), axis=-1)
        seq_reward = xp.sum(as_float(rewards, xp), axis=-1)
        if is_torch_array(response_mask):
            tok_sums, tok_hi, tok_lo = _token_block(
                xp, floats, mask, xp.astype(mask, work), use_critic, exact=True
            )
        else:
            tok_sums, tok_hi, tok_lo = _token_stats_host(floats, response_mask, use_critic)
            mask_invalid = tok_sums.pop()
    if not is_torch_array(response_mask) and mask_invalid:
        raise_invalid_mask(response_mask, "batch['response_mask']")
    n_tok, adv_s, ret_s, val_s, diff_s, ret_m2, ret_sq_n, diff_m2, diff_sq_n = tok_sums
    if prompt_len.shape[0] != n_rows:
        raise ValueError(
            f"prompt/response lengths have {prompt_len.shape[0]} rows, the token tensors {n_rows}"
        )

    # Sequence-level statistics, over arrays of shape (B,).
    non_aborted = response_len != 0
    everyone = xp.ones_like(non_aborted)
    r_limit = float(response_width(view) if max_response_length is None else max_response_length)
    if max_prompt_length is None:
        p_limit = float(view.tensor("prompts", why="its width is the prompt clip limit").shape[-1])
    else:
        p_limit = float(max_prompt_length)
    # Clip ratios: equal to the padded width (verl), or at least the configured limit.
    resp_clipped = (response_len == r_limit) if max_response_length is None else (response_len >= r_limit)
    prompt_clipped = (prompt_len == p_limit) if max_prompt_length is None else (prompt_len >= p_limit)
    f64 = xp.float64
    dev = getattr(advantages, "device", None)

    def count(b: Any) -> Any:
        return xp.astype(xp.count_nonzero(b), f64)

    score_s, score_hi, score_lo = _seq_stats(xp, seq_score, non_aborted)
    reward_s, reward_hi, reward_lo = _seq_stats(xp, seq_reward, non_aborted)
    resp_s, resp_hi, resp_lo = _seq_stats(xp, response_len, everyone)
    na_s, na_hi, na_lo = _seq_stats(xp, response_len, non_aborted)
    prompt_s, prompt_hi, prompt_lo = _seq_stats(xp, prompt_len, everyone)

    turns = _host_count_stats(view.non_tensor("__num_turns__"), "__num_turns__")
    tools = _host_count_stats(view.non_tensor("tool_call_counts"), "tool_call_counts")

    def vec(items: list[Any]) -> Any:
        return xp.stack([xp.reshape(xp.asarray(v, dtype=f64, device=dev), ()) for v in items])

    sums = vec(
        [
            float(n_rows),
            count(non_aborted),
            score_s,
            reward_s,
            n_tok,
            adv_s,
            ret_s,
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
            0.0 if mask_invalid is None else mask_invalid,
            0.0 if attention_invalid is None else attention_invalid,
        ]
    )
    maxes = vec([score_hi, reward_hi, *tok_hi, resp_hi, na_hi, prompt_hi, turns[2], tools[2]])
    mins = vec([score_lo, reward_lo, *tok_lo, resp_lo, na_lo, prompt_lo, turns[3], tools[3]])
    return DataStats(sums=sums, maxes=maxes, mins=mins)


def finalize_data_metrics(
    stats: DataStats,
    use_critic: bool = True,
    *,
    has_num_turns: bool = False,
    has_tool_call_counts: bool = False,
) -> dict[str, float]:
    """Turn :class:`DataStats` into verl's metric dictionary (one host transfer)."""
    sums_a, maxes_a, mins_a = stats.to_host()
    s = dict(zip(SUM_FIELDS, sums_a.tolist()))
    hi = dict(zip(EXTREME_FIELDS, maxes_a.tolist()))
    lo = dict(zip(EXTREME_FIELDS, mins_a.tolist()))
    nan = math.nan
    n, n_na, n_tok = s["n_samples"], s["n_non_aborted"], s["n_tokens"]
    for name, field in (
        ("response_mask", "n_invalid_mask_entries"),
        ("attention_mask", "n_invalid_attention_entries"),
    ):
        if s[field] > 0:
            raise ValueError(f"batch[{name!r}] must hold only 0 and 1; {int(s[field])} entries are not")

    def mean(total: float, count: float) -> float:
        return total / count if count > 0 else nan

    def ext(name: str, count: float) -> tuple[float, float]:
        return (hi[name], lo[name]) if count > 0 else (nan, nan)

    if n_na == 0:
        _undefined(
            "every sample is aborted (response length 0): score, reward and non-aborted length "
            "metrics are NaN"
        )
    if n_tok == 0:
        _undefined("response_mask is all zero: advantage, return and value metrics are NaN")

    m: dict[str, float] = {}
    for (k_mean, k_max, k_min), name, total, count in (
        ((K.SCORE_MEAN, K.SCORE_MAX, K.SCORE_MIN), "score", s["score_sum"], n_na),
        ((K.REWARDS_MEAN, K.REWARDS_MAX, K.REWARDS_MIN), "reward", s["reward_sum"], n_na),
        ((K.ADV_MEAN, K.ADV_MAX, K.ADV_MIN), "adv", s["adv_sum"], n_tok),
        ((K.RETURNS_MEAN, K.RETURNS_MAX, K.RETURNS_MIN), "ret", s["ret_sum"], n_tok),
    ):
        m[k_mean] = mean(total, count)
        m[k_max], m[k_min] = ext(name, count)
    if use_critic:
        m[K.VALUES_MEAN] = mean(s["val_sum"], n_tok)
        m[K.VALUES_MAX], m[K.VALUES_MIN] = ext("val", n_tok)
        m[K.VF_EXPLAINED_VAR] = _explained_variance(s)
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
    if has_num_turns:
        m[K.NUM_TURNS_MIN], m[K.NUM_TURNS_MAX] = lo["turns"], hi["turns"]
        m[K.NUM_TURNS_MEAN] = mean(s["turns_sum"], s["n_turns"])
    if has_tool_call_counts:
        m[K.TOOL_CALL_COUNTS_MIN], m[K.TOOL_CALL_COUNTS_MAX] = lo["tool_calls"], hi["tool_calls"]
        m[K.TOOL_CALL_COUNTS_MEAN] = mean(s["tool_calls_sum"], s["n_tool_calls"])
    return m


def _explained_variance(s: dict[str, float]) -> float:
    """verl's ``1 - Var(returns - values) / (Var(returns) + 1e-5)``, unbiased variances."""
    n = s["n_tokens"]
    if n == 0:
        return math.nan
    if n == 1:  # torch.var of one element is NaN (n - 1 = 0), so is verl's ratio.
        return math.nan
    # Merged centred second moments (Chan et al.): M2 = sum(M2_i) + sum(S_i**2/n_i) - S**2/n.
    # The bracket is exactly 0 for one batch; merged shards add their between-shard spread.
    var_ret = max(s["ret_m2"] + (s["ret_sq_over_n"] - s["ret_sum"] ** 2 / n), 0.0) / (n - 1)
    var_diff = max(s["diff_m2"] + (s["diff_sq_over_n"] - s["diff_sum"] ** 2 / n), 0.0) / (n - 1)
    return 1.0 - var_diff / (var_ret + 1e-5)


def _undefined(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def compute_data_metrics(
    batch: Any,
    use_critic: bool = True,
    *,
    max_response_length: int | None = None,
    max_prompt_length: int | None = None,
    process_group: Any = None,
) -> dict[str, float]:
    """Reward, advantage, return, value and length statistics of a training batch.

    Same keys and values as ``verl.trainer.ppo.metric_utils.compute_data_metrics``.

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        Needs ``token_level_scores``, ``token_level_rewards``, ``advantages``, ``returns``
        (and ``values`` when ``use_critic``), all ``(B, R)``; ``response_mask`` ``(B, R)`` (else
        the last ``R`` columns of ``attention_mask``); ``prompts`` ``(B, P)``, ``responses``
        ``(B, R)`` and ``attention_mask`` ``(B, P + R)``, or ``prompt_length`` and
        ``response_length`` ``(B,)``. Optional non-tensor ``__num_turns__`` and
        ``tool_call_counts``. numpy or torch (CPU or CUDA), any float dtype (statistics are
        computed in at least float32, sums in float64); masks bool or 0/1 integers.
    use_critic : bool
        Also report ``critic/values/*`` and ``critic/vf_explained_var``.
    max_response_length, max_prompt_length : int, optional, keyword-only
        Count a response (prompt) as clipped when its length reaches this configured limit.
        Default: equal to the padded width, as verl does (with dynamic padding verl's clip
        ratio can then never read 0).
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' batches.

    Returns
    -------
    dict[str, float]
        ``critic/score|rewards|advantages|returns|values/{mean,max,min}``,
        ``critic/vf_explained_var``, ``response_length/{mean,max,min,clip_ratio}``,
        ``response_length_non_aborted/*``, ``response/aborted_ratio``,
        ``prompt_length/{mean,max,min,clip_ratio}``, and ``num_turns/*`` and
        ``tool_call_counts/*`` when present. A statistic over an empty set (every response
        aborted, an all-zero mask) is NaN with a ``RuntimeWarning``.
    """
    view = as_batch(batch)
    if process_group is not None:
        from rlmetrics._core.comm import all_reduce_data_stats, empty_data_stats

        adv = view.tensor("advantages")
        if adv.shape[0] == 0:
            # An empty shard still joins the collectives (raising would leave the others waiting).
            on_device = is_torch_array(adv) and adv.device.type != "cpu"
            stats = empty_data_stats(adv.device if on_device else None)
        else:
            stats = data_statistics(
                view, use_critic, max_response_length=max_response_length, max_prompt_length=max_prompt_length
            )
        stats = all_reduce_data_stats(stats, process_group)
    else:
        stats = data_statistics(
            view, use_critic, max_response_length=max_response_length, max_prompt_length=max_prompt_length
        )
    return finalize_data_metrics(
        stats,
        use_critic,
        has_num_turns=view.non_tensor("__num_turns__") is not None,
        has_tool_call_counts=view.non_tensor("tool_call_counts") is not None,
    )
