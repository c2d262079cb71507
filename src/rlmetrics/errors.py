"""The exceptions and warning categories of rlmetrics.

Every error rlmetrics defines is an :class:`RLMetricsError`, and also the built-in type callers
already catch (``ValueError``): ``except rlmetrics.errors.RLMetricsError`` catches what rlmetrics
refused on purpose, ``except ValueError`` keeps working. Bad arguments are plain ``TypeError`` /
``ValueError`` naming the argument, what was expected and what came.

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

__all__ = [
    "DumpError",
    "HealthWarning",
    "RLMetricsError",
    "RLMetricsWarning",
    "RunReadError",
    "RunReadWarning",
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
