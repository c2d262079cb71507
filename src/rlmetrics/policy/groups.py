"""GRPO group statistics: how many prompt groups carry a learning signal.

GRPO normalises each response's reward within its group (the responses sampled for one prompt,
identified by verl's ``uid``). A group whose rewards are all equal has zero advantages and
contributes no gradient; this module measures how much of the batch that is, how many groups
are all solved / none solved, the mean within-group reward spread and the group sizes. Groups of
one sample and uneven group sizes are handled; with ``process_group=`` the groups are formed
over every rank's samples.

Unlike the other batch families these metrics are not functions of fixed sums over samples:
a group's spread and its solved-all/none flags need all of its rewards, and a group's samples
may sit on several ranks. So there is no ``group_statistics``: ``process_group=`` gathers the
(uid, reward) pairs (a few bytes per sample) and computes the groups of the union.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import check_finite_scalar, describe, is_torch_array
from rlmetrics._core.batch import as_batch
from rlmetrics._core.checks import check_int, warn_undefined
from rlmetrics._core.comm import all_gather_objects
from rlmetrics._core.stats import check_prefix, with_prefix

__all__ = ["compute_group_metrics"]


def _looks_like_batch(x: Any) -> bool:
    return isinstance(x, Mapping) or (hasattr(x, "batch") and not hasattr(x, "shape"))


def _host_1d(x: Any, name: str) -> np.ndarray:
    if is_torch_array(x):
        x = x.detach()
        x = (x.float() if x.dtype.is_floating_point and x.element_size() < 4 else x).cpu().numpy()
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have shape (B,); got {describe(arr)}")
    return arr


def _uids_and_rewards(
    uids_or_batch: Any, rewards: Any, reward_key: str, *, allow_empty: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    if _looks_like_batch(uids_or_batch):
        view = as_batch(uids_or_batch)
        uids = view.non_tensor("uid")
        if uids is None:
            present = ", ".join(sorted(str(k) for k in view.non_tensors)) or "none"
            raise ValueError(
                f"batch has no non-tensor 'uid' (the group ids); non-tensor keys present: {present}"
            )
        if rewards is None:
            rewards = view.tensor(reward_key, why="sequence rewards are its sum over the response")
            if rewards.ndim == 2:
                rewards = (
                    rewards.sum(-1) if is_torch_array(rewards) else np.sum(rewards, axis=-1, dtype=np.float64)
                )
        uid_arr = _host_1d(uids, "batch.non_tensor_batch['uid']")
    else:
        if rewards is None:
            raise TypeError("rewards is required when the first argument is an array of group ids")
        uid_arr = _host_1d(uids_or_batch, "uids")
    reward_arr = _host_1d(rewards, "rewards")
    if reward_arr.dtype.kind not in "biuf":
        raise TypeError(f"rewards must be numeric; got {describe(reward_arr)}")
    if reward_arr.shape[0] != uid_arr.shape[0]:
        raise ValueError(
            f"uids and rewards must have the same length; got {uid_arr.shape[0]} and {reward_arr.shape[0]}"
        )
    if uid_arr.shape[0] == 0 and not allow_empty:
        raise ValueError("the batch is empty: group metrics need at least one sample")
    reward_arr = reward_arr.astype(np.float64)
    if not np.all(np.isfinite(reward_arr)):
        bad = int(np.flatnonzero(~np.isfinite(reward_arr))[0])
        raise ValueError(f"rewards must be finite; sample {bad} has reward {reward_arr[bad]}")
    return uid_arr, reward_arr


def _gather_groups(
    uids_or_batch: Any, rewards: Any, reward_key: str, process_group: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's (uids, rewards), concatenated in rank order, on every rank.

    A group's samples may sit on several ranks, so its statistics cannot be merged from
    per-rank sums: the (uid, reward) pairs themselves are gathered (one object all-gather; a
    few bytes per sample). A rank whose input is bad still joins the collective, and then every
    rank raises the same error, naming that rank.
    """
    try:
        payload: tuple[Any, ...] = (
            "ok",
            *_uids_and_rewards(uids_or_batch, rewards, reward_key, allow_empty=True),
        )
    except (TypeError, ValueError) as err:
        payload = ("error", type(err).__name__, str(err))
    gathered = all_gather_objects(payload, process_group)
    for rank, item in enumerate(gathered):
        if item[0] == "error":
            kind = TypeError if item[1] == "TypeError" else ValueError
            raise kind(f"rank {rank}: {item[2]}")
    uids = np.concatenate([item[1] for item in gathered])
    r = np.concatenate([item[2] for item in gathered])
    if uids.shape[0] == 0:
        raise ValueError("the batch is empty on every rank: group metrics need at least one sample")
    return uids, r


def compute_group_metrics(
    uids_or_batch: Any,
    rewards: Any = None,
    *,
    reward_key: str = "token_level_rewards",
    solved_threshold: float = 1.0,
    zero_std_atol: float = 1e-8,
    ddof: int = 1,
    prefix: str = K.GRPO_PREFIX,
    process_group: Any = None,
) -> dict[str, float]:
    """Per-group reward statistics of a GRPO batch.

    Parameters
    ----------
    uids_or_batch : array of shape ``(B,)`` or batch
        Group id of every sample (strings, ints; numpy, list or torch), or a DataProto /
        TensorDict / dict whose non-tensor ``uid`` holds them.
    rewards : array of shape ``(B,)``, optional
        Sequence rewards. Required with group ids; with a batch, defaults to the sum of
        ``batch[reward_key]`` over the response (verl's GRPO outcome reward).
    reward_key : str, keyword-only
        Token-level reward tensor of the batch (default ``token_level_rewards``).
    solved_threshold : float, keyword-only
        A sample is solved when its reward is ``>=`` this (default 1.0, full marks).
    zero_std_atol : float, keyword-only
        A group has zero reward std when its population std is ``<=`` this (TRL's
        ``frac_reward_zero_std`` uses ``isclose(std, 0)``, i.e. 1e-8).
    ddof : int, keyword-only
        Delta degrees of freedom of the reported within-group std (1: unbiased, as
        ``torch.std`` in verl's and TRL's GRPO); groups with ``size <= ddof`` are left out of
        ``reward_std/mean``.
    prefix : str, keyword-only
        Prepended to every key (default ``"grpo/"``).
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' samples (a group
        split across ranks is one group); ranks with no samples still take part.

    Returns
    -------
    dict[str, float]
        ``num_groups``, ``num_samples``, ``group_size/{mean,max,min}``, ``num_singleton_groups``,
        ``frac_reward_zero_std`` (fraction of *groups*; a group of one sample counts as zero
        std, it has no learning signal), ``frac_samples_reward_zero_std`` (fraction of
        *samples* in such groups; equal to the former with equal group sizes, which is TRL's
        per-sample average), ``frac_all_solved``, ``frac_none_solved``, ``reward_std/mean``
        (NaN with a ``RuntimeWarning`` when no group has more than ``ddof`` samples).

    Examples
    --------
    >>> import numpy as np
    >>> uids = np.array(["a", "a", "b", "b", "b", "c"])
    >>> rewards = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    >>> m = compute_group_metrics(uids, rewards)
    >>> m["grpo/num_groups"], m["grpo/frac_reward_zero_std"], m["grpo/frac_samples_reward_zero_std"]
    (3.0, 0.6666666666666666, 0.5)
    >>> m["grpo/frac_all_solved"], m["grpo/frac_none_solved"], m["grpo/group_size/max"]
    (0.3333333333333333, 0.3333333333333333, 3.0)
    """
    threshold = check_finite_scalar(solved_threshold, "solved_threshold")
    atol = check_finite_scalar(zero_std_atol, "zero_std_atol")
    if atol < 0:
        raise ValueError(f"zero_std_atol must be >= 0; got {atol}")
    ddof = check_int(ddof, "ddof", minimum=0)
    check_prefix(prefix)
    if process_group is not None:
        uids, r = _gather_groups(uids_or_batch, rewards, reward_key, process_group)
    else:
        uids, r = _uids_and_rewards(uids_or_batch, rewards, reward_key)
    try:
        _, inverse = np.unique(uids, return_inverse=True)
    except TypeError:
        raise TypeError(
            f"uids must be sortable group ids (all strings or all numbers); got {describe(uids)}"
        ) from None
    inverse = inverse.reshape(-1)
    counts = np.bincount(inverse).astype(np.float64)
    n_groups = counts.shape[0]
    means = np.bincount(inverse, weights=r) / counts
    dev = r - means[inverse]
    sq = np.bincount(inverse, weights=dev * dev, minlength=n_groups)
    std_pop = np.sqrt(sq / counts)
    zero_std = std_pop <= atol
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts[:-1]).astype(np.int64)))
    g_max = np.maximum.reduceat(r[order], starts)
    g_min = np.minimum.reduceat(r[order], starts)
    enough = counts > ddof
    out = {
        K.GRPO_NUM_GROUPS: float(n_groups),
        K.GRPO_NUM_SAMPLES: float(r.shape[0]),
        K.GRPO_GROUP_SIZE_MEAN: float(counts.mean()),
        K.GRPO_GROUP_SIZE_MAX: float(counts.max()),
        K.GRPO_GROUP_SIZE_MIN: float(counts.min()),
        K.GRPO_NUM_SINGLETON_GROUPS: float(np.count_nonzero(counts == 1)),
        K.GRPO_FRAC_REWARD_ZERO_STD: float(np.count_nonzero(zero_std)) / n_groups,
        K.GRPO_FRAC_SAMPLES_REWARD_ZERO_STD: float(counts[zero_std].sum()) / r.shape[0],
        K.GRPO_FRAC_ALL_SOLVED: float(np.count_nonzero(g_min >= threshold)) / n_groups,
        K.GRPO_FRAC_NONE_SOLVED: float(np.count_nonzero(g_max < threshold)) / n_groups,
    }
    if enough.any():
        out[K.GRPO_REWARD_STD_MEAN] = float(np.mean(np.sqrt(sq[enough] / (counts[enough] - ddof))))
    else:
        out[K.GRPO_REWARD_STD_MEAN] = warn_undefined(
            f"no group has more than ddof={ddof} samples: grpo reward_std/mean is NaN", stacklevel=None
        )
    return with_prefix(out, K.GRPO_PREFIX, prefix)
