"""verl's bootstrap engine: ``process_validation_metrics`` with verl 0.9.1's keys and values.

* :mod:`~rlmetrics.validation.verl.bootstrap`: the verl drop-ins (``process_validation_metrics``,
  ``bootstrap_metric``, ``calc_maj_val``, ``flatten_validation_metrics``), vectorised over prompts.
* :mod:`~rlmetrics.validation.verl.draws`: verl's bootstrap draws, drawn once and shared.
* :mod:`~rlmetrics.validation.verl.extremes`: best@k / worst@k from rank counts over the draws.
* :mod:`~rlmetrics.validation.verl.majority`: maj@k as counts of verl's vote over the draws.

It reads its inputs with :mod:`~rlmetrics.validation.exact.inputs` and groups predictions into
vote patterns with :class:`~rlmetrics.validation.exact.votes.Votes`, the vote counter it shares
with the exact estimators.
"""
