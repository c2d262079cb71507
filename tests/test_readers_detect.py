"""How :func:`rlmetrics.readers.read_run` finds the run and its format (rlmetrics.readers.detect): a file
told by its content whatever its name, a run folder searched, a missing path."""

from __future__ import annotations

import json

import pytest

from planted_runs import FORMAT_LOGS, check_two_steps
from rlmetrics.errors import RunReadError
from rlmetrics.readers import TRL_TRAINER_STATE, read_run


@pytest.mark.parametrize(("data", "kind"), [c[1:] for c in FORMAT_LOGS], ids=[c[0] for c in FORMAT_LOGS])
def test_a_file_is_told_by_content_whatever_its_name(tmp_path, data, kind):
    path = tmp_path / "whatever.log"
    path.write_bytes(data)
    run = read_run(path)
    check_two_steps(run, kind)
    assert run.path == path and run.warnings == ()


def test_a_run_folder_is_searched(tmp_path):
    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-10").mkdir()
    history = [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]
    (tmp_path / "checkpoint-5" / "trainer_state.json").write_text(json.dumps({"log_history": history[:1]}))
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    run = read_run(tmp_path)
    check_two_steps(run, TRL_TRAINER_STATE)
    assert run.path == tmp_path / "checkpoint-10" / "trainer_state.json"


def test_a_missing_path_says_what_was_expected(tmp_path):
    with pytest.raises(
        RunReadError, match=r"nope'?: no such file or directory; expected a rlmetrics metrics\.jsonl"
    ):
        read_run(tmp_path / "nope")
