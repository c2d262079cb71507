"""A validation summary with exact estimators and honest error bars across prompts.

:func:`summarize_validation` reports, per data source and variable, the mean over samples and
the exact pass@k / pass^k / best@k / worst@k / maj@k (see :mod:`rlmetrics.validation.exact.estimators`)
for k = 1, 2, 4, ... N, plus the shares of prompts solved by all, by none, and at a rate of at
least tau (cover@tau) for 0/1 variables. Each is the mean over prompts of a per-prompt estimate
(:func:`prompt_estimates`: the table :mod:`rlmetrics.validation.comparison` pairs across runs) with
its standard error over prompts and an interval (:mod:`rlmetrics.validation.exact.intervals`: Wilson
on the effective number of prompts by default, which stays inside [0, 1]).

Prompts with different numbers of samples are kept apart where it matters: each statistic says
how many prompts it covers, prompts with fewer than ``k`` samples are left out of the ``@k``
statistics (without replacement the estimator is undefined there; a warning names them), and
the number of prompts per sample count is reported.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys
from rlmetrics._core.checks import check_int, check_seed, warn_undefined
from rlmetrics.errors import UndefinedMetricWarning
from rlmetrics.keys import ValName
from rlmetrics.validation._args import check_level
from rlmetrics.validation.exact.estimators import _order_stat_weights
from rlmetrics.validation.exact.inputs import (
    Prompts,
    as_list,
    factorize,
    group_prompts,
    local_codes,
    predictions,
    read_column,
)
from rlmetrics.validation.exact.intervals import CI_METHODS, DEFAULT_CI, Interval, column_intervals
from rlmetrics.validation.exact.votes import Votes, answer_means, pattern_weights, signatures, vote_means

__all__ = [
    "DEFAULT_TAUS",
    "PromptTable",
    "SummaryOptions",
    "default_ks",
    "prompt_estimates",
    "summarize_table",
    "summarize_validation",
]


def default_ks(n_max: int) -> list[int]:
    """k = 1, 2, 4, ... below ``n_max``, then ``n_max``.

    Examples
    --------
    >>> default_ks(16), default_ks(6), default_ks(1)
    ([1, 2, 4, 8, 16], [1, 2, 4, 6], [1])
    """
    ks = []
    k = 1
    while k < n_max:
        ks.append(k)
        k *= 2
    ks.append(max(n_max, 1))
    return ks


#: Default thresholds of cover@tau.
DEFAULT_TAUS = (0.5, 1.0)


class PromptTable(NamedTuple):
    """One variable of one data source: the per-prompt estimates behind its summary.

    ``values[i, j]`` is prompt ``i``'s estimate of metric ``names[j]`` (its mean over samples,
    its unbiased pass@k ...), NaN where it is undefined (``k`` above the prompt's samples, no
    predictions for maj@k). :func:`summarize_table` turns it into means with intervals;
    :mod:`rlmetrics.validation.comparison` pairs two of them prompt by prompt.
    """

    #: (source, uid) of each of the P prompts
    keys: list[tuple[Any, Any]]
    #: (P,) samples (non-missing values) per prompt
    counts: np.ndarray
    #: the M metric names, in report order
    names: list[str]
    #: (P, M) per-prompt estimates
    values: np.ndarray
    #: whether every value is 0 or 1
    binary: bool
    #: (P,) cluster code of each prompt, or None
    clusters: np.ndarray | None
    #: maj@k names computed partly by Monte Carlo -> False, exactly -> True
    exact_maj: dict[str, bool]
    #: names of the 0/1 per-prompt indicators (all_solved, cover@tau): one trial per prompt
    indicators: frozenset[str]


@dataclass(frozen=True)
class SummaryOptions:
    """The options of :func:`summarize_validation`, checked once, passed down as one object.

    Every field is checked (and normalised: ``ks`` and ``taus`` become tuples) when the object
    is made, so an error names the argument before any work is done.

    Attributes
    ----------
    ks : sequence of int or None
        The k values (>= 1, below 2**63); None: 1, 2, 4, ... and the largest number of samples.
    pred_key : str
        Name of the prediction variable.
    replace : bool
        Draws with replacement (the expectation of verl's bootstrap) instead of unbiased ones.
    confidence : float
        Level of the intervals, in (0, 1).
    ci : {"wilson-edge", "wilson", "t", "bootstrap"}
        The interval (:mod:`~rlmetrics.validation.exact.intervals`).
    taus : sequence of float
        Thresholds of cover@tau, in [0, 1] (repeats dropped).
    n_boot : int
        Resamples of ``ci="bootstrap"`` (>= 10).
    seed : int
        Seed of the maj@k Monte Carlo fallback and of the bootstrap (>= 0).

    Examples
    --------
    >>> SummaryOptions(ks=[1, 4], ci="t").ks
    (1, 4)
    >>> SummaryOptions(confidence=1.5)
    Traceback (most recent call last):
    ...
    ValueError: confidence must be in (0, 1); got 1.5
    """

    ks: Sequence[int] | None = None
    pred_key: str = ValName.PRED
    replace: bool = False
    confidence: float = 0.95
    ci: str = DEFAULT_CI
    taus: Sequence[float] = DEFAULT_TAUS
    n_boot: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        put = functools.partial(object.__setattr__, self)
        put("ks", _check_ks(self.ks))
        if not isinstance(self.pred_key, str):
            raise TypeError(
                f"pred_key must be the name of the prediction variable (a string); got "
                f"{type(self.pred_key).__name__} {self.pred_key!r}"
            )
        put("replace", bool(self.replace))
        put("confidence", check_level(self.confidence, "confidence"))
        if not isinstance(self.ci, str) or self.ci not in CI_METHODS:
            raise ValueError(f"ci must be one of {', '.join(CI_METHODS)}; got {self.ci!r}")
        put("taus", _check_taus(self.taus))
        put("n_boot", check_int(self.n_boot, "n_boot", minimum=10))
        put("seed", check_seed(self.seed))


def _check_ks(ks: Any) -> tuple[int, ...] | None:
    if ks is None:
        return None
    if isinstance(ks, str | bytes) or not isinstance(ks, Sequence | np.ndarray):
        raise TypeError(f"ks must be a list of integers >= 1; got {type(ks).__name__}")
    out = tuple(check_int(k, f"ks[{i}]", minimum=1) for i, k in enumerate(ks))
    if any(k > 2**63 - 1 for k in out):
        raise ValueError(f"ks must be integers below 2**63; got {max(out)}")
    if not out:
        raise ValueError("ks must be a non-empty list of integers >= 1; got []")
    return out


def _check_taus(taus: Any) -> tuple[float, ...]:
    if isinstance(taus, str | bytes) or not hasattr(taus, "__iter__"):
        raise TypeError(f"taus must be a list of numbers in [0, 1]; got {type(taus).__name__}")
    out = []
    for i, tau in enumerate(taus):
        if isinstance(tau, bool) or not isinstance(tau, int | float | np.integer | np.floating):
            raise TypeError(f"taus[{i}] must be a number in [0, 1]; got {type(tau).__name__} {tau!r}")
        if not 0.0 <= float(tau) <= 1.0:
            raise ValueError(f"taus[{i}] must be in [0, 1]; got {tau!r}")
        out.append(float(tau))
    return tuple(dict.fromkeys(out))


_DEFAULTS = SummaryOptions()


def _options(options: Any, fn: str, **given: Any) -> SummaryOptions:
    """``options``, or a :class:`SummaryOptions` of the keywords ``given``; not both."""
    if options is None:
        return SummaryOptions(**given)
    if not isinstance(options, SummaryOptions):
        raise TypeError(f"options must be a SummaryOptions; got {type(options).__name__}")
    changed = [name for name, value in given.items() if not _is_default(value, getattr(_DEFAULTS, name))]
    if changed:
        raise TypeError(
            f"{fn} takes options= or the keywords it holds, not both; got options= and {', '.join(changed)}"
        )
    return options


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if isinstance(default, tuple) and isinstance(value, list | tuple):
        return tuple(value) == default
    return type(value) is type(default) and value == default


def prompt_estimates(
    data_sources: Sequence[Any] | np.ndarray,
    sample_uids: Sequence[Any] | np.ndarray,
    infos_dict: Mapping[str, Sequence[Any]],
    *,
    ks: Sequence[int] | None = None,
    pred_key: str = ValName.PRED,
    replace: bool = False,
    seed: int = 0,
    clusters: Sequence[Any] | np.ndarray | None = None,
    taus: Sequence[float] = DEFAULT_TAUS,
    options: SummaryOptions | None = None,
) -> dict[str, dict[str, PromptTable]]:
    """Per data source and variable, every prompt's mean, pass@k, pass^k, best@k, worst@k, maj@k.

    Parameters are those of :func:`summarize_validation` (``clusters``: one label per sample,
    the same for every sample of a prompt); ``options`` holds the others at once.

    Returns
    -------
    dict
        ``{source: {variable: PromptTable}}``.

    Examples
    --------
    >>> t = prompt_estimates(["m"] * 4, ["a", "a", "b", "b"], {"acc": [1, 0, 1, 1]})["m"]["acc"]
    >>> t.names[:4], t.values[:, :4].tolist()
    (['mean@2', 'pass@1', 'best@1', 'worst@1'], [[0.5, 0.5, 0.5, 0.5], [1.0, 1.0, 1.0, 1.0]])
    """
    opts = _options(
        options, "prompt_estimates", ks=ks, pred_key=pred_key, replace=replace, seed=seed, taus=taus
    )
    return _prompt_tables(data_sources, sample_uids, infos_dict, opts, clusters)


def _check_data(data_sources: Any, sample_uids: Any, infos_dict: Any) -> tuple[list[Any], list[Any]]:
    sources = as_list(data_sources, "data_sources")
    uids = as_list(sample_uids, "sample_uids")
    n = len(sources)
    if len(uids) != n:
        raise ValueError(f"sample_uids must have one entry per sample ({n}); got {len(uids)}")
    if n == 0:
        raise ValueError("data_sources must hold at least one sample; got an empty sequence")
    if not isinstance(infos_dict, Mapping):
        raise TypeError(
            f"infos_dict must be a mapping of variable name to values; got {type(infos_dict).__name__}"
        )
    return sources, uids


def _prompt_tables(
    data_sources: Any, sample_uids: Any, infos_dict: Any, opts: SummaryOptions, clusters: Any
) -> dict[str, dict[str, PromptTable]]:
    """:func:`prompt_estimates` with its options checked; warns once for the prompts left out."""
    sources, uids = _check_data(data_sources, sample_uids, infos_dict)
    n = len(sources)
    prompts = group_prompts(sources, uids)
    cluster_codes = None if clusters is None else _prompt_clusters(clusters, prompts, n)
    key = opts.pred_key
    votes = Votes(predictions(infos_dict[key], prompts, key) if key in infos_dict else None, prompts.sizes)
    result: dict[str, dict[str, PromptTable]] = {str(src): {} for src in prompts.sources}
    all_keys = prompts.keys()
    short: list[str] = []
    for name, raw in infos_dict.items():
        rows = None if name == key else _numeric_rows(raw, name, n, prompts, votes.complete)
        if rows is None:  # the predictions, or a text variable
            continue
        for s, src in enumerate(map(str, prompts.sources)):
            active = np.flatnonzero((rows.counts > 0) & (prompts.src_of == s))
            if active.size:
                codes = None if cluster_codes is None else local_codes(cluster_codes[active][None, :])[0]
                table = _table(rows, active, votes, opts, [all_keys[i] for i in active], codes)
                result[src][name] = table
                short.extend(_short_prompts(table, opts, f"{src}/{name}"))
    if short:
        shown = "; ".join(short[:5]) + (f"; and {len(short) - 5} more" if len(short) > 5 else "")
        warnings.warn(
            f"a requested k is above the samples of some prompts, which are left out of those @k "
            f"metrics (their n_prompts says how many remain): {shown}",
            UndefinedMetricWarning,
            stacklevel=3,  # the caller of prompt_estimates or summarize_validation
        )
    return {src: body for src, body in result.items() if body}


def _prompt_clusters(clusters: Any, prompts: Prompts, n: int) -> np.ndarray:
    """(P,) cluster code of each prompt; a prompt whose samples carry different labels is an error."""
    labels = as_list(clusters, "clusters")
    if len(labels) != n:
        raise ValueError(f"clusters must have one label per sample ({n}); got {len(labels)}")
    codes, _ = factorize(labels, n, "clusters")
    first = codes[prompts.order[np.concatenate([[0], np.cumsum(prompts.sizes)[:-1]])]]
    mismatch = codes != first[prompts.pid]
    if mismatch.any():
        i = int(np.flatnonzero(mismatch)[0])
        key = prompts.keys()[int(prompts.pid[i])]
        raise ValueError(
            f"clusters must be the same for every sample of a prompt; prompt {key!r} has "
            f"{labels[i]!r} at sample {i} and another label before it"
        )
    return first


def summarize_table(
    table: PromptTable,
    *,
    ci: str = DEFAULT_CI,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    options: SummaryOptions | None = None,
) -> dict[str, Any]:
    """The summary of one :class:`PromptTable`: each metric's mean over prompts with its interval.

    ``options`` holds ``ci``, ``confidence``, ``n_boot`` and ``seed`` at once.

    Returns
    -------
    dict
        ``{"n_prompts", "n_samples", "samples_per_prompt", "binary", "ci", "metrics"}`` as in
        :func:`summarize_validation`.
    """
    opts = _options(options, "summarize_table", ci=ci, confidence=confidence, n_boot=n_boot, seed=seed)
    return _summarize_table(table, opts)


def _summarize_table(table: PromptTable, opts: SummaryOptions) -> dict[str, Any]:
    present = ~np.isnan(table.values)
    max_n_eff = table.counts.astype(np.float64) @ present
    for j, name in enumerate(table.names):
        if name in table.indicators:
            max_n_eff[j] = present[:, j].sum()
    iv = column_intervals(
        table.values,
        method=opts.ci,
        confidence=opts.confidence,
        clusters=table.clusters,
        max_n_eff=max_n_eff,
        n_boot=opts.n_boot,
        seed=opts.seed,
    )
    metrics = {
        name: _metric_entry(table, iv.row(j), name) for j, name in enumerate(table.names) if iv.n_prompts[j]
    }
    n_values, n_of = np.unique(table.counts, return_counts=True)
    n_clusters = None if table.clusters is None else int(np.unique(table.clusters).shape[0])
    return {
        "n_prompts": len(table.keys),
        "n_samples": int(table.counts.sum()),
        "samples_per_prompt": {str(int(v)): int(c) for v, c in zip(n_values, n_of)},
        "binary": table.binary,
        "ci": {"method": opts.ci, "confidence": opts.confidence, "n_clusters": n_clusters},
        "metrics": metrics,
    }


def _metric_entry(table: PromptTable, m: Interval, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "value": m.value,
        "se": m.se,
        "ci_low": m.ci_low,
        "ci_high": m.ci_high,
        "n_prompts": m.n_prompts,
        "method": m.method,
    }
    if m.n_clusters is not None:
        entry["n_clusters"] = m.n_clusters
    if name in table.exact_maj:
        entry["exact"] = table.exact_maj[name]
    return entry


def summarize_validation(
    data_sources: Sequence[Any] | np.ndarray,
    sample_uids: Sequence[Any] | np.ndarray,
    infos_dict: Mapping[str, Sequence[Any]],
    *,
    ks: Sequence[int] | None = None,
    pred_key: str = ValName.PRED,
    replace: bool = False,
    confidence: float = 0.95,
    ci: str = DEFAULT_CI,
    clusters: Sequence[Any] | np.ndarray | None = None,
    taus: Sequence[float] = DEFAULT_TAUS,
    n_boot: int = 2000,
    seed: int = 0,
    options: SummaryOptions | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per data source and variable: mean, pass@k, pass^k, best@k, worst@k, maj@k, cover@tau with intervals.

    Every statistic is the mean over prompts of a per-prompt estimate (:func:`prompt_estimates`),
    with its standard error over prompts (over clusters of prompts with ``clusters``) and a
    confidence interval (:mod:`rlmetrics.validation.exact.intervals`).

    Parameters
    ----------
    data_sources, sample_uids : sequence, length n
        Data source and prompt id of each sample (prompts are ``(source, uid)`` pairs).
    infos_dict : mapping of str to sequence of length n
        Per-sample values (numbers, bools, or None for a missing value). String variables are
        skipped; ``infos_dict[pred_key]``, if present, holds the predictions voted on for maj@k.
    ks : sequence of int, keyword-only, optional
        The k values; default 1, 2, 4, ... and the largest number of samples of a prompt. A k
        above the samples of some prompts leaves them out of those @k metrics, with a warning
        naming the prompts (without replacement the estimators are undefined there).
    pred_key : str, keyword-only
        Name of the prediction variable.
    replace : bool, keyword-only
        ``False``: unbiased estimators (k distinct samples). ``True``: draws with replacement,
        the expectation of verl's bootstrap.
    confidence : float, keyword-only
        Level of the intervals.
    ci : {"wilson-edge", "wilson", "t", "bootstrap"}, keyword-only
        The interval (:mod:`~rlmetrics.validation.exact.intervals`); each metric names the one used.
    clusters : sequence of length n, keyword-only, optional
        A cluster label per sample (constant within a prompt): clustered standard errors.
    taus : sequence of float, keyword-only
        Thresholds of cover@tau (0/1 variables).
    n_boot : int, keyword-only
        Resamples of ``ci="bootstrap"``.
    seed : int, keyword-only
        Seed of the maj@k Monte Carlo fallback (only for vote patterns too large to enumerate)
        and of the bootstrap.
    options : SummaryOptions, keyword-only, optional
        All of ``ks``, ``pred_key``, ``replace``, ``confidence``, ``ci``, ``taus``, ``n_boot``
        and ``seed`` at once, checked when it was made (then leave those keywords out).

    Returns
    -------
    dict
        ``{source: {variable: {"n_prompts", "n_samples", "samples_per_prompt", "binary", "ci",
        "metrics": {name: {"value", "se", "ci_low", "ci_high", "n_prompts", "method"}}}}}``
        with metric names ``mean@N`` (``mean@Nmin-Nmax`` for mixed counts), ``pass@k`` and
        ``pass^k`` (0/1 variables; pass^k = worst@k there), ``best@k``, ``worst@k``, ``maj@k``
        (when predictions exist), ``all_solved``, ``none_solved`` and ``cover@tau`` (0/1
        variables). A maj@k computed partly by Monte Carlo is flagged ``"exact": False``.

    Raises
    ------
    TypeError
        ``options`` together with one of the keywords it holds, or an option of the wrong type.
    ValueError
        An option out of range (named), or inputs that do not line up.

    Examples
    --------
    >>> s = summarize_validation(["m"] * 6, ["a", "a", "a", "b", "b", "b"],
    ...                          {"acc": [1, 0, 0, 1, 1, 1], "pred": ["x", "y", "z", "x", "x", "x"]})
    >>> m = s["m"]["acc"]["metrics"]
    >>> round(m["mean@3"]["value"], 4), round(m["pass@2"]["value"], 4), m["all_solved"]["value"]
    (0.6667, 0.8333, 0.5)
    >>> round(m["maj@3"]["value"], 4), m["maj@3"]["n_prompts"], m["pass^3"]["method"]
    (0.6667, 2, 'wilson-edge')
    """
    opts = _options(
        options,
        "summarize_validation",
        ks=ks,
        pred_key=pred_key,
        replace=replace,
        confidence=confidence,
        ci=ci,
        taus=taus,
        n_boot=n_boot,
        seed=seed,
    )
    tables = _prompt_tables(data_sources, sample_uids, infos_dict, opts, clusters)
    out = {
        src: {name: _summarize_table(t, opts) for name, t in per_var.items()}
        for src, per_var in tables.items()
    }
    units = "prompts" if clusters is None else "clusters"
    lonely = [
        f"{src}/{name}/{metric}"
        for src, per_var in out.items()
        for name, body in per_var.items()
        for metric, m in body["metrics"].items()
        if m.get("n_clusters", m["n_prompts"]) < 2
    ]
    if lonely:
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        warn_undefined(f"standard errors across {units} need at least 2 {units}; NaN for {shown}")
    return out


class _Rows(NamedTuple):
    """One numeric variable's kept values, grouped by prompt."""

    #: (m,) float64 values, prompt after prompt
    values: np.ndarray
    #: (P,) values per prompt
    counts: np.ndarray
    #: (P + 1,) start of each prompt's values
    starts: np.ndarray
    #: (P,) whether a prompt has maj@k: complete predictions and every value present
    has_pred: np.ndarray


def _numeric_rows(raw: Any, name: str, n: int, prompts: Prompts, complete: np.ndarray) -> _Rows | None:
    """The non-None values of a numeric variable per prompt; None for a text variable.

    ``complete`` says which prompts have all their predictions.

    Raises
    ------
    TypeError
        A variable mixing numbers and strings.
    """
    col = read_column(raw, name, n)
    order = prompts.order
    keep = ~col.is_none[order]
    is_str = col.is_str[order][keep]
    if is_str.any():
        if is_str.all():
            return None
        bad = int(order[keep][is_str][0])
        raise TypeError(
            f"infos_dict[{name!r}] mixes numbers and strings: sample {bad} is {as_list(raw, name)[bad]!r}"
        )
    n_prompts = prompts.sizes.shape[0]
    count = np.bincount(prompts.pid[order][keep], minlength=n_prompts)
    starts = np.zeros(n_prompts + 1, dtype=np.int64)
    np.cumsum(count, out=starts[1:])
    return _Rows(col.values[order][keep], count, starts, complete & (count == prompts.sizes))


class _Spec(NamedTuple):
    """What one variable's table holds: its rows, votes, ks, kind and options."""

    rows: _Rows
    votes: Votes
    ks: list[int]
    binary: bool
    opts: SummaryOptions
    #: metric name -> column
    col: dict[str, int]


def _names(
    counts: np.ndarray, ks: list[int], binary: bool, has_maj: bool, taus: Sequence[float]
) -> list[str]:
    """The metric names of a table, in report order (the 0/1 indicators last)."""
    n_max, n_min = int(counts.max()), int(counts.min())
    mean_name = (
        keys.at_k(ValName.MEAN, n_max) if n_min == n_max else keys.at_k_range(ValName.MEAN, n_min, n_max)
    )
    names = [mean_name]
    for k in ks:
        names += [keys.at_k(ValName.PASS, k)] if binary else []
        names += [keys.at_k(ValName.BEST, k), keys.at_k(ValName.WORST, k)]
        names += [keys.pass_hat(k)] if binary else []
        names += [keys.at_k(ValName.MAJ, k)] if has_maj else []
    return names + (_indicators(taus) if binary else [])


def _indicators(taus: Sequence[float]) -> list[str]:
    return [ValName.ALL_SOLVED, ValName.NONE_SOLVED] + [keys.cover_at(t) for t in taus]


def _table(
    rows: _Rows,
    active: np.ndarray,
    votes: Votes,
    opts: SummaryOptions,
    keys_of: list[tuple[Any, Any]],
    clusters: np.ndarray | None,
) -> PromptTable:
    """The per-prompt estimates of one variable over the prompts ``active`` (of one source)."""
    counts_a = rows.counts[active]
    binary = bool(np.all((rows.values == 0.0) | (rows.values == 1.0)))
    ks = list(dict.fromkeys(opts.ks if opts.ks is not None else default_ks(int(counts_a.max()))))
    names = _names(counts_a, ks, binary, bool(rows.has_pred[active].any()), opts.taus)
    spec = _Spec(rows, votes, ks, binary, opts, {name: j for j, name in enumerate(names)})
    values = np.full((active.shape[0], len(names)), np.nan)
    exact_maj: dict[str, bool] = {}
    for nv in np.unique(counts_a).tolist():
        sel = np.flatnonzero(counts_a == nv)
        exact_maj.update(_fill(values, sel, active[sel], nv, spec, exact_maj))
    indicators = _indicators(opts.taus) if binary else []
    if binary:
        means = values[:, 0]
        values[:, spec.col[ValName.ALL_SOLVED]] = means == 1.0
        values[:, spec.col[ValName.NONE_SOLVED]] = means == 0.0
        for tau in opts.taus:
            values[:, spec.col[keys.cover_at(tau)]] = cover_indicator(counts_a, means * counts_a, tau)
    return PromptTable(keys_of, counts_a, names, values, binary, clusters, exact_maj, frozenset(indicators))


def _fill(
    values: np.ndarray, sel: np.ndarray, prompts: np.ndarray, nv: int, spec: _Spec, exact_maj: dict[str, bool]
) -> dict[str, bool]:
    """Fill the rows ``sel`` (the ``prompts`` with ``nv`` values each) of every @k column.

    Returns the maj@k names with whether each is still exact (ANDed with ``exact_maj``).
    """
    rows, col, opts = spec.rows, spec.col, spec.opts
    vals = rows.values[rows.starts[prompts][:, None] + np.arange(nv)[None, :]]
    values[sel, 0] = vals.mean(axis=1)
    srt = np.sort(vals, axis=1)
    pred_rows = rows.has_pred[prompts]
    maj = _MajRows(spec.votes, prompts[pred_rows], vals[pred_rows], nv) if pred_rows.any() else None
    exact = dict(exact_maj)
    for k in spec.ks:
        if k > nv and not opts.replace:
            continue
        w = _order_stat_weights(nv, k, opts.replace)
        best, worst = srt @ w, srt @ w[::-1]
        values[sel, col[keys.at_k(ValName.BEST, k)]] = best
        values[sel, col[keys.at_k(ValName.WORST, k)]] = worst
        if spec.binary:
            values[sel, col[keys.at_k(ValName.PASS, k)]] = best
            values[sel, col[keys.pass_hat(k)]] = worst
        if maj is not None:
            name = keys.at_k(ValName.MAJ, k)
            values[sel[pred_rows], col[name]], ok = maj.at(k, opts.replace, opts.seed)
            exact[name] = exact.get(name, True) and ok
    return exact


class _MajRows:
    """Exact maj@k of some prompts with ``n`` samples, from the shared :class:`Votes`."""

    def __init__(self, votes: Votes, prompts: np.ndarray, vals: np.ndarray, n: int) -> None:
        self._votes, self._n = votes, n
        self._table = votes.patterns(n)
        at = votes.rows(prompts, n)
        self._inverse = self._table.inverse[at]
        self._means = answer_means(self._table.local[at], vals)

    def at(self, k: int, replace: bool, seed: int) -> tuple[np.ndarray, bool]:
        """Each prompt's maj@k, and whether it is exact (not Monte Carlo)."""
        votes, patterns = self._votes, self._table.patterns
        sig = votes.memo(("signatures", self._n), functools.partial(signatures, patterns))
        compute = functools.partial(pattern_weights, patterns, k, replace, seed, sig=sig)
        weights, exact = votes.memo(("exact", self._n, k, replace, seed), compute)
        return vote_means(weights[self._inverse], self._means), exact


def cover_indicator(n: np.ndarray, c: np.ndarray, tau: float) -> np.ndarray:
    """1.0 where a prompt's success rate ``c / n`` is at least ``tau`` (as :func:`cover_at_tau`)."""
    return (np.asarray(c, np.float64) >= tau * n - 1e-9 * n).astype(np.float64)


def _short_prompts(table: PromptTable, opts: SummaryOptions, what: str) -> list[str]:
    """One line per k that leaves prompts out (k above their samples), naming a few of them."""
    if opts.replace:
        return []
    ks = opts.ks if opts.ks is not None else default_ks(int(table.counts.max()))
    lines = []
    for k in dict.fromkeys(ks):
        short = np.flatnonzero(table.counts < k)
        if short.size:
            uids = ", ".join(repr(table.keys[i][1]) for i in short[:3].tolist())
            more = f" and {short.size - 3} more" if short.size > 3 else ""
            lines.append(
                f"{what}: k={k} > the samples of {short.size} prompt(s) ({uids}{more}; "
                f"fewest {int(table.counts[short].min())})"
            )
    return lines
