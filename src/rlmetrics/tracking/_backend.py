"""What every tracking backend provides, and the largest step the int64 trackers store."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["MAX_STEP_INT64", "TrackingBackend"]


#: The largest step TensorBoard, MLflow, W&B and trackio store (int64).
MAX_STEP_INT64 = 2**63 - 1


@runtime_checkable
class TrackingBackend(Protocol):
    """What a backend object passed in ``Tracker(backends=[...])`` must provide."""

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one step's metrics (floats, already converted and checked).

        An exception loses this record for this backend only (one warning); the tracker goes on
        calling it. A backend may set ``max_step`` (an int): records of later steps are not
        passed to it, each a record lost with a warning.
        """

    def finish(self) -> None:
        """Flush and close."""
