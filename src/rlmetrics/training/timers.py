"""Stage timers that fill verl's ``timing_raw`` dict.

``with timer("gen", timing_raw): ...`` adds the block's wall time (seconds) to
``timing_raw["gen"]``; repeated stages accumulate, stages nest (each keeps its own clock), and
re-entering a stage that is already running (recursion) is not counted twice. The dict feeds
:func:`rlmetrics.compute_timing_metrics` directly. :class:`StageTimer` bundles the dict with
per-stage call counts and a per-step ``pop``.

The clock is ``time.perf_counter``; with ``sync_cuda=True`` CUDA is synchronised before each
reading so that queued kernels are charged to the stage that launched them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["Stage", "StageTimer", "timer"]

#: The clock (seconds); a module attribute so that tests can substitute a fake one.
_clock = time.perf_counter

# Stages running in the current thread/task: (id of the target dict, stage name).
_ACTIVE: ContextVar[tuple[tuple[int, str], ...]] = ContextVar("rlmetrics_active_stages", default=())


def _cuda_sync() -> None:
    """Wait for queued CUDA work (no-op when torch has no CUDA device)."""
    try:
        import torch
    except ImportError:
        raise ImportError("sync_cuda=True needs torch: pip install 'rlmetrics[torch]'") from None
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Stage:
    """What :func:`timer` yields: the stage's name and, after the block, its ``elapsed`` seconds."""

    __slots__ = ("counted", "elapsed", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.elapsed = 0.0
        #: False when the stage was already running (re-entered) and was not added again.
        self.counted = True

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, elapsed={self.elapsed:.6f})"


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str (the stage name, e.g. 'gen'); got {name!r}")
    return name


@contextmanager
def timer(
    name: str,
    timing_raw: MutableMapping[str, float] | None = None,
    *,
    sync_cuda: bool = False,
) -> Iterator[Stage]:
    """Time a block and add its wall time, in seconds, to ``timing_raw[name]``.

    Parameters
    ----------
    name : str
        Stage name, e.g. ``"gen"``, ``"ref"``, ``"update_actor"``, ``"step"``.
    timing_raw : dict[str, float], optional
        The dict to add to (created entries start at 0). Without it the time is only on the
        yielded :class:`Stage`.
    sync_cuda : bool, keyword-only
        Synchronise CUDA before starting and before stopping the clock (asynchronous kernels
        otherwise finish after the block has "ended"). Needs torch; a no-op when CUDA is not
        initialised.

    Yields
    ------
    Stage
        ``.elapsed`` holds the block's seconds after it exits (also when it raised: the time
        spent is recorded and the exception propagates).

    Examples
    --------
    >>> timing_raw = {}
    >>> with timer("step", timing_raw):
    ...     for _ in range(2):
    ...         with timer("gen", timing_raw):
    ...             pass
    >>> sorted(timing_raw), timing_raw["step"] >= timing_raw["gen"] >= 0.0
    (['gen', 'step'], True)
    """
    name = _check_name(name)
    if timing_raw is not None and not isinstance(timing_raw, MutableMapping):
        raise TypeError(
            f"timing_raw must be a dict of stage name to seconds; got {type(timing_raw).__name__}"
        )
    stage = Stage(name)
    token_key = (id(timing_raw), name)
    active = _ACTIVE.get()
    stage.counted = timing_raw is None or token_key not in active
    token = _ACTIVE.set((*active, token_key)) if timing_raw is not None else None
    if sync_cuda:
        _cuda_sync()
    start = _clock()
    try:
        yield stage
    finally:
        if sync_cuda:
            _cuda_sync()
        stage.elapsed = _clock() - start
        if token is not None:
            _ACTIVE.reset(token)
        if timing_raw is not None and stage.counted:
            timing_raw[name] = float(timing_raw.get(name, 0.0)) + stage.elapsed


class StageTimer:
    """A ``timing_raw`` dict with stage timers, call counts and a per-step ``pop``.

    Parameters
    ----------
    sync_cuda : bool, keyword-only
        Default of ``sync_cuda`` for every stage (see :func:`timer`).

    Examples
    --------
    >>> t = StageTimer()
    >>> for _ in range(3):
    ...     with t("gen"):
    ...         pass
    >>> t.counts
    {'gen': 3}
    >>> step = t.pop()      # feed to compute_timing_metrics(batch, step)
    >>> list(step), t.timing_raw
    (['gen'], {})
    """

    def __init__(self, *, sync_cuda: bool = False) -> None:
        self.sync_cuda = bool(sync_cuda)
        self.timing_raw: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def __repr__(self) -> str:
        stages = ", ".join(f"{k}={v:.3f}s" for k, v in self.timing_raw.items())
        return f"StageTimer({stages})"

    @contextmanager
    def __call__(self, name: str, *, sync_cuda: bool | None = None) -> Iterator[Stage]:
        """Time a block as stage ``name`` (see :func:`timer`)."""
        sync = self.sync_cuda if sync_cuda is None else bool(sync_cuda)
        stage = None
        try:
            with timer(name, self.timing_raw, sync_cuda=sync) as stage:
                yield stage
        finally:
            if stage is not None and stage.counted:
                self.counts[name] = self.counts.get(name, 0) + 1

    def pop(self) -> dict[str, float]:
        """The accumulated ``timing_raw`` (stage to seconds), then start afresh."""
        out = self.timing_raw
        self.timing_raw = {}
        self.counts = {}
        return out

    def reset(self) -> None:
        """Forget every stage."""
        self.pop()
