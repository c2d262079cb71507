"""Reward components: per component (verl's ``reward_extra_info``, TRL's reward functions, any dict
of per-sample arrays) its mean, spread and range, and the share of samples it decides.

:func:`reward_component_statistics` reduces the components of one batch to a
:class:`~rlmetrics._core.stats.Stats`: per component the count of its given values (NaN marks a
value not given, as TRL's ``None``), their sum, centred second moment and ``S**2 / n`` (so that
spreads merge exactly, Chan's formula, as the data metrics do), maximum and minimum, and the
number of samples where it *decides* the total: its weighted contribution ``|w * x|`` is the
largest of the sample's given components (a tie goes to the first name in sorted order).
Micro-batches merge and ranks all-reduce exactly; :func:`compute_reward_component_metrics`
finalises them under ``reward_components/<name>/{mean,std,max,min,decides_frac}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import describe, is_torch_array
from rlmetrics._core.checks import warn_undefined
from rlmetrics._core.stats import Stats, metrics_from

__all__ = ["compute_reward_component_metrics", "reward_component_statistics"]

_SEP = "\x1f"


def _host(values: Any, name: str) -> np.ndarray:
    """A component as a 1-d float64 host array (NaN: not given), or an error naming it."""
    if is_torch_array(values):
        values = (
            values.detach().float().cpu().numpy()
            if values.element_size() < 4
            else values.detach().cpu().numpy()
        )
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"components[{name!r}] must hold numbers (NaN: not given); got {describe(values)}"
        ) from None
    if arr.ndim != 1:
        raise ValueError(f"components[{name!r}] must have shape (B,); got shape {arr.shape}")
    if np.isinf(arr).any():
        bad = int(np.flatnonzero(np.isinf(arr))[0])
        raise ValueError(f"components[{name!r}] must be finite or NaN; sample {bad} is infinite")
    return arr


def _checked(components: Any, weights: Any) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Sorted names, the ``(B, C)`` values and the ``(C,)`` weights, checked."""
    if not isinstance(components, Mapping) or not components:
        raise TypeError(
            f"components must be a non-empty mapping of name -> (B,) array; got {type(components).__name__}"
        )
    names = sorted(components)
    if any(not isinstance(n, str) for n in names):
        raise TypeError("components must be keyed by strings (the component names)")
    columns = [_host(components[n], n) for n in names]
    lengths = {c.shape[0] for c in columns}
    if len(lengths) > 1:
        raise ValueError(f"components must all hold one value per sample; got lengths {sorted(lengths)}")
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(names))
    if unknown:
        raise ValueError(f"weights names components that are not given: {unknown}")
    w = np.asarray([float(weights.get(n, 1.0)) for n in names])
    if not np.isfinite(w).all():
        raise ValueError(f"weights must be finite; got {weights}")
    return names, np.stack(columns, axis=1), w


def reward_component_statistics(
    components: Mapping[str, Any], *, weights: Mapping[str, float] | None = None
) -> Stats:
    """Sufficient statistics of :func:`compute_reward_component_metrics` for one batch.

    >>> import numpy as np
    >>> s = reward_component_statistics({"acc": np.array([1.0, 0.0]), "fmt": np.array([0.2, 0.5])})
    >>> t = reward_component_statistics({"acc": np.array([1.0]), "fmt": np.array([np.nan])})
    >>> m = s.merge(t).finalize()
    >>> m["reward_components/acc/mean"], m["reward_components/fmt/decides_frac"]
    (0.6666666666666666, 0.3333333333333333)
    """
    names, x, w = _checked(components, weights)
    given = ~np.isnan(x)
    n = given.sum(axis=0).astype(np.float64)
    total = np.where(given, x, 0.0).sum(axis=0)
    mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)
    dev = np.where(given, x - mean, 0.0)
    m2 = (dev * dev).sum(axis=0)
    sq_over_n = np.divide(total * total, n, out=np.zeros_like(total), where=n > 0)
    contribution = np.where(given, np.abs(x * w), -1.0)  # a missing value never decides
    decided = given.any(axis=1)
    decider = np.argmax(contribution, axis=1)  # the first of the largest: sorted-name ties
    decides = np.bincount(decider[decided], minlength=len(names)).astype(np.float64)
    hi = np.where(given, x, -math.inf).max(axis=0, initial=-math.inf)
    lo = np.where(given, x, math.inf).min(axis=0, initial=math.inf)
    sums: dict[str, float] = {"n_decided": float(decided.sum())}
    for j, name in enumerate(names):
        for field, value in (
            ("n", n),
            ("sum", total),
            ("m2", m2),
            ("sq_over_n", sq_over_n),
            ("decides", decides),
        ):
            sums[f"{name}{_SEP}{field}"] = float(value[j])
    maxes = {name: float(hi[j]) for j, name in enumerate(names)}
    mins = {name: float(lo[j]) for j, name in enumerate(names)}
    options = {"weights": tuple((n_, float(w_)) for n_, w_ in zip(names, w))}
    return Stats.pack("reward_components", sums, maxes, mins, finaliser=_finalize, options=options)


def _finalize(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """The per-component metrics from the host statistics."""
    out: dict[str, float] = {}
    for name in hi:
        n, total = s[f"{name}{_SEP}n"], s[f"{name}{_SEP}sum"]
        key = {stat: K.reward_component_key(name, stat) for stat in K.REWARD_COMPONENT_STATS}
        if n == 0:
            out[key["mean"]] = warn_undefined(
                f"reward component {name!r} is given for no sample: its metrics are NaN", stacklevel=None
            )
            out[key["std"]] = out[key["max"]] = out[key["min"]] = math.nan
        else:
            m2 = max(s[f"{name}{_SEP}m2"] + s[f"{name}{_SEP}sq_over_n"] - total * total / n, 0.0)
            out[key["mean"]] = total / n
            out[key["std"]] = math.sqrt(m2 / (n - 1)) if n > 1 else math.nan
            out[key["max"]], out[key["min"]] = hi[name], lo[name]
        decided = s["n_decided"]
        out[key["decides_frac"]] = s[f"{name}{_SEP}decides"] / decided if decided > 0 else math.nan
    return out


@metrics_from(reward_component_statistics)
def compute_reward_component_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    components: Mapping[str, Any],
    *,
    weights: Mapping[str, float] | None = None,
    process_group: Any = None,
) -> dict[str, float]:
    """Mean, unbiased std, max, min of each reward component, and the share of samples it decides.

    Parameters
    ----------
    components : Mapping[str, array of shape (B,)]
        Per-sample values of each component (verl's ``reward_extra_info``, one entry per TRL
        reward function); NaN marks a value not given for that sample (TRL's ``None``).
    weights : Mapping[str, float], optional, keyword-only
        Each component's weight in the total (default 1; TRL's ``reward_weights``): a component
        decides a sample when ``|weight * value|`` is the largest of its given components (ties
        to the first name in sorted order).
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        The metrics of the union of every rank's samples (exact); ranks must pass the same
        component names and weights.

    Returns
    -------
    dict[str, float]
        ``reward_components/<name>/{mean,std,max,min,decides_frac}``, the name escaped as a
        category (``keys.reward_component_key``). ``std`` is NaN with fewer than two values;
        every statistic of a component given for no sample is NaN with an
        ``UndefinedMetricWarning``.
    """
    ...  # @metrics_from computes: the statistics, their all-reduce, finalize
