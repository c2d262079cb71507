"""The live form of :func:`rlmetrics.health.rules.diagnose`: a monitor fed one step at a time.

:class:`HealthMonitor` keeps the scalars it is given and, every ``every`` steps, diagnoses the
history it holds; it returns the findings of kinds it has not reported before, so each failure
mode is reported once per run. :class:`rlmetrics.Tracker` runs one when given
``monitor=HealthMonitor()``; it turns each new finding into a ``HealthWarning`` and a
``health/<kind>`` record.

Only the keys the rules can read are kept (the candidates of
:data:`rlmetrics.health.signals.SIGNALS`, patterns included); other keys cost nothing but the
step's dict copy. A step costs one append to a list of pending rows; at a check the pending rows
are written into a table (one column per kept key, grown by doubling), the rows with the same
keys as one block, so the per-step cost does not grow with the number of keys or steps. The
diagnosis reads column views of that table. No thread is started: the check runs inside the
``update`` call that completes ``every`` steps.

Acting on a finding: ``actions=`` (an :class:`ActionPolicy`, or its mapping) says, per kind and
per severity, what the monitor does when a diagnosis holds a finding: ``"warn"`` (report it, the
default), ``"stop"`` (set :attr:`HealthMonitor.should_stop`, which a loop checks; the TRL
callback and the verl patch stop their trainer on it) or ``"raise"`` (raise
:class:`rlmetrics.errors.RunStopped` from the ``update`` or ``check`` that found it). Each action
is kept (:attr:`HealthMonitor.actions_taken`) and handed out once as a ``health_action/<kind>``
record (:meth:`HealthMonitor.pop_action_records`).
"""

from __future__ import annotations

import fnmatch
import math
import operator
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.checks import check_int
from rlmetrics.errors import RunStopped
from rlmetrics.health.findings import SEVERITIES, Diagnosis, Finding, as_history
from rlmetrics.health.rules import KINDS, diagnose, watched_for_nonfinite
from rlmetrics.health.signals import SIGNALS

__all__ = ["ACTIONS", "Action", "ActionPolicy", "HealthMonitor"]

#: What the monitor may do on a finding: report it, tell the loop to stop, raise RunStopped.
ACTIONS = ("warn", "stop", "raise")

_MIN_CAPACITY = 64
_clock = time.perf_counter
_PATTERN_CHARS = frozenset("*?[")
_CANDIDATES = [key for keys in SIGNALS.values() for key in keys]
_EXACT = frozenset(key for key in _CANDIDATES if not _PATTERN_CHARS & set(key))
_PATTERNS = tuple(key for key in _CANDIDATES if _PATTERN_CHARS & set(key))


def _read_by_rules(key: str) -> bool:
    """Whether a rule can read ``key`` (a candidate key of some signal, matching a pattern, or a
    training loss or gradient norm, which ``nonfinite`` watches)."""
    return (
        key in _EXACT
        or any(fnmatch.fnmatch(key, pattern) for pattern in _PATTERNS)
        or watched_for_nonfinite(key)
    )


class _TableHistory(Mapping[str, tuple[np.ndarray, np.ndarray]]):
    """A read-only history over the monitor's table: ``(steps, values)`` views built when asked for."""

    def __init__(
        self, columns: dict[str, int], steps: np.ndarray, values: np.ndarray, present: np.ndarray, n: int
    ) -> None:
        self._columns, self._n = columns, n
        self._steps, self._values, self._present = steps[:n], values[:, :n], present[:, :n]

    def __getitem__(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        j = self._columns[key]
        mask = self._present[j]
        values = self._values[j]
        if mask.all():
            return self._steps, values
        return self._steps[mask], values[mask]

    def __iter__(self) -> Iterator[str]:
        return (k for k, j in self._columns.items() if self._present[j].any())

    def __len__(self) -> int:
        return int(self._present.any(axis=1).sum()) if self._n else 0

    def __contains__(self, key: object) -> bool:
        j = self._columns.get(key) if isinstance(key, str) else None
        return j is not None and bool(self._present[j].any())


class _Layout:
    """Where the kept values of a step with these keys go: picked positions and table columns."""

    __slots__ = ("cols", "names", "pick")

    def __init__(self, names: tuple[str, ...], picked: list[int], cols: list[int]) -> None:
        self.names = tuple(names[i] for i in picked)
        self.cols = np.asarray(cols, dtype=np.intp)
        # one getter call per step: a tuple of the kept values (a slice for none or one)
        self.pick: Callable[[list[Any]], Any] = (
            operator.itemgetter(*picked)
            if len(picked) > 1
            else operator.itemgetter(slice(picked[0], picked[0] + 1) if picked else slice(0, 0))
        )


@dataclass(frozen=True)
class ActionPolicy:
    """What the live monitor does on a finding, per kind and per severity; checked once.

    Parameters
    ----------
    actions : Mapping[str, str], optional
        Key: a kind (:data:`~rlmetrics.health.rules.KINDS`, e.g. ``"nonfinite"``) or a severity
        (``"warning"``, ``"error"``); value: one of :data:`ACTIONS`. A finding takes the action
        of its kind, else of its severity, else ``"warn"``.

    Raises
    ------
    TypeError, ValueError
        ``actions`` is not a mapping, names an unknown kind or severity, or an action outside
        :data:`ACTIONS` (the message lists the allowed ones).

    Examples
    --------
    >>> policy = ActionPolicy({"nonfinite": "raise", "error": "stop"})
    >>> policy.action_for("nonfinite", "error"), policy.action_for("kl_drift", "error")
    ('raise', 'stop')
    >>> policy.action_for("kl_drift", "warning")
    'warn'
    """

    actions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        given = self.actions
        if not isinstance(given, Mapping):
            raise TypeError(
                f"actions must be a mapping kind or severity -> action, e.g. {{'nonfinite': 'raise'}}; "
                f"got {type(given).__name__}"
            )
        for key, action in given.items():
            if key not in KINDS and key not in SEVERITIES:
                raise ValueError(
                    f"actions: unknown key {key!r}; expected a severity ({', '.join(SEVERITIES)}) or a "
                    f"kind ({', '.join(KINDS)})"
                )
            if action not in ACTIONS:
                raise ValueError(
                    f"actions[{key!r}] must be one of {', '.join(map(repr, ACTIONS))}; got {action!r}"
                )
        object.__setattr__(self, "actions", MappingProxyType(dict(given)))

    def action_for(self, kind: str, severity: str) -> str:
        """The action on a finding of ``kind`` and ``severity``: its kind's, its severity's, or warn."""
        return self.actions.get(kind) or self.actions.get(severity) or "warn"

    @property
    def acts(self) -> bool:
        """Whether any finding can make the monitor do more than warn."""
        return any(action != "warn" for action in self.actions.values())


class Action(NamedTuple):
    """An action the monitor took: ``"stop"`` or ``"raise"``, the finding that caused it, and the
    last step held when it acted."""

    action: str
    finding: Finding
    step: int


def _as_policy(actions: ActionPolicy | Mapping[str, str] | None) -> ActionPolicy:
    if isinstance(actions, ActionPolicy):
        return actions
    return ActionPolicy({} if actions is None else actions)  # type: ignore[arg-type]


class HealthMonitor:
    """Diagnose a run while it is logged: the findings of kinds not reported before, every few steps.

    Parameters
    ----------
    thresholds : dict, optional, keyword-only
        ``kind -> parameter -> value`` overrides of
        :data:`rlmetrics.health.rules.THRESHOLDS`, passed to every diagnosis.
    signals : dict, optional, keyword-only
        ``signal -> key``: keys of your own loop a signal reads (``{"reward": "train_reward"}``),
        as in :func:`rlmetrics.health.rules.diagnose`; each from the first step it is logged.
    every : int, keyword-only
        Diagnose after every ``every`` distinct steps (>= 1).
    budget : float or None, keyword-only
        The largest share of the run's time the diagnoses may take (default 0.02). A due
        diagnosis waits, one step at a time, while the previous one took longer than
        ``budget`` times the time since it ended. In training, where a step takes seconds,
        every due diagnosis runs; steps logged in a tight loop are diagnosed less often (a
        diagnosis reads the whole history and takes milliseconds). ``None``: every due
        diagnosis runs, whatever it costs (deterministic, for tests).
    actions : ActionPolicy or Mapping[str, str], optional, keyword-only
        What to do on a finding, per kind and severity (:class:`ActionPolicy`; default: warn on
        every finding). ``{"nonfinite": "raise", "error": "stop"}``: raise
        :class:`~rlmetrics.errors.RunStopped` on a NaN, stop on any other error. Acted on at
        every diagnosis, for every finding it holds (so a kind first reported as a warning is
        acted on when it becomes an error), each kind at most once.
    defer_raise : bool, keyword-only
        ``True``: a ``"raise"`` action does not raise from ``update``/``check``; it stops the
        run like ``"stop"`` and :meth:`raise_pending` raises it later (integrations that must
        first log the step or save a checkpoint set it).

    Notes
    -----
    A live finding describes the run as logged so far, and is reported once: a condition that
    later clears (responses truncated while a policy trained from random weights has not yet
    learnt to stop: ``rlmetrics demo --warm-start-steps 0`` for its first ~70 steps) stays
    reported, while the diagnosis of the finished run (``rlmetrics diagnose``, :attr:`last`
    after :meth:`check`) no longer lists it.

    Attributes
    ----------
    reported : list of Finding
        Every finding returned so far, in the order reported (one per kind).
    last : Diagnosis or None
        The most recent diagnosis (with its skipped checks), ``None`` before the first.
    should_stop : bool
        Whether a ``"stop"`` or ``"raise"`` action was taken: a loop should end after this step.
    stop_reason : Finding or None
        The finding of the first such action.
    actions_taken : list of Action
        Every ``"stop"`` / ``"raise"`` action taken, in order.

    Examples
    --------
    >>> monitor = HealthMonitor(every=5, budget=None)
    >>> for step in range(20):
    ...     new = monitor.update({"actor/pg_loss": 0.1, "actor/grad_norm": 1.0}, step)
    >>> [f.kind for f in monitor.reported], monitor.n_steps
    ([], 20)
    >>> [f.kind for f in monitor.update({"actor/pg_loss": float("nan")}, 20) + monitor.check()]
    ['nonfinite']

    A loop that stops itself:

    >>> monitor = HealthMonitor(every=1, budget=None, actions={"error": "stop"})
    >>> for step in range(100):
    ...     _ = monitor.update({"actor/pg_loss": float("nan") if step == 3 else 0.1}, step)
    ...     if monitor.should_stop:
    ...         break
    >>> step, monitor.stop_reason.kind, monitor.pop_action_records()
    (3, 'nonfinite', {'health_action/nonfinite': 1.0})
    """

    def __init__(
        self,
        *,
        thresholds: Mapping[str, Mapping[str, float]] | None = None,
        signals: Mapping[str, str] | None = None,
        every: int = 10,
        budget: float | None = 0.02,
        actions: ActionPolicy | Mapping[str, str] | None = None,
        defer_raise: bool = False,
    ) -> None:
        self.actions = _as_policy(actions)
        if not isinstance(defer_raise, bool):
            raise TypeError(f"defer_raise must be True or False; got {type(defer_raise).__name__}")
        self.defer_raise = defer_raise
        self.every = check_int(every, "every", minimum=1)
        if budget is not None:
            if isinstance(budget, bool) or not isinstance(budget, int | float):
                raise TypeError(f"budget must be a number in (0, 1] or None; got {type(budget).__name__}")
            if not 0 < budget <= 1:
                raise ValueError(f"budget must be in (0, 1] or None; got {budget!r}")
        self.budget = None if budget is None else float(budget)
        if thresholds is not None and not isinstance(thresholds, Mapping):
            raise TypeError(
                f"thresholds must be a mapping kind -> parameter -> value; got {type(thresholds).__name__}"
            )
        self.thresholds = None if thresholds is None else {k: dict(v) for k, v in thresholds.items()}
        if self.thresholds:
            _diagnose({}, thresholds=self.thresholds)  # unknown kinds or parameters fail here, not mid-run
        self.signals = dict(signals or {})
        for signal, key in self.signals.items():  # names checked now; keys as they are logged
            if signal not in SIGNALS or not isinstance(key, str):
                raise ValueError(
                    f"signals: expected signal -> key with signals among {', '.join(sorted(SIGNALS))}; "
                    f"got {signal!r} -> {key!r}"
                )
        self._named_keys = frozenset(self.signals.values())
        self.reported: list[Finding] = []
        self.actions_taken: list[Action] = []
        self._acted: set[str] = set()
        self._unrecorded: list[Action] = []
        self._unraised: RunStopped | None = None
        self.last: Diagnosis | None = None
        self.n_steps = 0  #: distinct steps given so far
        self._kinds: set[str] = set()
        self._pending: list[tuple[int, _Layout, Any]] = []
        self._since_check = 0
        self._last_cost, self._last_end = 0.0, 0.0
        self._columns: dict[str, int] = {}
        self._layouts: dict[tuple[str, ...], _Layout] = {}
        self._kept: dict[str, bool] = {}
        self._steps = np.zeros(0, np.int64)
        self._values = np.zeros((0, 0), np.float64)
        self._present = np.zeros((0, 0), bool)
        self._n = 0
        self._last_step: int | None = None
        self._sorted = True

    def __repr__(self) -> str:
        return f"HealthMonitor(every={self.every}, steps={self.n_steps}, reported={sorted(self._kinds)})"

    def update(self, metrics: Mapping[str, float], step: int) -> list[Finding]:
        """Add one step's scalars; when a diagnosis is due, run it and return the new findings.

        Parameters
        ----------
        metrics : Mapping[str, float]
            The step's values (numbers; only the keys the rules read are kept). Keys logged
            again at the same step replace the earlier values, as
            :func:`~rlmetrics.health.findings.as_history` does.
        step : int
            The training step (>= 0).

        Returns
        -------
        list of Finding
            Findings of kinds not reported before, ordered by step (empty between diagnoses).
        """
        step = check_int(step, "step", minimum=0)
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a mapping of key to number; got {type(metrics).__name__}")
        names = tuple(metrics)
        layout = self._layouts.get(names) or self._layout(names)
        self._pending.append((step, layout, layout.pick(list(metrics.values()))))
        last = self._last_step
        if step == last:
            return []
        if last is not None and step < last:
            self._sorted = False
        self._last_step = step
        self.n_steps += 1
        self._since_check += 1
        if self._since_check < self.every:
            return []
        if self.budget is not None and self._last_cost > self.budget * (_clock() - self._last_end):
            return []  # the last diagnosis was dear for the time since: wait a step
        return self.check()

    @property
    def should_stop(self) -> bool:
        """Whether a ``"stop"`` or ``"raise"`` action was taken (the loop should end after this step)."""
        return bool(self.actions_taken)

    @property
    def stop_reason(self) -> Finding | None:
        """The finding of the first ``"stop"`` or ``"raise"`` action, ``None`` before one."""
        return self.actions_taken[0].finding if self.actions_taken else None

    def pop_action_records(self) -> dict[str, float]:
        """The ``health_action/<kind>`` records of the actions taken since the last call.

        Value 1.0 for ``"stop"``, 2.0 for ``"raise"`` (:data:`rlmetrics.keys.HEALTH_ACTION_VALUE`);
        log them with the step, beside its ``health/<kind>`` records.
        """
        records = {K.health_action(a.finding.kind): K.HEALTH_ACTION_VALUE[a.action] for a in self._unrecorded}
        self._unrecorded = []
        return records

    def raise_pending(self) -> None:
        """Raise the :class:`~rlmetrics.errors.RunStopped` a deferred ``"raise"`` action holds, once.

        Nothing happens when no ``"raise"`` action was taken with ``defer_raise=True``.
        """
        pending, self._unraised = self._unraised, None
        if pending is not None:
            raise pending

    def check(self) -> list[Finding]:
        """Diagnose what is held now and return the findings of kinds not reported before.

        Raises
        ------
        RunStopped
            A finding whose action is ``"raise"`` (not with ``defer_raise=True``); its
            ``findings`` are the new findings this call would have returned.
        """
        start = _clock()
        self._since_check = 0
        history = self.history()
        named = {signal: key for signal, key in self.signals.items() if key in history}
        diagnosis = _diagnose(history, thresholds=self.thresholds, signals=named or None)
        self.last = diagnosis
        fresh: list[Finding] = []
        for finding in sorted(diagnosis.findings, key=lambda f: f.step):
            if finding.kind not in self._kinds:  # a diagnosis can name a kind twice; report its first
                self._kinds.add(finding.kind)
                fresh.append(finding)
        self.reported.extend(fresh)
        self._last_end = _clock()
        self._last_cost = self._last_end - start
        if self.actions.acts:
            self._act(diagnosis, fresh)
        return fresh

    def _act(self, diagnosis: Diagnosis, fresh: list[Finding]) -> None:
        """Take the policy's action on each finding of a kind not acted on yet; raise on ``"raise"``."""
        step = -1 if self._last_step is None else self._last_step
        to_raise: RunStopped | None = None
        for finding in sorted(diagnosis.findings, key=lambda f: f.step):
            action = self.actions.action_for(finding.kind, finding.severity)
            if action == "warn" or finding.kind in self._acted:
                continue
            self._acted.add(finding.kind)
            taken = Action(action, finding, step)
            self.actions_taken.append(taken)
            self._unrecorded.append(taken)
            if action == "raise" and to_raise is None and self._unraised is None:
                to_raise = RunStopped(finding, action="raise", step=step, findings=fresh)
        if to_raise is not None:
            if not self.defer_raise:
                raise to_raise
            self._unraised = to_raise

    def history(self) -> Mapping[str, tuple[np.ndarray, np.ndarray]]:
        """The history held so far of the keys the rules read, key -> ``(steps, values)``.

        Views of the monitor's table, valid until the next ``update``.
        """
        self._flush()
        view = _TableHistory(self._columns, self._steps, self._values, self._present, self._n)
        if self._sorted:
            return view
        return as_history({k: view[k] for k in view})

    # -- the table -----------------------------------------------------------------------------
    def _layout(self, names: tuple[str, ...]) -> _Layout:
        """The layout of a step with these keys (new kept keys get a column)."""
        kept = self._kept
        named = self._named_keys
        picked = [
            i for i, name in enumerate(names) if kept.setdefault(name, name in named or _read_by_rules(name))
        ]
        for i in picked:
            self._columns.setdefault(names[i], len(self._columns))
        self._reserve(cols=len(self._columns))
        layout = _Layout(names, picked, [self._columns[names[i]] for i in picked])
        if len(self._layouts) < 256:
            self._layouts[names] = layout
        return layout

    def _flush(self) -> None:
        """Write the pending steps into the table (runs of steps with the same keys as one block)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        n = self._n
        prev = int(self._steps[n - 1]) if n else None
        row, rows, new_steps = n - 1, [], []
        for step, _, _ in pending:
            if step != prev:
                row += 1
                new_steps.append(step)
                prev = step
            rows.append(row)
        self._reserve(rows=row + 1)
        self._steps[n : row + 1] = new_steps
        i = 0
        while i < len(pending):
            layout = pending[i][1]
            j = i + 1
            while j < len(pending) and pending[j][1] is layout and rows[j] == rows[j - 1] + 1:
                j += 1
            if layout.cols.size:
                block = slice(rows[i], rows[j - 1] + 1)
                self._values[layout.cols, block] = _as_matrix(pending[i:j], layout).T
                self._present[layout.cols, block] = True
            i = j
        self._n = row + 1

    def _reserve(self, *, rows: int = 0, cols: int = 0) -> None:
        """Grow the table (by doubling) to hold ``rows`` steps and ``cols`` keys."""
        have_cols, have_rows = self._values.shape
        if rows <= have_rows and cols <= have_cols:
            return
        new_rows = have_rows if rows <= have_rows else max(_MIN_CAPACITY, 2 * have_rows, rows)
        new_cols = have_cols if cols <= have_cols else max(8, 2 * have_cols, cols)
        values = np.full((new_cols, new_rows), math.nan)
        present = np.zeros((new_cols, new_rows), bool)
        values[:have_cols, :have_rows] = self._values
        present[:have_cols, :have_rows] = self._present
        steps = np.zeros(new_rows, np.int64)
        steps[:have_rows] = self._steps
        self._values, self._present, self._steps = values, present, steps


def _as_matrix(block: list[tuple[int, _Layout, Any]], layout: _Layout) -> np.ndarray:
    """The kept values of steps with one layout as a (steps, keys) float64 array; a clear error otherwise."""
    try:
        return np.array([values for _, _, values in block], dtype=np.float64).reshape(len(block), -1)
    except (TypeError, ValueError):
        for step, _, values in block:
            for key, value in zip(layout.names, values):
                try:
                    float(value)
                except (TypeError, ValueError):
                    raise TypeError(
                        f"metrics[{key!r}] at step {step} must be a number; "
                        f"got {type(value).__name__} {value!r:.60}"
                    ) from None
        raise


def _diagnose(history: Any, *, thresholds: Any, signals: Any = None) -> Diagnosis:
    return diagnose(history, thresholds=thresholds, signals=signals)
