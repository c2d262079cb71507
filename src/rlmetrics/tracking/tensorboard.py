"""The ``tensorboard`` backend: TensorBoard event files (``tensorboard``'s own writer)."""

from __future__ import annotations

import time
from typing import Any

from rlmetrics.tracking._backend import MAX_STEP_INT64, RunInfo
from rlmetrics.tracking._files import _check_name
from rlmetrics.tracking._values import _config_json

__all__ = ["TensorBoardBackend"]


class TensorBoardBackend:
    """TensorBoard event files in ``run_dir/<folder>``, the config as a text summary at step 0.

    Parameters
    ----------
    folder : str, keyword-only
        The folder under the run directory (a plain name; default ``"tensorboard"``).
    flush : bool, keyword-only
        Flush the event file after every step (default; else TensorBoard's writer flushes on
        its own schedule and at the end).

    Examples
    --------
    >>> TensorBoardBackend(flush=False)
    TensorBoardBackend(folder='tensorboard', flush=False)
    """

    name = "tensorboard"
    max_step = MAX_STEP_INT64  # an event's step is an int64
    keeps_records = False  # log() turns its record into an event and keeps nothing of it

    def __init__(self, *, folder: str = "tensorboard", flush: bool = True) -> None:
        self.folder = _check_name(folder, "folder")
        if not isinstance(flush, bool):
            raise TypeError(f"flush must be a bool; got {type(flush).__name__} {flush!r}")
        self.flush = flush
        self._writer: Any = None

    def __repr__(self) -> str:
        return f"TensorBoardBackend(folder={self.folder!r}, flush={self.flush})"

    def start(self, run: RunInfo) -> list[str]:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise ImportError(
                "the tensorboard backend needs tensorboard: pip install 'rlmetrics[tensorboard]'"
            ) from None
        self._event_pb2, self._summary_pb2 = event_pb2, summary_pb2
        self.log_dir = run.run_dir / self.folder
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.log_dir))
        if run.config:
            self._add_text("config", "```\n" + _config_json(run.config) + "\n```", step=0)
            self._writer.flush()
        return []

    def _add_text(self, tag: str, text: str, step: int) -> None:
        from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

        s = self._summary_pb2
        meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(plugin_name="text"))
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            string_val=[text.encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]
            ),
        )
        summary = s.Summary(value=[s.Summary.Value(tag=tag, metadata=meta, tensor=tensor)])
        self._writer.add_event(self._event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def log(self, metrics: dict[str, float], step: int) -> None:
        s = self._summary_pb2
        summary = s.Summary(value=[s.Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()])
        self._writer.add_event(self._event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        if self.flush:
            self._writer.flush()

    def finish(self, *, exit_code: int = 0) -> None:
        if self._writer is not None:
            self._writer.close()
