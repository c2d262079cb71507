"""Tests of rlmetrics.tracking.mlflow: key mapping, params and metrics read back by MLflow's client."""

from __future__ import annotations

import hashlib
import math
import warnings

import pytest

from rlmetrics.tracking import Tracker, mlflow_key
from tracking_doubles import CONFIG, STEPS, log_all

# --- mlflow (one test: its import and sqlite set-up are slow) ---------------------------------


# keys MLflow refuses as they are, and the names they get (mlflow_key's documented mapping)
MLFLOW_ODD_KEYS = {
    "a//b": "a/_/b",
    "/lead": "_/lead",
    "trail/": "trail/_",
    "a/../b": "a/__/b",
    "..up": "_.up",
    "": "_",
    "sp ace:colon": "sp ace:colon",
    "what?": "what_",
}


def test_mlflow_key_mapping_is_legal_and_stable():
    pytest.importorskip("mlflow")
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name

    long = "x/" * 200
    for key, name in {**MLFLOW_ODD_KEYS, long: mlflow_key(long)}.items():
        assert mlflow_key(key) == name
        _validate_metric_name(name)  # MLflow's own checks: raise if illegal
        _validate_param_name(name)
        assert len(name) <= 250
    name = mlflow_key(long)
    assert len(name) == 250 and name.startswith("x/x/") and name[241] == "-"
    assert name != mlflow_key(long + "y") and mlflow_key(long + "y")[:241] == name[:241]  # the hash tells


def test_mlflow_round_trip_and_failed_status(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    config = {**CONFIG, "prompt": "x" * 7000}
    with pytest.warns(
        RuntimeWarning, match=r"param 'prompt': its value of 7000 characters is cut to MLflow's 6000"
    ):
        tr = Tracker("p", "e", backends=("mlflow",), config=config, log_dir=tmp_path)
    long_a, long_b = "k" * 300 + "a", "k" * 300 + "b"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log_all(tr)
        tr.log({"nan": float("nan")}, step=6)
        tr.log({**dict.fromkeys(MLFLOW_ODD_KEYS, 1.0), long_a: 2.0, long_b: 3.0}, step=7)
        tr.log({"what!": 4.0}, step=8)  # maps to 'what_', which 'what?' took
        tr.log({"critic/score/mean": 5.0}, step=2**63)  # beyond MLflow's int64 step
        tr.log({"critic/score/mean": 6.0}, step=9)
        tr.finish()
    messages = [str(w.message) for w in caught]
    assert sum("is over MLflow's 250 characters" in m for m in messages) == 2
    (taken,) = [m for m in messages if "what!" in m]
    assert taken == (
        f"tracking backend 'mlflow', step 8: key 'what!' maps to the MLflow name 'what_' of key 'what?': "
        f"logged as 'what_-{hashlib.sha256(b'what!').hexdigest()[:8]}'"
    )
    assert any("'mlflow' lost the record of step 9223372036854775808" in m for m in messages)
    backend = tr.backends["mlflow"]
    client = MlflowClient(tracking_uri=backend.tracking_uri)
    run = client.get_run(backend.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "e"
    assert run.data.params == {
        "trainer.total_epochs": "3",
        "trainer.project": "p",
        "actor.lr": "1e-06",
        "prompt": "x" * 6000,
    }
    for key in STEPS[1]:
        hist = client.get_metric_history(backend.run_id, mlflow_key(key))
        want = [(s, STEPS[s][key]) for s in STEPS] + ([(9, 6.0)] if key == "critic/score/mean" else [])
        assert sorted((m.step, m.value) for m in hist) == want
    (nan,) = client.get_metric_history(backend.run_id, "nan")
    assert math.isnan(nan.value)
    for key, name in MLFLOW_ODD_KEYS.items():  # every odd key stored, under its documented name
        assert [(m.step, m.value) for m in client.get_metric_history(backend.run_id, name)] == [(7, 1.0)], key
    for key, value in ((long_a, 2.0), (long_b, 3.0)):
        assert [m.value for m in client.get_metric_history(backend.run_id, mlflow_key(key))] == [value]
    assert mlflow_key(long_a) != mlflow_key(long_b)
    what = [m for m in run.data.metrics if m.startswith("what_-")]
    assert len(what) == 1 and run.data.metrics[what[0]] == 4.0
    # An exception inside the with-block marks the run failed (same store, a second run).
    with pytest.raises(KeyError), Tracker("p", "e2", backends=("mlflow",), log_dir=tmp_path) as tr2:
        raise KeyError("boom")
    assert client.get_run(tr2.backends["mlflow"].run_id).info.status == "FAILED"
    # resume=True continues the same MLflow run; the default takes a new run name
    with Tracker("p", "e", backends=("mlflow",), config=CONFIG, log_dir=tmp_path, resume=True) as tr3:
        tr3.log({"critic/score/mean": 7.0}, step=10)
    assert tr3.backends["mlflow"].run_id == backend.run_id
    hist = client.get_metric_history(backend.run_id, mlflow_key("critic/score/mean"))
    assert sorted(m.step for m in hist)[-2:] == [9, 10]
    assert client.get_run(backend.run_id).info.status == "FINISHED"
    with pytest.warns(RuntimeWarning, match="exists: this run is 'e-2'"):
        tr4 = Tracker("p", "e", backends=("mlflow",), log_dir=tmp_path)
    tr4.finish()
    assert tr4.backends["mlflow"].run_id != backend.run_id
    assert client.get_run(tr4.backends["mlflow"].run_id).info.run_name == "e-2"
    # a name MLflow still refuses (here forced through a broken mapping) drops that key alone
    import rlmetrics.tracking.mlflow as tracking_mlflow

    real = tracking_mlflow.mlflow_key
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tracking_mlflow, "mlflow_key", lambda key: "bad//name" if key == "bad" else real(key))
        with Tracker("p", "e3", backends=("mlflow",), log_dir=tmp_path) as tr5:
            with pytest.warns(
                RuntimeWarning, match=r"'mlflow', step 0: key 'bad' dropped: MLflow refuses it"
            ):
                tr5.log({"good": 1.0, "bad": 2.0, "also/good": 3.0}, step=0)
    assert client.get_run(tr5.backends["mlflow"].run_id).data.metrics == {"good": 1.0, "also/good": 3.0}


def _categories_of(plain: str, group: str, categories: list[str]) -> list[str]:
    from rlmetrics import keys as K

    return [K.category_key(plain, group, c) for c in categories]


#: Categories whose key tokens MLflow's "%" -> "_" would merge: "a/b" (a%2Fb) and "a_2Fb", "a:b"
#: (a%3Ab) and "a_3Ab"; the reserved tokens; a category with a space and a non-ASCII one.
COLLIDING_CATEGORIES = ["a/b", "a_2Fb", "a:b", "a_3Ab", "", "<other>", "x y", "é"]


def test_mlflow_category_keys_stay_distinct_and_read_back_through_mlflows_client(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from rlmetrics.errors import TrackingWarning
    from rlmetrics.readers import read_run

    wanted = [*_categories_of("critic/score/mean", "data_source", COLLIDING_CATEGORIES), "critic/score/mean"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrackingWarning)  # no collision to report: the names are injective
        with Tracker("p", "cats", backends=("mlflow",), log_dir=tmp_path) as tr:
            for step in (1, 2):
                tr.log({k: 10.0 * step + i for i, k in enumerate(wanted)}, step=step)
    backend = tr.backends["mlflow"]
    client = MlflowClient(tracking_uri=backend.tracking_uri)
    names = sorted(client.get_run(backend.run_id).data.metrics)
    assert len(names) == len(wanted) and names == sorted(mlflow_key(k) for k in wanted)
    # MLflow's own history, exported as its long CSV, reads back under the original keys
    lines = ["key,value,step,timestamp"]
    for name in names:
        lines += [
            f'"{name}",{m.value!r},{m.step},{m.timestamp}'
            for m in client.get_metric_history(backend.run_id, name)
        ]
    path = tmp_path / "history.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = read_run(path)
    assert sorted(run.series) == sorted(wanted)
    for i, key in enumerate(wanted):
        steps, values = run.series[key]
        assert list(steps) == [1, 2] and list(values) == [10.0 + i, 20.0 + i], key


def test_mlflow_keys_that_still_share_a_name_get_distinct_deterministic_names_with_a_warning(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from rlmetrics.errors import TrackingWarning

    first_hash = f"x_y-{hashlib.sha256(b'x%y').hexdigest()[:8]}"
    # "x%y" maps to "x_y" (a plain key: MLflow's "_"), taken; its hashed name is taken too
    logged = {"x_y": 1.0, first_hash: 2.0, "x%y": 3.0, "x@y": 4.0, "x_at_y": 5.0}
    runs = []
    for name in ("one", "two"):
        with (
            pytest.warns(TrackingWarning) as caught,
            Tracker("p", name, backends=("mlflow",), log_dir=tmp_path) as tr,
        ):
            tr.log(logged, step=0)
        messages = [str(w.message) for w in caught]
        assert any("key 'x%y' maps to the MLflow name 'x_y' of key 'x_y'" in m for m in messages)
        assert any("key 'x_at_y' maps to the MLflow name 'x_at_y' of key 'x@y'" in m for m in messages)
        backend = tr.backends["mlflow"]
        metrics = MlflowClient(tracking_uri=backend.tracking_uri).get_run(backend.run_id).data.metrics
        assert len(metrics) == len(logged) and sorted(metrics.values()) == sorted(logged.values())
        assert metrics["x_y"] == 1.0 and metrics[first_hash] == 2.0 and metrics["x_at_y"] == 4.0
        runs.append(metrics)
    assert runs[0] == runs[1]  # the same keys in the same order: the same names
