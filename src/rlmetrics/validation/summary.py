"""A validation summary with exact estimators and error bars across prompts.

:func:`summarize_validation` reports, per data source and variable, the mean over samples and
the exact pass@k / best@k / worst@k / maj@k (see :mod:`rlmetrics.validation.estimators`) for
k = 1, 2, 4, ... N, each as the mean over prompts of the per-prompt estimate with its standard
error and a normal-approximation confidence interval across prompts, plus the fractions of
prompts solved by all and by none of their samples (0/1 variables).

Prompts with different numbers of samples are kept apart where it matters: each statistic says
how many prompts it covers, prompts with fewer than ``k`` samples are left out of the ``@k``
statistics (without replacement the estimator is undefined there), and the number of prompts
per sample count is reported.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys
from rlmetrics._core.checks import check_int, warn_undefined
from rlmetrics.keys import ValName
from rlmetrics.validation.estimators import _maj_win_weights, _order_stat_weights
from rlmetrics.validation.inputs import (
    Predictions,
    Prompts,
    as_list,
    group_prompts,
    local_codes,
    predictions,
    read_column,
)

__all__ = ["default_ks", "summarize_validation"]


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


def _stats(
    named: Sequence[tuple[str, np.ndarray]], z: float, what: str, lonely: list[str]
) -> dict[str, dict[str, Any]]:
    """Mean over prompts of each ``(name, per_prompt)`` vector, its standard error and normal
    confidence interval, and the number of prompts.

    Vectors of one length go through one stacked pass, with the same numbers as one ``np.mean``
    / ``np.std(ddof=1)`` call each (numpy sums each contiguous row of a stack as it sums a vector
    alone). Statistics over a single prompt get a NaN standard error; their names
    (``what/name``) are appended to ``lonely``.
    """
    by_len: dict[int, list[int]] = {}
    for i, (_, arr) in enumerate(named):
        by_len.setdefault(int(arr.shape[0]), []).append(i)
    means: list[float] = [math.nan] * len(named)
    ses: list[float] = [math.nan] * len(named)
    for p, idx in by_len.items():
        if p == 0:
            continue
        stack = np.stack([named[i][1] for i in idx]).astype(np.float64, copy=False)
        mean = stack.sum(axis=1) / p
        for i, m in zip(idx, mean.tolist()):
            means[i] = m
        if p >= 2:
            dev = stack - mean[:, None]
            np.multiply(dev, dev, out=dev)
            se = np.sqrt(dev.sum(axis=1) / (p - 1)) / math.sqrt(p)
            for i, e in zip(idx, se.tolist()):
                ses[i] = e
    out: dict[str, dict[str, Any]] = {}
    for i, (name, arr) in enumerate(named):
        p = int(arr.shape[0])
        if p == 0:
            out[name] = {
                "value": math.nan,
                "se": math.nan,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "n_prompts": 0,
            }
            continue
        if p < 2:
            lonely.append(f"{what}/{name}")
        value, se_i = means[i], ses[i]
        out[name] = {
            "value": value,
            "se": se_i,
            "ci_low": value - z * se_i,
            "ci_high": value + z * se_i,
            "n_prompts": p,
        }
    return out


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


def summarize_validation(
    data_sources: Sequence[Any] | np.ndarray,
    sample_uids: Sequence[Any] | np.ndarray,
    infos_dict: Mapping[str, Sequence[Any]],
    *,
    ks: Sequence[int] | None = None,
    pred_key: str = ValName.PRED,
    replace: bool = False,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per data source and variable: mean, pass@k, best@k, worst@k, maj@k with error bars.

    Parameters
    ----------
    data_sources, sample_uids : sequence, length n
        Data source and prompt id of each sample (prompts are ``(source, uid)`` pairs).
    infos_dict : mapping of str to sequence of length n
        Per-sample values (numbers, bools, or None for a missing value). String variables are
        skipped; ``infos_dict[pred_key]``, if present, holds the predictions voted on for maj@k.
    ks : sequence of int, keyword-only, optional
        The k values; default 1, 2, 4, ... and the largest number of samples of a prompt.
    pred_key : str, keyword-only
        Name of the prediction variable.
    replace : bool, keyword-only
        ``False``: unbiased estimators (k distinct samples). ``True``: draws with replacement,
        the expectation of verl's bootstrap.
    confidence : float, keyword-only
        Level of the normal-approximation interval across prompts.
    seed : int, keyword-only
        Seed of the maj@k Monte Carlo fallback (only for vote patterns too large to enumerate).

    Returns
    -------
    dict
        ``{source: {variable: {"n_prompts", "n_samples", "samples_per_prompt", "binary",
        "metrics": {name: {"value", "se", "ci_low", "ci_high", "n_prompts"}}}}}`` with metric
        names ``mean@N`` (``mean@Nmin-Nmax`` for mixed counts), ``pass@k`` (0/1 variables),
        ``best@k``, ``worst@k``, ``maj@k`` (when predictions exist), ``all_solved`` and
        ``none_solved`` (0/1 variables). A maj@k computed partly by Monte Carlo is flagged
        ``"exact": False``.

    Examples
    --------
    >>> s = summarize_validation(["m"] * 6, ["a", "a", "a", "b", "b", "b"],
    ...                          {"acc": [1, 0, 0, 1, 1, 1], "pred": ["x", "y", "z", "x", "x", "x"]})
    >>> m = s["m"]["acc"]["metrics"]
    >>> round(m["mean@3"]["value"], 4), round(m["pass@2"]["value"], 4), m["all_solved"]["value"]
    (0.6667, 0.8333, 0.5)
    >>> round(m["maj@3"]["value"], 4), m["maj@3"]["n_prompts"]
    (0.6667, 2)
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
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    if ks is not None:
        ks = [check_int(k, f"ks[{i}]", minimum=1) for i, k in enumerate(ks)]
        if not ks:
            raise ValueError("ks must be a non-empty list of integers >= 1; got []")
    z = statistics.NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)
    options = _Options(ks, bool(replace), z, check_int(seed, "seed"))

    prompts = group_prompts(sources, uids)
    pred = predictions(infos_dict[pred_key], prompts, pred_key) if pred_key in infos_dict else None
    result: dict[str, dict[str, dict[str, Any]]] = {str(src): {} for src in prompts.sources}
    lonely: list[str] = []
    votes = _Votes(pred, prompts)
    for name, raw in infos_dict.items():
        if name == pred_key:
            continue
        rows = _numeric_rows(raw, name, n, prompts, pred)
        if rows is None:  # a text variable
            continue
        for s, src in enumerate(map(str, prompts.sources)):
            active = np.flatnonzero((rows.counts > 0) & (prompts.src_of == s))
            if active.size:
                result[src][name] = _summarize_var(rows, active, votes, options, f"{src}/{name}", lonely)
    if lonely:
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        warn_undefined(f"standard errors across prompts need at least 2 prompts; NaN for {shown}")
    return {src: body for src, body in result.items() if body}


class _Options(NamedTuple):
    ks: list[int] | None
    replace: bool
    z: float
    seed: int


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


def _per_k(
    rows: _Rows, active: np.ndarray, votes: _Votes, options: _Options, ks: list[int]
) -> tuple[np.ndarray, dict[str, list[np.ndarray]], dict[int, bool]]:
    """Per-prompt means, and best@k, worst@k, maj@k of each ``k`` (one part per number of samples)."""
    counts_a = rows.counts[active]
    per_k: dict[str, list[np.ndarray]] = {}
    exact_maj: dict[int, bool] = {}
    means = np.empty(active.shape[0])
    for nv in np.unique(counts_a).tolist():
        rows_sel = counts_a == nv
        prompts = active[rows_sel]
        vals = rows.values[rows.starts[prompts][:, None] + np.arange(nv)[None, :]]
        means[rows_sel] = vals.mean(axis=1)
        srt = np.sort(vals, axis=1)
        pred_rows = rows.has_pred[prompts]
        layout = votes.layout(prompts[pred_rows], nv) if pred_rows.any() else None
        answer_means = layout.answer_means(vals[pred_rows]) if layout is not None else None
        for k in ks:
            if k > nv and not options.replace:
                continue
            w = _order_stat_weights(nv, k, options.replace)
            per_k.setdefault(keys.at_k(ValName.BEST, k), []).append(srt @ w)
            per_k.setdefault(keys.at_k(ValName.WORST, k), []).append(srt @ w[::-1])
            if layout is not None and answer_means is not None:
                maj, exact = layout.maj(answer_means, k, options.replace, options.seed)
                per_k.setdefault(keys.at_k(ValName.MAJ, k), []).append(maj)
                exact_maj[k] = exact_maj.get(k, True) and exact
    return means, per_k, exact_maj


def _summarize_var(
    rows: _Rows, active: np.ndarray, votes: _Votes, options: _Options, what: str, lonely: list[str]
) -> dict[str, Any]:
    """The summary of one variable over the prompts ``active`` (of one source)."""
    counts_a = rows.counts[active]
    n_values, n_of = np.unique(counts_a, return_counts=True)
    n_max, n_min = int(n_values.max()), int(n_values.min())
    e_val = rows.values
    binary = bool(np.all((e_val == 0.0) | (e_val == 1.0)))
    ks = list(options.ks) if options.ks is not None else default_ks(n_max)
    means, per_k, exact_maj = _per_k(rows, active, votes, options, ks)
    mean_name = (
        keys.at_k(ValName.MEAN, n_max) if n_min == n_max else keys.at_k_range(ValName.MEAN, n_min, n_max)
    )
    named: list[tuple[str, np.ndarray]] = [(mean_name, means)]
    joined: dict[str, np.ndarray] = {}
    kinds = ((ValName.PASS, ValName.BEST) if binary else (ValName.BEST,)) + (ValName.WORST, ValName.MAJ)
    for k in ks:
        for kind in kinds:
            src_key = keys.at_k(ValName.BEST if kind == ValName.PASS else kind, k)
            if src_key not in per_k:
                continue
            if src_key not in joined:
                parts = per_k[src_key]
                joined[src_key] = parts[0] if len(parts) == 1 else np.concatenate(parts)
            named.append((keys.at_k(kind, k), joined[src_key]))
    if binary:
        named.append((ValName.ALL_SOLVED, (means == 1.0).astype(np.float64)))
        named.append((ValName.NONE_SOLVED, (means == 0.0).astype(np.float64)))
    metrics = _stats(named, options.z, what, lonely)
    for k, exact in exact_maj.items():
        metrics[keys.at_k(ValName.MAJ, k)]["exact"] = exact
    return {
        "n_prompts": int(active.shape[0]),
        "n_samples": int(counts_a.sum()),
        "samples_per_prompt": {str(int(v)): int(c) for v, c in zip(n_values, n_of)},
        "binary": binary,
        "metrics": metrics,
    }
