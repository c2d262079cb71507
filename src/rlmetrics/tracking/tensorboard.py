"""The ``tensorboard`` backend: TensorBoard event files (``tensorboard``'s own writer)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlmetrics.tracking._backend import MAX_STEP_INT64
from rlmetrics.tracking._values import _config_json


class _TensorBoardBackend:
    name = "tensorboard"
    max_step = MAX_STEP_INT64  # an event's step is an int64

    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise ImportError(
                "the tensorboard backend needs tensorboard: pip install 'rlmetrics[tensorboard]'"
            ) from None
        self._event_pb2, self._summary_pb2 = event_pb2, summary_pb2
        self.log_dir = run_dir / "tensorboard"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.log_dir))
        if config:
            self._add_text("config", "```\n" + _config_json(config) + "\n```", step=0)
            self._writer.flush()

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
        self._writer.flush()

    def finish(self) -> None:
        self._writer.close()
