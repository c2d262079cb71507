"""rlmetrics: training and validation metrics for RL fine-tuning of language models.

A drop-in for ``verl.trainer.ppo.metric_utils`` (same names, arguments, keys and values),
faster, with exact estimators beside verl's bootstrap, and tracking backends.

>>> import numpy as np, rlmetrics
>>> batch = {
...     "token_level_scores": np.array([[0.0, 1.0], [0.0, 0.0]], dtype=np.float32),
...     "token_level_rewards": np.array([[0.0, 1.0], [0.0, 0.0]], dtype=np.float32),
...     "advantages": np.array([[0.5, 0.5], [-0.5, 0.0]], dtype=np.float32),
...     "returns": np.array([[1.0, 1.0], [0.0, 0.0]], dtype=np.float32),
...     "response_mask": np.array([[1, 1], [1, 0]]),
...     "attention_mask": np.array([[1, 1, 1, 1], [0, 1, 1, 0]]),
...     "prompts": np.zeros((2, 2), dtype=np.int64),
...     "responses": np.zeros((2, 2), dtype=np.int64),
... }
>>> m = rlmetrics.compute_data_metrics(batch, use_critic=False)
>>> m["critic/score/mean"], m["response_length/mean"], m["prompt_length/clip_ratio"]
(0.5, 1.5, 0.5)
"""

from __future__ import annotations

from . import _keys as keys
from ._batch import BatchView, as_batch
from ._data import compute_data_metrics
from ._reduce import AggregationType, Metric, reduce_metrics, reducer_for_key
from ._timing import (
    ACCELERATOR_PEAK_FLOPS,
    compute_mfu,
    compute_throughout_metrics,
    compute_throughput_metrics,
    compute_timing_metrics,
)

# -- validation statistics (issue 3): add imports below this line --
# -- policy-side metrics (issue 4): add imports below this line --
# -- distributed, timers, tracking (issue 5): add imports below this line --

__version__ = "0.1.0"

__all__ = [
    "ACCELERATOR_PEAK_FLOPS",
    "AggregationType",
    "BatchView",
    "Metric",
    "__version__",
    "as_batch",
    "compute_data_metrics",
    "compute_mfu",
    "compute_throughout_metrics",
    "compute_throughput_metrics",
    "compute_timing_metrics",
    "keys",
    "reduce_metrics",
    "reducer_for_key",
]
