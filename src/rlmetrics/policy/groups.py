"""GRPO group statistics: how many prompt groups carry a learning signal.

GRPO normalises each response's reward within its group (the responses sampled for one prompt,
identified by verl's ``uid``). A group whose rewards are all equal has zero advantages and
contributes no gradient; this module measures how much of the batch that is, how many groups
are all solved / none solved, the mean within-group reward spread and the group sizes. Groups of
one sample and uneven group sizes are handled; with ``process_group=`` the groups are formed
over every rank's samples.

Two definitions: ``definition="verl"`` (the default, the statistics above under ``grpo/``) and
``definition="trl"``, TRL 1.16's ``GRPOTrainer`` numbers under TRL's own names (``reward``,
``reward_std``, ``frac_reward_zero_std``), with its NaN-aware handling of unscorable
completions.

Unlike the other batch families these metrics are not functions of fixed sums over samples:
a group's spread and its solved-all/none flags need all of its rewards, and a group's samples
may sit on several ranks. So there is no ``group_statistics``: ``process_group=`` gathers the
(uid, reward) pairs (a few bytes per sample) and computes the groups of the union.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import check_dense, check_finite_scalar, describe, is_torch_array
from rlmetrics._core.batch import as_batch
from rlmetrics._core.categories import category_codes, limit_categories
from rlmetrics._core.checks import check_int, warn_undefined
from rlmetrics._core.comm import all_gather_objects, describe_disagreement
from rlmetrics._core.dip import dip_pvalue
from rlmetrics._core.passk import pass_at_k
from rlmetrics._core.stats import check_prefix, with_prefix
from rlmetrics.training.categories import DEFAULT_MAX_CATEGORIES, check_max_categories, warn_folded

__all__ = ["DEFINITIONS", "DIP_JITTER_SEED", "compute_group_metrics"]

#: The group-statistics definitions ``compute_group_metrics(definition=)`` accepts.
DEFINITIONS = ("verl", "trl")
#: Seed of the uniform draws that spread each group's solve rate ``c / n`` over its cell
#: ``[c / (n + 1), (c + 1) / (n + 1))`` before the dip test (groups in sorted uid order).
DIP_JITTER_SEED = 0


def _looks_like_batch(x: Any) -> bool:
    return isinstance(x, Mapping) or (hasattr(x, "batch") and not hasattr(x, "shape"))


def _host_1d(x: Any, name: str) -> np.ndarray:
    if is_torch_array(check_dense(x, name)):
        x = x.detach()
        x = (x.float() if x.dtype.is_floating_point and x.element_size() < 4 else x).cpu().numpy()
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have shape (B,); got {describe(arr)}")
    return arr


def _uids_and_rewards(
    uids_or_batch: Any, rewards: Any, reward_key: str, *, allow_empty: bool = False, allow_nan: bool = False
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
    finite = np.isfinite(reward_arr)
    if allow_nan:
        finite |= np.isnan(reward_arr)
    if not np.all(finite):
        bad = int(np.flatnonzero(~finite)[0])
        allowed = "finite or NaN (unscorable)" if allow_nan else "finite"
        raise ValueError(f"rewards must be {allowed}; sample {bad} has reward {reward_arr[bad]}")
    return uid_arr, reward_arr


def _gather_groups(
    uids_or_batch: Any,
    rewards: Any,
    reward_key: str,
    process_group: Any,
    *,
    options: Callable[[], tuple[bool, float, float, int]],
    signature: Mapping[str, Any],
    labels: Callable[[int], np.ndarray | None] = lambda n: None,
) -> tuple[tuple[bool, float, float, int], np.ndarray, np.ndarray, np.ndarray | None]:
    """The checked options, and every rank's (uids, rewards) concatenated in rank order, on every rank.

    A group's samples may sit on several ranks, so its statistics cannot be merged from
    per-rank sums: the (uid, reward) pairs themselves are gathered (one object all-gather; a
    few bytes per sample). That one collective is also the agreement step: a rank whose
    options or input are bad still joins it, and then every rank raises the same error,
    naming that rank; ranks called with different options raise the same ``ValueError``.
    """
    checked: tuple[bool, float, float, int] = (False, 0.0, 0.0, 0)
    try:
        checked = options()
        pairs = _uids_and_rewards(uids_or_batch, rewards, reward_key, allow_empty=True, allow_nan=checked[0])
        payload: tuple[Any, ...] = ("ok", dict(signature), *pairs, labels(pairs[0].shape[0]))
    except Exception as err:  # any failure must reach the other ranks, not strand them
        kind = next((k.__name__ for k in (TypeError, ValueError) if isinstance(err, k)), "RuntimeError")
        payload = ("error", kind, str(err) if kind != "RuntimeError" else f"{type(err).__name__}: {err}")
    gathered = all_gather_objects(payload, process_group)
    bad = [(rank, item) for rank, item in enumerate(gathered) if item[0] == "error"]
    if bad:
        raised = {"TypeError": TypeError, "ValueError": ValueError}.get(bad[0][1][1], RuntimeError)
        raise raised("; ".join(f"rank {rank}: {item[2]}" for rank, item in bad))
    signatures = [item[1] for item in gathered]
    if any(sig != signatures[0] for sig in signatures[1:]):
        raise ValueError(describe_disagreement("the options of compute_group_metrics", signatures))
    uids = np.concatenate([item[2] for item in gathered])
    r = np.concatenate([item[3] for item in gathered])
    if uids.shape[0] == 0:
        raise ValueError("the batch is empty on every rank: group metrics need at least one sample")
    # the labels ride last (absent from a payload without group_by=)
    with_labels = [item[4] for item in gathered if len(item) > 4 and item[4] is not None]
    texts = np.concatenate(with_labels) if with_labels else None
    return checked, uids, r, texts


def _group_index(uids: np.ndarray) -> np.ndarray:
    """The group number (0..G-1) of every sample."""
    try:
        _, inverse = np.unique(uids, return_inverse=True)
    except TypeError:
        raise TypeError(
            f"uids must be sortable group ids (all strings or all numbers); got {describe(uids)}"
        ) from None
    return inverse.reshape(-1)


def compute_group_metrics(
    uids_or_batch: Any,
    rewards: Any = None,
    *,
    definition: str = "verl",
    reward_key: str = "token_level_rewards",
    solved_threshold: float = 1.0,
    zero_std_atol: float = 1e-8,
    ddof: int = 1,
    prefix: str | None = None,
    pass_k: int | Sequence[int] | None = None,
    group_by: Any = None,
    group_name: str | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    process_group: Any = None,
) -> dict[str, float]:
    """Per-group reward statistics of a GRPO batch (the training pass rates), by category if asked.

    Parameters
    ----------
    uids_or_batch : array of shape ``(B,)`` or batch
        Group id of every sample (strings, ints; numpy, list or torch), or a DataProto /
        TensorDict / dict whose non-tensor ``uid`` holds them.
    rewards : array of shape ``(B,)``, optional
        Sequence rewards. Required with group ids; with a batch, defaults to the sum of
        ``batch[reward_key]`` over the response (verl's GRPO outcome reward). With
        ``definition="trl"`` a NaN marks an unscorable completion (every reward function
        returned ``None``), as in TRL.
    definition : {"verl", "trl"}, keyword-only
        ``"verl"`` (default): the group statistics below under ``grpo/``. ``"trl"``: TRL 1.16's
        ``GRPOTrainer`` definitions under its names (see Notes).
    reward_key : str, keyword-only
        Token-level reward tensor of the batch (default ``token_level_rewards``).
    solved_threshold : float, keyword-only
        ``"verl"`` only: a sample is solved when its reward is ``>=`` this (default 1.0, full
        marks).
    zero_std_atol : float, keyword-only
        A group has zero reward std when its std is ``<=`` this (default 1e-8, the ``atol`` of
        TRL's ``torch.isclose(std, 0)``). ``"verl"`` compares the population std, ``"trl"`` the
        Bessel-corrected one, as TRL does.
    ddof : int, keyword-only
        ``"verl"``: delta degrees of freedom of the reported within-group std (1: unbiased, as
        ``torch.std`` in verl's and TRL's GRPO); groups with ``size <= ddof`` are left out of
        ``reward_std/mean``. ``"trl"`` is Bessel-corrected by definition: only 1 is accepted.
    prefix : str, optional, keyword-only
        Prepended to every key instead of the definition's own (``"grpo/"`` for ``"verl"``,
        none for ``"trl"``: TRL logs ``reward``, ``reward_std``, ``frac_reward_zero_std``).
    pass_k : int or sequence of int, optional, keyword-only
        ``"verl"`` only: also report ``pass@k`` for each ``k`` (``grpo/pass@4``): the mean over
        the groups of at least ``k`` samples of the unbiased estimator ``1 - C(n - c, k) / C(n, k)``
        (``c`` of the group's ``n`` samples reach ``solved_threshold``;
        :func:`rlmetrics.validation.exact.estimators.pass_at_k`). NaN with an
        ``UndefinedMetricWarning`` when no group has ``k`` samples.
    group_by : str or array of shape (B,), optional, keyword-only
        Also report every metric per category of the prompts: a column of the batch
        (``"data_source"``) or one label per sample; a group's samples must share their label.
        Category ``c``'s metrics are those of its groups alone, under
        ``keys.category_key(key, group, c)`` (``by_data_source/gsm8k/grpo/frac_all_solved``).
    group_name : str, optional, keyword-only
        The group's name in those keys (default: the column's name, ``"group"`` for labels).
    max_categories : int, keyword-only
        At most this many categories (default 64); the least frequent are reported together
        as ``<other>``, with one ``RLMetricsWarning``.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' samples (a group
        split across ranks is one group); ranks with no samples still take part.

    Returns
    -------
    dict[str, float]
        ``"verl"``: ``num_groups``, ``num_samples``, ``group_size/{mean,max,min}``,
        ``num_singleton_groups``, ``frac_reward_zero_std`` (fraction of *groups*; a group of
        one sample counts as zero std, it has no learning signal),
        ``frac_samples_reward_zero_std`` (fraction of *samples* in such groups; equal to the
        former with equal group sizes), ``frac_all_solved``, ``frac_none_solved``,
        ``reward_std/mean`` (NaN with an ``UndefinedMetricWarning`` when no group has more than
        ``ddof`` samples), ``solve_rate/dip`` and ``solve_rate/dip_pvalue``: Hartigan's dip test
        of the groups' solve rates (:func:`rlmetrics._core.dip.dip_pvalue`; each ``c / n`` spread
        uniformly over its cell, ``(c + u) / (n + 1)`` with ``u`` drawn from
        ``default_rng(DIP_JITTER_SEED)``, so that the test sees a continuous sample whose density
        is unimodal when the histogram of ``c`` is; a p-value of 1 under 4 groups).

        ``"trl"``: ``reward``, ``reward_std``, ``frac_reward_zero_std`` (see Notes).

    Notes
    -----
    ``definition="trl"`` follows ``GRPOTrainer._generate_and_score_completions`` of TRL 1.16.0
    (``trl/trainer/grpo_trainer.py``, the default ``scale_rewards="group"`` or ``"none"`` and
    ``multi_objective_aggregation="sum_then_normalize"``), over the completions of the batch
    (TRL's batch is the generation batch gathered from every process):

    * ``reward``: the mean over the scorable completions (NaN rewards left out);
    * ``reward_std``: the Bessel-corrected std over all scorable completions of the batch,
      *not* per group (``trl.trainer.utils.nanstd``); NaN with fewer than two;
    * ``frac_reward_zero_std``: the fraction of *completions* whose group's Bessel-corrected
      std (over the group's scorable completions) is ``<= zero_std_atol``; a group with at
      most one scorable completion has a NaN std and its completions do not count as zero
      std (they stay in the denominator); a group of one sample has std 0, TRL's
      ``num_generations == 1`` case.

    TRL groups the batch in consecutive blocks of ``num_generations``; here the groups are the
    ``uids``, so uneven groups work too. The arithmetic is float64. TRL's is float32, where a
    group of equal rewards that float32 cannot hold exactly may come out with a std above
    1e-8 (eight rewards of 0.7: std 6.4e-8), and TRL counts that group as having spread;
    here it has none. ``reward`` and ``reward_std`` agree with TRL's to float32 rounding.
    TRL's logged value is the mean of these per-batch numbers over the logging window.

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
    >>> t = compute_group_metrics(np.repeat([0, 1], 2), np.array([0.7, 0.7, 0.0, 1.0]), definition="trl")
    >>> t["reward"], round(t["reward_std"], 4), t["frac_reward_zero_std"]
    (0.6, 0.4243, 0.5)
    """

    def options() -> tuple[bool, float, float, int]:
        """(trl, threshold, atol, ddof) checked; with process_group= inside the one gather."""
        if definition not in DEFINITIONS:
            raise ValueError(f"definition must be one of {DEFINITIONS}; got {definition!r}")
        trl = definition == "trl"
        threshold = check_finite_scalar(solved_threshold, "solved_threshold")
        atol = check_finite_scalar(zero_std_atol, "zero_std_atol")
        if atol < 0:
            raise ValueError(f"zero_std_atol must be >= 0; got {atol}")
        n_ddof = check_int(ddof, "ddof", minimum=0)
        if trl and n_ddof != 1:
            raise ValueError(
                f"ddof must be 1 with definition='trl' (TRL's std is Bessel-corrected); got {n_ddof}"
            )
        if prefix is not None:
            check_prefix(prefix)
        if trl and pass_k is not None:
            raise ValueError("pass_k is reported with definition='verl' only; got definition='trl'")
        check_max_categories(max_categories)
        return trl, threshold, atol, n_ddof

    ks = _checked_ks(pass_k)
    name = _group_name(group_by, group_name)

    def labels(n_rows: int) -> np.ndarray | None:
        return _label_texts(uids_or_batch, group_by, n_rows)

    if process_group is not None:
        signature = {
            "definition": definition,
            "solved_threshold": solved_threshold,
            "zero_std_atol": zero_std_atol,
            "ddof": ddof,
            "prefix": prefix,
            "reward_key": reward_key,
            "pass_k": ks,
            "group_by": name,
            "max_categories": max_categories,
        }
        (trl, threshold, atol, n_ddof), uids, r, texts = _gather_groups(
            uids_or_batch,
            rewards,
            reward_key,
            process_group,
            options=options,
            signature=signature,
            labels=labels,
        )
    else:
        trl, threshold, atol, n_ddof = options()
        uids, r = _uids_and_rewards(uids_or_batch, rewards, reward_key, allow_nan=trl)
        texts = labels(uids.shape[0])

    metrics = _metrics_of(trl, threshold, atol, n_ddof, ks, prefix)
    inverse = _group_index(uids)
    out = metrics(inverse, r)
    if texts is not None and name is not None:
        out.update(_by_category(inverse, r, texts, name, check_max_categories(max_categories), metrics))
    return out


def _metrics_of(
    trl: bool, threshold: float, atol: float, ddof: int, ks: tuple[int, ...], prefix: str | None
) -> Callable[[np.ndarray, np.ndarray], dict[str, float]]:
    """``metrics(group index, rewards)`` of the checked options: the whole batch's or a category's."""

    def metrics(inverse: np.ndarray, r: np.ndarray) -> dict[str, float]:
        if trl:
            return _trl_metrics(inverse, r, atol, "" if prefix is None else prefix)
        out = _verl_metrics(inverse, r, threshold, atol, ddof)
        out.update(_pass_at_ks(inverse, r, threshold, ks))
        return with_prefix(out, K.GRPO_PREFIX, K.GRPO_PREFIX if prefix is None else prefix)

    return metrics


def _checked_ks(pass_k: Any) -> tuple[int, ...]:
    """``pass_k=`` as a sorted tuple of distinct integers >= 1 (empty for ``None``)."""
    if pass_k is None:
        return ()
    items = [pass_k] if not isinstance(pass_k, Sequence) or isinstance(pass_k, str) else list(pass_k)
    return tuple(sorted({check_int(k, "pass_k", minimum=1) for k in items}))


def _group_name(group_by: Any, group_name: str | None) -> str | None:
    """The group's name in the per-category keys (checked), ``None`` without ``group_by=``."""
    if group_by is None:
        if group_name is not None:
            raise ValueError("group_name= names the group of group_by=; pass group_by= too")
        return None
    name = group_name or (group_by if isinstance(group_by, str) else "group")
    K.category_key("", name, "")  # a TypeError / ValueError naming a bad group name
    return name


def _label_texts(uids_or_batch: Any, group_by: Any, n_rows: int) -> np.ndarray | None:
    """Each sample's category name (a host array of str), from a batch column or the labels."""
    if group_by is None:
        return None
    if isinstance(group_by, str):
        if not _looks_like_batch(uids_or_batch):
            raise TypeError(f"group_by={group_by!r} names a batch column; pass a batch, or the labels")
        view = as_batch(uids_or_batch)
        if group_by in view.non_tensors:
            column = view.non_tensors[group_by]
        elif view.has(group_by):
            column = view.tensor(group_by)
        else:
            raise KeyError(f"group_by: the batch has no column {group_by!r}")
        names, codes = category_codes(column, n_rows, where=f"batch[{group_by!r}]")
    else:
        names, codes = category_codes(group_by, n_rows, where="group_by")
    return np.asarray(names, dtype=object)[codes] if names else np.zeros(0, dtype=object)


def _by_category(
    inverse: np.ndarray,
    r: np.ndarray,
    texts: np.ndarray,
    name: str,
    max_categories: int,
    metrics: Callable[[np.ndarray, np.ndarray], dict[str, float]],
) -> dict[str, float]:
    """Each category's metrics: those of its groups alone, under ``category_key``."""
    names, codes = category_codes(texts, texts.shape[0], where="group_by")
    n_groups = int(inverse.max()) + 1
    lo = np.full(n_groups, np.iinfo(np.int64).max)
    hi = np.full(n_groups, -1)
    np.minimum.at(lo, inverse, codes)
    np.maximum.at(hi, inverse, codes)
    if np.any(lo != hi):
        g = int(np.flatnonzero(lo != hi)[0])
        raise ValueError(
            f"group_by: the samples of a group must share one category; a group has both "
            f"{names[lo[g]]!r} and {names[hi[g]]!r}"
        )
    names, codes, folded = limit_categories(names, codes, max_categories, K.OTHER_CATEGORY)
    if folded:
        warn_folded(name, max_categories)
    out: dict[str, float] = {}
    for c, category in enumerate(names):  # host arrays of one number per sample: a loop is cheap
        rows = codes == c
        sub = metrics(_group_index(inverse[rows]), r[rows])
        out.update({K.category_key(key, name, category): value for key, value in sub.items()})
    return out


def _pass_at_ks(
    inverse: np.ndarray, r: np.ndarray, threshold: float, ks: tuple[int, ...]
) -> dict[str, float]:
    """``grpo/pass@k``: the mean unbiased pass@k over the groups of at least ``k`` samples."""
    if not ks:
        return {}
    n = np.bincount(inverse).astype(np.int64)
    c = np.bincount(inverse, weights=(r >= threshold).astype(np.float64), minlength=n.shape[0])
    c = np.rint(c).astype(np.int64)
    out: dict[str, float] = {}
    for k in ks:
        ok = n >= k
        if ok.any():
            out[K.at_k(K.GRPO_PASS, k)] = float(np.mean(pass_at_k(n[ok], c[ok], k)))
        else:
            out[K.at_k(K.GRPO_PASS, k)] = warn_undefined(
                f"no group has {k} samples: grpo pass@{k} is NaN", stacklevel=None
            )
    return out


def _verl_metrics(
    inverse: np.ndarray, r: np.ndarray, threshold: float, atol: float, ddof: int
) -> dict[str, float]:
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
    out.update(_solve_rate_dip(inverse, r, counts, threshold))
    if enough.any():
        out[K.GRPO_REWARD_STD_MEAN] = float(np.mean(np.sqrt(sq[enough] / (counts[enough] - ddof))))
    else:
        out[K.GRPO_REWARD_STD_MEAN] = warn_undefined(
            f"no group has more than ddof={ddof} samples: grpo reward_std/mean is NaN", stacklevel=None
        )
    return out


def _solve_rate_dip(
    inverse: np.ndarray, r: np.ndarray, counts: np.ndarray, threshold: float
) -> dict[str, float]:
    """The dip test of the groups' solve rates, each spread over its cell (``DIP_JITTER_SEED``)."""
    solved = np.bincount(inverse, weights=(r >= threshold).astype(np.float64), minlength=counts.shape[0])
    u = np.random.default_rng(DIP_JITTER_SEED).random(counts.shape[0])
    value, p = dip_pvalue((solved + u) / (counts + 1.0))
    return {K.GRPO_SOLVE_RATE_DIP: value, K.GRPO_SOLVE_RATE_DIP_PVALUE: p}


def _bessel_std(total_sq: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``sqrt(total_sq / (n - 1))``, NaN where ``n <= 1`` (``trl.trainer.utils.nanstd``)."""
    out = np.full(n.shape, np.nan)
    ok = n > 1
    out[ok] = np.sqrt(total_sq[ok] / (n[ok] - 1))
    return out


def _trl_metrics(inverse: np.ndarray, r: np.ndarray, atol: float, prefix: str) -> dict[str, float]:
    scorable = ~np.isnan(r)
    n_scorable = int(np.count_nonzero(scorable))
    rs = r[scorable]
    if n_scorable:
        reward = float(np.mean(rs))
    else:
        reward = warn_undefined(
            "no completion is scorable (every reward is NaN): TRL reward is NaN", stacklevel=None
        )
    if n_scorable > 1:
        reward_std = float(np.sqrt(np.sum((rs - reward) ** 2) / (n_scorable - 1)))
    else:
        reward_std = warn_undefined(
            f"{n_scorable} scorable completion(s): TRL reward_std needs two, it is NaN", stacklevel=None
        )
    # each group's Bessel std over its scorable completions; a group of one sample: 0
    size = np.bincount(inverse).astype(np.float64)
    g_idx = inverse[scorable]
    n_g = np.bincount(g_idx, minlength=size.shape[0]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_g = np.bincount(g_idx, weights=rs, minlength=size.shape[0]) / n_g
    dev = rs - mean_g[g_idx]
    std_g = _bessel_std(np.bincount(g_idx, weights=dev * dev, minlength=size.shape[0]), n_g)
    std_g[size == 1] = 0.0
    zero = std_g <= atol  # NaN compares False: such a group has no zero std
    out = {
        K.TRL_REWARD: reward,
        K.TRL_REWARD_STD: reward_std,
        K.TRL_FRAC_REWARD_ZERO_STD: float(size[zero].sum()) / r.shape[0],
    }
    return {prefix + key: value for key, value in out.items()}
