"""Training-step metrics: the batch's data, per-stage timings, throughput and MFU.

* :mod:`~rlmetrics.training.data`: verl's ``compute_data_metrics`` (scores, rewards,
  advantages, returns, values, lengths) and its statistics, ``data_statistics``.
* :mod:`~rlmetrics.training.timing`: verl's ``compute_timing_metrics`` and
  ``compute_throughout_metrics``, and MFU from peak FLOP/s.
* :mod:`~rlmetrics.training.timers`: ``StageTimer`` and ``timer``, which fill the
  ``timing_raw`` dict those take.
* :mod:`~rlmetrics.training.samples`: ``select_samples``, a small deterministic sample of the
  step's rollouts (highest, lowest, median reward, random ones; row and byte budgets), a
  ``SampleTable`` for ``Tracker.log_samples``.
* :mod:`~rlmetrics.training.text`: text statistics of the step's rollouts (repetition,
  compression ratio, stop reasons, a format check, thinking spans), ``text_statistics``.
"""

from __future__ import annotations

from rlmetrics.training.data import compute_data_metrics, data_statistics
from rlmetrics.training.samples import SampleTable, select_samples
from rlmetrics.training.text import compute_text_metrics, text_statistics
from rlmetrics.training.timers import Stage, StageTimer, timer
from rlmetrics.training.timing import (
    ACCELERATOR_PEAK_FLOPS,
    compute_mfu,
    compute_throughout_metrics,
    compute_throughput_metrics,
    compute_timing_metrics,
)

__all__ = [
    "ACCELERATOR_PEAK_FLOPS",
    "SampleTable",
    "Stage",
    "StageTimer",
    "compute_data_metrics",
    "compute_mfu",
    "compute_text_metrics",
    "compute_throughout_metrics",
    "compute_throughput_metrics",
    "compute_timing_metrics",
    "data_statistics",
    "select_samples",
    "text_statistics",
    "timer",
]
