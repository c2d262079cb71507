"""verl's validation statistics (``process_validation_metrics``): the same draws, vectorised.

verl 0.9.1 estimates best@k, worst@k and maj@k of every prompt with a 1000-draw bootstrap run
as a Python loop per prompt, variable and k. Here the draws are shared
(:mod:`~rlmetrics.validation.verl.draws`), best@k and worst@k come from rank counts
(:mod:`~rlmetrics.validation.verl.extremes`), maj@k from exact vote scores
(:mod:`~rlmetrics.validation.verl.majority`, on the vote patterns of
:class:`~rlmetrics.validation.exact.votes.Votes`), for all prompts with the same number of samples at
once. Only the means and standard deviations over the draws are needed, so each prompt's
statistic is the weighted mean and std of its values under integer counts (float64; the results
agree with verl's to about 1e-15).

:func:`process_validation_metrics` runs in four stages: the samples are *grouped* into prompts
and each variable's kept values listed (:func:`_kept_values`), failed sessions are *padded*
(:func:`_pad`), the per-prompt metrics are computed *per variable* (:func:`_variable_metrics`)
and the means over prompts *assembled* in verl's key order (:func:`_assemble`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys
from rlmetrics._core.checks import check_int
from rlmetrics.keys import ValName
from rlmetrics.validation.exact.inputs import (
    Column,
    Prompts,
    as_list,
    group_prompts,
    predictions,
    read_column,
)
from rlmetrics.validation.exact.votes import Votes, first_positions
from rlmetrics.validation.verl import draws
from rlmetrics.validation.verl.extremes import (
    best_worst_stats,
    rank_counts,
    weighted_mean_std,
    weighted_mean_std_blocks,
)
from rlmetrics.validation.verl.majority import majority_counts, pattern_counts

__all__ = [
    "MAX_DRAWS",
    "MAX_SAMPLES_PER_PROMPT",
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "flatten_validation_metrics",
    "process_validation_metrics",
]

_N_BOOTSTRAP = 1000
#: Most samples per prompt (observed, or padded by ``expected_acc_counts``) that
#: :func:`process_validation_metrics` takes: verl's bootstrap draws 1000 x that many indices
#: per k, and 16384 already costs seconds and about 0.7 GB. The exact estimators of
#: :func:`~rlmetrics.validation.exact.summary.summarize_validation` have no such limit.
MAX_SAMPLES_PER_PROMPT = 1 << 14
#: Most indices (``n_bootstrap * subset_size``) one :func:`bootstrap_metric` or
#: :func:`bootstrap_indices` call draws: 128 MB of int64.
MAX_DRAWS = 1 << 24
_MAX_SEED = 2**32 - 1


def _check_seed(seed: Any) -> int:
    """verl's seed, for ``np.random.seed``: an integer in [0, 2**32 - 1]."""
    seed = check_int(seed, "seed")
    if not 0 <= seed <= _MAX_SEED:
        raise ValueError(
            f"seed must be an integer in [0, 2**32 - 1] (numpy's legacy seeding, as verl's "
            f"np.random.seed); got {seed}"
        )
    return seed


def _check_draws(subset_size: int, n_bootstrap: int) -> None:
    if n_bootstrap * max(subset_size, 1) > MAX_DRAWS:
        raise ValueError(
            f"n_bootstrap * subset_size must be at most {MAX_DRAWS} (2**24 indices drawn); got "
            f"n_bootstrap={n_bootstrap}, subset_size={subset_size}"
        )


# ----------------------------------------------------------------------------- verl drop-ins
def bootstrap_indices(
    n_data: int, subset_size: int, *, n_bootstrap: int = _N_BOOTSTRAP, seed: int = 42
) -> np.ndarray:
    """The bootstrap index matrix verl draws, without touching numpy's global RNG.

    verl calls ``np.random.seed(seed)`` then ``np.random.choice(n_data, size=(n_bootstrap,
    subset_size), replace=True)``; a local ``RandomState(seed)`` gives the same indices.

    Parameters
    ----------
    n_data : int
        Number of data points (> 0).
    subset_size : int
        Draws per bootstrap sample (>= 0).
    n_bootstrap : int, keyword-only
        Number of bootstrap samples (> 0); ``n_bootstrap * subset_size`` at most
        :data:`MAX_DRAWS`.
    seed : int, keyword-only
        The seed verl passes to ``np.random.seed``, in [0, 2**32 - 1].

    Returns
    -------
    numpy.ndarray of shape ``(n_bootstrap, subset_size)``, int
        Read-only (cached) index matrix.

    Examples
    --------
    >>> import numpy as np
    >>> idx = bootstrap_indices(5, 3, n_bootstrap=4, seed=42)
    >>> verl = np.random.RandomState(42)  # the generator np.random.seed(42) seeds, kept local here
    >>> bool((idx == verl.choice(5, size=(4, 3), replace=True)).all())
    True
    """
    n_data = check_int(n_data, "n_data", minimum=1)
    subset_size = check_int(subset_size, "subset_size", minimum=0)
    n_bootstrap = check_int(n_bootstrap, "n_bootstrap", minimum=1)
    _check_draws(subset_size, n_bootstrap)
    return draws.indices(n_data, subset_size, n_bootstrap, _check_seed(seed))


def calc_maj_val(data: Sequence[Mapping[str, Any]], vote_key: str, val_key: str) -> Any:
    """Value of the first item whose ``vote_key`` is the most common (verl's ``calc_maj_val``).

    Ties go to the vote that appears first in ``data``.

    Parameters
    ----------
    data : sequence of mappings
        Each holds ``vote_key`` and ``val_key``.
    vote_key, val_key : str
        The keys of the vote and of the value to return.

    Returns
    -------
    The ``val_key`` value of the first item voting for the winner.

    Examples
    --------
    >>> calc_maj_val([{"pred": "A", "val": 0.9}, {"pred": "B", "val": 0.8}, {"pred": "A", "val": 0.7}],
    ...              vote_key="pred", val_key="val")
    0.9
    """
    if len(data) == 0:
        raise ValueError("data must hold at least one item to vote on; got an empty sequence")
    counts: dict[Any, int] = {}
    first_val: dict[Any, Any] = {}
    for i, item in enumerate(data):
        try:
            vote, val = item[vote_key], item[val_key]
        except (KeyError, TypeError, IndexError):
            held = sorted(map(str, item.keys())) if hasattr(item, "keys") else type(item).__name__
            raise ValueError(
                f"data[{i}] must hold the keys {vote_key!r} and {val_key!r}; it holds {held}"
            ) from None
        if vote in counts:
            counts[vote] += 1
        else:
            counts[vote] = 1
            first_val[vote] = val
    winner = max(counts, key=counts.__getitem__)
    return first_val[winner]


def _reducer_kind(fn: Any) -> tuple[str, Any]:
    """Classify a reduce function: ('max'|'min'|'mean', None), ('maj', (vote, val)) or ('other', None)."""
    if fn in (np.max, np.amax, max):
        return "max", None
    if fn in (np.min, np.amin, min):
        return "min", None
    if fn is np.mean:
        return "mean", None
    if isinstance(fn, functools.partial) and not fn.args and set(fn.keywords) == {"vote_key", "val_key"}:
        target = fn.func
        if target is calc_maj_val or getattr(target, "__name__", "") == "calc_maj_val":
            return "maj", (fn.keywords["vote_key"], fn.keywords["val_key"])
    return "other", None


def _numeric_vector(data: Sequence[Any]) -> np.ndarray | None:
    try:
        arr = np.asarray(data)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        return None
    return arr.astype(np.float64)


def _vote_inputs(data: Sequence[Any], vote_key: str, val_key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(vote codes, float64 values) of mappings, or None when they are not that."""
    try:
        votes = [d[vote_key] for d in data]
        vals = _numeric_vector([d[val_key] for d in data])
        code_of: dict[Any, int] = {}
        codes = np.array([code_of.setdefault(v, len(code_of)) for v in votes], dtype=np.int64)
    except (KeyError, TypeError, IndexError):
        return None
    return None if vals is None else (codes, vals)


def _reduced(
    data: Sequence[Any], fn: Any, idx: np.ndarray, subset_size: int, n_bootstrap: int, seed: int
) -> tuple[float, float] | None:
    """Bootstrap (mean, std) of a reduce function verl's loop would give, vectorised; None when
    ``fn`` or ``data`` is of a kind only the loop handles."""
    kind, extra = _reducer_kind(fn)
    if subset_size == 0:
        return None
    if kind in ("max", "min", "mean"):
        numeric = _numeric_vector(data)
        if numeric is None:
            return None
        if kind == "mean":
            per_draw = numeric[idx].mean(axis=1)
            return float(np.mean(per_draw)), float(np.std(per_draw))
        sorted_vals, best, worst = rank_counts(numeric[None, :], subset_size, n_bootstrap, seed)
        mean, std = weighted_mean_std(sorted_vals, best if kind == "max" else worst, n_bootstrap)
        return float(mean[0]), float(std[0])
    if kind == "maj":
        got = _vote_inputs(data, *extra)
        if got is None:
            return None
        codes, vals = got
        # first positions in O(n log n): local_codes of one long row would compare every pair
        counts = majority_counts(first_positions(codes)[None, :], subset_size, n_bootstrap, seed)
        order = np.argsort(vals, kind="stable")
        mean, std = weighted_mean_std(vals[order][None, :], counts[:, order], n_bootstrap)
        return float(mean[0]), float(std[0])
    return None


def bootstrap_metric(
    data: Sequence[Any],
    subset_size: int,
    reduce_fns: Sequence[Callable[[np.ndarray], float]],
    n_bootstrap: int = _N_BOOTSTRAP,
    seed: int = 42,
) -> list[tuple[float, float]]:
    """Bootstrap (mean, std) of reduce functions over resamples, identical to verl's.

    Draws ``n_bootstrap`` samples of ``subset_size`` items with replacement (the same indices as
    verl, from a local generator: numpy's global RNG is left alone) and returns, per reduce
    function, the mean and population std of its value over the samples. ``np.max``/``max``,
    ``np.min``/``min``, ``np.mean`` and ``functools.partial(calc_maj_val, vote_key=..,
    val_key=..)`` are computed vectorised; any other callable is called on each sample (an
    object array, as in verl).

    Parameters
    ----------
    data : sequence, length n > 0
        Numbers, or mappings for the majority vote.
    subset_size : int
        Items per bootstrap sample.
    reduce_fns : sequence of callables
        Each maps a sample (object array of shape ``(subset_size,)``) to a number.
    n_bootstrap : int
        Number of bootstrap samples; ``n_bootstrap * subset_size`` at most :data:`MAX_DRAWS`.
    seed : int
        Seed of the draws (verl's default 42), in [0, 2**32 - 1].

    Returns
    -------
    list of (mean, std) float tuples, one per reduce function.

    Examples
    --------
    >>> import numpy as np
    >>> [tuple(round(v, 4) for v in r) for r in bootstrap_metric([1, 2, 3, 4, 5], 3, [np.mean, np.max])]
    [(3.0087, 0.8167), (4.221, 0.9488)]
    """
    if isinstance(data, str | bytes) or not hasattr(data, "__len__"):
        raise TypeError(f"data must be a sequence of numbers or mappings; got {type(data).__name__}")
    n_data = len(data)
    if n_data == 0:
        raise ValueError("data must hold at least one item to resample; got an empty sequence")
    if isinstance(reduce_fns, str | bytes) or callable(reduce_fns) or not hasattr(reduce_fns, "__iter__"):
        raise TypeError(
            f"reduce_fns must be a sequence of callables (e.g. [np.max]); got {type(reduce_fns).__name__}"
        )
    reduce_fns = list(reduce_fns)
    for i, fn in enumerate(reduce_fns):
        if not callable(fn):
            raise TypeError(f"reduce_fns[{i}] must be callable; got {type(fn).__name__} {fn!r}")
    idx = bootstrap_indices(n_data, subset_size, n_bootstrap=n_bootstrap, seed=seed)
    results: list[tuple[float, float]] = []
    for fn in reduce_fns:
        fast = _reduced(data, fn, idx, int(subset_size), int(n_bootstrap), int(seed))
        if fast is not None:
            results.append(fast)
            continue
        # any other reduce function: verl's loop
        data_np = np.empty(n_data, dtype=object)
        data_np[:] = list(data)
        out = np.empty(n_bootstrap, dtype=np.float64)
        for b in range(n_bootstrap):
            out[b] = fn(data_np[idx[b]])
        results.append((float(np.mean(out)), float(np.std(out))))
    return results


# ----------------------------------------------------------------------------- stage: group
class _Kept(NamedTuple):
    """One variable's kept values (None dropped), grouped by prompt in verl's list order."""

    #: (m,) prompt of each value, ascending
    pid: np.ndarray
    #: (m,) float64
    values: np.ndarray
    #: (m,) float32 copy when verl averages in float32, else None
    narrow: np.ndarray | None
    #: (m,) sample of each value (-1: padding)
    samples: np.ndarray


class _Variable(NamedTuple):
    """A variable of ``infos_dict`` (``column`` None for one derived from another) and its values."""

    column: Column | None
    kept: _Kept


def _kept_values(column: Column, prompts: Prompts, name: str, raw: Any) -> _Kept:
    """The values verl lists per prompt: None dropped, prompts whose first value is a string skipped.

    Raises
    ------
    TypeError
        A string among the numbers of a prompt whose first value is a number.
    """
    pid_sorted = prompts.pid[prompts.order]
    if column.is_none.any():
        keep = ~column.is_none[prompts.order]
        e_pid, e_idx = pid_sorted[keep], prompts.order[keep]
    else:  # shared, never written to
        e_pid, e_idx = pid_sorted, prompts.order
    e_str = column.is_str[e_idx]
    if e_str.any():
        first = np.ones(e_pid.shape[0], dtype=bool)
        first[1:] = e_pid[1:] != e_pid[:-1]
        skipped = np.zeros(prompts.sizes.shape[0], dtype=bool)
        skipped[e_pid[first & e_str]] = True
        skip = skipped[e_pid]
        if (e_str & ~skip).any():
            bad = int(e_idx[e_str & ~skip][0])
            raise TypeError(
                f"infos_dict[{name!r}] mixes numbers and strings within a prompt: sample {bad} is "
                f"the string {raw[bad]!r}"
            )
        e_pid, e_idx = e_pid[~skip], e_idx[~skip]
    narrow = column.narrow[e_idx] if column.narrow is not None else None
    return _Kept(e_pid, column.values[e_idx], narrow, e_idx)


# ----------------------------------------------------------------------------- stage: pad
class _Layout(NamedTuple):
    """The prompts after verl's padding of failed sessions (prompts only listed come last)."""

    #: every variable in verl's order, ``acc_success_only`` last when padding applies
    variables: dict[str, _Variable]
    #: (P,) source of each prompt
    src_of: np.ndarray
    #: (P,) observed samples per prompt (0 for a prompt only listed)
    sizes: np.ndarray
    #: prompts whose padded ``acc`` list mixes float32 with Python floats (verl: float64 mean)
    narrow_off: np.ndarray


def _pad(
    variables: dict[str, _Variable], prompts: Prompts, expected: Mapping[tuple[Any, Any], int] | None
) -> _Layout:
    """verl's ``expected_acc_counts``: for sources that report ``acc``, each listed prompt's ``acc``
    is padded with zeros up to its expected count, and ``acc_success_only`` keeps its observed values."""
    no_pad = np.zeros(0, dtype=np.int64)
    if not expected or ValName.ACC not in variables:
        return _Layout(variables, prompts.src_of, prompts.sizes, no_pad)
    acc = variables[ValName.ACC]
    plan = _pad_plan(acc, prompts, expected)
    kept = acc.kept
    in_listed = np.isin(kept.pid, plan.listed)
    success_only = _Kept(
        kept.pid[in_listed],
        kept.values[in_listed],
        kept.narrow[in_listed] if kept.narrow is not None else None,
        kept.samples[in_listed],
    )
    out = dict(variables)
    narrow_off = no_pad
    if plan.pad_pid.size:
        add = np.repeat(plan.pad_pid, plan.pad_count)
        srt = np.argsort(np.concatenate([kept.pid, add]), kind="stable")
        zeros = np.zeros(add.shape[0])
        narrow = None
        if kept.narrow is not None:
            narrow = np.concatenate([kept.narrow, zeros.astype(np.float32)])[srt]
            narrow_off = plan.pad_pid  # a float32 list padded with Python 0.0: verl's mean in float64
        padded = _Kept(
            np.concatenate([kept.pid, add])[srt],
            np.concatenate([kept.values, zeros])[srt],
            narrow,
            np.concatenate([kept.samples, np.full(add.shape[0], -1)])[srt],
        )
        out[ValName.ACC] = _Variable(acc.column, padded)
    out[ValName.ACC_SUCCESS_ONLY] = _Variable(None, success_only)
    src_of = np.concatenate([prompts.src_of, plan.new_src])
    sizes = np.concatenate([prompts.sizes, np.zeros(plan.new_src.shape[0], dtype=np.int64)])
    return _Layout(out, src_of, sizes, narrow_off)


class _PadPlan(NamedTuple):
    #: prompts listed in ``expected_acc_counts`` (sorted, distinct)
    listed: np.ndarray
    #: prompts to pad and how many zeros each
    pad_pid: np.ndarray
    pad_count: np.ndarray
    #: source of each listed prompt never observed (numbered after the observed ones)
    new_src: np.ndarray


def _pad_plan(acc: _Variable, prompts: Prompts, expected: Mapping[tuple[Any, Any], int]) -> _PadPlan:
    """Which prompts ``expected_acc_counts`` lists and pads (only sources that report ``acc``)."""
    assert acc.column is not None
    prompt_keys = prompts.keys()
    n_observed = len(prompt_keys)
    prompt_of = dict(zip(prompt_keys, range(n_observed)))
    observed = np.bincount(prompts.pid[~acc.column.is_none], minlength=n_observed)
    acc_sources = {prompt_keys[p][0] for p in np.flatnonzero(observed > 0).tolist()}
    src_code = {src: i for i, src in enumerate(prompts.sources)}
    listed: list[int] = []
    pad_pid: list[int] = []
    pad_count: list[int] = []
    new_src: list[int] = []
    for key, count in expected.items():
        if not isinstance(key, tuple) or len(key) != 2:
            raise TypeError(
                f"expected_acc_counts must map (data_source, uid) pairs to counts; got the key {key!r}"
            )
        name = f"expected_acc_counts[{key!r}]"
        count = check_int(count, name, minimum=0)
        if count > MAX_SAMPLES_PER_PROMPT:
            raise ValueError(
                f"{name} must be at most {MAX_SAMPLES_PER_PROMPT} (MAX_SAMPLES_PER_PROMPT: verl's "
                f"bootstrap draws 1000 x the samples of a prompt per k); got {count}"
            )
        src, uid = key
        if src not in acc_sources:
            continue
        p = prompt_of.get((src, uid))
        if p is None:
            p = prompt_of[(src, uid)] = n_observed + len(new_src)
            new_src.append(src_code[src])
        listed.append(p)
        missing = max(count - (int(observed[p]) if p < n_observed else 0), 0)
        if missing:
            pad_pid.append(p)
            pad_count.append(missing)
    return _PadPlan(
        np.unique(np.asarray(listed, dtype=np.int64)),
        np.asarray(pad_pid, dtype=np.int64),
        np.asarray(pad_count, dtype=np.int64),
        np.asarray(new_src, dtype=np.int64),
    )


# ----------------------------------------------------------------------------- stage: per variable
def _gen_ns(n_resps: int) -> list[int]:
    """verl's k: 2, 4, 8, ... below ``n_resps``, then ``n_resps`` (none for one sample)."""
    if n_resps <= 1:
        return []
    ns = []
    n = 2
    while n < n_resps:
        ns.append(n)
        n *= 2
    ns.append(n_resps)
    return ns


def _metric_names(n_resps: int, has_pred: bool) -> list[str]:
    """verl's metric names of a prompt with ``n_resps`` values, in its order."""
    names = [keys.at_k(ValName.MEAN, n_resps)]
    if n_resps > 1:
        names.append(keys.at_k(ValName.STD, n_resps))
        stats = (ValName.BEST, ValName.WORST, ValName.MAJ) if has_pred else (ValName.BEST, ValName.WORST)
        for k in _gen_ns(n_resps):
            names += [keys.val_moment(s, k, m) for s in stats for m in (ValName.MEAN, ValName.STD)]
    return names


def _maj_stats(
    votes: Votes, prompts: np.ndarray, vals: np.ndarray, k: int, n_bootstrap: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """verl's bootstrap maj@k mean and std of ``prompts`` (sorted, complete, one number of samples).

    The vote patterns come from the shared :class:`~rlmetrics.validation.exact.votes.Votes`;
    each pattern's counts of verl's picks (:func:`~rlmetrics.validation.verl.majority.pattern_counts`)
    are computed once per ``k`` and shared by every variable.
    """
    n = vals.shape[1]
    table = votes.patterns(n)
    compute = functools.partial(pattern_counts, table.patterns, k, n_bootstrap, seed)
    counts = votes.memo(("verl", n, k, n_bootstrap, seed), compute)
    return weighted_mean_std_blocks(vals, counts[table.inverse[votes.rows(prompts, n)]], n_bootstrap)


class _VarMetrics(NamedTuple):
    """A variable's per-prompt metrics and the prompts they cover."""

    #: metric name -> parts of (prompts, value of each), one part per number of values
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]]
    #: (A,) prompts with at least one value, ascending
    active: np.ndarray
    #: (A,) values per active prompt
    counts: np.ndarray
    #: (A,) whether each active prompt has maj@k
    has_pred: np.ndarray


def _mean_std(
    vals: np.ndarray, pos: np.ndarray, kept: _Kept, narrow_rows: np.ndarray | None, column: Column | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``np.mean`` / ``np.std`` as verl computes them (float32 rows stay float32)."""
    means = np.mean(vals, axis=1)
    stds = np.std(vals, axis=1)
    if kept.narrow is not None and narrow_rows is not None and narrow_rows.any():
        nv = kept.narrow[pos[narrow_rows]]
        means[narrow_rows] = np.mean(nv, axis=1)
        stds[narrow_rows] = np.std(nv, axis=1)
    if column is not None and column.items is not None:
        # float32 / float16 among other numbers: verl's dtype depends on each prompt's list
        items = column.items
        for r in range(vals.shape[0]):
            row = [items[i] if i >= 0 else 0.0 for i in kept.samples[pos[r]].tolist()]
            means[r] = float(np.mean(row))
            stds[r] = float(np.std(row))
    return means, stds


def _variable_metrics(
    name: str, var: _Variable, layout: _Layout, votes: Votes, n_bootstrap: int, seed: int
) -> _VarMetrics | None:
    """verl's per-prompt metrics of one variable, for all prompts with the same number of values
    at once; None when no prompt has a value."""
    kept = var.kept
    count = np.bincount(kept.pid, minlength=layout.sizes.shape[0])
    active = np.flatnonzero(count > 0)
    if active.size == 0:
        return None
    starts = np.concatenate([[0], np.cumsum(count)])
    has_pred = votes.complete & (count == layout.sizes)
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}

    def add(metric: str, prompts: np.ndarray, values: np.ndarray) -> None:
        parts.setdefault(metric, []).append((prompts, values))

    for n_resps in np.unique(count[active]).tolist():
        prompts = active[count[active] == n_resps]
        pos = starts[prompts][:, None] + np.arange(n_resps)[None, :]
        vals = kept.values[pos]
        narrow_rows = None
        if kept.narrow is not None:
            narrow_off = layout.narrow_off if name == ValName.ACC else np.zeros(0, dtype=np.int64)
            narrow_rows = ~np.isin(prompts, narrow_off)
        means, stds = _mean_std(vals, pos, kept, narrow_rows, var.column)
        add(keys.at_k(ValName.MEAN, n_resps), prompts, means)
        if n_resps <= 1:
            continue
        add(keys.at_k(ValName.STD, n_resps), prompts, stds)
        ks = _gen_ns(n_resps)
        extremes = best_worst_stats(vals, ks, n_bootstrap, seed)
        vote_rows = has_pred[prompts]
        for k in ks:
            bw = extremes[k]
            add(keys.val_moment(ValName.BEST, k, ValName.MEAN), prompts, bw.best_mean)
            add(keys.val_moment(ValName.BEST, k, ValName.STD), prompts, bw.best_std)
            add(keys.val_moment(ValName.WORST, k, ValName.MEAN), prompts, bw.worst_mean)
            add(keys.val_moment(ValName.WORST, k, ValName.STD), prompts, bw.worst_std)
            if vote_rows.any():
                mean, std = _maj_stats(votes, prompts[vote_rows], vals[vote_rows], k, n_bootstrap, seed)
                add(keys.val_moment(ValName.MAJ, k, ValName.MEAN), prompts[vote_rows], mean)
                add(keys.val_moment(ValName.MAJ, k, ValName.STD), prompts[vote_rows], std)
    return _VarMetrics(parts, active, count[active], has_pred[active])


def _same_variable(name: str, done: Mapping[str, _Variable], var: _Variable) -> str | None:
    """An earlier variable with the same kept values per prompt (verl's ``reward`` next to ``score``
    or ``acc``), whose metrics are then shared; only plain float64 columns are compared."""
    if var.kept.narrow is not None or var.column is None or var.column.exotic:
        return None
    e = var.kept
    for other, o_var in done.items():
        o = o_var.kept
        if o.narrow is not None or o_var.column is None or o_var.column.exotic or o.pid.shape != e.pid.shape:
            continue
        if (o.pid is e.pid or np.array_equal(o.pid, e.pid)) and (
            np.array_equal(o.values, e.values)  # one pass; NaNs (never equal) need the slower check
            or (bool(np.isnan(e.values).any()) and np.array_equal(o.values, e.values, equal_nan=True))
        ):
            return other
    return None


# ----------------------------------------------------------------------------- stage: assemble
def _assemble(
    per_var: Mapping[str, _VarMetrics], layout: _Layout, sources: list[Any]
) -> dict[str, dict[str, dict[str, float]]]:
    """The mean over prompts of every metric, per source, in verl's order: variables in order of
    their first prompt in the source, metrics in :func:`_metric_names` order."""
    var_rank = {name: i for i, name in enumerate(layout.variables)}
    one_source = len(sources) == 1
    result: dict[str, dict[str, dict[str, float]]] = {}
    for s, src in enumerate(sources):
        entries = []
        for name, vm in per_var.items():
            in_src = layout.src_of[vm.active] == s
            if in_src.any():
                entries.append((int(vm.active[in_src][0]), var_rank[name], name, in_src))
        if not entries:
            continue
        src_out: dict[str, dict[str, float]] = {}
        for _, _, name, in_src in sorted(entries, key=lambda e: e[:2]):
            vm = per_var[name]
            names = _names_in_order(vm.counts[in_src], vm.has_pred[in_src])
            src_out[name] = {m: _source_mean(vm.parts[m], layout.src_of, s, one_source) for m in names}
        result[src] = src_out
    return result


def _names_in_order(counts: np.ndarray, has_pred: np.ndarray) -> list[str]:
    """Metric names of prompts with these (count, has_pred), configurations in first-prompt order."""
    cfg = counts.astype(np.int64) * 2 + has_pred
    _, first_at = np.unique(cfg, return_index=True)
    names: dict[str, None] = {}
    for i in np.sort(first_at).tolist():
        names.update(dict.fromkeys(_metric_names(int(counts[i]), bool(has_pred[i]))))
    return list(names)


def _source_mean(
    parts: list[tuple[np.ndarray, np.ndarray]], src_of: np.ndarray, s: int, one_source: bool
) -> float:
    """``np.mean`` of a metric over the prompts of source ``s``, in prompt order (as verl lists them)."""
    if one_source and len(parts) == 1:  # every prompt, already in ascending order
        return float(np.mean(parts[0][1]))
    p_all = np.concatenate([p for p, _ in parts])
    v_all = np.concatenate([v for _, v in parts])
    sel = src_of[p_all] == s
    p_sel, v_sel = p_all[sel], v_all[sel]
    if p_sel.size > 1 and not bool(np.all(p_sel[1:] > p_sel[:-1])):
        v_sel = v_sel[np.argsort(p_sel, kind="stable")]
    return float(np.mean(v_sel))


# ----------------------------------------------------------------------------- the entry point
def process_validation_metrics(
    data_sources: Sequence[Any] | np.ndarray,
    sample_uids: Sequence[Any] | np.ndarray,
    infos_dict: Mapping[str, Sequence[Any]],
    seed: int = 42,
    expected_acc_counts: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Validation metrics per data source and variable, identical to verl 0.9.1's.

    Groups samples by ``(data_source, uid)`` and, per prompt and numeric variable, computes
    ``mean@N`` and ``std@N`` over its ``N`` samples and, for ``k`` in 2, 4, 8, ... and ``N``,
    verl's bootstrap ``best@k/mean|std``, ``worst@k/mean|std`` and, when a ``pred`` variable
    exists, ``maj@k/mean|std``; then averages every metric over the prompts that have it.
    ``None`` values are dropped and string variables skipped, as verl does.

    Parameters
    ----------
    data_sources : sequence, length n
        Data source of each sample.
    sample_uids : sequence, length n
        Prompt id of each sample.
    infos_dict : mapping of str to sequence of length n
        Per-sample values (bool, int, float, str or None) of each variable.
    seed : int
        Seed of verl's bootstrap draws, in [0, 2**32 - 1] (numpy's global RNG is not touched).
    expected_acc_counts : mapping of (data_source, uid) to int, optional
        verl's failed-session padding: for sources that report ``acc``, each listed prompt's
        ``acc`` is padded with zeros up to the expected count, and ``acc_success_only`` keeps the
        observed values. Counts are integers in [0, :data:`MAX_SAMPLES_PER_PROMPT`].

    Raises
    ------
    TypeError
        Arguments of the wrong type: a non-sequence, unhashable sources or uids, values that
        are not numbers/bools/strings/None, a count that is not an integer.
    ValueError
        Lengths that differ, sources that print the same (``1`` and ``"1"``), a seed outside
        [0, 2**32 - 1], or a prompt (observed or expected) of more than
        :data:`MAX_SAMPLES_PER_PROMPT` samples.

    Returns
    -------
    dict
        ``{data_source: {variable: {metric_name: value}}}`` with float values.

    Examples
    --------
    >>> out = process_validation_metrics(
    ...     ["math"] * 4, ["q1", "q1", "q2", "q2"],
    ...     {"acc": [1.0, 0.0, 1.0, 1.0], "pred": ["4", "5", "7", "7"]})
    >>> out["math"]["acc"]["mean@2"], out["math"]["acc"]["best@2/mean"]
    (0.75, 0.885)
    """
    sources = as_list(data_sources, "data_sources")
    uids = as_list(sample_uids, "sample_uids")
    n = len(sources)
    if len(uids) != n:
        raise ValueError(
            f"sample_uids must have one entry per sample ({n}, the length of data_sources); got {len(uids)}"
        )
    if not isinstance(infos_dict, Mapping):
        raise TypeError(
            f"infos_dict must be a mapping of variable name to values; got {type(infos_dict).__name__}"
        )
    seed = _check_seed(seed)
    n_bootstrap = _N_BOOTSTRAP
    if expected_acc_counts is not None and not isinstance(expected_acc_counts, Mapping):
        raise TypeError(
            "expected_acc_counts must be a mapping of (data_source, uid) to int; got "
            f"{type(expected_acc_counts).__name__}"
        )

    prompts = group_prompts(sources, uids, check_uids=False)  # the output names no uid
    if prompts.sizes.size and int(prompts.sizes.max()) > MAX_SAMPLES_PER_PROMPT:
        p = int(np.argmax(prompts.sizes))
        raise ValueError(
            f"the prompt {prompts.keys()[p]!r} has {int(prompts.sizes[p])} samples; "
            f"process_validation_metrics takes at most {MAX_SAMPLES_PER_PROMPT} per prompt "
            "(MAX_SAMPLES_PER_PROMPT: verl's bootstrap draws 1000 x that many per k); "
            "summarize_validation has no such limit"
        )
    columns = {name: read_column(raw, name, n) for name, raw in infos_dict.items()}
    variables = {
        name: _Variable(column, _kept_values(column, prompts, name, infos_dict[name]))
        for name, column in columns.items()
    }
    layout = _pad(variables, prompts, expected_acc_counts)
    pred = (
        predictions(infos_dict[ValName.PRED], prompts, ValName.PRED) if ValName.PRED in infos_dict else None
    )
    votes = Votes(pred, layout.sizes)

    per_var: dict[str, _VarMetrics] = {}
    done: dict[str, _Variable] = {}
    for name, var in layout.variables.items():
        twin = _same_variable(name, done, var)
        if twin is not None:
            if twin in per_var:
                per_var[name] = per_var[twin]
            continue
        done[name] = var
        metrics = _variable_metrics(name, var, layout, votes, n_bootstrap, seed)
        if metrics is not None:
            per_var[name] = metrics
    return _assemble(per_var, layout, prompts.sources)


def flatten_validation_metrics(
    metrics: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> dict[str, float]:
    """Logger keys ``val-core/{source}/{var}/{metric}`` and ``val-aux/...``, by verl's rule.

    A metric is *core* when its variable is the source's core variable (``acc`` if the source has
    it, else ``reward``), its name starts with ``mean``, ``maj`` or ``best``, and it is taken at
    the largest ``N`` of that variable; everything else is *aux*.

    Parameters
    ----------
    metrics : mapping
        The output of :func:`process_validation_metrics`.

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> flat = flatten_validation_metrics({"gsm8k": {"acc": {"mean@4": 0.5, "best@2/mean": 0.7,
    ...                                                      "best@4/mean": 0.8}}})
    >>> sorted(flat)
    ['val-aux/gsm8k/acc/best@2/mean', 'val-core/gsm8k/acc/best@4/mean', 'val-core/gsm8k/acc/mean@4']
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"metrics must be a nested mapping source -> variable -> metric; got {type(metrics).__name__}"
        )
    acc, reward = keys.VAL_CORE_VARS
    out: dict[str, float] = {}
    for source, var2metric in metrics.items():
        core_var = acc if acc in var2metric else reward
        for var_name, metric2val in var2metric.items():
            try:
                n_max = max(int(m.split("@")[-1].split("/")[0]) for m in metric2val)
            except ValueError:
                raise ValueError(
                    f"metrics[{source!r}][{var_name!r}] must hold verl metric names such as 'mean@4'; "
                    f"got {sorted(metric2val)}"
                ) from None
            for metric_name, value in metric2val.items():
                core = (
                    var_name == core_var
                    and metric_name.startswith(keys.VAL_CORE_METRIC_PREFIXES)
                    and keys.at_k("", n_max) in metric_name
                )
                section = keys.VAL_CORE_PREFIX if core else keys.VAL_AUX_PREFIX
                out[keys.val_metric(section, source, var_name, metric_name)] = float(value)
    return out
