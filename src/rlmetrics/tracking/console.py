"""The ``console`` backend: a line per step of the keys that matter most (rich)."""

from __future__ import annotations

import fnmatch
import math
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from rlmetrics import keys as K

__all__ = ["DEFAULT_CONSOLE_KEYS"]


#: Keys (``fnmatch`` patterns) the console backend shows by default, in this order.
DEFAULT_CONSOLE_KEYS = (
    K.SCORE_MEAN,
    K.REWARDS_MEAN,
    K.ACTOR_PG_LOSS,
    K.ACTOR_ENTROPY,
    K.PPO_KL,
    K.ACTOR_GRAD_NORM,
    K.CRITIC_VF_LOSS,
    K.RESPONSE_LENGTH_MEAN,
    f"{K.VAL_CORE_PREFIX}/*",
    K.timing_s(K.STAGE_STEP),
    K.PERF_THROUGHPUT,
)


class _ConsoleBackend:
    name = "console"

    def __init__(
        self, project: str, experiment: str, *, keys: Sequence[str] | None = None, file: TextIO | None = None
    ) -> None:
        from rich.console import Console

        self.patterns = tuple(DEFAULT_CONSOLE_KEYS if keys is None else keys)
        self.console = Console(file=file if file is not None else sys.stdout, highlight=False, soft_wrap=True)
        self.console.print(f"[bold]{project}[/bold] / {experiment}")

    def _select(self, metrics: Mapping[str, float]) -> list[str]:
        chosen: list[str] = []
        for pattern in self.patterns:
            for key in metrics:
                if key not in chosen and fnmatch.fnmatchcase(key, pattern):
                    chosen.append(key)
        return chosen or list(metrics)[:6]

    def log(self, metrics: dict[str, float], step: int) -> None:
        from rich.markup import escape

        shown = self._select(metrics)
        parts = [f"[dim]{escape(k)}[/dim] {_fmt(metrics[k])}" for k in shown]
        more = len(metrics) - len(shown)
        tail = f" [dim](+{more} more)[/dim]" if more else ""
        self.console.print(f"[bold]step {step}[/bold] | " + " | ".join(parts) + tail)

    def finish(self) -> None:
        self.console.file.flush()


def _fmt(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"
