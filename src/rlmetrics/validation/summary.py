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
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlmetrics.validation.bootstrap import _as_list, _Column, _factorize, _factorize_prompts, _local_codes
from rlmetrics.validation.estimators import _maj_win_weights, _order_stat_weights

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
        local = _local_codes(codes)
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
    pred_key: str = "pred",
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
    sources = _as_list(data_sources, "data_sources")
    uids = _as_list(sample_uids, "sample_uids")
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
    z = statistics.NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)
    if ks is not None:
        ks = [int(k) for k in ks]
        if not ks or any(k < 1 for k in ks):
            raise ValueError(f"ks must be a non-empty list of integers >= 1; got {ks!r}")

    # prompts and their sources in order of first appearance (the uids alone when one source)
    pid, src_of, src_items, _ = _factorize_prompts(sources, uids, n)
    n_prompts = src_of.shape[0]
    order = np.argsort(pid, kind="stable")
    sizes = np.bincount(pid, minlength=n_prompts)

    pred_sorted: np.ndarray | None = None
    pred_ok = np.zeros(n_prompts, dtype=bool)
    if pred_key in infos_dict:
        items = _as_list(infos_dict[pred_key], f"infos_dict[{pred_key!r}]")
        if len(items) != n:
            raise ValueError(
                f"infos_dict[{pred_key!r}] must have one value per sample ({n}); got {len(items)}"
            )
        codes, code_of = _factorize(items, n, f"infos_dict[{pred_key!r}]")
        if None in code_of:
            codes[codes == code_of[None]] = -1
        pred_ok = np.bincount(pid[codes < 0], minlength=n_prompts) == 0
        pred_sorted = codes[order]

    src_names = [str(s) for s in src_items]
    result: dict[str, dict[str, dict[str, Any]]] = {src: {} for src in src_names}
    lonely: list[str] = []
    layouts: dict[tuple[int, bytes], _VoteLayout] = {}
    for name, raw in infos_dict.items():
        if name == pred_key:
            continue
        col = _Column(raw, name, n)
        keep = ~col.is_none[order]
        if col.is_str[order][keep].any():
            if col.is_str[order][keep].all():
                continue  # a text variable
            bad = int(order[keep][col.is_str[order][keep]][0])
            raise TypeError(
                f"infos_dict[{name!r}] mixes numbers and strings: "
                f"sample {bad} is {_as_list(raw, name)[bad]!r}"
            )
        e_pid = pid[order][keep]
        e_val = col.values[order][keep]
        e_full = keep  # positions within prompt rows, to align with predictions
        count = np.bincount(e_pid, minlength=n_prompts)
        starts = np.zeros(n_prompts + 1, dtype=np.int64)
        np.cumsum(count, out=starts[1:])
        full_starts = np.zeros(n_prompts + 1, dtype=np.int64)
        np.cumsum(sizes, out=full_starts[1:])
        has_pred = pred_ok & (count == sizes)
        for s, src in enumerate(src_names):
            active = np.flatnonzero((count > 0) & (src_of == s))
            if active.size == 0:
                continue
            result[src][name] = _summarize_var(
                active,
                count,
                starts,
                e_val,
                has_pred,
                full_starts,
                pred_sorted,
                ks=ks,
                replace=replace,
                z=z,
                seed=seed,
                what=f"{src}/{name}",
                lonely=lonely,
                layouts=layouts,
            )
        del e_full
    if lonely:
        shown = ", ".join(lonely[:5]) + (f" and {len(lonely) - 5} more" if len(lonely) > 5 else "")
        warnings.warn(
            f"standard errors across prompts need at least 2 prompts; NaN for {shown}",
            RuntimeWarning,
            stacklevel=2,
        )
    return {src: body for src, body in result.items() if body}


def _summarize_var(
    active: np.ndarray,
    count: np.ndarray,
    starts: np.ndarray,
    e_val: np.ndarray,
    has_pred: np.ndarray,
    full_starts: np.ndarray,
    pred_sorted: np.ndarray | None,
    *,
    ks: Sequence[int] | None,
    replace: bool,
    z: float,
    seed: int,
    what: str,
    lonely: list[str],
    layouts: dict[tuple[int, bytes], _VoteLayout],
) -> dict[str, Any]:
    counts_a = count[active]
    n_values, n_of = np.unique(counts_a, return_counts=True)
    n_max, n_min = int(n_values.max()), int(n_values.min())
    binary = bool(np.all((e_val == 0.0) | (e_val == 1.0)))
    ks_used = list(ks) if ks is not None else default_ks(n_max)
    per_k: dict[str, list[np.ndarray]] = {}
    exact_maj: dict[int, bool] = {}
    means = np.empty(active.shape[0])
    for nv in n_values.tolist():
        rows_sel = counts_a == nv
        prompts = active[rows_sel]
        vals = e_val[starts[prompts][:, None] + np.arange(nv)[None, :]]
        means[rows_sel] = vals.mean(axis=1)
        srt = np.sort(vals, axis=1)
        pred_rows = has_pred[prompts] if pred_sorted is not None else np.zeros(prompts.shape[0], dtype=bool)
        layout: _VoteLayout | None = None
        if pred_rows.any():
            assert pred_sorted is not None
            sel = prompts[pred_rows]
            layout_key = (nv, sel.tobytes())
            if layout_key not in layouts:
                codes = pred_sorted[full_starts[sel][:, None] + np.arange(nv)[None, :]]
                layouts[layout_key] = _VoteLayout(codes)
            layout = layouts[layout_key]
            answer_means = layout.answer_means(vals[pred_rows])
        for k in ks_used:
            if k > nv and not replace:
                continue
            w = _order_stat_weights(nv, k, bool(replace))
            per_k.setdefault(f"best@{k}", []).append(srt @ w)
            per_k.setdefault(f"worst@{k}", []).append(srt @ w[::-1])
            if layout is not None:
                maj, exact = layout.maj(answer_means, k, bool(replace), seed)
                per_k.setdefault(f"maj@{k}", []).append(maj)
                exact_maj[k] = exact_maj.get(k, True) and exact
    mean_name = f"mean@{n_max}" if n_min == n_max else f"mean@{n_min}-{n_max}"
    named: list[tuple[str, np.ndarray]] = [(mean_name, means)]
    joined: dict[str, np.ndarray] = {}
    for k in ks_used:
        for kind in (("pass", "best") if binary else ("best",)) + ("worst", "maj"):
            src_key = f"{'best' if kind == 'pass' else kind}@{k}"
            if src_key not in per_k:
                continue
            if src_key not in joined:
                parts = per_k[src_key]
                joined[src_key] = parts[0] if len(parts) == 1 else np.concatenate(parts)
            named.append((f"{kind}@{k}", joined[src_key]))
    if binary:
        named.append(("all_solved", (means == 1.0).astype(np.float64)))
        named.append(("none_solved", (means == 0.0).astype(np.float64)))
    metrics = _stats(named, z, what, lonely)
    for k in ks_used:
        if f"maj@{k}" in metrics:
            metrics[f"maj@{k}"]["exact"] = exact_maj[k]
    return {
        "n_prompts": int(active.shape[0]),
        "n_samples": int(counts_a.sum()),
        "samples_per_prompt": {str(int(v)): int(c) for v, c in zip(n_values, n_of)},
        "binary": binary,
        "metrics": metrics,
    }
