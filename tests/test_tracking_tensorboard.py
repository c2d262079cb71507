"""Tests of rlmetrics.tracking.tensorboard: event files read back by TensorBoard's own reader."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlmetrics.tracking import Tracker
from tracking_doubles import CONFIG, STEPS, log_all

# --- tensorboard -------------------------------------------------------------------------------


def test_tensorboard_round_trip(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with Tracker("p", "e", backends=("tensorboard",), config=CONFIG, log_dir=tmp_path) as tr:
        log_all(tr)
        tr.log({"nan": float("nan")}, step=6)
        # beyond an event's int64 step: that record is lost for TensorBoard, the next one is kept
        with pytest.warns(
            RuntimeWarning,
            match=r"'tensorboard' lost the record of step 9223372036854775808.*"
            r"beyond its step range \(0 to 9223372036854775807\)",
        ):
            tr.log({"critic/score/mean": 9.0}, step=2**63)
        tr.log({np.str_("np-key"): 1.5, "critic/score/mean": 2.0}, step=2**63 - 1)
    assert tr.lost == {"tensorboard": 1}
    acc = EventAccumulator(str(tr.run_dir / "tensorboard"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("np-key")] == [(2**63 - 1, 1.5)]
    assert [e.step for e in acc.Scalars("critic/score/mean")] == [*STEPS, 2**63 - 1]
    for key in STEPS[1]:
        events = acc.Scalars(key)[: len(STEPS)]
        assert [e.step for e in events] == list(STEPS)
        want = np.array([STEPS[s][key] for s in STEPS], dtype=np.float32)  # simple_value is float32
        np.testing.assert_array_equal(np.array([e.value for e in events], dtype=np.float32), want)
    assert math.isnan(acc.Scalars("nan")[0].value)
    (text,) = acc.Tensors("config")
    assert json.loads(text.tensor_proto.string_val[0].decode().strip("`\n")) == CONFIG
