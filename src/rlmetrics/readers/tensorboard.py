"""TensorBoard event files (verl's and TRL's ``tensorboard`` loggers): every scalar of one log directory.

Read with TensorBoard's own reader (``pip install 'rlmetrics[tensorboard]'``), imported when a
run is read. Every event is kept (no per-tag sampling); TF2's ``tf.summary.scalar`` tensors are
read as scalars.
"""

from __future__ import annotations

import numpy as np

from rlmetrics.errors import RunReadError
from rlmetrics.readers._history import as_history
from rlmetrics.readers._run import Notes, Parsed, Source

__all__ = ["EVENTS_GLOB", "TENSORBOARD", "read_tensorboard"]

TENSORBOARD = "tensorboard"
#: The names of TensorBoard's event files.
EVENTS_GLOB = "events.out.tfevents.*"


def read_tensorboard(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """The scalars of the event file or log directory ``src``."""
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
    except ImportError:
        raise ImportError(
            f"reading the TensorBoard log {src.name!r} needs tensorboard: "
            "pip install 'rlmetrics[tensorboard]'"
        ) from None
    # 0 = keep every event (the default keeps 10,000 scalars per tag, sampled); 1 for the
    # kinds not read, so images and histograms do not fill memory
    guidance = {ea.SCALARS: 0, ea.TENSORS: 0, ea.IMAGES: 1, ea.AUDIO: 1, ea.HISTOGRAMS: 1}
    guidance[ea.COMPRESSED_HISTOGRAMS] = 1
    acc = ea.EventAccumulator(src.name, size_guidance=guidance)
    try:
        acc.Reload()
    except Exception as err:  # a corrupt file: TensorBoard's reader raises its own errors
        raise RunReadError(f"{src.name!r}: TensorBoard could not read the event file(s): {err}") from None
    tags = acc.Tags()
    series: dict[str, tuple[list[int], list[float]]] = {}
    for tag in tags.get(ea.SCALARS, []):
        events = acc.Scalars(tag)
        series[tag] = ([e.step for e in events], [e.value for e in events])
    for tag in tags.get(ea.TENSORS, []):
        # tf.summary.scalar (TF2) writes scalars as tensors of the "scalars" plugin
        if tag not in series and acc.SummaryMetadata(tag).plugin_data.plugin_name == "scalars":
            found = _tensor_scalars(acc.Tensors(tag))
            if found[0]:
                series[tag] = found
    arrays = {k: (np.asarray(s, np.int64), np.asarray(v, np.float64)) for k, (s, v) in series.items()}
    return Parsed(as_history(arrays))


def _tensor_scalars(events: list[object]) -> tuple[list[int], list[float]]:
    """The steps and values of the one-number tensors among ``events``."""
    from tensorboard.util import tensor_util

    steps, values = [], []
    for e in events:
        arr = tensor_util.make_ndarray(e.tensor_proto)  # type: ignore[attr-defined]
        if arr.size == 1 and arr.dtype.kind in "fiu":
            steps.append(e.step)  # type: ignore[attr-defined]
            values.append(float(arr.reshape(())))
    return steps, values
