"""rlmetrics.health.watch: the refresh of growing runs, new findings once."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from planted_runs import append, healthy_run, plant, row, to_rows
from rlmetrics import keys as K
from rlmetrics.health.findings import Finding
from rlmetrics.health.rules import diagnose
from rlmetrics.health.watch import Watcher, at_least, key_values, run_finished
from rlmetrics.readers import read_run


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


# --- health.watch ------------------------------------------------------------------------------


def test_watcher_waits_for_a_run_then_follows_it(tmp_path):
    p = tmp_path / "exp1" / "metrics.jsonl"
    clock = Clock()
    w = Watcher([p.parent], clock=clock)
    assert w.poll() == [] and w.runs[0].status == "waiting" and "no such file" in w.runs[0].problem
    p.parent.mkdir()
    append(p, *(row(s) for s in range(5)))
    clock.now = 1.0
    assert w.poll() == []
    run = w.runs[0]
    assert (run.status, run.format, run.last_step, run.problem) == ("following", "rlmetrics-jsonl", 4, None)
    assert run.offset == p.stat().st_size and run.last_growth == 1.0
    assert run.values == {"reward": 0.2, "kl_ref": None, "entropy": 0.5, "response_length": None}


def test_watcher_reports_a_new_finding_once_and_again_when_it_gets_worse(tmp_path, monkeypatch):
    p = tmp_path / "metrics.jsonl"
    append(p, *(row(s) for s in range(5)))
    w = Watcher([p], names=["exp1"])
    assert w.poll() == []
    append(p, row(5, loss=float("nan")))
    new = w.poll()
    assert [(n.run.name, n.finding.kind, n.finding.severity, n.finding.step) for n in new] == [
        ("exp1", "nonfinite", "error", 5)
    ]
    append(p, row(6, loss=float("nan")))
    assert w.poll() == []  # the same kind at the same severity: not new
    assert w.runs[0].last_step == 6 and w.runs[0].history[K.ACTOR_PG_LOSS][0].tolist() == list(range(7))


def test_watcher_reports_an_escalation(tmp_path, monkeypatch):
    import rlmetrics.health.rules as rules
    from rlmetrics.health.findings import Diagnosis

    severities = iter(["warning", "warning", "error"])

    def fake(history, **kwargs):
        return Diagnosis((Finding("grad_spike", next(severities), 1, ("g",)),))

    monkeypatch.setattr(rules, "diagnose", fake)
    p = tmp_path / "metrics.jsonl"
    w = Watcher([p])
    got = []
    for s in range(3):
        append(p, row(s))
        got.append([n.finding.severity for n in w.poll()])
    assert got == [["warning"], [], ["error"]]


def test_watcher_reads_only_what_changed(tmp_path, monkeypatch):
    import rlmetrics.health.watch as watch

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append(a, row(1))
    append(b, row(1))
    w = Watcher([a, b])
    w.poll()
    calls = []
    real = watch.read_tail
    monkeypatch.setattr(
        watch, "read_tail", lambda path, *args, **kw: calls.append(path.name) or real(path, *args, **kw)
    )
    w.poll()
    assert calls == []  # nothing changed: a stat each, no read
    append(b, row(2))
    w.poll()
    assert calls == ["b.jsonl"]


def test_watcher_budget_leaves_runs_for_the_next_poll(tmp_path):
    paths = [tmp_path / f"r{i}.jsonl" for i in range(3)]
    for p in paths:
        append(p, row(1))
    w = Watcher(paths)
    w.poll(budget=0.0)  # at least one run per poll
    assert w.pending == 2 and [r.status for r in w.runs].count("following") == 1
    w.poll(budget=0.0)
    w.poll(budget=0.0)
    assert w.pending == 0 and all(r.status == "following" for r in w.runs)


def test_watcher_rereads_a_rewritten_file_whole(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, *(row(s) for s in range(10)))
    w = Watcher([p])
    w.poll()
    p.write_text(json.dumps(row(20)) + "\n")  # shorter: truncated and rewritten
    w.poll()
    assert w.runs[0].history[K.ACTOR_PG_LOSS][0].tolist() == [20]


def test_watcher_follows_a_console_log_and_sees_verl_finish(tmp_path):
    log = tmp_path / "nohup.out"
    log.write_text(
        "".join(f"(TaskRunner pid=7) step:{s} - actor/pg_loss:0.1 - actor/entropy:0.5\n" for s in range(1, 4))
    )
    w = Watcher([log])
    w.poll()
    assert (w.runs[0].format, w.runs[0].last_step, w.runs[0].status) == ("verl-console", 3, "following")
    with open(log, "a") as fh:
        fh.write("(TaskRunner pid=7) step:4 - actor/pg_loss:0.1 - actor/entropy:0.5\n")
        fh.write("(TaskRunner pid=7) 'Final validation metrics: {}'\n")
    w.poll()
    assert w.runs[0].status == "finished" and w.ended()


def test_watcher_sees_trl_finish(tmp_path):
    log = tmp_path / "train.log"
    lines = [f"{{'loss': 0.5, 'reward': 0.{s}, 'epoch': 0.{s}}}" for s in range(1, 4)]
    log.write_text("\n".join(lines) + "\n")
    w = Watcher([log])
    w.poll()
    assert (w.runs[0].status, w.runs[0].last_step) == ("following", 3)
    with open(log, "a") as fh:  # the summary, no step of its own
        fh.write("{'train_runtime': 31.5, 'train_loss': 0.4, 'epoch': 0.4}\n")
    w.poll()
    assert w.runs[0].status == "finished"


@pytest.mark.parametrize("given", ["folder", "file"])
def test_watcher_sees_a_tracker_finish_and_a_resume_undoes_it(tmp_path, given):
    from rlmetrics.readers.jsonl import run_end
    from rlmetrics.tracking import Tracker

    tr = Tracker("p", "e", log_dir=tmp_path)
    for s in range(3):
        tr.log({K.SCORE_MEAN: 0.1 * s}, step=s)
    w = Watcher([tr.run_dir if given == "folder" else tr.jsonl_path])
    w.poll()
    assert (w.runs[0].status, w.runs[0].last_step) == ("following", 2)
    assert run_end(tr.jsonl_path) is None
    tr.finish(exit_code=1)
    w.poll()  # the end file alone changed: the run is looked at again
    assert w.runs[0].status == "finished" and w.ended()
    end = run_end(tr.jsonl_path)
    assert end is not None and (end["exit_code"], end["last_step"]) == (1, 2)
    again = Tracker("p", "e", log_dir=tmp_path, resume=True)
    assert again.run_dir == tr.run_dir and run_end(tr.jsonl_path) is None
    again.finish()


def test_a_cut_end_file_still_marks_the_end(tmp_path):
    from rlmetrics.readers.jsonl import RUN_END_FILE, run_end

    (tmp_path / RUN_END_FILE).write_text('{"exit_co')
    assert run_end(tmp_path / "metrics.jsonl") == {}


def test_watcher_fails_a_rollout_dump(tmp_path):
    dump = tmp_path / "0.jsonl"
    append(dump, {"input": "q", "output": "a", "score": 1.0, "step": 0})
    w = Watcher([dump])
    w.poll()
    assert w.runs[0].status == "failed" and "rollout dump" in w.runs[0].problem
    assert w.ended()


def test_watcher_ends_on_idle(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, row(1))
    clock = Clock()
    w = Watcher([p], clock=clock)
    w.poll()
    clock.now = 9.0
    assert not w.ended(idle=10.0) and not w.ended()
    clock.now = 10.0
    assert w.ended(idle=10.0)


def test_watcher_warnings_are_kept_not_raised(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, row(1), raw="{torn\n")
    append(p, row(2))
    w = Watcher([p])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w.poll()
    assert any("unreadable line" in m for m in w.runs[0].warnings)


def test_watcher_names_must_match_sources(tmp_path):
    with pytest.raises(ValueError, match="names: expected one per source"):
        Watcher([tmp_path / "a"], names=["a", "b"])


def test_key_values_last_finite_of_each_signal():
    h = {
        K.SCORE_MEAN: (np.array([1, 2, 3]), np.array([0.1, 0.2, np.nan])),
        "kl": (np.array([1]), np.array([0.05])),
    }
    assert key_values(h) == {"reward": 0.2, "kl_ref": 0.05, "entropy": None, "response_length": None}
    own = {"my_reward": (np.array([1]), np.array([0.7]))}
    assert key_values(own, signals={"reward": "my_reward"})["reward"] == 0.7
    assert key_values(own, signals={"reward": "not_logged_yet"})["reward"] is None


@pytest.mark.parametrize(
    ("fmt", "keys", "finished"),
    [
        ("trl-printed", ["train_runtime"], True),
        ("tensorboard", ["train/train_runtime"], True),
        ("rlmetrics-jsonl", ["actor/entropy"], False),
        ("verl-console", ["actor/entropy"], False),
    ],
    ids=["trl-printed", "trl-tensorboard", "rlmetrics", "verl-without-target"],
)
def test_run_finished(fmt, keys, finished):
    h = {k: (np.array([1]), np.array([1.0])) for k in keys}
    assert run_finished(fmt, h) is finished


@pytest.mark.parametrize(
    ("severity", "level", "expected"),
    [
        ("error", "error", True),
        ("error", "warning", True),
        ("warning", "warning", True),
        ("warning", "error", False),
    ],
    ids=["error-error", "error-warning", "warning-warning", "warning-error"],
)
def test_at_least(severity, level, expected):
    assert at_least(Finding("k", severity, 1, ()), level) is expected


def test_at_least_unknown_level():
    with pytest.raises(ValueError, match="severity must be one of"):
        at_least(Finding("k", "error", 1, ()), "fatal")


def test_watcher_follows_a_tensorboard_folder(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    for s in range(1, 6):
        writer.add_scalar(K.ACTOR_PG_LOSS, 0.1, s)
    writer.flush()
    w = Watcher([tmp_path / "tb"], names=["tb"])
    assert w.poll() == []
    assert (w.runs[0].format, w.runs[0].last_step) == ("tensorboard", 5)
    writer.add_scalar(K.ACTOR_PG_LOSS, float("nan"), 6)
    writer.flush()
    new = w.poll()
    writer.close()
    assert [(n.finding.kind, n.finding.step) for n in new] == [("nonfinite", 6)]


# --- a refresh diagnoses over the new points only, with the findings of a fresh diagnosis -------

WATCHED_PLANTS = [None, "nonfinite", "kl_drift", "grad_spike", "entropy_collapse", "reward_gaming"]


@pytest.mark.parametrize("seed", [0, 3], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("kind", WATCHED_PLANTS, ids=lambda k: k or "healthy")
def test_a_refresh_gives_the_findings_of_a_fresh_diagnosis(tmp_path, kind, seed):
    run = healthy_run(240, seed=seed)
    rows = to_rows(plant(run, kind, 150, seed=seed) if kind is not None else run)
    p = tmp_path / "metrics.jsonl"
    rng = np.random.default_rng(seed)
    cuts = np.unique(np.concatenate([[80], 80 + np.cumsum(rng.integers(1, 8, 40)), [len(rows)]]))
    cuts = cuts[cuts <= len(rows)]
    w = Watcher([p])
    done, reported = 0, []
    for c in cuts:
        append(p, *rows[done:c])
        done = c
        reported += [n.finding.kind for n in w.poll()]
        state = w.runs[0]
        assert state.last_step == rows[c - 1][K.TRACKING_STEP]
        assert state.diagnosis == diagnose(state.history)  # the same Findings, evidence and all
        whole = read_run(p).series  # the history grown in its buffers is the file read whole
        assert sorted(whole) == sorted(state.history)
        for key, (s, v) in whole.items():
            assert s.tobytes() == state.history[key][0].tobytes()
            assert v.tobytes() == state.history[key][1].tobytes()
    assert state.cache.extended > 0 and len(state.cache) > 0
    assert kind is None or kind in reported


def test_a_refresh_of_a_rewritten_run_gives_the_findings_of_a_fresh_diagnosis(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, *to_rows(healthy_run(200, seed=1)))
    w = Watcher([p])
    w.poll()
    p.write_text("")  # the run restarted under the same name, with another seed and a failure
    rows = to_rows(plant(healthy_run(220, seed=2), "grad_spike", 150, seed=2))
    append(p, *rows)
    w.poll()
    assert w.runs[0].last_step == 219 and w.runs[0].diagnosis == diagnose(w.runs[0].history)
    append(p, *to_rows(healthy_run(230, seed=2))[220:])
    w.poll()
    assert w.runs[0].diagnosis == diagnose(w.runs[0].history)
