"""The ``console`` backend: a line per step of the keys that matter most (rich)."""

from __future__ import annotations

import fnmatch
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rlmetrics import keys as K
from rlmetrics.tracking._backend import RunInfo

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["DEFAULT_CONSOLE_KEYS", "ConsoleBackend"]


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


class ConsoleBackend:
    """A line per step of the keys that matter most, printed with rich.

    Parameters
    ----------
    keys : sequence of str, optional, keyword-only
        ``fnmatch`` patterns of the keys shown, in this order (default
        :data:`DEFAULT_CONSOLE_KEYS`; the first six keys of a step when none matches).
    file : file, optional, keyword-only
        Where the lines go (default ``sys.stdout``).

    Examples
    --------
    >>> import io, tempfile
    >>> from rlmetrics.tracking import Tracker
    >>> out = io.StringIO()
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with Tracker("demo", "run1", backends=[ConsoleBackend(keys=["a*"], file=out)], log_dir=d) as tr:
    ...         tr.log({"a": 1.0, "b": 2.0}, step=3)
    >>> out.getvalue().splitlines()[-1]
    'step 3 | a 1 (+1 more)'
    """

    name = "console"
    max_step = None
    keeps_records = False  # log() only reads its record

    def __init__(self, *, keys: Sequence[str] | None = None, file: TextIO | None = None) -> None:
        if keys is not None:
            if isinstance(keys, str) or not isinstance(keys, Iterable):
                raise TypeError(
                    f"keys must be a sequence of str patterns; got {type(keys).__name__} {keys!r}"
                )
            keys = tuple(keys)
            wrong = [k for k in keys if not isinstance(k, str)]
            if wrong:
                raise TypeError(f"keys must be a sequence of str patterns; got {wrong[0]!r} among them")
        if file is not None and not callable(getattr(file, "write", None)):
            raise TypeError(f"file must be a text file (with write()); got {type(file).__name__}")
        self.patterns: tuple[str, ...] = DEFAULT_CONSOLE_KEYS if keys is None else keys
        self.file = file
        self.console: Any = None

    def start(self, run: RunInfo) -> list[str]:
        from rich.console import Console

        out = self.file if self.file is not None else sys.stdout
        self.console = Console(file=out, highlight=False, soft_wrap=True)
        self.console.print(f"[bold]{run.project}[/bold] / {run.experiment}")
        return []

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

    def log_samples(self, table: SampleTable, step: int) -> None:
        """One line: the step's sample rows and their reward range (the texts are left to the files)."""
        rewards = table.reward
        span = f" [dim]reward[/dim] {_fmt(min(rewards))} .. {_fmt(max(rewards))}" if rewards else ""
        self.console.print(f"[bold]step {step}[/bold] | [dim]samples[/dim] {len(table)} rows{span}")

    def finish(self, *, exit_code: int = 0) -> None:
        if self.console is not None:
            self.console.file.flush()


def _fmt(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"
