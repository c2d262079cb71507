"""The exceptions and warning categories of rlmetrics.

Every error rlmetrics defines is an :class:`RLMetricsError`, and also the built-in type callers
already catch (``ValueError``): ``except rlmetrics.errors.RLMetricsError`` catches what rlmetrics
refused on purpose, ``except ValueError`` keeps working. Bad arguments are plain ``TypeError`` /
``ValueError`` naming the argument, what was expected and what came. One error is not a refusal
but a decision: :class:`RunStopped`, raised by the live health monitor on a finding its action
policy says to ``raise`` on; it is only an :class:`RLMetricsError` (no built-in base), so that no
``except ValueError`` or ``except RuntimeError`` of a training loop swallows it by accident.

Every warning rlmetrics emits is an :class:`RLMetricsWarning` (a ``RuntimeWarning``, as before),
in one category per kind, so one kind can be silenced without silencing numpy's warnings or the
other kinds::

    import warnings
    from rlmetrics.errors import UndefinedMetricWarning

    warnings.simplefilter("ignore", UndefinedMetricWarning)  # NaN metrics on empty batches

=========================  ==================================================================
category                   emitted when
=========================  ==================================================================
UndefinedMetricWarning     a statistic is undefined on this input (no tokens, one sample,
                           ``k > n``): the value is NaN
TrackingWarning            a tracker renamed a run, dropped a key or a record, or a backend or
                           the health monitor failed (logging goes on)
HealthWarning              the live health monitor found a failure mode in the run
RunReadWarning             a run or dump was read with something left out (a torn last line, a
                           step logged twice, a config that could not be read)
=========================  ==================================================================

This module imports nothing from rlmetrics: every layer may use it.

Examples
--------
>>> issubclass(RunReadError, ValueError) and issubclass(RunReadError, RLMetricsError)
True
>>> issubclass(UndefinedMetricWarning, RuntimeWarning)
True
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DumpError",
    "HealthWarning",
    "RLMetricsError",
    "RLMetricsWarning",
    "RunReadError",
    "RunReadWarning",
    "RunStopped",
    "TrackingWarning",
    "UndefinedMetricWarning",
    "ValidationDumpError",
]


class RLMetricsError(Exception):
    """Base of the errors rlmetrics defines."""


class RunReadError(RLMetricsError, ValueError):
    """A run that could not be read: the message names the path and what was expected."""


class ValidationDumpError(RunReadError):
    """The file is a validation rollout dump, not a run's metrics."""


class DumpError(RLMetricsError, ValueError):
    """A rollout dump that could not be read (missing, unreadable, malformed); the message says which."""


class RunStopped(RLMetricsError):
    """The live health monitor stopped the run: a finding its action policy says to act on.

    Parameters
    ----------
    finding : object
        The :class:`~rlmetrics.health.findings.Finding` that caused it (its ``kind``,
        ``severity``, ``step`` and ``advice`` make the message).
    action : str, keyword-only
        ``"raise"`` (the policy's action) or ``"stop"`` (an integration unwinding a loop it cannot
        break otherwise, e.g. verl's ``fit``).
    step : int or None, keyword-only
        The last step the monitor held when it acted.
    findings : sequence, keyword-only
        The new findings of the diagnosis that acted (the ones ``update`` would have returned).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> f = SimpleNamespace(kind="nonfinite", severity="error", step=7, advice="Lower the learning rate.")
    >>> str(RunStopped(f, step=8))
    'rlmetrics health: run stopped at step 8 on nonfinite (error) from step 7: Lower the learning rate.'
    """

    def __init__(
        self,
        finding: object,
        *,
        action: str = "raise",
        step: int | None = None,
        findings: Sequence[object] = (),
    ) -> None:
        self.finding = finding
        self.action = action
        self.step = step
        self.findings = tuple(findings)
        kind, severity = getattr(finding, "kind", "?"), getattr(finding, "severity", "?")
        at = "" if step is None else f" at step {step}"
        super().__init__(
            f"rlmetrics health: run stopped{at} on {kind} ({severity}) from step "
            f"{getattr(finding, 'step', '?')}: {getattr(finding, 'advice', '')}".rstrip(": ")
        )

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled with its keywords (a Ray task's error, a subprocess's): ``Exception``'s own
        pickling calls the class with ``args``, the message, which would become the finding."""
        return (_rebuild_run_stopped, (type(self), self.finding, self.action, self.step, self.findings))


def _rebuild_run_stopped(
    cls: type[RunStopped], finding: object, action: str, step: int | None, findings: Sequence[object]
) -> RunStopped:
    return cls(finding, action=action, step=step, findings=findings)


class RLMetricsWarning(RuntimeWarning):
    """Base of the warnings rlmetrics emits."""


class UndefinedMetricWarning(RLMetricsWarning):
    """A statistic is undefined on this input; its value is NaN."""


class TrackingWarning(RLMetricsWarning):
    """A tracker left something out (a key, a record, a backend) or renamed a run; logging goes on."""


class HealthWarning(RLMetricsWarning):
    """The live health monitor found a failure mode in the run."""


class RunReadWarning(RLMetricsWarning):
    """A run or dump was read with something left out (a torn line, a repeated step)."""
