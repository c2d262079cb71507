"""A validation summary with exact estimators and honest error bars across prompts.

:func:`summarize_validation` reports, per data source and variable, the mean over samples and
the exact pass@k / pass^k / best@k / worst@k / maj@k (see :mod:`rlmetrics.validation.estimators`)
for k = 1, 2, 4, ... N, plus the shares of prompts solved by all, by none, and at a rate of at
least tau (cover@tau) for 0/1 variables. Each is the mean over prompts of a per-prompt estimate
(:func:`prompt_estimates`: the table :mod:`rlmetrics.validation.compare` pairs across runs) with
its standard error over prompts and an interval (:mod:`rlmetrics.validation.intervals`: Wilson
on the effective number of prompts by default, which stays inside [0, 1]).

Prompts with different numbers of samples are kept apart where it matters: each statistic says
how many prompts it covers, prompts with fewer than ``k`` samples are left out of the ``@k``
statistics (without replacement the estimator is undefined there; a warning names them), and
the number of prompts per sample count is reported.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys
from rlmetrics._core.checks import check_int, check_seed, warn_undefined
from rlmetrics.errors import UndefinedMetricWarning
from rlmetrics.keys import ValName
from rlmetrics.validation._args import check_level
from rlmetrics.validation.exact.estimators import _maj_win_weights, _order_stat_weights
from rlmetrics.validation.exact.inputs import (
    Predictions,
    Prompts,
    as_list,
    factorize,
    group_prompts,
    local_codes,
    predictions,
    read_column,
)
from rlmetrics.validation.exact.intervals import CI_METHODS, column_intervals

__all__ = [
    "DEFAULT_TAUS",
    "PromptTable",
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


class _VoteLayout:
    """Per-prompt vote structure of rows of prediction codes (P, n), shared by every k and variable."""

    def __init__(self, codes: np.ndarray) -> None:
        p, n = codes.shape
        local = local_codes(codes)
        self.lin = (np.repeat(np.arange(p), n) * n + local.ravel()).astype(np.int64)
        self.shape = (p, n)
        self.sizes = np.bincount(self.lin, minlength=p * n).reshape(p, n).astype(np.float64)
        self.order = np.argsort(-self.sizes, axis=1, kind="stable")
        sig = np.take_along_axis(self.sizes, self.order, axis=1).astype(np.int64)
        self.signatures, inverse = np.unique(sig, axis=0, return_inverse=True)
        self.inverse = inverse.reshape(-1)
        # each signature's answer sizes (largest first), shared by every k
        self._sizes_of = [tuple(row[row > 0].tolist()) for row in self.signatures]
        self._weights: dict[tuple[int, bool, int], tuple[np.ndarray, bool]] = {}

    def weights(self, k: int, replace: bool, seed: int) -> tuple[np.ndarray, bool]:
        """(P, n) probability that each prompt's answer (named by its first position) wins."""
        key = (k, replace, seed)
        if key not in self._weights:
            p, n = self.shape
            wfull = np.zeros((self.signatures.shape[0], n))
            exact = True
            for s, sizes_s in enumerate(self._sizes_of):
                w, ok = _maj_win_weights(sizes_s, k, replace, seed)
                wfull[s, : len(w)] = w
                exact = exact and ok
            weights = np.zeros((p, n))
            np.put_along_axis(weights, self.order, wfull[self.inverse], axis=1)
            self._weights[key] = (weights, exact)
        return self._weights[key]

    def answer_means(self, vals: np.ndarray) -> np.ndarray:
        """(P, n): the mean value of each prompt's answer (named by its first position), 0 elsewhere;
        the rows of ``vals`` (P, n) are the prompts' sample values."""
        p, n = self.shape
        sums = np.bincount(self.lin, weights=vals.ravel(), minlength=p * n).reshape(p, n)
        return np.divide(sums, self.sizes, out=np.zeros_like(sums), where=self.sizes > 0)

    def maj(self, answer_means: np.ndarray, k: int, replace: bool, seed: int) -> tuple[np.ndarray, bool]:
        """Exact maj@k of each prompt, from :meth:`answer_means` of its values."""
        weights, exact = self.weights(k, replace, seed)
        return np.einsum("pn,pn->p", weights, answer_means), exact


#: Default thresholds of cover@tau.
DEFAULT_TAUS = (0.5, 1.0)


class PromptTable(NamedTuple):
    """One variable of one data source: the per-prompt estimates behind its summary.

    ``values[i, j]`` is prompt ``i``'s estimate of metric ``names[j]`` (its mean over samples,
    its unbiased pass@k ...), NaN where it is undefined (``k`` above the prompt's samples, no
    predictions for maj@k). :func:`summarize_table` turns it into means with intervals;
    :mod:`rlmetrics.validation.compare` pairs two of them prompt by prompt.
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
) -> dict[str, dict[str, PromptTable]]:
    """Per data source and variable, every prompt's mean, pass@k, pass^k, best@k, worst@k, maj@k.

    Parameters are those of :func:`summarize_validation` (``clusters``: one label per sample,
    the same for every sample of a prompt).

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
    if ks is not None:
        if isinstance(ks, str | bytes) or not isinstance(ks, Sequence | np.ndarray):
            raise TypeError(f"ks must be a list of integers >= 1; got {type(ks).__name__}")
        ks = [check_int(k, f"ks[{i}]", minimum=1) for i, k in enumerate(ks)]
        if any(k > 2**63 - 1 for k in ks):
            raise ValueError(f"ks must be integers below 2**63; got {max(ks)}")
        if not ks:
            raise ValueError("ks must be a non-empty list of integers >= 1; got []")
    options = _Options(ks, bool(replace), check_seed(seed), _check_taus(taus))

    prompts = group_prompts(sources, uids)
    cluster_codes = None if clusters is None else _prompt_clusters(clusters, prompts, n)
    pred = predictions(infos_dict[pred_key], prompts, pred_key) if pred_key in infos_dict else None
    result: dict[str, dict[str, PromptTable]] = {str(src): {} for src in prompts.sources}
    votes = _Votes(pred, prompts)
    all_keys = prompts.keys()
    short: list[str] = []
    for name, raw in infos_dict.items():
        if name == pred_key:
            continue
        rows = _numeric_rows(raw, name, n, prompts, pred)
        if rows is None:  # a text variable
            continue
        for s, src in enumerate(map(str, prompts.sources)):
            active = np.flatnonzero((rows.counts > 0) & (prompts.src_of == s))
            if active.size:
                codes = None if cluster_codes is None else local_codes(cluster_codes[active][None, :])[0]
                table = _table(rows, active, votes, options, [all_keys[i] for i in active], codes)
                result[src][name] = table
                short.extend(_short_prompts(table, options, f"{src}/{name}"))
    if short:
        shown = "; ".join(short[:5]) + (f"; and {len(short) - 5} more" if len(short) > 5 else "")
        warnings.warn(
            f"a requested k is above the samples of some prompts, which are left out of those @k "
            f"metrics (their n_prompts says how many remain): {shown}",
            UndefinedMetricWarning,
            stacklevel=3 if _called_by_summary() else 2,
        )
    return {src: body for src, body in result.items() if body}


def _called_by_summary() -> bool:
    import sys

    return sys._getframe(2).f_code.co_name == "summarize_validation"


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
    ci: str = "wilson",
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """The summary of one :class:`PromptTable`: each metric's mean over prompts with its interval.

    Returns
    -------
    dict
        ``{"n_prompts", "n_samples", "samples_per_prompt", "binary", "ci", "metrics"}`` as in
        :func:`summarize_validation`.
    """
    present = ~np.isnan(table.values)
    max_n_eff = table.counts.astype(np.float64) @ present
    for j, name in enumerate(table.names):
        if name in table.indicators:
            max_n_eff[j] = present[:, j].sum()
    iv = column_intervals(
        table.values,
        method=ci,
        confidence=confidence,
        clusters=table.clusters,
        max_n_eff=max_n_eff,
        n_boot=n_boot,
        seed=seed,
    )
    metrics: dict[str, dict[str, Any]] = {}
    for j, name in enumerate(table.names):
        if not iv.n_prompts[j]:
            continue
        m = iv.row(j)
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
        metrics[name] = entry
    n_values, n_of = np.unique(table.counts, return_counts=True)
    n_clusters = None if table.clusters is None else int(np.unique(table.clusters).shape[0])
    return {
        "n_prompts": len(table.keys),
        "n_samples": int(table.counts.sum()),
        "samples_per_prompt": {str(int(v)): int(c) for v, c in zip(n_values, n_of)},
        "binary": table.binary,
        "ci": {"method": ci, "confidence": float(confidence), "n_clusters": n_clusters},
        "metrics": metrics,
    }


def summarize_validation(
    data_sources: Sequence[Any] | np.ndarray,
    sample_uids: Sequence[Any] | np.ndarray,
    infos_dict: Mapping[str, Sequence[Any]],
    *,
    ks: Sequence[int] | None = None,
    pred_key: str = ValName.PRED,
    replace: bool = False,
    confidence: float = 0.95,
    ci: str = "wilson",
    clusters: Sequence[Any] | np.ndarray | None = None,
    taus: Sequence[float] = DEFAULT_TAUS,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per data source and variable: mean, pass@k, pass^k, best@k, worst@k, maj@k, cover@tau with intervals.

    Every statistic is the mean over prompts of a per-prompt estimate (:func:`prompt_estimates`),
    with its standard error over prompts (over clusters of prompts with ``clusters``) and a
    confidence interval (:mod:`rlmetrics.validation.intervals`).

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
    ci : {"wilson", "t", "bootstrap"}, keyword-only
        The interval (:mod:`~rlmetrics.validation.intervals`); each metric names the one used.
    clusters : sequence of length n, keyword-only, optional
        A cluster label per sample (constant within a prompt): clustered standard errors.
    taus : sequence of float, keyword-only
        Thresholds of cover@tau (0/1 variables).
    n_boot : int, keyword-only
        Resamples of ``ci="bootstrap"``.
    seed : int, keyword-only
        Seed of the maj@k Monte Carlo fallback (only for vote patterns too large to enumerate)
        and of the bootstrap.

    Returns
    -------
    dict
        ``{source: {variable: {"n_prompts", "n_samples", "samples_per_prompt", "binary", "ci",
        "metrics": {name: {"value", "se", "ci_low", "ci_high", "n_prompts", "method"}}}}}``
        with metric names ``mean@N`` (``mean@Nmin-Nmax`` for mixed counts), ``pass@k`` and
        ``pass^k`` (0/1 variables; pass^k = worst@k there), ``best@k``, ``worst@k``, ``maj@k``
        (when predictions exist), ``all_solved``, ``none_solved`` and ``cover@tau`` (0/1
        variables). A maj@k computed partly by Monte Carlo is flagged ``"exact": False``.

    Examples
    --------
    >>> s = summarize_validation(["m"] * 6, ["a", "a", "a", "b", "b", "b"],
    ...                          {"acc": [1, 0, 0, 1, 1, 1], "pred": ["x", "y", "z", "x", "x", "x"]})
    >>> m = s["m"]["acc"]["metrics"]
    >>> round(m["mean@3"]["value"], 4), round(m["pass@2"]["value"], 4), m["all_solved"]["value"]
    (0.6667, 0.8333, 0.5)
    >>> round(m["maj@3"]["value"], 4), m["maj@3"]["n_prompts"], m["pass^3"]["method"]
    (0.6667, 2, 'wilson')
    """
    confidence = check_level(confidence, "confidence")
    if ci not in CI_METHODS:
        raise ValueError(f"ci must be one of {', '.join(CI_METHODS)}; got {ci!r}")
    n_boot = check_int(n_boot, "n_boot", minimum=10)
    tables = prompt_estimates(
        data_sources,
        sample_uids,
        infos_dict,
        ks=ks,
        pred_key=pred_key,
        replace=replace,
        seed=seed,
        clusters=clusters,
        taus=taus,
    )
    out: dict[str, dict[str, dict[str, Any]]] = {}
    lonely: list[str] = []
    for src, per_var in tables.items():
        out[src] = {}
        for name, table in per_var.items():
            body = summarize_table(table, ci=ci, confidence=confidence, n_boot=n_boot, seed=seed)
            units = "prompts" if table.clusters is None else "clusters"
            lonely.extend(
                f"{src}/{name}/{metric}"
                for metric, m in body["metrics"].items()
                if m.get("n_clusters", m["n_prompts"]) < 2
            )
            out[src][name] = body
    if lonely:
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        warn_undefined(f"standard errors across {units} need at least 2 {units}; NaN for {shown}")
    return out


class _Options(NamedTuple):
    ks: list[int] | None
    replace: bool
    seed: int
    taus: tuple[float, ...]


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


def _numeric_rows(raw: Any, name: str, n: int, prompts: Prompts, pred: Predictions | None) -> _Rows | None:
    """The non-None values of a numeric variable per prompt; None for a text variable.

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
    complete = pred.complete if pred is not None else np.zeros(n_prompts, dtype=bool)
    return _Rows(col.values[order][keep], count, starts, complete & (count == prompts.sizes))


class _Votes:
    """The vote layouts of the prompts with predictions, per number of samples and prompt set."""

    def __init__(self, pred: Predictions | None, prompts: Prompts) -> None:
        self._pred = pred
        self._starts = np.concatenate([[0], np.cumsum(prompts.sizes)])
        self._layouts: dict[tuple[int, bytes], _VoteLayout] = {}

    def layout(self, prompts: np.ndarray, n_samples: int) -> _VoteLayout:
        """:class:`_VoteLayout` of ``prompts`` (every one with ``n_samples`` predictions)."""
        assert self._pred is not None
        key = (n_samples, prompts.tobytes())
        if key not in self._layouts:
            codes = self._pred.codes[self._starts[prompts][:, None] + np.arange(n_samples)[None, :]]
            self._layouts[key] = _VoteLayout(codes)
        return self._layouts[key]


def _table(
    rows: _Rows,
    active: np.ndarray,
    votes: _Votes,
    options: _Options,
    keys_of: list[tuple[Any, Any]],
    clusters: np.ndarray | None,
) -> PromptTable:
    """The per-prompt estimates of one variable over the prompts ``active`` (of one source)."""
    counts_a = rows.counts[active]
    n_max, n_min = int(counts_a.max()), int(counts_a.min())
    binary = bool(np.all((rows.values == 0.0) | (rows.values == 1.0)))
    ks = list(options.ks) if options.ks is not None else default_ks(n_max)
    has_maj = bool(rows.has_pred[active].any())
    mean_name = (
        keys.at_k(ValName.MEAN, n_max) if n_min == n_max else keys.at_k_range(ValName.MEAN, n_min, n_max)
    )
    names = [mean_name]
    for k in dict.fromkeys(ks):
        names += [keys.at_k(ValName.PASS, k)] if binary else []
        names += [keys.at_k(ValName.BEST, k), keys.at_k(ValName.WORST, k)]
        names += [keys.pass_hat(k)] if binary else []
        names += [keys.at_k(ValName.MAJ, k)] if has_maj else []
    indicators: list[str] = []
    if binary:
        indicators = [ValName.ALL_SOLVED, ValName.NONE_SOLVED] + [keys.cover_at(t) for t in options.taus]
        names += indicators
    col = {name: j for j, name in enumerate(names)}
    values = np.full((active.shape[0], len(names)), np.nan)
    exact_maj: dict[str, bool] = {}
    for nv in np.unique(counts_a).tolist():
        sel = np.flatnonzero(counts_a == nv)
        prompts = active[sel]
        vals = rows.values[rows.starts[prompts][:, None] + np.arange(nv)[None, :]]
        values[sel, 0] = vals.mean(axis=1)
        srt = np.sort(vals, axis=1)
        pred_rows = rows.has_pred[prompts]
        layout = votes.layout(prompts[pred_rows], nv) if pred_rows.any() else None
        answer_means = layout.answer_means(vals[pred_rows]) if layout is not None else None
        for k in dict.fromkeys(ks):
            if k > nv and not options.replace:
                continue
            w = _order_stat_weights(nv, k, options.replace)
            best, worst = srt @ w, srt @ w[::-1]
            values[sel, col[keys.at_k(ValName.BEST, k)]] = best
            values[sel, col[keys.at_k(ValName.WORST, k)]] = worst
            if binary:
                values[sel, col[keys.at_k(ValName.PASS, k)]] = best
                values[sel, col[keys.pass_hat(k)]] = worst
            if layout is not None and answer_means is not None:
                maj, exact = layout.maj(answer_means, k, options.replace, options.seed)
                name = keys.at_k(ValName.MAJ, k)
                values[sel[pred_rows], col[name]] = maj
                exact_maj[name] = exact_maj.get(name, True) and exact
    if binary:
        means = values[:, 0]
        values[:, col[ValName.ALL_SOLVED]] = means == 1.0
        values[:, col[ValName.NONE_SOLVED]] = means == 0.0
        for tau in options.taus:
            values[:, col[keys.cover_at(tau)]] = cover_indicator(counts_a, means * counts_a, tau)
    return PromptTable(keys_of, counts_a, names, values, binary, clusters, exact_maj, frozenset(indicators))


def cover_indicator(n: np.ndarray, c: np.ndarray, tau: float) -> np.ndarray:
    """1.0 where a prompt's success rate ``c / n`` is at least ``tau`` (as :func:`cover_at_tau`)."""
    return (np.asarray(c, np.float64) >= tau * n - 1e-9 * n).astype(np.float64)


def _short_prompts(table: PromptTable, options: _Options, what: str) -> list[str]:
    """One line per k that leaves prompts out (k above their samples), naming a few of them."""
    if options.replace:
        return []
    ks = options.ks if options.ks is not None else default_ks(int(table.counts.max()))
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
