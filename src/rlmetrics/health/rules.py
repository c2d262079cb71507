"""One rule per failure mode of RL fine-tuning, their thresholds, and :func:`diagnose`.

Each rule reads the signals it needs (:mod:`~rlmetrics.health.signals`) and returns a
:class:`~rlmetrics.health.findings.Finding`, nothing (the run is healthy on that count), or a
:class:`~rlmetrics.health.findings.Skipped` (a signal is missing, or the run is too short).

Absolute levels of most metrics do not transfer between tasks and models (healthy entropies range
from ~0.08 to several nats, and a fall of ~70% in the first couple of hundred steps is normal,
Cui et al. 2025). So most rules compare a run with its own early level: a *frozen* baseline (the
median of the first ``baseline`` logged points, in log space for heavy-tailed metrics: a rolling
one would follow a slow drift), robust statistics (median, MAD), and persistence (``k`` of ``n``
consecutive logged points); the onset is the first flagged point of the first qualifying window.
A rule's ``n`` and ``baseline`` also set the shortest run it can judge.

A rule is declared in one place, where its check is written::

    @_rule(signals=("entropy", ...), thresholds={"fraction": Threshold(0.1, "its source"), ...},
           advice="What to try.")
    def entropy_collapse(history: History, p: Params) -> Result: ...

The kind is the function's name, reached in its body as ``p.kind`` (:class:`Params`); each
threshold carries its source or reason (:class:`Threshold`), and those several rules share
(``k`` and ``n`` of the persistent rules ...) are declared once. :data:`RULE_SPECS` holds the
declarations; :data:`KINDS`, :data:`THRESHOLDS`, :data:`ADVICE` and :data:`RULES` are views of it.

TRL's ``sampling/sampling_logp_difference/mean`` is the mean ``|log p_train - log p_rollout|``;
``exp`` of it is at most NeMo-RL's mean ``exp|...|`` (Jensen), so the 1.05 check on it is
conservative. verl's ``rollout_corr/ppl_ratio`` is checked both ways (``max(r, 1/r)``).

The off-policy rules read the lag under rlmetrics' ``staleness/`` keys or the peers' names
:mod:`rlmetrics.policy.staleness` maps to them (verl, prime-rl, slime; see
:mod:`~rlmetrics.health.signals`). The text rules name the steps whose samples show a finding
(``sample_steps`` in its evidence: the last step before its onset, the onset, the worst step),
for a report to open those steps' sample tables (:func:`rlmetrics.health.examples.finding_examples`
picks their rows that show it).

Thresholds (:data:`THRESHOLDS`, overridable by ``diagnose(..., thresholds={kind: {param: value}})``),
with their sources, as :func:`threshold_table` renders them from the declarations (appended to
this docstring on import; the rows a group of rules shares come last):
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics.health.categories import check_groups, fold_findings, in_category, split_history
from rlmetrics.health.findings import ERROR, WARNING, Diagnosis, Finding, History, Series, Skipped, as_history
from rlmetrics.health.signals import SIGNALS, resolve, resolve_all, resolving, with_signals
from rlmetrics.health.smoothing import (
    SeriesCache,
    debiased_ema,
    first_persistent,
    frozen_baseline,
    last_persistent,
    noise_sigma,
    rolling_baseline,
    series_median,
    window_counts,
    window_median,
)

__all__ = [
    "ADVICE",
    "KINDS",
    "RULES",
    "RULE_SPECS",
    "THRESHOLDS",
    "Params",
    "Rule",
    "Threshold",
    "diagnose",
    "resolve_thresholds",
    "threshold_table",
]


class Threshold(NamedTuple):
    """One threshold of a rule as declared: its default, and why that value.

    Attributes
    ----------
    value : float
        The default (:data:`THRESHOLDS`).
    source : str
        Its source or reason, one sentence (a paper, a peer's health check, what healthy runs show).
    group : str
        The rules that share it (``"persistent rules"``), declared once for them; ``""`` for a
        rule's own.
    """

    value: float
    source: str
    group: str = ""


def _one_source(source: str, *, group: str = "", **values: float) -> dict[str, Threshold]:
    """Thresholds with one source (``k`` and ``n``, a range's two ends): one row of the table."""
    return {name: Threshold(value, source, group) for name, value in values.items()}


class Params(Mapping[str, float]):
    """The thresholds a rule runs with (parameter -> value, read-only), and its kind.

    >>> p = Params("kl_drift", {"window": 20.0})
    >>> p.kind, p["window"], dict(p)
    ('kl_drift', 20.0, {'window': 20.0})
    """

    __slots__ = ("_values", "kind")

    def __init__(self, kind: str, values: Mapping[str, float]) -> None:
        self.kind = kind
        self._values = dict(values)

    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Params({self.kind!r}, {self._values!r})"


Result = Finding | Skipped | None
#: A rule's body: the history, and its thresholds with its kind.
Check = Callable[[History, Params], Result]


@dataclass(frozen=True)
class Rule:
    """One failure mode: its check, the signals it reads, its thresholds with their sources, and
    what to try when it is found.

    Attributes
    ----------
    kind : str
        The name of the failure mode (the check function's name).
    check : callable
        ``check(history, params) -> Finding | Skipped | None``; ``params`` any mapping
        parameter -> value (:data:`THRESHOLDS` ``[kind]``, overridden or not).
    thresholds : Mapping[str, float]
        Parameter -> default value.
    advice : str
        What to try, shown with every finding of this kind.
    signals : tuple of str
        The signals of :data:`~rlmetrics.health.signals.SIGNALS` it reads (those it needs and
        those it reads where logged).
    declared : Mapping[str, Threshold]
        Parameter -> its default, source and group, as declared.
    """

    kind: str
    check: Callable[[History, Mapping[str, float]], Result]
    thresholds: Mapping[str, float]
    advice: str
    signals: tuple[str, ...] = ()
    declared: Mapping[str, Threshold] = field(default_factory=dict)

    @property
    def sources(self) -> dict[str, str]:
        """Parameter -> the source or reason of its default."""
        return {name: t.source for name, t in self.declared.items()}


_REGISTRY: dict[str, Rule] = {}


def _rule(
    *, signals: tuple[str, ...], thresholds: Mapping[str, Threshold], advice: str
) -> Callable[[Check], Callable[[History, Mapping[str, float]], Result]]:
    """Declare a rule where its check is written: the kind is the function's name; rules run in
    the order they are declared. The check registered takes any mapping of thresholds and hands
    the body a :class:`Params` carrying the kind."""

    def register(body: Check) -> Callable[[History, Mapping[str, float]], Result]:
        kind = body.__name__

        @functools.wraps(body)
        def check(history: History, params: Mapping[str, float]) -> Result:
            return body(history, Params(kind, params))

        defaults = {name: float(t.value) for name, t in thresholds.items()}
        _REGISTRY[kind] = Rule(kind, check, defaults, advice, signals, MappingProxyType(dict(thresholds)))
        return check

    return register


# --- thresholds several rules share -----------------------------------------------------------------

_PERSIST = _one_source("8 of the last 10 logged points", group="persistent rules", k=8.0, n=10.0)
_BASE = {"baseline": Threshold(10.0, "points of the frozen early baseline", "baseline rules"), **_PERSIST}
#: The rules of a share rising from its best level so far (text statistics, dropped samples).
_RISE = {
    "rise_sigmas": Threshold(
        4.0,
        "repetition, gibberish, format, drops: the rise also 4 noise sigmas (binomial noise of a "
        "share of a batch)",
        "rising rules",
    ),
    "error_factor": Threshold(
        3.0, "a rise 3x its threshold, or two arms rising together: an error", "rising rules"
    ),
    "window": Threshold(
        10.0, "points of the window medians whose lowest (best) so far is the reference", "rising rules"
    ),
    **_PERSIST,
}
_LENGTH_REWARD = Threshold(
    1.0, "reward gain over the window under one noise sigma: the reward does not follow", "length rules"
)
_VERL_CHECK = "verl rollout-correction health check"
#: A run too short for a rule's window, judged on what its last points show.
_SHORT = _one_source(
    "a run too short for a rule's window is judged on its last points: a stretch lasting to its "
    "end, 2 points at least and half of its points (one point is noise; most of a run, to its "
    "end, is what the run shows)",
    group="short runs",
    tail_points=2.0,
    tail_share=0.5,
)


# --- shared pieces ------------------------------------------------------------------------------


def _num(x: float | np.floating[Any]) -> float | str:
    """A JSON-friendly number: 6 significant digits; ``"nan"``, ``"inf"`` or ``"-inf"`` when not finite."""
    value = float(x)
    return float(f"{value:.6g}") if np.isfinite(value) else str(value)


def _series(history: History, kind: str, *signals: str) -> list[Series] | Skipped:
    """The series of ``signals``, or a Skipped naming the first that is missing."""
    out = []
    for signal in signals:
        found = resolve(history, signal)
        if found is None:
            return Skipped(
                kind, f"needs {signal} (one of {', '.join(SIGNALS[signal])}); none is logged", not_logged=True
            )
        out.append(found)
    return out


def _too_short(kind: str, s: Series, needed: int) -> Skipped | None:
    if needed <= s.values.size and np.isfinite(s.values[: max(needed, 0)]).all():
        return None  # the first points are enough: the rest need not be counted
    have = int(np.isfinite(s.values).sum())
    if have >= needed:
        return None
    return Skipped(kind, f"run too short: {have} finite points of {s.key}, needs {needed}")


def _finding(
    kind: str, severity: str, steps: np.ndarray, onset: int, end: int, s: Series, **evidence: Any
) -> Finding:
    """A Finding from its window ``[onset, end]`` (indices into ``steps``), with the smoothed level."""
    smoothed = debiased_ema(s.values)
    at_end = int(np.searchsorted(s.steps, steps[end], side="right")) - 1
    metric = tuple(evidence.pop("metric", (s.key,)))
    evidence = {
        "window": [int(steps[onset]), int(steps[end])],
        "smoothed": _num(smoothed[max(at_end, 0)]),
        **{k: (_num(v) if isinstance(v, float | np.floating) else v) for k, v in evidence.items()},
    }
    return Finding(kind, severity, int(steps[onset]), metric, evidence, ADVICE[kind])


def _at_or_before(steps: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Index of the last of ``steps`` (increasing, no step twice) at or before each of ``at``
    (-1 before the first): ``np.searchsorted(steps, at, side="right") - 1``, without the search
    where ``at`` are ``steps`` (two signals of one run, logged at the same steps)."""
    if at is steps or (at.shape == steps.shape and np.array_equal(at, steps)):
        return np.arange(steps.size)
    return np.searchsorted(steps, at, side="right") - 1


def _common_steps(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps two series share and their indices in each (steps increasing, no step twice):
    ``np.intersect1d(a, b, return_indices=True)``, without its sort where they are the same."""
    if a is b or (a.shape == b.shape and np.array_equal(a, b)):
        return a.copy(), np.arange(a.size), np.arange(b.size)
    return np.intersect1d(a, b, return_indices=True)


class _Held(NamedTuple):
    """Where one arm of a rule holds: its series, its window ``[onset, end]`` (indices), and the
    level the arm is judged against (its level at saturation, its early level) where it has one."""

    s: Series
    onset: int
    end: int
    level: float = float("nan")

    @property
    def step(self) -> int:
        """The step of its onset."""
        return int(self.s.steps[self.onset])

    def window(self) -> np.ndarray:
        """Its values over the window."""
        return self.s.values[self.onset : self.end + 1]


def _persist(flags: np.ndarray, p: Params, *, start: int = 0) -> tuple[int, int] | None:
    return first_persistent(flags, k=int(p["k"]), n=int(p["n"]), start=start)


def _short_tail(flags: np.ndarray, finite: np.ndarray, p: Params) -> tuple[int, int] | None:
    """A run too short for its rule's window, judged on its last points: the stretch of flagged
    points that lasts to its last finite point, when it holds ``tail_points`` points at least and
    ``tail_share`` of the run's finite points (the indices of its first and last point).

    >>> p = Params("k", {"tail_points": 2.0, "tail_share": 0.5})
    >>> finite = np.ones(4, dtype=bool)
    >>> _short_tail(np.array([False, True, True, True]), finite, p)
    (1, 3)
    >>> _short_tail(np.array([True, False, False, True]), finite, p) is None
    True
    """
    where = np.flatnonzero(finite)
    flagged = np.asarray(flags, dtype=bool)[where]
    unflagged = np.flatnonzero(~flagged)
    m = int(where.size - (unflagged[-1] + 1 if unflagged.size else 0))
    if m == 0 or m < p["tail_points"] or m < p["tail_share"] * where.size:
        return None
    return int(where[-m]), int(where[-1])


def _reward_gain(
    reward: Series, at_steps: np.ndarray, window: int, *, since_start: bool = False
) -> np.ndarray:
    """Median reward over the ``window`` points up to each step, minus the median of the ``window``
    before (``since_start``: of the first ``window``, for windows that lie past it).

    NaN where the reward has fewer than ``2 * window`` points up to that step.
    """
    rs, rv = reward.steps, reward.values
    wm = window_median(rv, window=window)
    gain = np.full(at_steps.shape, np.nan)
    first = 2 * window - 1
    if at_steps is rs or (at_steps.shape == rs.shape and np.array_equal(at_steps, rs)):
        # at the reward's own steps (signals logged together): the points from the first with
        # 2 * window points up to it, and the windows before them, as slices
        reference = wm[window - 1] if since_start else wm[first - window : rs.size - window]
        gain[first:] = wm[first:] - reference
        return gain
    idx = np.searchsorted(rs, at_steps, side="right") - 1
    ok = idx >= first
    reference = np.full(ok.sum(), wm[window - 1]) if since_start else wm[idx[ok] - window]
    gain[ok] = wm[idx[ok]] - reference
    return gain


def _reward_not_rising(
    reward: Series, at_steps: np.ndarray, window: int, sigmas: float, *, since_start: bool = False
) -> np.ndarray:
    """Where the reward gained less than ``sigmas`` noise levels; a reward that does not move at
    all (zero noise, zero gain) has stalled too."""
    gain = _reward_gain(reward, at_steps, window, since_start=since_start)
    limit = sigmas * noise_sigma(reward.values)
    return np.isfinite(gain) & ((gain < limit) | ((gain <= 0) & (limit == 0)))


def _start_level(values: np.ndarray, level: float, *, skip: int = 0) -> float:
    """The higher of a frozen early level and the run's first point (after ``skip``).

    A collapse within the first steps (a learning rate far too high) drags the early window down
    with it, and the frozen level then hides it: the first point is the level before it.
    """
    x = values[skip:]
    for lo in range(0, x.size, 256):  # looked for from the start: usually among the first points
        chunk = x[lo : lo + 256]
        first = np.flatnonzero(np.isfinite(chunk) & (chunk > 0))
        if first.size:
            return max(level, float(chunk[first[0]]))
    return level


def _below_baseline(
    s: Series, p: Params, fraction: float, *, log: bool = False, from_start: bool = False
) -> Result:
    """Shared body: ``s`` below ``fraction`` of its frozen early level for k of n points
    (``from_start``: of the higher of that level and the first point)."""
    steps, values = s.steps, s.values
    window, skip = int(p["baseline"]), int(p.get("skip", 0))
    if short := _too_short(p.kind, s, window + skip + int(p["k"])):
        return short
    base = frozen_baseline(values, window=window, log=log, skip=skip)
    if base is None:  # in log space, points <= 0 cannot set the level
        return Skipped(p.kind, f"{s.key} has fewer than {window} positive points to set its early level")
    level = _start_level(values, base.level, skip=skip) if from_start else base.level
    hit = _persist(values < fraction * level, p, start=base.last_index + 1)
    if hit is None:
        return None
    return _finding(
        p.kind,
        WARNING,
        steps,
        *hit,
        s,
        baseline=level,
        threshold=fraction * level,
        baseline_window=[int(steps[0]), int(steps[base.last_index])],
    )


# --- the rules ----------------------------------------------------------------------------------


#: The signals nonfinite watches (besides the keys :func:`watched_for_nonfinite` names).
_NONFINITE_SIGNALS = ("loss", "grad_norm", "reward", "advantage", "kl_ref", "mismatch_kl")


@_rule(
    signals=_NONFINITE_SIGNALS,
    thresholds={
        "min_points": Threshold(
            1.0,
            "one NaN/inf in a loss, gradient norm, reward, advantage or KL poisons Adam's moments "
            "and every later step",
        ),
        **_one_source(
            "only gradient norms non-finite, under 3 of 10 steps: a warning (an fp16 loss scaler "
            "skips an overflowing step); repeated, an error (prime-rl aborts on repeated "
            "non-finite gradients)",
            repeat_k=3.0,
            repeat_n=10.0,
        ),
    },
    advice="A NaN or inf reached the update: lower the learning rate, check the reward function "
    "and the loss scaling, and restart from the last finite checkpoint.",
)
def nonfinite(history: History, p: Params) -> Result:
    """NaN or inf in a loss, value loss, gradient norm, reward, return, advantage or KL.

    An error, except where only gradient norms are non-finite, fewer than ``repeat_k`` of any
    ``repeat_n`` consecutive logged steps: a warning (an fp16 loss scaler skips the update of
    an overflowing step and lowers its scale); repeated, an error (``repeated_from`` names the
    step).

    Besides the signals' keys, every training key :func:`watched_for_nonfinite` names is
    watched (``critic/vf_loss``, ``critic/grad_norm``, ``train/policy_loss``, ``critic_loss``,
    ``loss/value_avg``, ``critic/rewards/mean`` ...); validation keys are not (an undefined
    validation statistic may be NaN by design).
    """
    watched = [k for sig in _NONFINITE_SIGNALS for k in resolve_all(history, sig)]
    watched += sorted(k for k in history if k not in watched and watched_for_nonfinite(k))
    if not watched:
        return Skipped(
            p.kind, "needs a loss, gradient norm, reward, advantage or KL; none is logged", not_logged=True
        )
    first: tuple[int, str] | None = None
    bad: dict[str, int] = {}
    for key in watched:
        steps, values = history[key]
        where = np.flatnonzero(~np.isfinite(np.asarray(values, dtype=np.float64)))
        if where.size >= p["min_points"]:
            bad[key] = int(where.size)
            if first is None or int(steps[where[0]]) < first[0]:
                first = (int(steps[where[0]]), key)
    if first is None:
        return None
    evidence: dict[str, Any] = {"nonfinite_points": bad, "first_key": first[1]}
    severity = ERROR
    if all(_is_gradient_norm(key) for key in bad):
        # an fp16 loss scaler skips the step of an overflowing gradient: an error once repeated
        repeated = _repeated_nonfinite(history, list(bad), int(p["repeat_k"]), int(p["repeat_n"]))
        severity = ERROR if repeated is not None else WARNING
        evidence |= {"gradient_only": True, "repeated_from": repeated}
    return Finding(p.kind, severity, first[0], tuple(bad), evidence, ADVICE[p.kind])


def _is_gradient_norm(key: str) -> bool:
    name = key.lower().rsplit("/", 1)[-1]
    return "grad_norm" in name or "gradient_norm" in name


def _repeated_nonfinite(history: History, keys: list[str], k: int, n: int) -> int | None:
    """The first step at which ``k`` of the last ``n`` logged steps had a non-finite point in one of
    ``keys`` (None if never)."""
    steps = np.unique(np.concatenate([np.asarray(history[key][0]) for key in keys]))
    bad = np.zeros(steps.size, dtype=bool)
    for key in keys:
        s, v = history[key]
        bad[np.searchsorted(steps, np.asarray(s)[~np.isfinite(np.asarray(v, dtype=np.float64))])] = True
    counts = window_counts(bad, n)
    hit = np.flatnonzero(counts >= k)
    return int(steps[hit[0]]) if hit.size else None


_VALIDATION_PREFIXES = ("val-", K.VERL_LEGACY_VAL_PREFIX, "val_", "validation", "eval", "test")
#: Words of a metric's name that make it a reward, return, advantage or KL: a NaN there is a
#: broken reward function or a broken log-probability, and reaches the update.
_NONFINITE_WORDS = frozenset({"reward", "rewards", "score", "scores", "return", "returns", "advantage"})
_NONFINITE_WORDS |= {"advantages", "kl"}
#: ... unless the name is a statistic of their spread or a share (``reward_std``,
#: ``frac_reward_zero_std``), which is undefined by design on a degenerate batch.
#: TRL's per-function reward statistics with each ``/`` written ``_`` (a TensorBoard CSV download).
#: (``rewards_<function>_mean``, older TRL's ``train_rewards_<function>``), not ``rewards_mean``.
_FLAT_TRL_REWARDS = re.compile(rf"(?:train_)?{K.TRL_REWARDS_GROUP}_(?!(?:mean|std|min|max)$).+")
_SPREAD_WORDS = frozenset({"std", "var", "frac", "num", "count"})
#: The statistics verl and rlmetrics put after a metric's name (``critic/score/mean``).
_STAT_SEGMENTS = frozenset({"mean", "max", "min", "avg"})


def watched_for_nonfinite(key: str) -> bool:
    """Whether ``nonfinite`` watches ``key`` beyond the signals: a training loss (value losses
    included), gradient norm, reward, return, advantage or KL.

    The name is the last segment (the one before it for ``.../mean``, ``/max``, ``/min``):
    ``critic/vf_loss``, ``loss/value_avg`` (TRL's PPO groups its losses), ``critic_loss``,
    ``critic/grad_norm``, ``critic/rewards/mean``, ``objective/scores`` (TRL's PPO), ``kl_penalty`` are
    watched. Validation keys are not (an undefined validation statistic may be NaN by design),
    nor TRL's per-function ``rewards/<function>/mean`` (the mean over a step where that function
    returned None for every sample is NaN by design; ``rewards_<function>_mean`` in a TensorBoard
    CSV download's name), nor the value predictions' own statistics
    (``critic/values/mean``: a NaN there comes with a NaN value loss).
    """
    lowered = key.lower()
    if lowered.startswith(_VALIDATION_PREFIXES):
        return False
    # TensorBoard/W&B's train/ prefix aside; stage timings (timing_s/reward) are not rewards
    lowered = lowered.removeprefix("train/")
    segments = lowered.split("/")
    if segments[0] == K.TRL_REWARDS_GROUP or lowered.startswith(
        (K.TIMING_S_PREFIX, K.TIMING_PER_TOKEN_MS_PREFIX)
    ):
        return False
    if _FLAT_TRL_REWARDS.fullmatch(lowered):  # rewards/<function>/mean in a TensorBoard CSV's name
        return False
    name = segments[-2] if len(segments) > 1 and segments[-1] in _STAT_SEGMENTS else segments[-1]
    if name.endswith("loss") or segments[0] == "loss" or "grad_norm" in name or "gradient_norm" in name:
        return True
    words = set(name.replace("-", "_").split("_"))
    return bool(words & _NONFINITE_WORDS) and not words & _SPREAD_WORDS


def _every_point_above(s: Series, p: Params, **evidence: Any) -> Finding | None:
    """A short run (under ``k`` points): a finding when every finite point is above ``level``."""
    finite = np.isfinite(s.values)
    if not finite.any() or not np.all(s.values[finite] >= p["level"]):
        return None
    where = np.flatnonzero(finite)
    severity = ERROR if np.all(s.values[finite] >= p["error_level"]) else WARNING
    return _finding(
        p.kind,
        severity,
        s.steps,
        int(where[0]),
        int(where[-1]),
        s,
        level=p["level"],
        error_level=p["error_level"],
        every_point_of=int(finite.sum()),
        **evidence,
    )


def _above_level(s: Series, p: Params, *, to_the_end: bool = False, **evidence: Any) -> Result:
    """Shared body: a fraction above ``level`` (error above ``error_level``) for k of n points.

    ``to_the_end``: only a stretch that still holds over the last ``n`` points counts. A run
    logged at fewer than ``k`` points is judged on all of them: every point above the level is
    damning by itself (every group without reward spread, every response cut at the limit), but
    with ``to_the_end`` only once the run is past its first ``n`` steps.
    """
    if short := _too_short(p.kind, s, int(p["k"])):
        # a policy's first steps may all truncate (it learns to stop later): a short run that
        # ends within them is not judged when only a stretch lasting to the end counts
        if to_the_end and not (s.steps.size and s.steps[-1] >= p["n"]):
            return short
        return _every_point_above(s, p, **evidence) or short
    steps, values = s.steps, s.values
    k, n = int(p["k"]), int(p["n"])

    def persist(flags: np.ndarray) -> tuple[int, int] | None:
        return last_persistent(flags, k=k, n=n) if to_the_end else _persist(flags, p)

    with np.errstate(invalid="ignore"):
        hit = persist(values >= p["level"])
        severe = hit is not None and persist(values >= p["error_level"]) is not None
    if hit is None:
        return None
    severity = ERROR if severe else WARNING
    return _finding(
        p.kind, severity, steps, *hit, s, level=p["level"], error_level=p["error_level"], **evidence
    )


def _bimodal_split(
    history: History, p: Params, steps: np.ndarray, middle: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """Where the solve rates split in two (a flag per step of ``steps``): Hartigan's dip test of
    the per-group solve rates rejecting unimodality (``grpo/solve_rate/dip_pvalue`` under
    ``dip_alpha``) where it is logged at the step, else the share between the ends under
    ``middle_level``; and the evidence of which test decided."""
    pvalue = resolve(history, "solve_rate_dip_pvalue")
    with np.errstate(invalid="ignore"):
        by_share = middle < p["middle_level"]
    if pvalue is None:
        return by_share, {"test": "shares"}
    _, at, pi = _common_steps(steps, pvalue.steps)
    flags = by_share.copy()
    with np.errstate(invalid="ignore"):
        flags[at] = pvalue.values[pi] < p["dip_alpha"]
    tested = np.full(steps.size, np.nan)
    tested[at] = pvalue.values[pi]
    return flags, {"test": "dip", "dip_pvalues": tested, "dip_key": pvalue.key}


def _bimodal(history: History, p: Params) -> Result:
    """A bimodal solve rate: the groups at both ends (all solved, none solved), few in between.

    Each end holds ``end_level`` of the groups or more (``grpo/frac_all_solved``,
    ``grpo/frac_none_solved``), and the solve rates split in two: Hartigan's dip test of the
    per-group solve rates rejects unimodality at ``dip_alpha`` (``grpo/solve_rate/dip_pvalue``,
    logged by the group statistics), or, at a step without it, the share between the ends is
    under ``middle_level``; for k of n points.
    """
    solved, unsolved = resolve(history, "frac_all_solved"), resolve(history, "frac_none_solved")
    if solved is None or unsolved is None:
        return None
    steps, a, b = _common_steps(solved.steps, unsolved.steps)
    top, bottom = solved.values[a], unsolved.values[b]
    with np.errstate(over="ignore", invalid="ignore"):  # shares far out of [0, 1] (a broken log)
        middle = Series(solved.key, steps, 1.0 - top - bottom)
    if _too_short(p.kind, middle, int(p["k"])):
        return None
    split, test = _bimodal_split(history, p, steps, middle.values)
    with np.errstate(invalid="ignore"):
        flags = (top >= p["end_level"]) & (bottom >= p["end_level"]) & split
    hit = _persist(flags, p)
    if hit is None:
        return None
    onset, end = hit
    evidence: dict[str, Any] = {"test": test["test"]}
    if test["test"] == "dip":
        window = test["dip_pvalues"][onset : end + 1]
        evidence["dip_pvalue"] = float(np.nanmedian(window)) if np.isfinite(window).any() else None
    return _finding(
        p.kind,
        WARNING,
        steps,
        onset,
        end,
        middle,
        metric=(solved.key, unsolved.key) + ((test["dip_key"],) if test["test"] == "dip" else ()),
        bimodal=True,
        frac_all_solved=float(np.median(top[onset : end + 1])),
        frac_none_solved=float(np.median(bottom[onset : end + 1])),
        middle=float(np.median(middle.values[onset : end + 1])),
        **evidence,
    )


def _zero_spread_share(history: History, kind: str) -> Series | Skipped:
    """The share of prompt groups without reward spread: ``frac_reward_zero_std``, or where it is
    not logged a lower bound of it from the mean group std (``reward_std``): 1 at a step where
    that mean is exactly 0 (no group has spread), 0 elsewhere (some group has; how many is not
    known). A share above a level on the bound is above it on the share: a finding from the
    bound holds, and no finding from it says nothing (``lower_bound_from`` in the evidence)."""
    share = resolve(history, "frac_reward_zero_std")
    if share is not None:
        return share
    std = resolve(history, "reward_std")
    if std is None:
        found = _series(history, kind, "frac_reward_zero_std")
        assert isinstance(found, Skipped)
        return found
    with np.errstate(invalid="ignore"):
        bound = np.where(np.isfinite(std.values), (std.values == 0.0).astype(np.float64), np.nan)
    return Series(std.key, std.steps, bound)


@_rule(
    signals=(
        "frac_reward_zero_std",
        "reward_std",
        "frac_all_solved",
        "frac_none_solved",
        "solve_rate_dip_pvalue",
    ),
    thresholds={
        "level": Threshold(
            0.8,
            "share of zero-spread groups that are not all solved (``frac_all_solved``, where "
            "logged: a solved group is a success): above it, under 1 group in 5 carries a gradient "
            "(DAPO's dynamic sampling filters them)",
        ),
        "error_level": Threshold(0.95, "almost no group carries a gradient"),
        "end_level": Threshold(
            0.3,
            "bimodal (a warning): 30% of the groups or more all solved and 30% none solved (a "
            "solved run keeps ~15% unsolved) ...",
        ),
        "middle_level": Threshold(
            0.1,
            "... and, where the dip test of the solve rates is not logged, under a tenth in "
            "between: the solve rates have two modes and no middle",
        ),
        "dip_alpha": Threshold(
            0.05,
            "... or, where it is (``grpo/solve_rate/dip_pvalue``), Hartigan's dip test rejects a "
            "unimodal solve rate at 5% (Hartigan & Hartigan 1985; the p-value against uniform "
            "samples of as many groups, rlmetrics._core.dip)",
        ),
        **_PERSIST,
    },
    advice="Most prompt groups are all right or all wrong: filter such prompts (dynamic "
    "sampling), raise the group size, or move to harder or easier data.",
)
def advantage_collapse(history: History, p: Params) -> Result:
    """Most prompt groups have zero reward spread, and are not all solved: little learning signal.

    Where ``frac_reward_zero_std`` is not logged, the mean group std (TRL's ``reward_std``)
    bounds it from below: 1 at a step where it is exactly 0.
    Groups whose every sample has full marks (``grpo/frac_all_solved``) are a success, not a
    collapse: they are left out where that share is logged (TRL logs none). Where the share of
    groups none solved is logged too, a bimodal solve rate (30% or more of the groups at
    each end, and Hartigan's dip test of the per-group solve rates rejecting unimodality, or
    where it is not logged under a tenth between: half the prompts always solved, half never)
    is a warning of this kind (``bimodal`` in its evidence, ``test`` saying which decided).
    """
    zero = _zero_spread_share(history, p.kind)
    if isinstance(zero, Skipped):
        return zero
    bound: dict[str, Any] = {} if resolve(history, "frac_reward_zero_std") else {"lower_bound_from": zero.key}
    solved = resolve(history, "frac_all_solved")
    if solved is None:
        return _above_level(zero, p, **bound)
    steps, zi, si = _common_steps(zero.steps, solved.steps)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, a point left out
        unsolved = Series(zero.key, steps, zero.values[zi] - solved.values[si])
    found = _above_level(unsolved, p, metric=(zero.key, solved.key))
    return found if isinstance(found, Finding) else _bimodal(history, p) or found


def _tail_median(s: Series | None, n: int) -> float | None:
    """Median of the last ``n`` finite points of ``s`` (None when it has none)."""
    if s is None:
        return None
    x = s.values[np.isfinite(s.values)][-n:]
    return series_median(x) if x.size else None


def _reward_rise(history: History, n: int) -> float | None:
    """The reward's median over its last ``n`` points minus its first ``n``, in noise sigmas."""
    reward = resolve(history, "reward")
    if reward is None:
        return None
    x = reward.values[np.isfinite(reward.values)]
    if x.size < 2 * n:
        return None
    gain = series_median(x[-n:]) - series_median(x[:n])
    sigma = noise_sigma(x)
    if sigma > 0:
        return gain / sigma
    return 0.0 if gain == 0 else float(np.copysign(np.inf, gain))


@_rule(
    signals=("entropy", "frac_all_solved", "reward"),
    thresholds={
        "fraction": Threshold(
            0.1, "entropy under 10% of its early level; a ~70% fall is normal (Cui et al. 2025)"
        ),
        "error_fraction": Threshold(0.02, "under 2%: the policy is deterministic"),
        "solved_level": Threshold(
            0.5,
            "not a failure when over half of the groups are all solved (median of the last n "
            "points): a solved task is rightly deterministic",
        ),
        "reward_sigmas": Threshold(
            20.0,
            "a warning only when the reward (median of the last n points) rose 20 noise sigmas "
            "above its first n points",
        ),
        **_BASE,
        "baseline": Threshold(
            3.0,
            "early level from the first 3 points: a learning rate far too high collapses the "
            "entropy within 10 steps",
        ),
        "short_fraction": Threshold(
            0.05,
            "a run too short for the baseline and k points: its last points under 5% of its "
            "first (a fall of over 95% within a few logged steps; the first point alone sets the "
            "level, and ~70% over a couple of hundred steps is normal)",
        ),
        **_SHORT,
    },
    advice="The policy stopped exploring: raise the upper clip range (clip-higher), add an "
    "entropy bonus or lower the learning rate.",
)
def entropy_collapse(history: History, p: Params) -> Result:
    """Policy entropy falls to a small fraction of its early level, the task unsolved.

    A policy that solved its task is rightly deterministic: no finding when most groups end
    all solved (``grpo/frac_all_solved``), and a warning only when the reward rose far above
    its early level. A run too short for the baseline and ``k`` points is judged on its last
    points (``tail_points`` at least, ``tail_share`` of the run): under ``short_fraction`` of
    its first point, a warning; under ``error_fraction``, an error.
    """
    s = _series(history, p.kind, "entropy")
    if isinstance(s, Skipped):
        return s
    (entropy,) = s
    found = _below_baseline(entropy, p, p["fraction"], log=True, from_start=True)
    if isinstance(found, Skipped) and found.why.startswith("run too short"):
        return _short_entropy_collapse(history, entropy, p) or found
    if not isinstance(found, Finding):
        return found
    n = int(p["n"])
    solved = _tail_median(resolve(history, "frac_all_solved"), n)
    if solved is not None and solved >= p["solved_level"]:
        return None
    severe = isinstance(_below_baseline(entropy, p, p["error_fraction"], log=True, from_start=True), Finding)
    rise = _reward_rise(history, n)
    learned = rise is not None and rise >= p["reward_sigmas"]
    evidence = dict(found.evidence)
    if rise is not None:
        evidence["reward_rise_sigmas"] = _num(rise)
    if solved is not None:
        evidence["frac_all_solved"] = _num(solved)
    severity = ERROR if severe and not learned else WARNING
    return Finding(found.kind, severity, found.step, found.metric, evidence, found.advice)


def _short_entropy_collapse(history: History, entropy: Series, p: Params) -> Finding | None:
    """A short run's entropy under ``short_fraction`` of its first point over its last points."""
    values = entropy.values
    finite = np.isfinite(values)
    where = np.flatnonzero(finite)
    if not where.size or values[where[0]] <= 0:
        return None
    level = float(values[where[0]])
    with np.errstate(invalid="ignore"):
        tail = _short_tail(values < p["short_fraction"] * level, finite, p)
    if tail is None:
        return None
    onset, end = tail
    solved = resolve(history, "frac_all_solved")
    if solved is not None:
        at = solved.values[np.isin(solved.steps, entropy.steps[onset : end + 1])]
        if np.isfinite(at).any() and float(np.nanmedian(at)) >= p["solved_level"]:
            return None  # a solved task is rightly deterministic
    window = values[onset : end + 1]
    severe = bool(np.all(window[np.isfinite(window)] < p["error_fraction"] * level))
    return _finding(
        p.kind,
        ERROR if severe else WARNING,
        entropy.steps,
        onset,
        end,
        entropy,
        baseline=level,
        threshold=p["short_fraction"] * level,
        ratio=float(np.nanmedian(window)) / level,
        baseline_window=[int(entropy.steps[where[0]]), int(entropy.steps[where[0]])],
        last_points=int(finite[onset : end + 1].sum()),
        of_points=int(where.size),
    )


@_rule(
    signals=("kl_ref", "reward"),
    thresholds={
        "window": Threshold(20.0, "points in each of the two windows compared (a trend, not the noise)"),
        "growth": Threshold(2.0, "KL median doubles from one window to the next (a reward that stalled)"),
        "start_growth": Threshold(
            10.0, "... or is 10x the KL at the start of the run (a reward that never rose)"
        ),
        "baseline": Threshold(
            3.0,
            "the KL at the start: the smallest of the first 3 points (the policy starts at the "
            "reference; a jump in the first steps must not set the level)",
        ),
        "min_kl": Threshold(
            0.01,
            "KL to the reference below it is noise around the start (nats per token): both levels "
            "compared with are floored at it",
        ),
        "reward_sigmas": Threshold(1.0, "reward gain across the two windows under one noise sigma: stalled"),
        "start_reward_sigmas": Threshold(
            3.0,
            "reward gain since the start under 3 noise sigmas: a tenfold KL bought next to nothing",
        ),
        **_PERSIST,
    },
    advice="The policy moves away from the reference without gaining reward: raise the KL coefficient "
    "or lower the learning rate; the reward may be saturated or exploited.",
)
def kl_drift(history: History, p: Params) -> Result:
    """KL to the reference grows while the reward does not: KL bought without reward.

    Two spans are judged, each ending at the window of the last ``window`` points: from the
    window before it (the KL median doubled, the reward stalled) and from the start of the run
    (the KL median ``start_growth`` times its start level, the reward no higher than over the
    first ``window`` points). The start level is the smallest of the first ``baseline`` points:
    a policy that jumps away from the reference in its first steps and then wanders has drifted
    as much as one that drifts slowly. Both levels are floored at ``min_kl``: a KL that doubles
    within the noise around the reference is no drift.
    """
    s = _series(history, p.kind, "kl_ref", "reward")
    if isinstance(s, Skipped):
        return s
    kl, reward = s
    w = int(p["window"])
    if short := _too_short(p.kind, kl, 2 * w + int(p["k"])) or _too_short(p.kind, reward, 2 * w):
        return short
    steps, values = kl.steps, kl.values
    recent = window_median(values, window=w)
    # both references floored at min_kl: a KL that doubles from 0.003 to 0.012 nats is still noise
    # around the reference (an Unsloth GRPO run's 0.04 at its end is a healthy one)
    before = np.concatenate([np.full(w, np.nan), recent[:-w]])
    before = np.where(np.isnan(before), np.nan, np.fmax(before, p["min_kl"]))
    first = values[np.isfinite(values)][: int(p["baseline"])]
    start = max(float(first.min()), p["min_kl"])
    with np.errstate(invalid="ignore"):
        doubled = recent > p["growth"] * before
        doubled &= _reward_not_rising(reward, steps, w, p["reward_sigmas"])
        from_start = recent > p["start_growth"] * start
        from_start &= _reward_not_rising(reward, steps, w, p["start_reward_sigmas"], since_start=True)
    hit = _persist(doubled | from_start, p)
    if hit is None:
        return None
    onset, end = hit
    reference = before[end] if doubled[end] else start
    return _finding(
        p.kind,
        WARNING,
        steps,
        max(onset - w + 1, 0),
        end,
        kl,
        metric=(kl.key, reward.key),
        kl_median=recent[end],
        kl_reference=reference,
        growth=recent[end] / reference,
        compared_with="the window before" if doubled[end] else "the start of the run",
        reward_gain=_reward_gain(reward, steps[end : end + 1], w, since_start=not doubled[end])[0],
        reward_noise_sigma=noise_sigma(reward.values),
    )


@_rule(
    signals=("length_clip_ratio",),
    thresholds={
        "level": Threshold(
            0.1,
            "over 10% of responses cut at the limit up to the end of the run (k of the last n "
            "points): the limit shapes the reward (DAPO's overlong filtering); an early phase that "
            "ends is normal (a random policy rarely emits EOS)",
        ),
        "error_level": Threshold(0.3, "nearly a third truncated"),
        "near_total": Threshold(
            0.9,
            "a run of under k points: near-total truncation (under 1 response in 10 ends by "
            "itself) over its last points after a first point below it is an error, whatever its "
            "steps: the policy stopped ending its responses, the opposite of a fresh policy "
            "learning to stop",
        ),
        "early_steps": Threshold(
            20.0,
            "a run whose last step is under 20 is a warning at most (but near-total truncation "
            "that rose): a fresh policy's truncation often lasts its first tens of steps (DAPO's "
            "and verl's GRPO baselines), and such a run has not shown it lasting",
        ),
        **_PERSIST,
        **_SHORT,
    },
    advice="Many responses hit the length limit: raise max_response_length, penalise or "
    "filter overlong samples, or check for repetition loops.",
)
def length_truncation(history: History, p: Params) -> Result:
    """A large share of responses hits the length limit, up to the end of the run.

    A random policy rarely emits EOS, so a healthy run often starts truncated and learns to
    stop: only truncation that lasts to the last ``n`` points counts. A run of fewer than ``k``
    points is judged on every point once past its first ``n`` steps, and, whatever its steps
    (TRL's printed logs only count them), on its last points: ``near_total`` truncation over
    the stretch that ends the run (``tail_points`` at least, ``tail_share`` of its points),
    after a first point below it, is an error (the share rose to near total: not a fresh
    policy's first steps; ``near_total_from`` in the evidence). Otherwise a run that ends before
    step ``early_steps`` gets a warning at most (``early_run`` in the evidence).
    """
    s = _series(history, p.kind, "length_clip_ratio")
    if isinstance(s, Skipped):
        return s
    (clipped,) = s
    found = _above_level(clipped, p, to_the_end=True)
    if isinstance(found, Finding) and found.severity == ERROR and clipped.steps[-1] < p["early_steps"]:
        evidence = found.evidence | {"early_run": True}
        found = Finding(found.kind, WARNING, found.step, found.metric, evidence, found.advice)
    finite = np.isfinite(clipped.values)
    if int(finite.sum()) >= p["k"] or (isinstance(found, Finding) and found.severity == ERROR):
        return found
    with np.errstate(invalid="ignore"):
        tail = _short_tail(clipped.values >= p["near_total"], finite, p)
    first = int(np.flatnonzero(finite)[0]) if finite.any() else 0
    if tail is None or tail[0] == first:  # near total from the first point: a fresh policy, maybe
        return found
    onset, end = tail
    near = {
        "near_total": p["near_total"],
        "near_total_from": int(clipped.steps[onset]),
        "last_points": int(finite[onset : end + 1].sum()),
        "of_points": int(finite.sum()),
    }
    if isinstance(found, Finding):  # every point above the level: the same finding, now an error
        evidence = found.evidence | near
        return Finding(found.kind, ERROR, found.step, found.metric, evidence, found.advice)
    return _finding(
        p.kind, ERROR, clipped.steps, onset, end, clipped, first_point=float(clipped.values[first]), **near
    )


@_rule(
    signals=("val_score", "reward"),
    thresholds={
        "min_val_points": Threshold(5.0, "validation points needed"),
        "val_sigmas": Threshold(
            4.0,
            "validation (a median of 3 points) below its best so far by 4 noise sigmas (a running "
            "max of noisy points sits high)",
        ),
        "error_sigmas": Threshold(8.0, "a fall of 8 noise sigmas"),
        "train_sigmas": Threshold(
            1.0, "training reward above its level at the validation peak by one noise sigma"
        ),
        **_one_source("validation is sparse: 2 of 3 points", k=2.0, n=3.0),
    },
    advice="Training reward rises while validation falls: the policy exploits the reward; "
    "inspect samples, harden the reward function, and keep the checkpoint of the validation peak.",
)
def reward_hacking(history: History, p: Params) -> Result:
    """Training reward keeps rising while the validation score falls."""
    s = _series(history, p.kind, "val_score", "reward")
    if isinstance(s, Skipped):
        return s
    val, reward = s
    if short := _too_short(p.kind, val, int(p["min_val_points"])):
        return short
    finite = np.isfinite(val.values)
    steps, raw = val.steps[finite], val.values[finite]
    # validation is sparse and noisy: a median of 3 points keeps one lucky evaluation from
    # setting a best the run never reaches again
    values = window_median(raw, window=3).copy()  # written below (a cached result is read-only)
    values[:2] = [raw[0], np.median(raw[:2])][: values[:2].size]
    best = np.maximum.accumulate(values)
    peak = np.array([int(np.flatnonzero(values[: i + 1] == best[i])[0]) for i in range(values.size)])
    sigma = max(noise_sigma(raw), 1e-9)
    drop = best - values
    rs, rv = reward.steps, reward.values
    r_sigma = noise_sigma(rv)
    flags = np.zeros(values.size, dtype=bool)
    for i in np.flatnonzero(drop > p["val_sigmas"] * sigma):
        lo, hi = steps[peak[i]], steps[i]
        after = rv[(rs > lo) & (rs <= hi)]
        before = rv[(rs <= lo) & (rs > lo - (hi - lo))]
        after, before = after[np.isfinite(after)], before[np.isfinite(before)]
        flags[i] = (
            bool(after.size and before.size)
            and series_median(after) - series_median(before) > p["train_sigmas"] * r_sigma
        )
    hit = _persist(flags, p)
    if hit is None:
        return None
    onset, end = hit
    # the fall starts after the last validation point within one noise sigma of the best so far
    within = np.flatnonzero(drop[:onset] <= sigma)  # holds index 0: drop[0] == 0
    start = max(int(peak[onset]), int(within[-1]) - 1, 0)  # - 1: a median of 3 lags one point
    severity = ERROR if drop[end] > p["error_sigmas"] * sigma else WARNING
    return _finding(
        p.kind,
        severity,
        steps,
        start,
        end,
        Series(val.key, steps, values),
        metric=(val.key, reward.key),
        val_best=best[end],
        val_best_step=int(steps[peak[end]]),
        val_now=values[end],
        val_noise_sigma=sigma,
    )


def _saturated(reward: Series, p: Params) -> tuple[np.ndarray, np.ndarray]:
    """Per finite reward point: whether the reward sits at its top, and whether it saturated there.

    At its top: the median of the last ``window`` points within ``top_sigmas`` noise sigmas of
    its best so far, or, for a reward bounded in [0, 1], at ``ceiling_level`` or above.
    Saturated: at its top, no longer rising (less than ``plateau_sigmas`` gained over the last
    ``window`` points) and either risen ``rise_sigmas`` above its first ``window`` points or at
    the ceiling of a [0, 1] reward.
    """
    w = int(p["window"])
    x = reward.values
    wm = window_median(x, window=w)
    sigma = noise_sigma(x)
    with np.errstate(invalid="ignore"):
        best = np.fmax.accumulate(wm)
        bounded = bool(np.all((x >= 0.0) & (x <= 1.0)))
        at_ceiling = bounded & (wm >= p["ceiling_level"])
        top = (wm >= best - p["top_sigmas"] * sigma) | at_ceiling
        before = np.concatenate([np.full(w, np.nan), wm[:-w]])
        flat = wm - before <= p["plateau_sigmas"] * sigma
        risen = (wm - wm[w - 1] >= p["rise_sigmas"] * sigma) & (wm > wm[w - 1])
    return top, top & ((flat & risen) | at_ceiling)


def _runaway(
    s: Series, t0: int, high_at: Callable[[np.ndarray], np.ndarray], w: int, flags_of: Callable[..., Any]
) -> tuple[np.ndarray, float] | None:
    """Flags of ``s`` past step ``t0`` (the reward still high), and its level at ``t0``: the
    median of its last ``w`` points up to ``t0``. None when it has no point up to ``t0``."""
    upto = s.values[(s.steps <= t0) & np.isfinite(s.values)][-w:]
    if upto.size == 0:
        return None
    anchor = series_median(upto)
    recent = window_median(s.values, window=w)
    with np.errstate(invalid="ignore"):
        flags = (s.steps > t0) & high_at(s.steps) & flags_of(recent, anchor)
    return flags, anchor


def _gaming_arms(
    history: History, reward: Series, p: Params
) -> dict[str, Callable[[np.ndarray, float], np.ndarray]]:
    """The signals reward_gaming watches, each with its runaway test ``(window median, level at
    saturation) -> flags``; the entropy only under a [0, 1] reward at its ceiling and a task not
    solved."""
    arms: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
        "kl_ref": lambda x, a: (x >= p["kl_growth"] * a) & (x >= p["min_kl"]),
        "response_length": lambda x, a: x >= p["length_growth"] * a,
        "perplexity": lambda x, a: x >= p["ppl_growth"] * a,
    }
    solved = _tail_median(resolve(history, "frac_all_solved"), int(p["n"]))
    bounded = bool(np.all((reward.values >= 0.0) & (reward.values <= 1.0)))
    top = np.nanmax(window_median(reward.values, window=int(p["window"])))
    if bounded and top >= p["ceiling_level"] and (solved is None or solved < p["solved_level"]):
        arms["entropy"] = lambda x, a: x <= p["entropy_fraction"] * a
    return arms


@_rule(
    signals=("reward", "val_score", "kl_ref", "response_length", "perplexity", "entropy", "frac_all_solved"),
    thresholds={
        "window": Threshold(10.0, "points of each window median (reward, KL, length, perplexity, entropy)"),
        "rise_sigmas": Threshold(
            3.0, "reward risen 3 noise sigmas above its first window: it learned, then ..."
        ),
        "plateau_sigmas": Threshold(1.0, "... gained under one sigma over the last window: saturated"),
        "top_sigmas": Threshold(2.0, "within 2 sigmas of its best window so far: still at its top"),
        "ceiling_level": Threshold(0.9, "a [0, 1] reward at 0.9 or above is at its ceiling, risen or not"),
        **_one_source(
            "KL 4x its level at saturation and over 0.1 nats: healthy GRPO/PPO runs here (planted, "
            "demo, eight real logs) stay under 0.05",
            kl_growth=4.0,
            min_kl=0.1,
        ),
        "length_growth": Threshold(
            2.0, "responses twice as long as at saturation (healthy: +30% over a run)"
        ),
        "ppl_growth": Threshold(2.0, "perplexity doubled since saturation"),
        "entropy_fraction": Threshold(
            0.1, "entropy under 10% of its level at the ceiling (as entropy_collapse)"
        ),
        "solved_level": Threshold(
            0.5, "no entropy arm when most groups are all solved (a solved task is deterministic)"
        ),
        "min_val_points": Threshold(5.0, "validation logged: reward_hacking judges the run instead"),
        **_PERSIST,
    },
    advice="The reward sits at its top while the policy runs away (KL, length, perplexity) or "
    "stops exploring: the policy may exploit the reward. Read samples, log a held-out "
    "validation score, harden the reward, and keep the checkpoint from before the runaway.",
)
def reward_gaming(history: History, p: Params) -> Result:
    """Reward gaming from training signals alone: the reward saturated at its top while the KL
    to the reference, the response length or the perplexity run away from their level when it
    saturated, or, a [0, 1] reward at its ceiling, while the entropy collapses.

    Judged only where no validation score is logged (:func:`reward_hacking` judges those runs);
    an error when two of the signals run away together.
    """
    s = _series(history, p.kind, "reward")
    if isinstance(s, Skipped):
        return s
    (logged,) = s
    val = resolve(history, "val_score")
    if val is not None and np.isfinite(val.values).sum() >= p["min_val_points"]:
        return Skipped(p.kind, f"validation is logged ({val.key}): reward_hacking judges this run")
    w, k = int(p["window"]), int(p["k"])
    finite = np.isfinite(logged.values)
    # every point finite (the usual case): the series itself, its steps those of the other signals
    reward = logged if finite.all() else Series(logged.key, logged.steps[finite], logged.values[finite])
    if short := _too_short(p.kind, reward, 2 * w + k):
        return short
    top, saturated = _saturated(reward, p)
    sat = _persist(saturated, p)
    if sat is None:
        return None
    t0 = int(reward.steps[sat[0]])

    def high_at(steps: np.ndarray) -> np.ndarray:
        at = _at_or_before(reward.steps, steps)
        return np.where(at >= 0, top[np.maximum(at, 0)], False)

    hits: dict[str, _Held] = {}  # signal -> where it runs away, and its level at saturation
    for signal, flags_of in _gaming_arms(history, reward, p).items():
        x = resolve(history, signal)
        found = _runaway(x, t0, high_at, w, flags_of) if x is not None else None
        if x is not None and found is not None and (hit := _persist(found[0], p)) is not None:
            hits[signal] = _Held(x, *hit, level=found[1])
    if not hits:
        return None
    first = min(hits.values(), key=lambda h: h.step)
    start = max(first.onset - w + 1, int(np.searchsorted(first.s.steps, t0, side="right")))
    return _finding(
        p.kind,
        ERROR if len(hits) >= 2 else WARNING,
        first.s.steps,
        start,
        first.end,
        first.s,
        metric=(reward.key, *(h.s.key for h in hits.values())),
        saturated_at=t0,
        reward_at_saturation=float(np.median(reward.values[max(sat[0] - w + 1, 0) : sat[0] + 1])),
        running_away=sorted(hits),
        level_at_saturation={h.s.key: _num(h.level) for h in hits.values()},
        level_now={h.s.key: _num(np.median(h.window())) for h in hits.values()},
    )


@_rule(
    signals=(
        "is_weight_mean",
        "is_ess",
        "is_weight_std",
        "mismatch_kl",
        "chi2_token",
        "ppl_ratio",
        "logp_abs_diff",
    ),
    thresholds={
        **_one_source(_VERL_CHECK, is_mean_low=0.5, is_mean_high=2.0),
        "ess_min": Threshold(0.3, f"{_VERL_CHECK} (effective sample size)"),
        "is_std_max": Threshold(1.0, f"{_VERL_CHECK} (importance-weight std)"),
        "kl_max": Threshold(0.1, f"{_VERL_CHECK} (mismatch KL)"),
        "chi2_token_max": Threshold(1.0, f"{_VERL_CHECK} (chi-square per token)"),
        "prob_error_ratio_max": Threshold(
            1.05, "NeMo-RL: a token probability error ratio above 1.05 is worth investigating"
        ),
        **_one_source("a sourced absolute check: 3 of 5", k=3.0, n=5.0),
    },
    advice="The rollout engine and the trainer disagree on token probabilities: check dtype "
    "and weight sync, and enable importance-sampling correction (rollout_is) or truncation.",
)
def rollout_mismatch(history: History, p: Params) -> Result:
    """Rollout and training policies disagree (verl's and NeMo-RL's health checks)."""
    checks: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "is_weight_mean": lambda x: (x < p["is_mean_low"]) | (x > p["is_mean_high"]),
        "is_ess": lambda x: x < p["ess_min"],
        "is_weight_std": lambda x: x > p["is_std_max"],
        "mismatch_kl": lambda x: np.abs(x) > p["kl_max"],
        "chi2_token": lambda x: x > p["chi2_token_max"],
        "ppl_ratio": lambda x: np.maximum(x, 1.0 / x) > p["prob_error_ratio_max"],
        "logp_abs_diff": lambda x: np.exp(x) > p["prob_error_ratio_max"],
    }
    present = {sig: found for sig in checks if (found := resolve(history, sig)) is not None}
    if not present:
        return Skipped(
            p.kind,
            "needs rollout-correction metrics (rollout_corr/* or TRL's sampling/*); none is logged",
            not_logged=True,
        )
    failed: dict[str, _Held] = {}
    for sig, s in present.items():
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            hit = _persist(checks[sig](s.values), p)
        if hit is not None:
            failed[sig] = _Held(s, *hit)
    if not failed:
        return None
    first = min(failed.values(), key=lambda f: f.step)
    evidence = {f.s.key: _num(np.median(f.window())) for f in failed.values()}
    severity = ERROR if len(failed) >= 2 else WARNING
    return _finding(
        p.kind,
        severity,
        first.s.steps,
        first.onset,
        first.end,
        first.s,
        metric=tuple(f.s.key for f in failed.values()),
        failed_checks=sorted(failed),
        window_medians=evidence,
    )


@_rule(
    signals=("grad_norm",),
    thresholds={
        "window": Threshold(20.0, "points of the running level (median)"),
        "factor": Threshold(10.0, "a spike: 10x the running median ..."),
        "sigmas": Threshold(6.0, "... and 6 robust sigmas above it (log)"),
        "error_count": Threshold(3.0, "repeated spikes: an unstable update"),
    },
    advice="Gradient-norm spikes: lower the learning rate, tighten gradient clipping, and look "
    "for outlier samples (very long responses, extreme advantages).",
)
def grad_spike(history: History, p: Params) -> Result:
    """Gradient-norm spikes far above its running level."""
    s = _series(history, p.kind, "grad_norm")
    if isinstance(s, Skipped):
        return s
    (grad,) = s
    w = int(p["window"])
    if short := _too_short(p.kind, grad, w + 1):
        return short
    steps, values = grad.steps, grad.values
    med, mad = rolling_baseline(values, window=w, log=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        logv = np.log(values)
        sigma = np.maximum(mad * 1.4826, 0.05)
        spikes = np.flatnonzero(
            np.isfinite(logv) & (logv - med > np.log(p["factor"])) & (logv - med > p["sigmas"] * sigma)
        )
    if spikes.size == 0:
        return None
    severity = ERROR if spikes.size >= p["error_count"] else WARNING
    ratios = np.exp(logv[spikes] - med[spikes])
    return _finding(
        p.kind,
        severity,
        steps,
        int(spikes[0]),
        int(spikes[0]),
        grad,
        spike_steps=[int(x) for x in steps[spikes[:10]]],
        spikes=int(spikes.size),
        max_ratio_to_running_median=float(ratios.max()),
    )


@_rule(
    signals=("throughput",),
    thresholds={
        "fraction": Threshold(0.5, "tokens/s under half its early level (after ``skip`` warm-up points)"),
        "skip": Threshold(2.0, "warm-up points left out before the early level is taken"),
        **_BASE,
    },
    advice="Tokens per second fell: look for longer generations, memory pressure "
    "(offloading, recomputation) or a slow node.",
)
def throughput_drop(history: History, p: Params) -> Result:
    """Tokens/s falls well below its early level and stays there."""
    s = _series(history, p.kind, "throughput")
    if isinstance(s, Skipped):
        return s
    (throughput,) = s
    return _below_baseline(throughput, p, p["fraction"], log=True)


@_rule(
    signals=("entropy", "response_length"),
    thresholds={
        "entropy_factor": Threshold(2.0, "entropy at twice its early level ..."),
        "length_factor": Threshold(1.5, "... with responses 1.5x longer"),
        **_BASE,
    },
    advice="Entropy and length jumped together (gibberish): lower the learning rate, "
    "restart from an earlier checkpoint, check the rollout/trainer mismatch.",
)
def entropy_explosion(history: History, p: Params) -> Result:
    """Entropy and response length jump together (the "gibberish" failure)."""
    s = _series(history, p.kind, "entropy", "response_length")
    if isinstance(s, Skipped):
        return s
    ent, length = s
    needed = int(p["baseline"] + p["k"])
    if short := _too_short(p.kind, ent, needed) or _too_short(p.kind, length, needed):
        return short
    steps, ei, li = _common_steps(ent.steps, length.steps)
    e, ln = ent.values[ei], length.values[li]
    e_base = frozen_baseline(e, window=int(p["baseline"]), log=True)
    l_base = frozen_baseline(ln, window=int(p["baseline"]), log=True)
    if e_base is None or l_base is None:
        return Skipped(p.kind, "entropy and response length share too few logged steps")
    flags = (e > p["entropy_factor"] * e_base.level) & (ln > p["length_factor"] * l_base.level)
    hit = _persist(flags, p, start=max(e_base.last_index, l_base.last_index) + 1)
    if hit is None:
        return None
    onset, end = hit
    return _finding(
        p.kind,
        ERROR,
        steps,
        onset,
        end,
        ent,
        metric=(ent.key, length.key),
        entropy_baseline=e_base.level,
        entropy_ratio=float(np.median(e[onset : end + 1])) / e_base.level,
        length_baseline=l_base.level,
        length_ratio=float(np.median(ln[onset : end + 1])) / l_base.level,
    )


def _length_change(
    history: History, p: Params, flags_of: Callable[[np.ndarray, float], np.ndarray], *, collapse: bool
) -> Result:
    """Shared body of the length rules: length away from its early level while the reward does not
    follow (``collapse``: a fall, judged from the start of the run too, an error below
    ``error_fraction``, dated at the first point of the fall that lasts into the window found,
    ``confirmed_at`` the step where the window begins)."""
    s = _series(history, p.kind, "response_length", "reward")
    if isinstance(s, Skipped):
        return s
    length, reward = s
    window = int(p["baseline"])
    if short := _too_short(p.kind, length, window + int(p["k"])) or _too_short(
        p.kind, reward, 2 * int(p["n"])
    ):
        return short
    steps, values = length.steps, length.values
    base = frozen_baseline(values, window=window, log=True)
    if base is None:  # in log space, lengths <= 0 cannot set the level
        return Skipped(p.kind, f"{length.key} has fewer than {window} positive points to set its early level")
    # a collapse is judged from the start of the run too (it may happen within the early window)
    level = _start_level(values, base.level) if collapse else base.level
    fallen = flags_of(values, level)
    flags = fallen & _reward_not_rising(reward, steps, int(p["n"]), p["reward_sigmas"])
    hit = _persist(flags, p, start=base.last_index + 1)
    if hit is None:
        return None
    confirmed, end = hit
    onset = confirmed
    if collapse:
        # confirmed once the reward has 2 n points, dated where the length first fell and stayed
        # (a collapse at step 3 is confirmed at step 20 or so, and dated 3)
        while onset > 0 and fallen[onset - 1]:
            onset -= 1
    ratio = float(np.median(values[onset : end + 1])) / level
    severity = ERROR if collapse and ratio < p["error_fraction"] else WARNING
    dated = {"confirmed_at": int(steps[confirmed])} if onset < confirmed else {}
    return _finding(
        p.kind,
        severity,
        steps,
        onset,
        end,
        length,
        metric=(length.key, reward.key),
        baseline=level,
        ratio=ratio,
        reward_gain=_reward_gain(reward, steps[end : end + 1], int(p["n"]))[0],
        **dated,
    )


@_rule(
    signals=("response_length", "reward"),
    thresholds={
        "fraction": Threshold(0.25, "mean length under a quarter of early"),
        "error_fraction": Threshold(0.05, "a few tokens left"),
        "reward_sigmas": _LENGTH_REWARD,
        **_BASE,
    },
    advice="Responses shrink to a few tokens without a reward gain: check the reward for "
    "a bias to short answers and the EOS handling.",
)
def length_collapse(history: History, p: Params) -> Result:
    """Mean response length shrinks toward a few tokens while the reward does not follow.

    Confirmed once the reward has ``2 n`` points (a collapse at step 3 is confirmed at step 20 or
    so), the finding is dated at the first point of the fall that lasts into its window
    (``confirmed_at`` in the evidence: where that window begins).
    """
    return _length_change(history, p, lambda x, level: x < p["fraction"] * level, collapse=True)


@_rule(
    signals=("response_length", "reward"),
    thresholds={
        "factor": Threshold(3.0, "mean length over 3x its early level"),
        "reward_sigmas": _LENGTH_REWARD,
        **_BASE,
    },
    advice="Responses grow toward the limit without a reward gain: check for repetition, "
    "add a length penalty or overlong shaping.",
)
def length_explosion(history: History, p: Params) -> Result:
    """Mean response length grows far above its early level while the reward does not follow."""
    return _length_change(history, p, lambda x, level: x > p["factor"] * level, collapse=False)


@_rule(
    signals=("explained_variance",),
    thresholds={
        "level": Threshold(0.0, "explained variance below 0: the critic predicts worse than a constant"),
        "error_level": Threshold(-0.5, "window median far below 0"),
        "skip": Threshold(10.0, "points of critic warm-up left out"),
        **_PERSIST,
    },
    advice="The value function explains none of the returns: warm up or retrain the critic, "
    "raise its learning rate, or check the value-loss clipping.",
)
def critic_failure(history: History, p: Params) -> Result:
    """PPO: the value function's explained variance below 0 for a sustained window."""
    s = _series(history, p.kind, "explained_variance")
    if isinstance(s, Skipped):
        return s
    (explained,) = s
    skip = int(p["skip"])
    if short := _too_short(p.kind, explained, skip + int(p["k"])):
        return short
    steps, values = explained.steps, explained.values
    hit = _persist(values < p["level"], p, start=skip)
    if hit is None:
        return None
    onset, end = hit
    median = float(np.median(values[onset : end + 1]))
    severity = ERROR if median < p["error_level"] else WARNING
    return _finding(p.kind, severity, steps, onset, end, explained, window_median=median, level=p["level"])


@_rule(
    signals=(
        "grad_norm",
        "reward",
        "frac_reward_zero_std",
        "reward_std",
        "frac_all_solved",
        "advantage_max",
        "advantage_min",
    ),
    thresholds={
        "fraction": Threshold(0.05, "gradient norm under 5% of early level (or exactly 0)"),
        "error_fraction": Threshold(1e-3, "under 0.1% (or 0): no update at all"),
        "reward_sigmas": Threshold(
            2.0,
            "reward change between the halves of the window under 2 noise sigmas: flat (a median "
            "of n/2 points is noisier)",
        ),
        "zero_std_level": Threshold(0.99, "every group without reward spread ..."),
        "adv_range_max": Threshold(
            1e-6, "... or every advantage equal (max - min): GRPO's update is then exactly zero"
        ),
        "steps": Threshold(
            5.0,
            "... for 5 consecutive logged steps (an isolated all-zero batch is noise; the shipped "
            "demo has single ones)",
        ),
        "solved_level": Threshold(
            0.5, "a warning, not an error, when over half of those groups are all solved (done)"
        ),
        **_BASE,
        **_SHORT,
    },
    advice="The update has nothing to learn from (gradients near zero, or no group with reward "
    "spread, or every advantage zero): check the reward spread, filter solved and unsolvable prompts "
    "(dynamic sampling), the learning rate schedule and frozen parameters.",
)
def no_learning_signal(history: History, p: Params) -> Result:
    """No learning signal: the gradient norm flat near zero while the reward is flat; or (GRPO)
    every group without reward spread (``frac_reward_zero_std`` at ``zero_std_level`` or
    above; where it is not logged, the mean group std exactly 0), or every advantage of the batch
    equal (their max - min at most ``adv_range_max``), for ``steps`` consecutive logged steps,
    solved groups or not: the update is zero. A run logged at fewer than ``steps`` points (a
    paste of a few steps) is judged on all of them; one under the gradient's window whose last
    gradient norms are exactly 0 (``tail_points`` at least, ``tail_share`` of its points: 3 of 4
    logged steps, say) made no update since.
    """
    arms = (_vanished_gradient(history, p), _zero_spread(history, p), _zero_advantages(history, p))
    found = [a for a in arms if isinstance(a, Finding)]
    if found:
        return min(found, key=lambda f: f.step)
    return arms[0] if all(isinstance(a, Skipped) for a in arms) else None


def _consecutive(flags: np.ndarray, m: int) -> tuple[int, int] | None:
    """The first run of ``m`` consecutive True flags, as (its first index, its last index)."""
    run = 0
    for i, flag in enumerate(flags):
        run = run + 1 if flag else 0
        if run == m:
            return i - m + 1, i
    return None


def _every_point(flags: np.ndarray, finite: np.ndarray, m: int) -> tuple[int, int] | None:
    """``m`` consecutive flags; a run of fewer finite points than ``m`` is judged on all of them:
    (its first, its last finite index) when every finite point is flagged."""
    if int(finite.sum()) >= m:
        return _consecutive(flags, m)
    where = np.flatnonzero(finite)
    return (int(where[0]), int(where[-1])) if where.size and bool(np.all(flags[where])) else None


def _zero_spread(history: History, p: Params) -> Result:
    s = _zero_spread_share(history, p.kind)
    if isinstance(s, Skipped):
        return Skipped(p.kind, "needs frac_reward_zero_std", not_logged=s.not_logged)
    # a run logged at fewer than `steps` points is judged on all of them (a paste of a few
    # steps): a step whose every group has no reward spread has a zero update by itself
    with np.errstate(invalid="ignore"):
        hit = _every_point(s.values >= p["zero_std_level"], np.isfinite(s.values), int(p["steps"]))
    if hit is None:
        return None
    # every group solved is a success, not a failure: the run has nothing left to learn (a warning)
    solved = resolve(history, "frac_all_solved")
    at = solved.values[np.isin(solved.steps, s.steps[hit[0] : hit[1] + 1])] if solved is not None else None
    share = float(np.nanmedian(at)) if at is not None and np.isfinite(at).any() else None
    evidence: dict[str, Any] = {"zero_std_level": p["zero_std_level"], "consecutive_steps": int(p["steps"])}
    if share is not None:
        evidence["frac_all_solved"] = share
    severity = WARNING if share is not None and share >= p["solved_level"] else ERROR
    return _finding(p.kind, severity, s.steps, *hit, s, **evidence)


def _zero_advantages(history: History, p: Params) -> Result:
    hi, lo = resolve(history, "advantage_max"), resolve(history, "advantage_min")
    if hi is None or lo is None:
        return Skipped(p.kind, "needs advantage_max and advantage_min", not_logged=True)
    steps, a, b = _common_steps(hi.steps, lo.steps)
    spread = hi.values[a] - lo.values[b]
    with np.errstate(invalid="ignore"):
        hit = _every_point(spread <= p["adv_range_max"], np.isfinite(spread), int(p["steps"]))
    if hit is None:
        return None
    return _finding(
        p.kind,
        ERROR,
        steps,
        *hit,
        Series(hi.key, steps, spread),
        metric=(hi.key, lo.key),
        advantage_range=float(np.nanmax(spread[hit[0] : hit[1] + 1])),
        consecutive_steps=int(p["steps"]),
    )


def _exactly_zero_gradient(grad: Series, p: Params, needed: int) -> Finding | None:
    """A run of fewer than ``needed`` gradient norms that ends exactly 0: its last points
    (``tail_points`` at least, ``tail_share`` of the run) made no update (a single zero step may
    be a batch of solved prompts; most of a run, to its end, at exactly 0 is no update at all,
    whatever the reward did)."""
    finite = np.isfinite(grad.values)
    if int(finite.sum()) >= needed:
        return None
    tail = _short_tail(grad.values == 0.0, finite, p)
    if tail is None:
        return None
    onset, end = tail
    zero, points = int(finite[onset : end + 1].sum()), int(finite.sum())
    # every_point_of: the whole run is zero; zero_points of points: the stretch that ends it
    whole = {"every_point_of": points} if zero == points else {"zero_points": zero, "of_points": points}
    return _finding(p.kind, ERROR, grad.steps, onset, end, grad, **whole, baseline=0.0, ratio=0.0)


def _vanished_gradient(history: History, p: Params) -> Result:
    """Gradient norm flat near zero for a sustained window while the reward is flat; a short run
    (under the window) whose last gradient norms, half of its points and two at least, are
    exactly 0."""
    grad = resolve(history, "grad_norm")
    if grad is not None and (zero := _exactly_zero_gradient(grad, p, int(p["baseline"]) + int(p["k"]))):
        return zero
    s = _series(history, p.kind, "grad_norm", "reward")
    if isinstance(s, Skipped):
        return s
    grad, reward = s
    window, n = int(p["baseline"]), int(p["n"])
    if short := _too_short(p.kind, grad, window + int(p["k"])) or _too_short(p.kind, reward, 2 * n):
        return short
    steps, values = grad.steps, grad.values
    # in log space a zero gradient cannot set the level: a run whose gradient is exactly 0 from
    # the start has level 0, and a zero gradient is no signal at any level
    base = frozen_baseline(values, window=window, log=True)
    level = base.level if base is not None else 0.0
    start = base.last_index + 1 if base is not None else 0
    gain = _reward_gain(reward, steps, max(n // 2, 1))  # the two halves of the window
    # <=: a reward that is exactly constant (noise 0) is flat
    flat = np.isfinite(gain) & (np.abs(gain) <= p["reward_sigmas"] * noise_sigma(reward.values))
    with np.errstate(invalid="ignore"):
        vanished = (values < p["fraction"] * level) | (values == 0.0)
    hit = _persist(vanished & flat, p, start=start)
    if hit is None:
        return None
    onset, end = hit
    median = float(np.median(values[onset : end + 1]))
    ratio = median / level if level > 0 else 0.0
    return _finding(
        p.kind,
        ERROR if median == 0.0 or ratio < p["error_fraction"] else WARNING,
        steps,
        onset,
        end,
        grad,
        metric=(grad.key, reward.key),
        baseline=level,
        ratio=ratio,
        reward_gain=gain[end],
    )


@_rule(
    signals=("advantage", "advantage_max", "advantage_min"),
    thresholds={
        "level": Threshold(
            0.25,
            "batch mean of the advantages over a quarter of their half-range (max - min) / 2 (else "
            "of the unit spread of normalised advantages): GRPO's centred and PPO's whitened "
            "advantages sit at 0 (healthy: under 0.02, demo and real logs)",
        ),
        "error_level": Threshold(0.5, "half of it: one sign dominates"),
        **_PERSIST,
    },
    advice="The advantages are no longer centred: check the advantage estimator and its "
    "normalisation (per group, per batch), and a length gap between right and wrong answers "
    "under a token-mean loss (long wrong answers pull the mean below zero).",
)
def advantage_drift(history: History, p: Params) -> Result:
    """The batch mean of the advantages drifts from 0, where GRPO's (centred per group) and
    whitened PPO/GAE advantages sit, for k of n points.

    In units of the advantages' half-range (``(max - min) / 2``) where verl logs them, else of the
    unit spread the normalisation gives; a step whose advantages are all equal is no_learning_signal's.
    """
    s = _series(history, p.kind, "advantage")
    if isinstance(s, Skipped):
        return s
    (mean,) = s
    if short := _too_short(p.kind, mean, int(p["k"])):
        return short
    steps, values, scale = mean.steps, mean.values, np.ones(mean.values.size)
    hi, lo = resolve(history, "advantage_max"), resolve(history, "advantage_min")
    if hi is not None and lo is not None:
        steps, a, b = _common_steps(hi.steps, lo.steps)
        steps, m, c = _common_steps(mean.steps, steps)
        values, scale = mean.values[m], (hi.values[a][c] - lo.values[b][c]) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(scale > 0, np.abs(values) / scale, np.nan)
    drifted = Series(mean.key, steps, ratio)
    found = _above_level(drifted, p, metric=(mean.key,))
    if not isinstance(found, Finding):
        return found
    window = found.evidence["window"]
    at = (steps >= window[0]) & (steps <= window[1])
    evidence = {
        **found.evidence,
        "mean": _num(np.nanmedian(values[at])),
        "scale": _num(np.nanmedian(scale[at])),
    }
    return Finding(found.kind, found.severity, found.step, found.metric, evidence, found.advice)


# --- off-policy staleness (policy.staleness) -------------------------------------------------------


def _hinge_onset(values: np.ndarray, lo: int, hi: int, end: int) -> int:
    """Where a flat series turns into a rising line: the break ``s`` in ``[lo, hi]`` of the
    least-squares fit ``a + b * max(i - s, 0)`` to the points ``lo .. end`` (their indices)."""
    idx = np.arange(lo, end + 1)
    y = values[lo : end + 1]
    ok = np.isfinite(y)
    idx, y = idx[ok], y[ok]
    best, best_sse = hi, np.inf
    for s in range(lo, hi + 1):
        design = np.column_stack([np.ones(idx.size), np.clip(idx - s, 0, None)])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        sse = float(np.sum((y - design @ coef) ** 2))
        if sse < best_sse - 1e-12:
            best, best_sse = s, sse
    return best


@_rule(
    signals=("staleness_lag",),
    thresholds={
        "window": Threshold(10.0, "points of each of the two lag windows"),
        "span": Threshold(30.0, "points from one window's end to the other's: 1/30 version a step is seen"),
        "min_rise": Threshold(
            1.0,
            "the lag median a whole version above the window before (lags are whole versions; a "
            "bounded queue holds the lag flat once it is full), k of n points up to the end of the "
            "run",
        ),
        "rise_sigmas": Threshold(
            3.0, "... and 3 noise sigmas (a difference of two 10-point medians has ~0.56)"
        ),
        "error_lag": Threshold(
            8.0,
            "an error once the lag is 8 or more: the staleness family's last bucket (9 and more) "
            "lies beyond it",
        ),
        **_PERSIST,
    },
    advice="The off-policy lag keeps growing: the generator outruns the trainer. Bound the queue "
    "(a staleness threshold or an async level), drop or down-weight stale samples, or give the "
    "trainer more of the hardware.",
)
def staleness_growth(history: History, p: Params) -> Result:
    """The off-policy lag grows without bound: its median over the last ``window`` points a whole
    version (``min_rise``) above its median over the ``window`` points ending ``span`` points
    before (a growth of 1/30 of a version a step or more), in k of n points up to the end of the
    run.

    A lag that is high but flat is not growth (a pipeline configured for it), nor is the ramp of a
    queue filling up at the start of a run (``rlmetrics demo --off-policy-lag N`` ramps 0 .. N
    and stays there): only a rise that still holds over the last ``n`` points counts. The onset
    is the break of a flat-then-rising line fitted before the first flagged point.
    """
    s = _series(history, p.kind, "staleness_lag")
    if isinstance(s, Skipped):
        return s
    (lag,) = s
    w, span = int(p["window"]), max(int(p["span"]), 1)
    if short := _too_short(p.kind, lag, w + span + int(p["k"])):
        return short
    steps, values = lag.steps, lag.values
    recent = window_median(values, window=w)
    before = np.concatenate([np.full(span, np.nan), recent[:-span]])[: recent.size]
    limit = max(p["min_rise"], p["rise_sigmas"] * noise_sigma(values))
    with np.errstate(invalid="ignore"):
        flags = recent - before >= limit
    hit = last_persistent(flags, k=int(p["k"]), n=int(p["n"]))
    if hit is None:
        return None
    first, end = hit
    onset = _hinge_onset(values, max(first - span - w, 0), first, min(first + w, end))
    at_end = float(np.nanmedian(values[-w:]))
    at_onset = float(np.nanmedian(values[max(onset - w + 1, 0) : onset + 1]))
    span = max(int(steps[end] - steps[onset]), 1)
    return _finding(
        p.kind,
        ERROR if at_end >= p["error_lag"] else WARNING,
        steps,
        onset,
        end,
        lag,
        lag_at_onset=at_onset,
        lag_now=at_end,
        growth_per_step=(at_end - at_onset) / span,
        window_rise=recent[end] - before[end],
    )


#: The cost signals staleness_cost reads with the lag: (signal, absolute value, floor parameter).
_LAG_COSTS = (
    ("mismatch_kl", True, "min_kl"),
    ("is_clip_share", False, "min_share"),
    ("clip_fraction", False, "min_share"),
)


@_rule(
    signals=("staleness_lag", "mismatch_kl", "is_clip_share", "clip_fraction"),
    thresholds={
        "lag_rise": Threshold(1.0, "the lag a version above its early level ..."),
        "cost_factor": Threshold(
            2.0,
            "... while the mismatch KL, the share of truncated importance weights or the clip "
            "fraction doubled at the same k of n points",
        ),
        **_one_source(
            "... and rose by 0.001 nats (a hundredth of the 0.1 verl's health check flags) or 2% "
            "of the tokens: a doubling of next to nothing is noise",
            min_kl=1e-3,
            min_share=0.02,
        ),
        **_BASE,
    },
    advice="The rollout/training mismatch or the clipped importance weights rise with the lag: "
    "the stale samples cost the update. Bound the staleness, correct with (truncated) importance "
    "weights, or drop samples past a lag.",
)
def staleness_cost(history: History, p: Params) -> Result:
    """The lag and what it costs rise together: the lag a version (``lag_rise``) above its early
    level while the rollout/training mismatch KL, the share of truncated (or zeroed) importance
    weights, or the PPO clip fraction reaches ``cost_factor`` times its early level (and at least
    ``min_kl`` nats, ``min_share`` of the tokens above it), at the same k of n points.

    A cost that rises while the lag stays at its level is another failure's
    (``rollout_mismatch``); a lag that rises for free is ``staleness_growth``'s. An error when two
    costs rise with the lag.
    """
    s = _series(history, p.kind, "staleness_lag")
    if isinstance(s, Skipped):
        return s
    (lag,) = s
    window = int(p["baseline"])
    costs = [(sig, found, a, f) for sig, a, f in _LAG_COSTS if (found := resolve(history, sig)) is not None]
    if not costs:
        return Skipped(
            p.kind,
            "needs a mismatch KL, a clipped importance-weight share or a clip fraction",
            not_logged=True,
        )
    if short := _too_short(p.kind, lag, window + int(p["k"])):
        return short
    hits: dict[str, _Held] = {}  # signal -> where the cost rises with the lag, and its early level
    lags: dict[str, _Held] = {}  # signal -> the lag at the cost's steps over that window, and its early level
    for signal, cost, absolute, floor in costs:
        steps, li, ci = _common_steps(lag.steps, cost.steps)
        x = lag.values[li]
        c = np.abs(cost.values[ci]) if absolute else cost.values[ci]
        lag_base, cost_base = frozen_baseline(x, window=window), frozen_baseline(c, window=window)
        if lag_base is None or cost_base is None:
            continue
        with np.errstate(invalid="ignore"):
            flags = (x >= lag_base.level + p["lag_rise"]) & (c >= p["cost_factor"] * cost_base.level)
            flags &= c - cost_base.level >= p[floor]
        hit = _persist(flags, p, start=max(lag_base.last_index, cost_base.last_index) + 1)
        if hit is not None:
            hits[signal] = _Held(Series(cost.key, steps, c), *hit, level=cost_base.level)
            lags[signal] = _Held(Series(lag.key, steps, x), *hit, level=lag_base.level)
    if not hits:
        return None
    first = min(hits, key=lambda signal: hits[signal].step)
    rising, lag_then = hits[first], lags[first]
    return _finding(
        p.kind,
        ERROR if len(hits) >= 2 else WARNING,
        rising.s.steps,
        rising.onset,
        rising.end,
        rising.s,
        metric=(lag.key, *(h.s.key for h in hits.values())),
        rising_with_lag=sorted(hits),
        lag_baseline=lag_then.level,
        lag_in_window=float(np.nanmedian(lag_then.window())),
        cost_baseline={h.s.key: _num(h.level) for h in hits.values()},
        cost_in_window={h.s.key: _num(np.nanmedian(h.window())) for h in hits.values()},
        rank_correlation=_rank_correlation(lag_then.s.values, rising.s.values),
    )


def _rank_correlation(a: np.ndarray, b: np.ndarray) -> float | str:
    """Spearman's correlation of two series on their finite points (``"nan"`` when undefined)."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return "nan"
    ra = np.argsort(np.argsort(a[ok], kind="stable"), kind="stable").astype(np.float64)
    rb = np.argsort(np.argsort(b[ok], kind="stable"), kind="stable").astype(np.float64)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    scale = float(np.sqrt(np.sum(ra**2) * np.sum(rb**2)))
    return _num(float(np.sum(ra * rb)) / scale) if scale > 0 else "nan"


def _rise(values: np.ndarray, window: int, sign: float) -> np.ndarray:
    """How far each point is (``sign``: above, or below for -1) from the series' best level before
    it: the lowest (highest) median of ``window`` points ending before it; NaN before the first."""
    x = sign * np.asarray(values, dtype=np.float64)
    best = np.fmin.accumulate(window_median(x, window=window))
    reference = np.concatenate([[np.nan], best[:-1]])
    return x - reference


#: An arm of a rising rule: (signal, sign, its threshold parameter).
_Arm = tuple[str, float, str]


class _Hit(NamedTuple):
    """Where one arm of a rule holds: its series, window ``[onset, end]`` (indices), how far each
    point is from the arm's reference, its threshold, and its sign (-1: a falling arm)."""

    s: Series
    onset: int
    end: int
    away: np.ndarray
    threshold: float
    sign: float

    def reference(self) -> float:
        """The arm's best level before its onset, in the metric's own units."""
        return float(self.s.values[self.onset] - self.sign * self.away[self.onset])

    def in_window(self) -> float:
        return float(np.nanmedian(self.s.values[self.onset : self.end + 1]))


def _rising(history: History, p: Params, arms: Sequence[_Arm], *, samples: bool = False) -> Result:
    """Shared body of the rising rules: a signal away from its best level so far (its lowest
    window median; the highest for a falling arm) by its threshold and by ``rise_sigmas`` noise
    sigmas, for k of n points; an error when two arms hold, or one by ``error_factor`` times its
    threshold. ``samples``: the evidence names the steps whose samples show it."""
    present = [(sig, sign, name, s) for sig, sign, name in arms if (s := resolve(history, sig)) is not None]
    if not present:
        needs = " or ".join(f"{sig} ({', '.join(SIGNALS[sig])})" for sig, _, _ in arms)
        return Skipped(p.kind, f"needs {needs}; none is logged", not_logged=True)
    w = int(p["window"])
    hits: list[_Hit] = []
    shorts: list[Skipped] = []
    for _, sign, name, s in present:
        if too_short := _too_short(p.kind, s, w + int(p["k"])):
            shorts.append(too_short)
            continue
        away = _rise(s.values, w, sign)
        limit = max(p[name], p["rise_sigmas"] * noise_sigma(s.values))
        with np.errstate(invalid="ignore"):
            hit = _persist(away >= limit, p, start=w)
        if hit is not None:
            hits.append(_Hit(s, *hit, away, p[name], sign))
    if not hits:
        return shorts[0] if len(shorts) == len(present) else None
    first = min(hits, key=lambda h: int(h.s.steps[h.onset]))
    severe = len(hits) >= 2 or any(
        np.nanmedian(h.away[h.onset : h.end + 1]) >= p["error_factor"] * h.threshold for h in hits
    )
    evidence: dict[str, Any] = {
        "rising": sorted(sig for sig, _, _, s in present if any(h.s is s for h in hits)),
        "level_before": {h.s.key: _num(h.reference()) for h in hits},
        "level_in_window": {h.s.key: _num(h.in_window()) for h in hits},
    }
    if samples:
        evidence["sample_steps"] = _sample_steps(first.s, first.onset, first.end, first.away)
    return _finding(
        p.kind,
        ERROR if severe else WARNING,
        first.s.steps,
        first.onset,
        first.end,
        first.s,
        metric=tuple(h.s.key for h in hits),
        **evidence,
    )


def _sample_steps(s: Series, onset: int, end: int, worse: np.ndarray) -> dict[str, int]:
    """The steps whose rollouts show a finding: the last before its onset (what it was), its onset
    and its worst point up to the window's end (a report links them to that step's samples)."""
    out = {"onset": int(s.steps[onset])}
    before = np.flatnonzero(np.isfinite(s.values[:onset]))
    if before.size:
        out["before"] = int(s.steps[before[-1]])
    segment = np.where(np.isfinite(worse[onset : end + 1]), worse[onset : end + 1], -np.inf)
    out["worst"] = int(s.steps[onset + int(np.argmax(segment))])
    return out


def _increments(total: Series | None) -> Series | None:
    """A running total as its increase since the previous logged step (from the first step: none).

    A total that falls (a restarted counter) gives NaN at that step, not a negative count.
    """
    if total is None or total.values.size < 2:
        return None
    with np.errstate(invalid="ignore"):  # an infinite total gives NaN, as a damaged value does
        rise = np.diff(total.values)
    rise[rise < 0] = np.nan
    return Series(total.key, total.steps[1:], rise)


@_rule(
    signals=("dropped_share", "dropped_count", "dropped_total"),
    thresholds={
        "share_rise": Threshold(
            0.1,
            "a tenth more of the generated samples dropped than at the lowest level so far: that "
            "generation is wasted",
        ),
        "count_factor": Threshold(
            2.0,
            "peers log counts without a batch size: the count doubled (from none: one more a step)",
        ),
        **_RISE,
    },
    advice="More and more generated samples are dropped or evicted (too stale, filtered): the "
    "generation they cost is wasted and what is trained on is biased toward fast rollouts. Bound "
    "the lag upstream, raise the staleness limit, or generate less ahead.",
)
def staleness_drops(history: History, p: Params) -> Result:
    """The share of generated samples dropped or evicted rises above its lowest level so far.

    From ``staleness/dropped/share`` where logged (a rise of ``share_rise``); else from a count
    per step (rlmetrics' ``dropped/count``, verl's ``evicted_samples`` in prompt groups, prime-rl's
    ``off_policy/dropped`` in traces) or from a running total (verl's fully-async
    ``dropped_stale_samples``, read as its increase between logged steps), which carry no batch
    size: a rise to ``count_factor`` times its lowest level (from none, to at least one more a
    step).
    """
    if resolve(history, "dropped_share") is not None:
        return _rising(history, p, [("dropped_share", 1.0, "share_rise")])
    count = resolve(history, "dropped_count") or _increments(resolve(history, "dropped_total"))
    if count is None:
        names = SIGNALS["dropped_share"] + SIGNALS["dropped_count"] + SIGNALS["dropped_total"]
        return Skipped(
            p.kind,
            f"needs dropped_share, dropped_count or dropped_total (one of {', '.join(names)}); "
            "none is logged",
            not_logged=True,
        )
    w = int(p["window"])
    if short := _too_short(p.kind, count, w + int(p["k"])):
        return short
    away = _rise(count.values, w, 1.0)
    with np.errstate(invalid="ignore"):
        # from none, at least one more sample a step; from some, count_factor times as many
        needed = (p["count_factor"] - 1.0) * np.fmax(count.values - away, 1.0)
        limit = np.fmax(p["rise_sigmas"] * noise_sigma(count.values), needed)
        hit = _persist(away >= limit, p, start=w)
    if hit is None:
        return None
    h = _Hit(count, *hit, away, float(limit[hit[0]]), 1.0)
    severe = np.nanmedian(away[h.onset : h.end + 1]) >= p["error_factor"] * h.threshold
    return _finding(
        p.kind,
        ERROR if severe else WARNING,
        count.steps,
        h.onset,
        h.end,
        count,
        rising=["dropped_count"],
        level_before={count.key: _num(h.reference())},
        level_in_window={count.key: _num(h.in_window())},
    )


@_rule(
    signals=("trained_length", "generated_length"),
    thresholds={
        "ratio": Threshold(
            1.1,
            "trained and generated mean lengths 10% apart: with a tenth dropped, the dropped twice "
            "as long as the kept",
        ),
        "error_ratio": Threshold(1.25, "a quarter apart"),
        "noise_sigmas": Threshold(
            4.0,
            "the median gap of n points beyond 4 standard errors of the ratio's point-to-point "
            "noise: batch noise alone does not hold a gap for k of n windows",
        ),
        **_PERSIST,
    },
    advice="The samples trained on are shorter (or longer) than those generated: dropping stale "
    "samples keeps the fast rollouts. Bound the lag rather than drop, or drop whole groups at "
    "random, and compare the rewards of trained and generated samples.",
)
def staleness_length_bias(history: History, p: Params) -> Result:
    """The mean length of the samples trained on and of those generated (trained + dropped) apart
    by a factor ``ratio``, the same way (trained longer, or shorter): the median ratio of n points,
    beyond ``ratio`` and beyond the noise of such a median, for k of n points.

    Dropping stale samples drops the slow rollouts, the long ones: a 10% gap needs, with a tenth
    of the samples dropped, dropped samples twice as long as the kept ones. At a step where nothing
    is dropped the two means are equal.
    """
    s = _series(history, p.kind, "trained_length", "generated_length")
    if isinstance(s, Skipped):
        return s
    trained, generated = s
    steps, a, b = _common_steps(trained.steps, generated.steps)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = trained.values[a] / generated.values[b]
        ratio = np.where((r > 0) & np.isfinite(r), np.maximum(r, 1.0 / np.where(r > 0, r, 1.0)), np.nan)
    bias = Series(trained.key, steps, ratio)
    if short := _too_short(p.kind, bias, int(p["k"])):
        return short
    n = int(p["n"])
    with np.errstate(divide="ignore", invalid="ignore"):
        log_r = np.log(np.where((r > 0) & np.isfinite(r), r, np.nan))
        # the median of the last n points, one way, past both the ratio and the noise of n points
        level = window_median(log_r, window=n)
        floor = max(float(np.log(p["ratio"])), p["noise_sigmas"] * noise_sigma(log_r) / np.sqrt(n))
        sign = 1.0
        hit = _persist(level >= floor, p)
        if hit is None:
            sign, hit = -1.0, _persist(level <= -floor, p)
        if hit is None:
            return None
        # the onset: the first point past the floor among those of the first window past it
        first = max(hit[0] - n + 1, 0)
        onset, end = first + int(np.argmax(sign * log_r[first : hit[0] + 1] >= floor)), hit[1]
    window_ratio = float(np.nanmedian(r[onset : end + 1]))
    return _finding(
        p.kind,
        ERROR if np.nanmedian(ratio[onset : end + 1]) >= p["error_ratio"] else WARNING,
        steps,
        onset,
        end,
        bias,
        metric=(trained.key, generated.key),
        trained_over_generated=window_ratio,
        trained_shorter=window_ratio < 1.0,
    )


# --- text statistics of the rollouts (training.text) -----------------------------------------------


@_rule(
    signals=("loop_ratio", "distinct_ngram"),
    thresholds={
        "loop_rise": Threshold(
            0.1,
            "one response in ten more ending in an n-gram loop than at the lowest level so far (a "
            "sampled policy rarely loops to its end)",
        ),
        "distinct_fall": Threshold(0.1, "mean distinct-n 0.1 below its highest"),
        **_RISE,
    },
    advice="More responses repeat themselves (n-gram loops, fewer distinct n-grams): read the "
    "samples of the steps named, lower the learning rate, add a repetition or overlong penalty, "
    "check the sampling temperature.",
)
def repetition_rise(history: History, p: Params) -> Result:
    """Repetition rises: the share of responses ending in an n-gram loop up by ``loop_rise`` from its
    lowest level so far, or the mean distinct-n down by ``distinct_fall`` from its highest.

    Names the steps whose samples show it (``sample_steps``: before, onset, worst).
    """
    arms = [("loop_ratio", 1.0, "loop_rise"), ("distinct_ngram", -1.0, "distinct_fall")]
    return _rising(history, p, arms, samples=True)


@_rule(
    signals=("compression_ratio", "non_word_ratio"),
    thresholds={
        "compression_rise": Threshold(
            0.05,
            "mean compression ratio up by 0.05: 2 KB of README prose compress to 0.58, random "
            "characters to 0.76 (zlib level 1): over a quarter turned to noise",
        ),
        "non_word_rise": Threshold(
            0.1, "a tenth more of the pieces non-words (random characters: all of them)"
        ),
        **_RISE,
    },
    advice="The responses look more like noise (they compress worse, fewer of their pieces are "
    "words): read the samples of the steps named, check the rollout/trainer mismatch and the "
    "tokenizer, lower the learning rate or restart from an earlier checkpoint.",
)
def gibberish_rise(history: History, p: Params) -> Result:
    """The gibberish proxies rise: the mean compression ratio up by ``compression_rise`` or the mean
    non-word share up by ``non_word_rise`` from their lowest level so far.

    ``compression_rise``: 2 KB of this README compress (zlib level 1, :mod:`~rlmetrics.training.text`)
    to 0.58 of their size, random characters to 0.76: a rise of 0.05 is over a quarter of the
    responses turned to noise. Names the steps whose samples show it.
    """
    arms = [("compression_ratio", 1.0, "compression_rise"), ("non_word_ratio", 1.0, "non_word_rise")]
    return _rising(history, p, arms, samples=True)


@_rule(
    signals=("format_match",),
    thresholds={
        "fail_rise": Threshold(0.1, "a tenth more answers failing the format check than at the best so far"),
        **_RISE,
    },
    advice="More answers fail the format check: read the samples of the steps named; check the "
    "format reward, the length limit (answers cut before their end) and the chat template.",
)
def format_failure_rise(history: History, p: Params) -> Result:
    """The share of answers failing the format check (``1 - format/match_ratio``) up by
    ``fail_rise`` from its lowest level so far. Names the steps whose samples show it."""
    return _rising(history, p, [("format_match", -1.0, "fail_rise")], samples=True)


@_rule(
    signals=("stop_length", "stop_error"),
    thresholds={
        "window": Threshold(10.0, "the median of the 10 points before each point is its reference"),
        "length_jump": Threshold(
            0.2,
            "a fifth more stopped by the length limit than just before: a jump, not a drift "
            "(length_truncation's)",
        ),
        "error_jump": Threshold(0.1, "a tenth more stopped by an error"),
        "takeover_level": Threshold(0.5, "most responses stop so: an error"),
        **_one_source("a jump that lasts, not one bad batch", k=3.0, n=5.0),
    },
    advice="The responses stop for another reason all of a sudden (the length limit or errors): "
    "read the samples of the steps named; check the generation settings, the engine's logs and "
    "the length limit.",
)
def stop_reason_shift(history: History, p: Params) -> Result:
    """A sudden shift in stop reasons: the share stopped by the length limit up by ``length_jump``,
    or stopped by an error up by ``error_jump``, over its median of the ``window`` points before,
    for k of n points (a jump, not a drift: a slow rise of truncation is ``length_truncation``'s).

    An error when the reason takes over (``takeover_level``, most responses). Names the steps
    whose samples show it.
    """
    arms = [("stop_length", "length_jump"), ("stop_error", "error_jump")]
    present = [(sig, name, s) for sig, name in arms if (s := resolve(history, sig)) is not None]
    if not present:
        return Skipped(
            p.kind, "needs stop_length or stop_error (text/stop_reason/*); none is logged", not_logged=True
        )
    w = int(p["window"])
    hits: dict[str, _Hit] = {}
    for signal, name, s in present:
        if _too_short(p.kind, s, w + int(p["k"])):
            continue
        median, _ = rolling_baseline(s.values, window=w)
        jump = s.values - median
        with np.errstate(invalid="ignore"):
            hit = _persist(jump >= p[name], p, start=w)
        if hit is not None:
            hits[signal] = _Hit(s, *hit, jump, p[name], 1.0)
    if not hits:
        if all(_too_short(p.kind, s, w + int(p["k"])) for _, _, s in present):
            return _too_short(p.kind, present[0][2], w + int(p["k"]))
        return None
    first = min(hits.values(), key=lambda h: int(h.s.steps[h.onset]))
    levels = {h.s.key: float(np.nanmax(h.s.values[h.onset : h.end + 1])) for h in hits.values()}
    return _finding(
        p.kind,
        ERROR if max(levels.values()) >= p["takeover_level"] else WARNING,
        first.s.steps,
        first.onset,
        first.end,
        first.s,
        metric=tuple(h.s.key for h in hits.values()),
        shifted=sorted(hits),
        level_before={h.s.key: _num(h.reference()) for h in hits.values()},
        level_in_window={k: _num(v) for k, v in levels.items()},
        sample_steps=_sample_steps(first.s, first.onset, first.end, first.away),
    )


#: Every rule, in the order they run.
RULE_SPECS: Mapping[str, Rule] = MappingProxyType(_REGISTRY)
#: Every kind, in the order the rules run.
KINDS: tuple[str, ...] = tuple(_REGISTRY)
#: kind -> parameter -> default (their sources: :func:`threshold_table`).
THRESHOLDS: dict[str, dict[str, float]] = {kind: dict(rule.thresholds) for kind, rule in _REGISTRY.items()}
#: kind -> what to try when it is found.
ADVICE: dict[str, str] = {kind: rule.advice for kind, rule in _REGISTRY.items()}
#: kind -> its check, ``check(history, params)``.
RULES: dict[str, Callable[[History, Mapping[str, float]], Result]] = {
    kind: rule.check for kind, rule in _REGISTRY.items()
}


def threshold_table() -> str:
    """Every rule's thresholds, their defaults and sources, as a reStructuredText table.

    A rule's own thresholds come under its kind, in the order declared; those a group of rules
    shares (:attr:`Threshold.group`) once each, under the group's name, after the rules.
    Consecutive parameters with one source share a row. The module docstring ends with it.

    Examples
    --------
    >>> header, rule, first = threshold_table().splitlines()[1:4]
    >>> print(header)
    kind                   parameter                  default      source or reason
    >>> print(first)
    nonfinite              min_points                 1            one NaN/inf in a loss, gradient norm,
    """
    sections: dict[str, list[tuple[str, Threshold]]] = {}
    groups: dict[str, dict[str, Threshold]] = {}
    for kind, rule in _REGISTRY.items():
        sections[kind] = [(name, t) for name, t in rule.declared.items() if not t.group]
        for name, t in rule.declared.items():
            if t.group:
                groups.setdefault(t.group, {}).setdefault(name, t)
    sections |= {f"({group})": list(shared.items()) for group, shared in groups.items()}
    rows = [("kind", "parameter", "default", "source or reason")]
    for label, declared in sections.items():
        for source, same in groupby(declared, key=lambda item: item[1].source):
            names, values = zip(*((name, _value_text(t.value)) for name, t in same), strict=True)
            rows.append((label, ", ".join(names), ", ".join(values), source))
    return _rst_table(rows, wrap=40)


def _value_text(value: float) -> str:
    """A default as the table shows it: ``10``, ``0.25``, ``1e-6``."""
    return f"{value:g}".replace("e-0", "e-")


def _rst_table(rows: list[tuple[str, str, str, str]], *, wrap: int) -> str:
    """A reStructuredText simple table, its first row the header; the last column wrapped at
    ``wrap`` characters, its continuation lines empty in the other columns."""
    wrapped = [(*row[:3], textwrap.wrap(row[3], wrap)) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    widths.append(max(len(piece) for *_, text in wrapped for piece in text))
    lines = []
    for *cells, text in wrapped:
        for i, piece in enumerate(text):
            line = [*cells, piece] if i == 0 else ["", "", "", piece]
            lines.append("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    rule = "  ".join("=" * w for w in widths)
    header, *body = lines
    return "\n".join([rule, header, rule, *body, rule]) + "\n"


if __doc__ is not None:  # python -OO drops docstrings
    __doc__ += "\n" + threshold_table()


def resolve_thresholds(
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, dict[str, float]]:
    """:data:`THRESHOLDS` with ``thresholds`` laid over it.

    Raises
    ------
    ValueError
        An unknown kind or parameter (named), or a value that is not a finite number.

    Examples
    --------
    >>> resolve_thresholds({"entropy_collapse": {"fraction": 0.2}})["entropy_collapse"]["fraction"]
    0.2
    """
    merged = {kind: dict(params) for kind, params in THRESHOLDS.items()}
    for kind, params in (thresholds or {}).items():
        if kind not in merged:
            raise ValueError(f"thresholds: unknown kind {kind!r}; expected one of {list(KINDS)}")
        if not isinstance(params, Mapping):
            raise ValueError(
                f"thresholds[{kind!r}] must be a mapping parameter -> value; got {type(params).__name__}"
            )
        for name, value in params.items():
            if name not in merged[kind]:
                raise ValueError(
                    f"thresholds[{kind!r}]: unknown parameter {name!r}; expected one of "
                    f"{sorted(merged[kind])}"
                )
            if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
                raise ValueError(f"thresholds[{kind!r}][{name!r}] must be a finite number; got {value!r}")
            merged[kind][name] = float(value)
    return merged


def diagnose(
    history: Any,
    *,
    thresholds: Mapping[str, Mapping[str, float]] | None = None,
    kinds: tuple[str, ...] | list[str] | None = None,
    signals: Mapping[str, str] | None = None,
    groups: Sequence[str] | None = None,
    cache: SeriesCache | None = None,
) -> Diagnosis:
    """Run the health rules over one run, and over each of its categories.

    Parameters
    ----------
    history : list of dict or History
        The rows :func:`rlmetrics.read_jsonl` returns, or a mapping key -> ``(steps, values)``.
    thresholds : dict, optional
        ``{kind: {parameter: value}}`` over :data:`THRESHOLDS`.
    kinds : sequence of str, optional
        The rules to run (default: all of :data:`KINDS`).
    signals : dict, optional
        ``{signal: key}``: the key of this run a signal reads (e.g. ``{"reward": "train_reward"}``
        for a custom loop), before the candidates of :data:`~rlmetrics.health.signals.SIGNALS`.
        A category reads the same key under its prefix, where it logs it.
    groups : sequence of str, optional
        The groups whose categories (``by_<group>/<category>/<key>``, logged with ``group_by=``)
        are diagnosed each as a run of its own (default: every group but the outcome split;
        ``()``: none). :mod:`rlmetrics.health.categories` says which of their findings are
        reported: a category's is folded into the run's finding of its kind when the plain
        keys show it too (``Finding.categories``), and reported on its own, ``Finding.category``
        naming it, when they do not (one source collapsed while the mean looks healthy).
    cache : SeriesCache, optional
        The window statistics of this run's previous diagnosis
        (:class:`~rlmetrics.health.smoothing.SeriesCache`): a run that grew since is diagnosed
        over its new points only where a statistic allows it, with the same findings. Keep one
        per run (``rlmetrics watch`` does).

    Returns
    -------
    Diagnosis
        Findings ordered by step (the run's before a category's at the same step), the rules
        that could not run on the run's plain keys, with why, and the categories diagnosed.

    Examples
    --------
    >>> rows = [{"step": i, "actor/grad_norm": 1.0, "actor/pg_loss": 0.1} for i in range(3)]
    >>> rows[2]["actor/pg_loss"] = float("nan")
    >>> d = diagnose(rows, kinds=["nonfinite", "throughput_drop"])
    >>> [(f.kind, f.severity, f.step) for f in d.findings], [s.kind for s in d.skipped]
    ([('nonfinite', 'error', 2)], ['throughput_drop'])
    """
    if cache is not None:
        with cache.active():
            return diagnose(history, thresholds=thresholds, kinds=kinds, signals=signals, groups=groups)
    params = resolve_thresholds(thresholds)
    selected = KINDS if kinds is None else tuple(kinds)
    unknown = [k for k in selected if k not in RULES]
    if unknown:
        raise ValueError(f"kinds: unknown kind(s) {unknown}; expected some of {list(KINDS)}")
    full = as_history(history)
    plain, categories = split_history(full, groups=check_groups(groups), keep=(signals or {}).values())
    findings, skipped = _run_rules(with_signals(plain, signals), selected, params)
    in_categories: list[Finding] = []
    for label, h in categories.items():
        named = {signal: key for signal, key in (signals or {}).items() if key in h}
        found, _ = _run_rules(with_signals(h, named or None), selected, params)
        in_categories.extend(in_category(f, label, h) for f in found)
    reported = fold_findings(findings, in_categories)
    reported.sort(key=lambda f: (f.step, KINDS.index(f.kind), f.category is not None, f.category or ""))
    return Diagnosis(tuple(reported), tuple(skipped), tuple(categories))


def _run_rules(
    history: History, kinds: tuple[str, ...], params: Mapping[str, Mapping[str, float]]
) -> tuple[list[Finding], list[Skipped]]:
    """The findings and the skipped checks of the rules ``kinds`` over one history."""
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    history = resolving(history)  # the rules read the same signals: each resolved once
    for kind in kinds:
        result = RULES[kind](history, params[kind])
        if isinstance(result, Finding):
            findings.append(result)
        elif isinstance(result, Skipped):
            skipped.append(result)
    return findings, skipped
