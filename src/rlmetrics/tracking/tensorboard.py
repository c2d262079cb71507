"""The ``tensorboard`` backend: TensorBoard event files (``tensorboard``'s own writer)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as K
from rlmetrics.tracking._backend import MAX_STEP_INT64, RunInfo
from rlmetrics.tracking._files import _check_name
from rlmetrics.tracking._values import _config_json

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["TensorBoardBackend"]


class TensorBoardBackend:
    """TensorBoard event files in ``run_dir/<folder>``, the config as a text summary at step 0,
    each step's sample table as a text table (tag ``samples``).

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

    def _add_text(self, tag: str, text: str | list[list[str]], step: int) -> None:
        """A text summary: one string, or a table (rows of cells: the text plugin shows a 2-d
        string tensor as a table, each cell as markdown)."""
        from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

        s = self._summary_pb2
        meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(plugin_name="text"))
        cells = [text] if isinstance(text, str) else [cell for row in text for cell in row]
        sizes = [1] if isinstance(text, str) else [len(text), len(text[0])]
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            string_val=[cell.encode("utf-8") for cell in cells],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in sizes]
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

    def log_samples(self, table: SampleTable, step: int) -> None:
        """The table as text under the tag ``samples``: a 2-d string tensor, its first row the
        column names (TensorBoard's text plugin shows it as a table; None is an empty cell)."""
        if not len(table):
            return
        columns = table.as_dict()
        rows = [list(K.SAMPLES_COLUMNS)]
        rows += [
            ["" if v is None else str(v) for v in values] for values in zip(*columns.values(), strict=True)
        ]
        self._add_text(K.SAMPLES_TABLE, rows, step)
        if self.flush:
            self._writer.flush()

    def finish(self, *, exit_code: int = 0) -> None:
        if self._writer is not None:
            self._writer.close()
