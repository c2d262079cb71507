"""rlmetrics inside the trainers people run; each module imports its trainer's packages, this one nothing.

* :mod:`rlmetrics.integrations.trl`: ``RLMetricsCallback`` for TRL's ``GRPOTrainer``.
* :mod:`rlmetrics.integrations.verl`: ``patch()`` verl's metric functions in place, and the Ray
  ``runtime_env()`` that patches every worker of a verl job (its trainer actor included).
"""
