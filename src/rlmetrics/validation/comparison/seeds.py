"""Evaluations of runs trained with different seeds: variance components and seeds as the unit.

Per training seed ``s = 1..S`` there is an evaluation on the same ``P`` prompts, so per prompt
``i`` an estimate ``y_si`` of one metric (mean@N, pass@k ...). The spread between seeds
usually dwarfs the spread a single evaluation's interval over prompts shows, and a claim about a
training configuration is a claim about its seeds: the seeds are the unit.

* :func:`combine_seeds`: the seeds x prompts table as a **two-way crossed random-effects model**
  ``y_si = mu + a_s + b_i + e_si`` (seed effect ``a_s``, prompt difficulty ``b_i``, and a
  residual ``e_si`` that holds the seed x prompt interaction and the sampling noise of the
  prompt's samples), fitted by the **method of moments** (ANOVA, expected mean squares; one
  observation per cell):

  ``MS_seed = P * sum_s (ybar_s. - ybar)^2 / (S - 1)``,  E = ``s2_res + P * s2_seed``

  ``MS_prompt = S * sum_i (ybar_.i - ybar)^2 / (P - 1)``, E = ``s2_res + S * s2_prompt``

  ``MS_res = sum_si (y_si - ybar_s. - ybar_.i + ybar)^2 / ((S - 1)(P - 1))``, E = ``s2_res``

  so ``s2_seed = (MS_seed - MS_res) / P`` and ``s2_prompt = (MS_prompt - MS_res) / S``, each set
  to 0 when negative (the estimates of a balanced design, which REML gives too when they are
  positive). The mean over seeds has the interval of a Student t over the ``S`` seed means
  (``S - 1`` degrees of freedom): the prompts are the benchmark, fixed; the seeds are the sample.
* :func:`compare_seed_groups`: two training configurations, each a list of seeds evaluated on
  the same prompts, compared by Welch's t on the per-seed means.

scipy is imported inside the functions that need it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlmetrics._core.checks import warn_undefined
from rlmetrics.validation._args import check_level, check_vector
from rlmetrics.validation.comparison.paired import unpaired_difference
from rlmetrics.validation.exact.summary import PromptTable

__all__ = ["SeedComparison", "SeedSummary", "combine_seeds", "compare_seed_groups"]

#: What :func:`combine_seeds` fits, as its results say.
SEED_METHOD = (
    "two-way crossed random effects (seed x prompt), method of moments (expected mean squares), "
    "negative components set to 0; interval: Student t over the seed means"
)
#: What :func:`compare_seed_groups` tests.
SEED_COMPARISON_METHOD = "Welch t over seed means"


@dataclass(frozen=True)
class SeedSummary:
    """One metric over several training seeds evaluated on the same prompts.

    Attributes
    ----------
    seeds : tuple of str
        The seeds' names, in the order given.
    seed_means : float64 array, shape (S,)
        Each seed's mean over the prompts.
    n_seeds, n_prompts : int
        ``S`` and ``P`` (the prompts every seed has, the metric defined in each).
    mean : float
        Mean over seeds (and prompts).
    se : float
        Standard error of ``mean`` with the seeds as the unit: ``sd(seed_means) / sqrt(S)``.
    df : int
        ``S - 1``.
    ci_low, ci_high : float
        Student-t interval at ``confidence``.
    confidence : float
        Level of the interval.
    var_seed : float
        Between-seed variance component ``s2_seed`` (>= 0).
    var_prompt : float
        Between-prompt variance component ``s2_prompt`` (>= 0): the spread of difficulty shared
        by every seed.
    var_residual : float
        Residual component ``s2_res``: the seed x prompt interaction and the sampling noise.
    var_within_seed : float
        Mean over seeds of the variance over prompts within a seed (what one evaluation's interval
        over prompts is built on; expected ``s2_prompt + s2_res``).
    ms_seed, ms_prompt, ms_residual : float
        The mean squares of the two-way table (``nan`` for ``ms_residual`` never: ``S, P >= 2``).
    se_prompts : float
        ``sqrt(var_within_seed / P)``: the standard error one seed's evaluation reports over
        prompts. Compare with ``se * sqrt(S)``, the spread of one seed's mean between seeds.
    seed_share : float
        ``var_seed / (var_seed + var_residual / P)``: the share of the variance of one seed's mean
        (on these prompts) that is due to the seed; NaN when both are 0.
    method : str
        :data:`SEED_METHOD`.
    """

    seeds: tuple[str, ...]
    seed_means: np.ndarray
    n_seeds: int
    n_prompts: int
    mean: float
    se: float
    df: int
    ci_low: float
    ci_high: float
    confidence: float
    var_seed: float
    var_prompt: float
    var_residual: float
    var_within_seed: float
    ms_seed: float
    ms_prompt: float
    ms_residual: float
    se_prompts: float
    seed_share: float
    method: str

    def as_dict(self) -> dict[str, Any]:
        """Plain data (numbers, lists, strings) for JSON."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["seeds"] = list(self.seeds)
        out["seed_means"] = self.seed_means.tolist()
        return out


@dataclass(frozen=True)
class SeedComparison:
    """Configuration B against A, the seeds as the unit (Welch's t on the per-seed means).

    Attributes
    ----------
    a, b : SeedSummary
        Each configuration over its seeds (same prompts in both).
    diff : float
        ``b.mean - a.mean``.
    se : float
        ``sqrt(a.se^2 + b.se^2)``.
    df : float
        Welch-Satterthwaite degrees of freedom.
    ci_low, ci_high : float
        Two-sided Student-t interval at ``confidence``.
    p_value : float
        Two-sided p-value of H0: the configurations' means over seeds are equal.
    statistic : float
        ``diff / se``.
    mde : float
        The ``|difference|`` detected with probability ``power`` at level ``1 - confidence``
        with these seeds: ``(t_{1-alpha/2} + t_power) * se``.
    method : str
        :data:`SEED_COMPARISON_METHOD`.
    confidence, power : float
        The levels used.
    """

    a: SeedSummary
    b: SeedSummary
    diff: float
    se: float
    df: float
    ci_low: float
    ci_high: float
    p_value: float
    statistic: float
    mde: float
    method: str
    confidence: float
    power: float

    def as_dict(self) -> dict[str, Any]:
        """Plain data (numbers, lists, strings) for JSON."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["a"] = self.a.as_dict()
        out["b"] = self.b.as_dict()
        return out


# --------------------------------------------------------------------------------------------
# the seeds x prompts table


def _named_seeds(tables_by_seed: Any, name: str) -> list[tuple[str, Any]]:
    """``[(seed name, its evaluation)]`` from a mapping, a sequence or a 2-D array."""
    if isinstance(tables_by_seed, Mapping):
        return [(str(k), v) for k, v in tables_by_seed.items()]
    if isinstance(tables_by_seed, np.ndarray):
        if tables_by_seed.ndim != 2:
            raise ValueError(
                f"{name} as an array must be 2-D (seeds x prompts); got shape {tables_by_seed.shape}"
            )
        return [(f"seed{j}", row) for j, row in enumerate(tables_by_seed)]
    if isinstance(tables_by_seed, str | bytes) or not isinstance(tables_by_seed, Sequence):
        raise TypeError(
            f"{name} must be a mapping of seed name to per-prompt estimates (or PromptTables), or a "
            f"list of them; got {type(tables_by_seed).__name__}"
        )
    return [(f"seed{j}", v) for j, v in enumerate(tables_by_seed)]


def _table_column(table: PromptTable, metric: str | None, where: str) -> np.ndarray:
    if metric is None:
        raise TypeError(f"{where} is a PromptTable: pass metric= (one of {', '.join(table.names)})")
    if metric not in table.names:
        raise ValueError(f"metric {metric!r} is not in {where}; its metrics: {', '.join(table.names)}")
    return np.asarray(table.values[:, table.names.index(metric)], dtype=np.float64)


def _gather(
    groups: Sequence[tuple[str, list[tuple[str, Any]]]], metric: str | None, common_prompts: bool
) -> list[np.ndarray]:
    """One (S_g, P) matrix per group, on the same P prompts (matched by key for PromptTables)."""
    entries = [(f"{arg}[{seed!r}]", value) for arg, seeds in groups for seed, value in seeds]
    is_table = [isinstance(v, PromptTable) for _, v in entries]
    if any(is_table) and not all(is_table):
        where = entries[is_table.index(False)][0]
        raise TypeError(
            f"every seed must be a PromptTable, or every seed per-prompt values; {where} is a "
            f"{type(entries[is_table.index(False)][1]).__name__} among PromptTables"
        )
    if all(is_table):
        rows = _table_rows(entries, metric, common_prompts)
    else:
        if metric is not None:
            raise TypeError("metric= is for PromptTables; the seeds are per-prompt values")
        rows = [check_vector(v, where) for where, v in entries]
        first_where, p = entries[0][0], rows[0].size
        for (where, _), row in zip(entries, rows):
            if row.size != p:
                raise ValueError(
                    f"{where} has {row.size} prompts and {first_where} has {p}: every seed must be "
                    "evaluated on the same prompts, in the same order"
                )
    out, start = [], 0
    for _, seeds in groups:
        out.append(np.vstack(rows[start : start + len(seeds)]) if seeds else np.empty((0, 0)))
        start += len(seeds)
    return out


def _table_rows(entries: list[tuple[str, Any]], metric: str | None, common_prompts: bool) -> list[np.ndarray]:
    """The ``metric`` column of every PromptTable on the prompts they share, NaN prompts dropped."""
    first_where, first = entries[0]
    keys = list(first.keys)
    if common_prompts:
        shared = set(keys).intersection(*(set(t.keys) for _, t in entries[1:]))
        keys = [k for k in keys if k in shared]
    else:
        wanted = set(keys)
        for where, t in entries[1:]:
            have = set(t.keys)
            if have != wanted:
                missing, extra = wanted - have, have - wanted
                example = next(iter(missing or extra))
                raise ValueError(
                    f"{where} has {len(have)} prompts and {first_where} has {len(wanted)} "
                    f"({len(missing)} missing, {len(extra)} extra, e.g. {example!r}): every seed must "
                    "be evaluated on the same prompts (or pass common_prompts=True)"
                )
    rows = []
    for where, t in entries:
        pos = {k: i for i, k in enumerate(t.keys)}
        col = _table_column(t, metric, where)
        rows.append(col[[pos[k] for k in keys]] if keys else col[:0])
    matrix = np.vstack(rows)
    defined = np.all(np.isfinite(matrix), axis=0)
    if not defined.all():
        warn_undefined(
            f"{metric} is undefined (NaN) for {int((~defined).sum())} of {defined.size} prompts in some "
            "seed (k above its samples); those prompts are left out",
            stacklevel=None,
        )
    return list(matrix[:, defined])


def _summary(y: np.ndarray, seeds: tuple[str, ...], confidence: float, arg: str) -> SeedSummary:
    s, p = y.shape
    if s < 2:
        raise ValueError(f"{arg} must hold at least two seeds (the unit of the interval); got {s}")
    if p < 2:
        raise ValueError(f"{arg}: the seeds must share at least two prompts with the metric defined; got {p}")
    seed_means = y.mean(axis=1)
    prompt_means = y.mean(axis=0)
    grand = float(seed_means.mean())
    ms_seed = float(p * np.sum((seed_means - grand) ** 2) / (s - 1))
    ms_prompt = float(s * np.sum((prompt_means - grand) ** 2) / (p - 1))
    resid = y - seed_means[:, None] - prompt_means[None, :] + grand
    ms_res = float(np.sum(resid * resid) / ((s - 1) * (p - 1)))
    var_seed = max(0.0, (ms_seed - ms_res) / p)
    var_prompt = max(0.0, (ms_prompt - ms_res) / s)
    var_within = float(np.mean(np.var(y, axis=1, ddof=1)))
    se = float(np.std(seed_means, ddof=1) / math.sqrt(s))
    if se > 0:
        from scipy import special

        half = float(special.stdtrit(s - 1, 0.5 + confidence / 2.0)) * se
    else:
        half = 0.0
    denom = var_seed + ms_res / p
    return SeedSummary(
        seeds=seeds,
        seed_means=seed_means,
        n_seeds=s,
        n_prompts=p,
        mean=grand,
        se=se,
        df=s - 1,
        ci_low=grand - half,
        ci_high=grand + half,
        confidence=confidence,
        var_seed=var_seed,
        var_prompt=var_prompt,
        var_residual=ms_res,
        var_within_seed=var_within,
        ms_seed=ms_seed,
        ms_prompt=ms_prompt,
        ms_residual=ms_res,
        se_prompts=math.sqrt(var_within / p),
        seed_share=var_seed / denom if denom > 0 else math.nan,
        method=SEED_METHOD,
    )


def combine_seeds(
    tables_by_seed: Any,
    *,
    confidence: float = 0.95,
    metric: str | None = None,
    common_prompts: bool = False,
) -> SeedSummary:
    """One metric over several training seeds: variance components and the mean with its interval.

    The seeds x prompts table is fitted as a two-way crossed random-effects model by the method
    of moments (module docstring): between-seed, between-prompt and residual variance; the mean
    over seeds gets a Student-t interval with ``S - 1`` degrees of freedom over the seed means
    (the seeds are the sample; the prompts, the benchmark, are fixed).

    Parameters
    ----------
    tables_by_seed : mapping or sequence of array_like (P,) or PromptTable, or array (S, P)
        One evaluation per seed (a mapping gives the seeds' names): per-prompt estimates of one
        metric on the same prompts in the same order, or per-seed
        :class:`~rlmetrics.validation.exact.summary.PromptTable` (one variable's table of
        :func:`~rlmetrics.validation.exact.summary.prompt_estimates`), matched by ``(source,
        uid)``; prompts where ``metric`` is NaN in some seed are left out (with a warning).
    confidence : float, keyword-only
        Level of the interval.
    metric : str, keyword-only
        The column of the PromptTables (e.g. ``"pass@4"``); only for PromptTables.
    common_prompts : bool, keyword-only
        PromptTables only: use the prompts every seed has instead of refusing seeds whose
        prompts differ.

    Returns
    -------
    SeedSummary

    Raises
    ------
    TypeError, ValueError
        Fewer than two seeds or shared prompts, seeds of different lengths or prompts, non-finite
        values, a mix of PromptTables and arrays, a ``metric`` not in a table (each message names
        the argument and the seed).

    Examples
    --------
    >>> y = {"s0": [0.2, 0.6, 0.9, 0.5], "s1": [0.3, 0.7, 1.0, 0.6], "s2": [0.1, 0.6, 0.8, 0.5]}
    >>> r = combine_seeds(y)
    >>> round(r.mean, 4), r.n_seeds, r.n_prompts, r.df
    (0.5667, 3, 4, 2)
    >>> round(r.var_seed, 5), round(r.var_prompt, 4), round(r.var_residual, 5)
    (0.00556, 0.0833, 0.00111)
    >>> r.ci_low < r.mean < r.ci_high
    True
    """
    confidence = check_level(confidence, "confidence")
    seeds = _named_seeds(tables_by_seed, "tables_by_seed")
    if len(seeds) < 2:
        raise ValueError(
            f"tables_by_seed must hold at least two seeds (the unit of the interval); got {len(seeds)}"
        )
    (y,) = _gather([("tables_by_seed", seeds)], metric, bool(common_prompts))
    return _summary(y, tuple(n for n, _ in seeds), confidence, "tables_by_seed")


def compare_seed_groups(
    group_a: Any,
    group_b: Any,
    *,
    confidence: float = 0.95,
    power: float = 0.8,
    metric: str | None = None,
    common_prompts: bool = False,
) -> SeedComparison:
    """Two training configurations compared with the seeds as the unit: Welch's t on seed means.

    Each configuration is trained with several seeds and every seed evaluated on the same prompts
    (in both configurations). What varies between runs of one configuration is the seed, so the
    comparison counts seeds, not prompts: the per-seed means of B against those of A, with
    ``se^2 = sd_a^2 / S_a + sd_b^2 / S_b`` and the Welch-Satterthwaite degrees of freedom. A
    paired test over prompts would treat two seeds as the whole configuration and call their
    seed-to-seed difference an effect.

    Parameters
    ----------
    group_a, group_b : mapping or sequence of array_like (P,) or PromptTable, or array (S, P)
        Each configuration's seeds, as :func:`combine_seeds` takes them (at least two each), on
        the same prompts.
    confidence, power : float, keyword-only
        Level of the interval (the test's is ``1 - confidence``); power of ``mde``.
    metric, common_prompts : keyword-only
        As in :func:`combine_seeds`; ``common_prompts`` keeps the prompts every seed of both
        configurations has.

    Returns
    -------
    SeedComparison
        The difference ``B - A`` with its interval, p-value and MDE, and each side's
        :class:`SeedSummary`.

    Raises
    ------
    TypeError, ValueError
        As :func:`combine_seeds`, for either group (the message says which); groups on different
        prompts.

    Examples
    --------
    >>> a = [[0.2, 0.6, 0.9, 0.5], [0.3, 0.7, 1.0, 0.6], [0.1, 0.6, 0.8, 0.5]]
    >>> b = [[0.4, 0.8, 1.0, 0.7], [0.3, 0.7, 0.9, 0.7], [0.5, 0.8, 1.0, 0.8]]
    >>> r = compare_seed_groups(a, b)
    >>> round(r.diff, 4), round(r.p_value, 3), r.a.n_seeds + r.b.n_seeds, r.method
    (0.15, 0.061, 6, 'Welch t over seed means')
    """
    confidence = check_level(confidence, "confidence")
    power = check_level(power, "power")
    seeds_a = _named_seeds(group_a, "group_a")
    seeds_b = _named_seeds(group_b, "group_b")
    for arg, seeds in (("group_a", seeds_a), ("group_b", seeds_b)):
        if len(seeds) < 2:
            raise ValueError(
                f"{arg} must hold at least two seeds (seeds are the unit of the comparison); got {len(seeds)}"
            )
    ya, yb = _gather([("group_a", seeds_a), ("group_b", seeds_b)], metric, bool(common_prompts))
    sa = _summary(ya, tuple(n for n, _ in seeds_a), confidence, "group_a")
    sb = _summary(yb, tuple(n for n, _ in seeds_b), confidence, "group_b")
    d = unpaired_difference(
        sa.mean, sa.se, sa.n_seeds, sb.mean, sb.se, sb.n_seeds, confidence=confidence, power=power
    )
    return SeedComparison(
        a=sa,
        b=sb,
        diff=d.diff,
        se=d.se,
        df=d.df,
        ci_low=d.ci_low,
        ci_high=d.ci_high,
        p_value=d.p_value,
        statistic=d.statistic,
        mde=d.mde,
        method=SEED_COMPARISON_METHOD,
        confidence=confidence,
        power=power,
    )
