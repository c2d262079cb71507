"""``trainer_state.json`` through the run reader (:mod:`rlmetrics.readers.trainer_state`): a file, a TRL
output folder and its checkpoints, a stream; damaged forms are errors naming the file."""

from __future__ import annotations

import io
import json

import pytest

from rlmetrics.errors import RunReadError
from rlmetrics.readers import TRL_TRAINER_STATE, read_run

LOGS = [
    {"loss": 0.5, "reward": 0.1, "completion_length": 200.0, "step": 5},
    {"loss": 0.4, "reward": 0.3, "completion_length": 180.0, "step": 10},
    {"eval_loss": 0.45, "step": 10},
    {"train_runtime": 12.0, "step": 10},
]


def _state(logs=LOGS) -> str:
    return json.dumps({"global_step": 10, "log_history": logs}, indent=2)


@pytest.mark.parametrize("where", ["file", "output-dir", "checkpoint", "stream"])
def test_trainer_state_read(tmp_path, where):
    if where == "file":
        source = tmp_path / "trainer_state.json"
    elif where == "output-dir":
        source = tmp_path
    else:
        (tmp_path / "checkpoint-10").mkdir()
        source = tmp_path
    target = {"file": tmp_path / "trainer_state.json", "output-dir": tmp_path / "trainer_state.json"}.get(
        where, tmp_path / "checkpoint-10" / "trainer_state.json"
    )
    target.write_text(_state())
    run = read_run(io.BytesIO(_state().encode()) if where == "stream" else source)
    assert (run.format, run.n_steps) == (TRL_TRAINER_STATE, 2)
    assert run.series["reward"][0].tolist() == [5, 10] and run.series["eval_loss"][0].tolist() == [10]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{oops", r"trainer_state\.json'?: not JSON .*; expected a trainer_state\.json"),
        (
            '{"log_history": {"a": 1}}',
            r"with a 'log_history' list of dicts; got dict with keys \['log_history'\]",
        ),
        ('{"log_history": [1, 2]}', "list of dicts"),
        ('[{"loss": 1}]', "got list"),
        ('{"log_history": [{"note": "x"}]}', r"\(trl-trainer-state\): no numeric metric"),
    ],
    ids=["not-json", "not-a-list", "not-dicts", "not-a-dict", "no-numbers"],
)
def test_damaged_trainer_state_is_an_error(tmp_path, text, match):
    path = tmp_path / "trainer_state.json"
    path.write_text(text)
    with pytest.raises(RunReadError, match=match):
        read_run(path)
