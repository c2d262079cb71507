"""How many prompts, and samples a prompt, an evaluation needs to detect a difference.

From a pilot evaluation's spread (:func:`pilot_spread`: the prompts' per-prompt rates and the
variance of a sample around its prompt's rate), :func:`plan_evaluation` gives, for each number
of samples per prompt ``n``, the number of prompts ``P`` at which a two-sided test at level
``alpha`` detects a difference of ``mde`` between two runs with probability ``power``, by the
normal approximation. One prompt's mean over ``n`` samples varies as

``var_between + var_within / n``

(the spread of the prompts' true rates, and the sampling noise of ``n`` samples). Two runs on the
same prompts compared prompt by prompt (``paired=True``, as ``rlmetrics compare`` does) differ
per prompt by ``V(n) = 2 (1 - rho) var_between + 2 var_within / n``, ``rho`` the correlation of
the two runs' true per-prompt rates (a pilot of one run cannot tell it: ``correlation=``);
compared unpaired, ``V(n) = 2 (var_between + var_within / n)`` with ``P`` prompts a run. Then
``se = sqrt(V(n) / P)`` and ``P`` is the smallest with
``Phi(mde / se - z_{1-alpha/2}) + Phi(-mde / se - z_{1-alpha/2}) >= power`` (statsmodels'
``NormalIndPower``). More samples a prompt shrink only the second term: below
``min_prompts`` (``n`` infinite) no number of samples makes up for too few prompts.

scipy is imported inside the functions that need it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rlmetrics._core.checks import check_int
from rlmetrics.validation._args import check_level, check_scalar, check_vector
from rlmetrics.validation.exact.summary import PromptTable

__all__ = [
    "DEFAULT_PLAN_SAMPLES",
    "EvaluationPlan",
    "PilotSpread",
    "PlanRow",
    "pilot_spread",
    "plan_evaluation",
]

#: Samples a prompt tried by default.
DEFAULT_PLAN_SAMPLES = (1, 2, 4, 8, 16, 32, 64)

#: The most prompts a plan reports (beyond it a difference is too small to plan for).
MAX_PLAN_PROMPTS = 10**9


class PilotSpread(NamedTuple):
    """The spread of a pilot evaluation, what a plan needs.

    Attributes
    ----------
    mean : float
        Mean over prompts of the per-prompt rates.
    var_between : float
        Variance of the prompts' true rates (between prompts), the sampling noise taken out
        (>= 0).
    var_within : float
        Mean over prompts of the variance of one sample around its prompt's rate (``p (1 - p)``
        for 0/1 samples).
    n_prompts : int
        Prompts of the pilot.
    n_samples : float
        Mean samples per prompt of the pilot.
    """

    mean: float
    var_between: float
    var_within: float
    n_prompts: int
    n_samples: float


class PlanRow(NamedTuple):
    """One option of a plan: ``n_prompts`` prompts of ``n_samples`` samples each."""

    n_samples: int
    n_prompts: int
    #: ``n_prompts * n_samples``: generations of one run
    total_samples: int
    #: standard error of the difference at this plan
    se: float
    #: the power reached at ``n_prompts`` (>= the power asked for)
    power: float
    #: whether ``n_prompts`` is within ``max_prompts`` (True without it)
    feasible: bool


@dataclass(frozen=True)
class EvaluationPlan:
    """Options of (samples a prompt, prompts) that detect ``mde`` with probability ``power``.

    Attributes
    ----------
    rows : tuple of PlanRow
        One per number of samples a prompt, in increasing order.
    spread : PilotSpread
        The pilot's spread the plan is built on.
    mde, power, alpha : float
        The difference to detect, the power and the two-sided level.
    paired : bool
        Two runs on the same prompts compared prompt by prompt (else unpaired, ``P`` a run).
    correlation : float or None
        The correlation of the runs' true per-prompt rates assumed (paired only).
    min_prompts : int
        The prompts needed with infinitely many samples a prompt.
    max_prompts : int or None
        Prompts available (the benchmark's size), if given.
    method : str
        What was computed, in words.
    """

    rows: tuple[PlanRow, ...]
    spread: PilotSpread
    mde: float
    power: float
    alpha: float
    paired: bool
    correlation: float | None
    min_prompts: int
    max_prompts: int | None
    method: str

    def as_dict(self) -> dict[str, Any]:
        """Plain data (numbers, lists, strings) for JSON."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["rows"] = [row._asdict() for row in self.rows]
        out["spread"] = self.spread._asdict()
        return out


# --------------------------------------------------------------------------------------------
# the pilot's spread


def _mean_column(table: PromptTable) -> np.ndarray:
    j = next((j for j, name in enumerate(table.names) if name.startswith("mean@")), None)
    if j is None:  # pragma: no cover - every PromptTable has its mean first
        raise ValueError("pilot has no mean@N column")
    return np.asarray(table.values[:, j], dtype=np.float64)


def pilot_spread(pilot: Any, *, counts: Any = None, within_var: Any = None) -> PilotSpread:
    """The between- and within-prompt variance of a pilot evaluation.

    With ``r_i`` the mean of prompt ``i``'s ``n_i`` samples and ``w_i`` an unbiased estimate of
    the variance of one of its samples (``r_i (1 - r_i) n_i / (n_i - 1)`` for 0/1 samples, or
    ``within_var``): ``var_within = mean(w_i)`` and ``var_between = var(r) - mean(w_i / n_i)``
    (the observed spread of the rates less their sampling noise), set to 0 when negative.

    Parameters
    ----------
    pilot : PromptTable or array_like of float, shape (P,)
        A variable's :class:`~rlmetrics.validation.exact.summary.PromptTable` (0/1 values, unless
        ``within_var`` is given; its mean@N column and sample counts are used), or per-prompt
        rates (means over samples).
    counts : int or array_like of int, shape (P,), keyword-only
        Samples per prompt (>= 2), for rates; a table has its own.
    within_var : array_like of float, shape (P,), keyword-only
        Each prompt's sample variance (``ddof=1``) of its samples: for values that are not 0/1.

    Returns
    -------
    PilotSpread

    Raises
    ------
    TypeError, ValueError
        Rates outside [0, 1] without ``within_var``, ``counts`` missing, below 2 or of another
        length, fewer than two prompts, a table of non-0/1 values without ``within_var``.

    Examples
    --------
    >>> s = pilot_spread([0.0, 0.25, 1.0, 0.5, 0.75, 1.0], counts=4)
    >>> round(s.mean, 4), round(s.var_between, 4), round(s.var_within, 4), s.n_prompts
    (0.5833, 0.1, 0.1389, 6)
    """
    if isinstance(pilot, PromptTable):
        if counts is not None:
            raise TypeError("counts= is for rates; a PromptTable pilot has its own sample counts")
        if not pilot.binary and within_var is None:
            raise ValueError(
                "pilot holds values that are not 0/1: pass within_var= (each prompt's sample variance)"
            )
        rates, n = _mean_column(pilot), np.asarray(pilot.counts, dtype=np.float64)
    else:
        rates = check_vector(pilot, "pilot")
        if counts is None:
            raise TypeError("counts= (samples per prompt) is needed with per-prompt rates")
        n = _counts(counts, rates.size)
    p = int(rates.size)
    if p < 2:
        raise ValueError(f"pilot must have at least two prompts; got {p}")
    if np.any(n < 2):
        raise ValueError(
            f"counts must be >= 2 samples per prompt (a within-prompt variance); got {int(n.min())}"
        )
    if within_var is None:
        if np.any((rates < 0) | (rates > 1)):
            raise ValueError(
                "pilot rates must be in [0, 1] for 0/1 samples (else pass within_var=); got "
                f"{float(rates[(rates < 0) | (rates > 1)][0])!r}"
            )
        w = rates * (1.0 - rates) * n / (n - 1.0)
    else:
        w = check_vector(within_var, "within_var")
        if w.size != p:
            raise ValueError(f"within_var must have one value per prompt ({p}); got {w.size}")
        if np.any(w < 0):
            raise ValueError(f"within_var must be >= 0; got {float(w[w < 0][0])!r}")
    var_between = max(0.0, float(np.var(rates, ddof=1) - np.mean(w / n)))
    return PilotSpread(float(rates.mean()), var_between, float(w.mean()), p, float(n.mean()))


def _counts(counts: Any, p: int) -> np.ndarray:
    if isinstance(counts, int | np.integer) and not isinstance(counts, bool):
        return np.full(p, float(counts))
    arr = np.asarray(counts)
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise TypeError(
            f"counts must be an integer or a 1-D array of integers; got {type(counts).__name__} "
            f"of dtype {arr.dtype}, shape {arr.shape}"
        )
    if arr.size != p:
        raise ValueError(f"counts must have one count per prompt ({p}); got {arr.size}")
    return arr.astype(np.float64)


# --------------------------------------------------------------------------------------------
# the plan


def _power(delta: float, z: float, n_prompts: int) -> float:
    """Two-sided normal power at standardised effect ``delta`` per prompt, ``n_prompts`` prompts."""
    from scipy import special

    shift = delta * math.sqrt(n_prompts)
    return float(special.ndtr(shift - z) + special.ndtr(-shift - z))


def _prompts_needed(delta: float, z: float, z_power: float, power: float) -> int:
    """Smallest P >= 2 whose two-sided normal power at ``delta`` reaches ``power``."""
    if math.isinf(delta):
        return 2
    if delta <= 0:
        return MAX_PLAN_PROMPTS
    guess = min(float(MAX_PLAN_PROMPTS), math.ceil(((z + z_power) / delta) ** 2))
    p = max(2, int(guess))
    while p > 2 and _power(delta, z, p - 1) >= power:  # the far tail helps a little
        p -= 1
    while p < MAX_PLAN_PROMPTS and _power(delta, z, p) < power:
        p += 1
    return p


def _check_samples(n_samples: Any) -> tuple[int, ...]:
    if isinstance(n_samples, int | np.integer) and not isinstance(n_samples, bool):
        n_samples = [n_samples]
    if isinstance(n_samples, str | bytes) or not isinstance(n_samples, Sequence | np.ndarray):
        raise TypeError(f"n_samples must be a list of integers >= 1; got {type(n_samples).__name__}")
    out = sorted({check_int(n, f"n_samples[{i}]", minimum=1) for i, n in enumerate(n_samples)})
    if not out:
        raise ValueError("n_samples must hold at least one number of samples; got []")
    return tuple(out)


def plan_evaluation(
    pilot: Any,
    *,
    mde: float,
    power: float = 0.8,
    alpha: float = 0.05,
    paired: bool = True,
    correlation: float = 0.5,
    n_samples: Sequence[int] = DEFAULT_PLAN_SAMPLES,
    counts: Any = None,
    within_var: Any = None,
    max_prompts: int | None = None,
) -> EvaluationPlan:
    """Prompts and samples a prompt needed to detect a difference ``mde`` between two runs.

    The normal approximation of the module docstring, on the pilot's spread: for each number of
    samples a prompt, the fewest prompts at which a two-sided test at ``alpha`` detects a true
    difference of ``mde`` with probability ``power``.

    Parameters
    ----------
    pilot : PromptTable, array_like of float (P,), or PilotSpread
        A pilot evaluation (:func:`pilot_spread` takes the first two, with ``counts`` and
        ``within_var``), or its spread.
    mde : float > 0, keyword-only
        The difference of the metric to detect (0.02: two points of accuracy).
    power, alpha : float, keyword-only
        The probability of detecting it, and the two-sided level of the test.
    paired : bool, keyword-only
        Both runs evaluated on the same prompts and compared prompt by prompt (else unpaired,
        ``n_prompts`` a run).
    correlation : float in [-1, 1], keyword-only
        Paired only: the assumed correlation of the two runs' true per-prompt rates (checkpoints
        of one model are typically 0.5-0.9; ``rlmetrics compare`` prints it for a pair of runs).
    n_samples : sequence of int, keyword-only
        The numbers of samples a prompt to plan for.
    counts, within_var : keyword-only
        As in :func:`pilot_spread`, for a pilot of rates.
    max_prompts : int, optional, keyword-only
        Prompts available: rows needing more are marked ``feasible=False``.

    Returns
    -------
    EvaluationPlan

    Raises
    ------
    TypeError, ValueError
        An ``mde`` that is not a positive number, levels outside (0, 1), a correlation outside
        [-1, 1], the pilot's errors (:func:`pilot_spread`).

    Examples
    --------
    >>> spread = PilotSpread(mean=0.5, var_between=0.06, var_within=0.18, n_prompts=500, n_samples=8)
    >>> plan = plan_evaluation(spread, mde=0.02, n_samples=[1, 4, 16], correlation=0.8)
    >>> [(r.n_samples, r.n_prompts) for r in plan.rows], plan.min_prompts
    ([(1, 7535), (4, 2237), (16, 913)], 471)
    """
    mde = check_scalar(mde, "mde")
    if mde <= 0:
        raise ValueError(f"mde must be > 0 (the difference to detect); got {mde!r}")
    power = check_level(power, "power")
    alpha = check_level(alpha, "alpha")
    correlation = check_scalar(correlation, "correlation")
    if not -1.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must be in [-1, 1]; got {correlation!r}")
    samples = _check_samples(n_samples)
    if max_prompts is not None:
        max_prompts = check_int(max_prompts, "max_prompts", minimum=1)
    if isinstance(pilot, PilotSpread):
        if counts is not None or within_var is not None:
            raise TypeError("counts= and within_var= are for a pilot of rates, not a PilotSpread")
        spread = pilot
    else:
        spread = pilot_spread(pilot, counts=counts, within_var=within_var)
    from scipy import special

    z = float(special.ndtri(1.0 - alpha / 2.0))
    z_power = float(special.ndtri(power))
    between = 2.0 * (1.0 - correlation) * spread.var_between if paired else 2.0 * spread.var_between
    rows = []
    for n in samples:
        var = between + 2.0 * spread.var_within / n
        delta = mde / math.sqrt(var) if var > 0 else math.inf
        p = _prompts_needed(delta, z, z_power, power)
        rows.append(
            PlanRow(
                n_samples=n,
                n_prompts=p,
                total_samples=p * n,
                se=math.sqrt(var / p),
                power=_power(delta, z, p) if math.isfinite(delta) else 1.0,
                feasible=max_prompts is None or p <= max_prompts,
            )
        )
    floor = mde / math.sqrt(between) if between > 0 else math.inf
    how = (
        f"paired over prompts, assumed correlation {correlation:g} of the runs' per-prompt rates"
        if paired
        else "unpaired, n_prompts a run"
    )
    return EvaluationPlan(
        rows=tuple(rows),
        spread=spread,
        mde=mde,
        power=power,
        alpha=alpha,
        paired=bool(paired),
        correlation=correlation if paired else None,
        min_prompts=_prompts_needed(floor, z, z_power, power),
        max_prompts=max_prompts,
        method=f"normal approximation, two-sided at {alpha:g}; {how}",
    )
