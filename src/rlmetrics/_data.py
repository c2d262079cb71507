"""Batch data metrics: verl's ``compute_data_metrics``, computed as mergeable sufficient statistics.

Every statistic is first reduced to a sum, a max or a min (:class:`DataStats`), which

* reach the host in one transfer per call (verl calls ``.item()`` about thirty times), and
* merge exactly across data-parallel ranks: three all-reduces (sum, max, min) give the metrics
  of the union of the shards (see ``process_group=``).

Token tensors are scanned in row blocks small enough to stay in the CPU cache, so that the
several reductions each tensor needs (sum, max, min, sum of squares) cost about one read of it.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _keys as K
from ._array import array_namespace, as_float, check_mask, check_same_shape, describe, is_torch_array
from ._batch import as_batch
from ._lengths import prompt_response_lengths, response_width

__all__ = ["DataStats", "compute_data_metrics", "data_statistics", "finalize_data_metrics"]

logger = logging.getLogger(__name__)

# Names of the statistics, by how they merge. The order is the layout of the packed vectors.
SUM_FIELDS = (
    "n_samples",
    "n_non_aborted",
    "score_sum",
    "reward_sum",
    "n_tokens",
    "adv_sum",
    "ret_sum",
    "ret_sumsq",
    "val_sum",
    "diff_sum",
    "diff_sumsq",
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

# Rows per block when scanning token tensors on the CPU: 2**17 elements per block keeps a
# float32 block of each tensor in L2.
_BLOCK_ELEMENTS = 1 << 17


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
        if is_torch_array(self.sums):
            import torch

            packed = torch.cat([self.sums, self.maxes, self.mins]).detach().cpu().numpy()
        else:
            packed = np.concatenate([np.asarray(self.sums), np.asarray(self.maxes), np.asarray(self.mins)])
        n_s, n_e = len(SUM_FIELDS), len(EXTREME_FIELDS)
        return packed[:n_s], packed[n_s : n_s + n_e], packed[n_s + n_e :]

    @classmethod
    def merge(cls, parts: list[DataStats]) -> DataStats:
        """Statistics of the union of the batches that ``parts`` describe (host arrays)."""
        hosts = [p.to_host() for p in parts]
        return cls(
            sums=np.sum([h[0] for h in hosts], axis=0),
            maxes=np.max([h[1] for h in hosts], axis=0),
            mins=np.min([h[2] for h in hosts], axis=0),
        )


def _masked_token_stats_numpy(tensors: list[np.ndarray], mask: np.ndarray, use_critic: bool) -> list[float]:
    """Token sums/extremes for numpy inputs, block by block with ``where=`` reductions."""
    adv, ret = tensors[0], tensors[1]
    val = tensors[2] if use_critic else None
    n_rows, width = mask.shape
    step = max(1, _BLOCK_ELEMENTS // max(width, 1))
    acc = dict.fromkeys(("n", "adv", "ret", "ret2", "val", "d", "d2"), 0.0)
    hi = dict.fromkeys(("adv", "ret", "val"), -math.inf)
    lo = dict.fromkeys(("adv", "ret", "val"), math.inf)
    for start in range(0, n_rows, step):
        rows = slice(start, start + step)
        m = mask[rows]
        n = int(np.count_nonzero(m))
        if n == 0:
            continue
        acc["n"] += n
        blocks = {"adv": adv[rows], "ret": ret[rows]}
        if val is not None:
            blocks["val"] = val[rows]
        for name, x in blocks.items():
            acc[name] += float(np.sum(x, where=m, dtype=np.float64))
            hi[name] = max(hi[name], float(np.max(x, where=m, initial=-np.inf)))
            lo[name] = min(lo[name], float(np.min(x, where=m, initial=np.inf)))
        r = np.where(m, blocks["ret"], 0).astype(np.float64, copy=False)
        acc["ret2"] += float(np.dot(r.ravel(), r.ravel()))
        if val is not None:
            d = np.where(m, blocks["ret"].astype(np.float64) - blocks["val"], 0.0)
            acc["d"] += float(d.sum())
            acc["d2"] += float(np.dot(d.ravel(), d.ravel()))
    sums = [acc["n"], acc["adv"], acc["ret"], acc["ret2"], acc["val"], acc["d"], acc["d2"]]
    return sums + [hi["adv"], hi["ret"], hi["val"], lo["adv"], lo["ret"], lo["val"]]


def _masked_token_stats_xp(xp: Any, tensors: list[Any], mask: Any, use_critic: bool) -> list[Any]:
    """Token sums/extremes through the array API (torch CPU/CUDA); 0-d float64 results."""
    adv, ret = tensors[0], tensors[1]
    val = tensors[2] if use_critic else None
    n_rows, width = mask.shape
    on_cpu = str(getattr(mask, "device", "cpu")) == "cpu"
    step = max(1, _BLOCK_ELEMENTS // max(width, 1)) if on_cpu else max(n_rows, 1)
    f64 = xp.float64
    zero = xp.asarray(0.0, dtype=f64, device=mask.device)
    acc = {k: zero for k in ("n", "adv", "ret", "ret2", "val", "d", "d2")}
    ninf = xp.asarray(-math.inf, dtype=f64, device=mask.device)
    pinf = xp.asarray(math.inf, dtype=f64, device=mask.device)
    hi = {k: ninf for k in ("adv", "ret", "val")}
    lo = {k: pinf for k in ("adv", "ret", "val")}
    for start in range(0, n_rows, step):
        rows = slice(start, start + step)
        m = mask[rows, ...]
        acc["n"] = acc["n"] + xp.astype(xp.count_nonzero(m), f64)
        blocks = {"adv": adv[rows, ...], "ret": ret[rows, ...]}
        if val is not None:
            blocks["val"] = val[rows, ...]
        zero_blk = xp.asarray(0.0, dtype=blocks["adv"].dtype, device=mask.device)
        for name, x in blocks.items():
            xm = xp.where(m, x, zero_blk)
            acc[name] = acc[name] + xp.astype(xp.sum(xm), f64)
            hi[name] = xp.maximum(hi[name], xp.astype(xp.max(xp.where(m, x, -math.inf)), f64))
            lo[name] = xp.minimum(lo[name], xp.astype(xp.min(xp.where(m, x, math.inf)), f64))
            if name == "ret":
                r64 = xp.astype(xm, f64)
                acc["ret2"] = acc["ret2"] + xp.sum(r64 * r64)
        if val is not None:
            d = xp.where(m, xp.astype(blocks["ret"], f64) - xp.astype(blocks["val"], f64), 0.0)
            acc["d"] = acc["d"] + xp.sum(d)
            acc["d2"] = acc["d2"] + xp.sum(d * d)
    sums = [acc["n"], acc["adv"], acc["ret"], acc["ret2"], acc["val"], acc["d"], acc["d2"]]
    return sums + [hi["adv"], hi["ret"], hi["val"], lo["adv"], lo["ret"], lo["val"]]


def _seq_stats(xp: Any, x: Any, keep: Any) -> tuple[Any, Any, Any]:
    """(sum, max, min) of ``x`` over ``keep`` as float64 0-d arrays (max=-inf, min=inf if empty)."""
    x64 = xp.astype(x, xp.float64)
    total = xp.sum(xp.where(keep, x64, 0.0))
    hi = xp.max(xp.where(keep, x64, -math.inf)) if x.shape[0] else xp.asarray(-math.inf, dtype=xp.float64)
    lo = xp.min(xp.where(keep, x64, math.inf)) if x.shape[0] else xp.asarray(math.inf, dtype=xp.float64)
    return total, hi, lo


def _host_count_stats(values: Any, name: str) -> tuple[float, float, float, float]:
    """(n, sum, max, min) of a host array such as ``__num_turns__``."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"batch.non_tensor_batch[{name!r}] must hold numbers; got dtype {arr.dtype}") from None
    if arr.size == 0:
        return 0.0, 0.0, -math.inf, math.inf
    return float(arr.size), float(arr.sum(dtype=np.float64)), float(arr.max()), float(arr.min())


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
    view = as_batch(batch)
    scores = view.tensor("token_level_scores")
    rewards = view.tensor("token_level_rewards")
    advantages = view.tensor("advantages")
    returns = view.tensor("returns")
    xp = array_namespace(scores, rewards, advantages, returns)
    if scores.ndim != 2:
        raise ValueError(f"batch['token_level_scores'] must have shape (B, R); got {describe(scores)}")
    n_rows = scores.shape[0]
    if n_rows == 0:
        raise ValueError("batch is empty: token_level_scores has 0 rows; metrics need at least one sample")
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
        if x.shape[0] != n_rows:
            raise ValueError(f"batch[{name!r}] has {x.shape[0]} rows, batch['advantages'] has {n_rows}")
    mask = check_mask(response_mask, "batch['response_mask']")

    # Sequence-level quantities, shape (B,).
    prompt_len, response_len = prompt_response_lengths(view)
    if prompt_len.shape[0] != n_rows:
        raise ValueError(f"prompt/response lengths have {prompt_len.shape[0]} rows, the token tensors {n_rows}")
    seq_score = xp.sum(as_float(scores, xp), axis=-1)
    seq_reward = xp.sum(as_float(rewards, xp), axis=-1)
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

    def count(b: Any) -> Any:
        return xp.astype(xp.count_nonzero(b), f64)

    score_s, score_hi, score_lo = _seq_stats(xp, seq_score, non_aborted)
    reward_s, reward_hi, reward_lo = _seq_stats(xp, seq_reward, non_aborted)
    resp_s, resp_hi, resp_lo = _seq_stats(xp, response_len, everyone)
    na_s, na_hi, na_lo = _seq_stats(xp, response_len, non_aborted)
    prompt_s, prompt_hi, prompt_lo = _seq_stats(xp, prompt_len, everyone)

    # Token-level quantities over the response mask.
    floats = [as_float(x, xp) for x in token_tensors]
    if is_torch_array(mask):
        tok = _masked_token_stats_xp(xp, floats, mask, use_critic)
    else:
        tok = [xp.asarray(v, dtype=f64) for v in _masked_token_stats_numpy(floats, mask, use_critic)]
    n_tok, adv_s, ret_s, ret2_s, val_s, d_s, d2_s, adv_hi, ret_hi, val_hi, adv_lo, ret_lo, val_lo = tok

    turns = _host_count_stats(view.non_tensor("__num_turns__"), "__num_turns__") if (
        view.non_tensor("__num_turns__") is not None
    ) else (0.0, 0.0, -math.inf, math.inf)
    tools = _host_count_stats(view.non_tensor("tool_call_counts"), "tool_call_counts") if (
        view.non_tensor("tool_call_counts") is not None
    ) else (0.0, 0.0, -math.inf, math.inf)

    dev = getattr(mask, "device", None)

    def vec(items: list[Any]) -> Any:
        return xp.stack([xp.reshape(xp.asarray(v, dtype=f64, device=dev), ()) for v in items])

    sums = vec([
        float(n_rows), count(non_aborted), score_s, reward_s, n_tok, adv_s, ret_s, ret2_s, val_s, d_s, d2_s,
        resp_s, count(resp_clipped), na_s, count(non_aborted & resp_clipped), prompt_s, count(prompt_clipped),
        turns[0], turns[1], tools[0], tools[1],
    ])
    maxes = vec([score_hi, reward_hi, adv_hi, ret_hi, val_hi, resp_hi, na_hi, prompt_hi, turns[2], tools[2]])
    mins = vec([score_lo, reward_lo, adv_lo, ret_lo, val_lo, resp_lo, na_lo, prompt_lo, turns[3], tools[3]])
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

    def mean(total: float, count: float) -> float:
        return total / count if count > 0 else nan

    def ext(name: str, count: float) -> tuple[float, float]:
        return (hi[name], lo[name]) if count > 0 else (nan, nan)

    if n_na == 0:
        _undefined("every sample is aborted (response length 0): score, reward and non-aborted length metrics are NaN")
    if n_tok == 0:
        _undefined("response_mask is all zero: advantage, return and value metrics are NaN")

    m: dict[str, float] = {}
    for prefix, name, total in (("critic/score", "score", s["score_sum"]), ("critic/rewards", "reward", s["reward_sum"])):
        m[f"{prefix}/mean"] = mean(total, n_na)
        m[f"{prefix}/max"], m[f"{prefix}/min"] = ext(name, n_na)
    for prefix, name, total in (("critic/advantages", "adv", s["adv_sum"]), ("critic/returns", "ret", s["ret_sum"])):
        m[f"{prefix}/mean"] = mean(total, n_tok)
        m[f"{prefix}/max"], m[f"{prefix}/min"] = ext(name, n_tok)
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
    var_ret = max(s["ret_sumsq"] - s["ret_sum"] ** 2 / n, 0.0) / (n - 1)
    var_diff = max(s["diff_sumsq"] - s["diff_sum"] ** 2 / n, 0.0) / (n - 1)
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
    stats = data_statistics(
        view, use_critic, max_response_length=max_response_length, max_prompt_length=max_prompt_length
    )
    if process_group is not None:
        from ._distributed import all_reduce_data_stats

        stats = all_reduce_data_stats(stats, process_group)
    return finalize_data_metrics(
        stats,
        use_critic,
        has_num_turns=view.non_tensor("__num_turns__") is not None,
        has_tool_call_counts=view.non_tensor("tool_call_counts") is not None,
    )
