"""Test doubles and steps shared by the tests of rlmetrics.tracking: recording and failing backends, a
few verl steps.
"""

from __future__ import annotations

from rlmetrics.tracking import RunInfo, Tracker

STEPS = {
    1: {"critic/score/mean": 0.5, "actor/pg_loss": -0.125, "val-core/gsm8k/acc/mean@8": 0.25},
    2: {"critic/score/mean": 0.75, "actor/pg_loss": 0.0625, "val-core/gsm8k/acc/mean@8": 0.5},
    5: {"critic/score/mean": 1.0, "actor/pg_loss": 3.0, "val-core/gsm8k/acc/mean@8": 0.875},
}
CONFIG = {"trainer": {"total_epochs": 3, "project": "p"}, "actor": {"lr": 1e-6}}


class Recorder:
    """A custom backend that keeps what it was given."""

    name = "recorder"

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict]] = []
        self.finished = 0

    def log(self, metrics, step):
        self.rows.append((step, metrics))

    def finish(self):
        self.finished += 1


def log_all(tracker: Tracker) -> None:
    for step, metrics in STEPS.items():
        tracker.log(metrics, step=step)


class Mine:
    """A backend with the whole protocol, keeping what the tracker asked of it."""

    name = "mine"
    keeps_records = True

    def __init__(self, max_step: int | None = None, notes: tuple[str, ...] = ()) -> None:
        self.samples: list[tuple[int, object]] = []
        self.max_step = max_step
        self.notes = notes
        self.run: RunInfo | None = None
        self.rows: list[tuple[int, dict]] = []
        self.exit_codes: list[int] = []

    def start(self, run: RunInfo) -> list[str]:
        self.run = run
        return list(self.notes)

    def log(self, metrics, step):
        self.rows.append((step, metrics))
        return ["a note"] if "noted" in metrics else None

    def log_samples(self, table, step):
        self.samples.append((step, table))

    def finish(self, *, exit_code: int = 0) -> None:
        self.exit_codes.append(exit_code)
