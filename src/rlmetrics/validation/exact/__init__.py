"""Exact estimators and summaries with intervals across prompts (no bootstrap of the samples).

* :mod:`~rlmetrics.validation.exact.estimators`: exact pass@k, pass^k, best@k, worst@k, maj@k and
  cover@tau of one prompt (or rows of prompts).
* :mod:`~rlmetrics.validation.exact.summary`: those per data source and variable, per prompt
  (:func:`~rlmetrics.validation.exact.summary.prompt_estimates`) and as means with intervals
  (:func:`~rlmetrics.validation.exact.summary.summarize_validation`, its options one
  :class:`~rlmetrics.validation.exact.summary.SummaryOptions`).
* :mod:`~rlmetrics.validation.exact.intervals`: Wilson on the effective number of prompts, t,
  bootstrap over prompts; clustered standard errors.
* :mod:`~rlmetrics.validation.exact.votes`: the one maj@k vote counter (predictions as vote
  patterns, the exact chance of each answer winning), also behind verl's bootstrap maj@k.
* :mod:`~rlmetrics.validation.exact.inputs`: samples grouped into prompts, value columns,
  prediction codes (shared with :mod:`~rlmetrics.validation.verl`).
"""
