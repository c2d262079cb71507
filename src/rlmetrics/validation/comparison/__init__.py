"""Two evaluations compared prompt by prompt: differences, curves over k, whole tables.

* :mod:`~rlmetrics.validation.comparison.paired`: matching prompts, paired (and unpaired)
  differences of one metric.
* :mod:`~rlmetrics.validation.comparison.curves`: per-prompt pass@k / pass^k curves, their
  difference with a simultaneous band and where the runs cross.
* :mod:`~rlmetrics.validation.comparison.tables`: every metric of two runs' per-prompt tables
  (:func:`~rlmetrics.validation.exact.summary.prompt_estimates`), or of two summaries.
* :mod:`~rlmetrics.validation.comparison.family`: every comparison of a call adjusted as one family
  (p-values, intervals, verdicts).
* :mod:`~rlmetrics.validation.comparison.results`: the result types ``tables`` returns and
  ``family`` fills in.
* :mod:`~rlmetrics.validation.comparison.multiplicity`: p-values adjusted for the family
  compared (Holm, Benjamini-Hochberg).
* :mod:`~rlmetrics.validation.comparison.equivalence`: non-inferiority and equivalence within a
  margin (two one-sided tests) and a verdict in words.
* :mod:`~rlmetrics.validation.comparison.seeds`: evaluations of several training seeds combined
  (between-seed, between-prompt and residual variance; an interval over seeds) and two
  configurations compared with the seeds as the unit.
* :mod:`~rlmetrics.validation.comparison.plan`: prompts and samples a prompt an evaluation needs
  to detect a difference, from a pilot's spread.
"""
