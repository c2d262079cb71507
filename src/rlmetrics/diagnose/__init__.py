"""Health checks of an RL fine-tuning run: the known failure modes, named, with their onset.

* :mod:`~rlmetrics.diagnose.findings`: :class:`Finding`, :class:`Diagnosis`, the history type.
* :mod:`~rlmetrics.diagnose.signals`: the metric vocabularies of verl and TRL, mapped to the
  signals the rules read.
* :mod:`~rlmetrics.diagnose.smoothing`: TensorBoard's debiased EMA, frozen robust baselines,
  persistence windows.
* :mod:`~rlmetrics.diagnose.rules`: one rule per failure mode, their thresholds, :func:`diagnose`.
* :mod:`~rlmetrics.diagnose.sources`: runs read from rlmetrics/verl JSONL, TensorBoard, TRL's
  ``trainer_state.json`` and W&B offline directories.
* :mod:`~rlmetrics.diagnose.monitor`: :class:`HealthMonitor`, the live form for ``Tracker``.
"""
