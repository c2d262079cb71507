"""rlmetrics.errors: one base exception, one warning category per kind, used by every layer."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import rlmetrics
from rlmetrics import errors
from rlmetrics.errors import (
    DumpError,
    HealthWarning,
    RLMetricsError,
    RLMetricsWarning,
    RunReadError,
    RunReadWarning,
    TrackingWarning,
    UndefinedMetricWarning,
    ValidationDumpError,
)


@pytest.mark.parametrize(
    ("error", "builtin"),
    [(RunReadError, ValueError), (ValidationDumpError, RunReadError), (DumpError, ValueError)],
    ids=["run-read", "validation-dump", "dump"],
)
def test_every_error_is_an_rlmetrics_error_and_what_callers_catch_today(error, builtin):
    assert issubclass(error, RLMetricsError) and issubclass(error, builtin)


@pytest.mark.parametrize(
    "category",
    [UndefinedMetricWarning, TrackingWarning, HealthWarning, RunReadWarning],
    ids=["undefined", "tracking", "health", "run-read"],
)
def test_every_warning_is_an_rlmetrics_warning_and_a_runtime_warning(category):
    assert issubclass(category, RLMetricsWarning) and issubclass(category, RuntimeWarning)


def test_the_old_names_are_the_same_classes():
    from rlmetrics.health.sources import RunReadError as from_sources
    from rlmetrics.report import ValidationDumpError as from_report
    from rlmetrics.validation.dumps import DumpError as from_dumps
    from rlmetrics.validation.dumps import ValidateInputError

    assert from_dumps is ValidateInputError is DumpError
    assert from_report is ValidationDumpError
    assert from_sources is RunReadError
    assert (
        rlmetrics.RLMetricsError is RLMetricsError
        and rlmetrics.UndefinedMetricWarning is UndefinedMetricWarning
    )
    assert sorted(errors.__all__) == errors.__all__


def _aborted_batch():
    """Two samples whose responses are empty (aborted): the token statistics are undefined."""
    z = np.zeros((2, 3), dtype=np.float32)
    return {
        "token_level_scores": z,
        "token_level_rewards": z,
        "advantages": z,
        "returns": z,
        "response_mask": z,
        "attention_mask": np.concatenate([np.ones((2, 2)), np.zeros((2, 3))], axis=1),
        "prompts": np.zeros((2, 2)),
        "responses": np.zeros((2, 3)),
    }


@pytest.mark.parametrize(
    "undefined",
    [
        lambda: rlmetrics.compute_data_metrics(_aborted_batch(), use_critic=False),
        lambda: rlmetrics.pass_at_k(2, 1, 3),
        lambda: rlmetrics.reduce_metrics({"actor/x": []}),
        lambda: rlmetrics.maj_at_k(["a"], [1.0], 2),
    ],
    ids=["aborted-batch", "pass-at-k-above-n", "no-values", "maj-at-k-above-n"],
)
def test_undefined_metrics_warn_in_their_own_category(undefined):
    with pytest.warns(UndefinedMetricWarning):
        undefined()


def test_undefined_metric_warnings_can_be_silenced_alone():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        rlmetrics.pass_at_k(2, 1, 3)
        np.log(np.zeros(1))  # numpy's own RuntimeWarning still shows
    assert [w.category for w in seen] == [RuntimeWarning]


def test_tracker_and_reader_warnings(tmp_path):
    with rlmetrics.Tracker("p", "e", backends=("jsonl",), log_dir=tmp_path) as first:
        first.log({"a/x": 1.0}, step=1)
    with pytest.warns(TrackingWarning, match="exists: this run is 'e-2'"):
        with rlmetrics.Tracker("p", "e", backends=("jsonl",), log_dir=tmp_path) as second:
            with pytest.warns(TrackingWarning, match=r"metrics\['a/y'\] is dropped"):
                second.log({"a/x": 1.0, "a/y": 10**400}, step=1)
    path = first.run_dir / "metrics.jsonl"
    with open(path, "a") as fh:
        fh.write(json.dumps({"step": 1, "a/x": 2.0}) + "\n" + '{"step": 2, "a/')
    with pytest.warns(RunReadWarning) as seen:
        rlmetrics.read_jsonl(path)
    assert {str(w.message).split(": ", 1)[1][:8] for w in seen} >= {"skipping"}


def test_health_findings_warn_in_their_own_category(tmp_path):
    monitor = rlmetrics.HealthMonitor(budget=None)
    with pytest.warns(HealthWarning, match="rlmetrics health: nonfinite"):
        with rlmetrics.Tracker("p", "h", backends=("jsonl",), log_dir=tmp_path, monitor=monitor) as tracker:
            for step in range(1, 12):
                tracker.log({"actor/pg_loss": float("nan") if step == 5 else 0.1}, step=step)


def test_run_stopped_survives_pickling_with_its_message_and_finding():
    import pickle

    from rlmetrics.errors import RunStopped
    from rlmetrics.health.findings import Finding

    finding = Finding("nonfinite", "error", 7, ("actor/pg_loss",), {}, "Lower the learning rate.")
    err = RunStopped(finding, action="stop", step=9, findings=[finding])
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is RunStopped and str(back) == str(err) and back.args == err.args
    assert (back.finding, back.action, back.step, back.findings) == (finding, "stop", 9, (finding,))


def test_run_stopped_carries_its_finding_and_is_caught_by_nothing_built_in():
    from rlmetrics.errors import RunStopped
    from rlmetrics.health.findings import Finding

    finding = Finding("nonfinite", "error", 7, ("actor/pg_loss",), {}, "Lower the learning rate.")
    err = RunStopped(finding, action="stop", step=9, findings=[finding])
    assert isinstance(err, RLMetricsError) and not isinstance(err, ValueError | RuntimeError | TypeError)
    assert (err.finding, err.action, err.step, err.findings) == (finding, "stop", 9, (finding,))
    with pytest.raises(
        RLMetricsError,
        match=r"^rlmetrics health: run stopped at step 9 on nonfinite \(error\) "
        r"from step 7: Lower the learning rate\.$",
    ):
        raise err
