"""Health checks of an RL fine-tuning run: the known failure modes, named, with their onset.

>>> from rlmetrics.health import diagnose
>>> rows = [{"step": s, "actor/pg_loss": (float("nan") if s == 7 else 0.1)} for s in range(10)]
>>> [(f.kind, f.severity, f.step) for f in diagnose(rows).findings]
[('nonfinite', 'error', 7)]

* :mod:`~rlmetrics.health.findings`: :class:`Finding`, :class:`Diagnosis` (the history type
  comes from :mod:`rlmetrics.readers`).
* :mod:`~rlmetrics.health.signals`: the metric vocabularies of verl, TRL, OpenRLHF and
  NeMo-RL, mapped to the signals the rules read.
* :mod:`~rlmetrics.health.smoothing`: TensorBoard's debiased EMA, frozen robust baselines,
  persistence windows.
* :mod:`~rlmetrics.health.rules`: one rule per failure mode, their thresholds, :func:`diagnose`.
* :mod:`~rlmetrics.health.sources`: :func:`load_history`, a run in any format that
  :func:`rlmetrics.readers.read_run` reads, as the rules' history.
* :mod:`~rlmetrics.health.examples`: :func:`~rlmetrics.health.examples.finding_examples`, the
  sample rows that show a text finding.
* :mod:`~rlmetrics.health.monitor`: :class:`HealthMonitor`, the live form for ``Tracker``.
"""

from __future__ import annotations

from rlmetrics.health.findings import Diagnosis, Finding, Skipped, as_history
from rlmetrics.health.monitor import HealthMonitor
from rlmetrics.health.rules import KINDS, THRESHOLDS, diagnose
from rlmetrics.health.sources import RunReadError, load_history

__all__ = [
    "KINDS",
    "THRESHOLDS",
    "Diagnosis",
    "Finding",
    "HealthMonitor",
    "RunReadError",
    "Skipped",
    "as_history",
    "diagnose",
    "load_history",
]
