"""CSV exports through the run reader (:mod:`rlmetrics.readers.csvlogs`): W&B, TensorBoard and MLflow
layouts, clean and damaged; a damaged row costs that row, with a warning naming its line."""

from __future__ import annotations

import csv
import io
import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.errors import RunReadWarning
from rlmetrics.health.sources import RunReadError, load_history
from rlmetrics.readers import CSV_EXPORT, read_run
from rlmetrics.readers.csvlogs import csv_export_records, is_csv_export, parse_csv_export

CLEAN = [
    ("wandb-panel", "run-1.csv", "Step,run-1 - reward,run-1 - reward__MIN\n1,0.1,0.0\n2,0.2,0.1\n"),
    ("tensorboard-scalar", "run-exp-tag-reward.csv", "Wall time,Step,Value\n1.7e9,1,0.1\n1.7e9,2,0.2\n"),
    ("mlflow-long", "history.csv", "key,value,step,timestamp\nreward,0.1,1,0\nreward,0.2,2,0\n"),
    ("pandas-to-csv", "h.csv", ",step,reward\n0,1,0.1\n1,2,0.2\n"),
]


@pytest.mark.parametrize(("name", "text"), [c[1:] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_clean_exports(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_run(path)
    assert (run.format, run.n_steps) == (CSV_EXPORT, 2)
    assert run.series["reward"][1].tolist() == [0.1, 0.2]


DAMAGED = [
    ("step-not-a-number", "step,reward\n1,0.1\nx,0.5\n3,0.3\n", [1, 3], [3]),
    ("step-not-whole", "step,reward\n1,0.1\n2.5,0.5\n3,0.3\n", [1, 3], [3]),
    ("long-row-cut", "key,value,step\nreward,0.1,1\nreward\nreward,0.3,3\n", [1, 3], [3]),
]


@pytest.mark.parametrize(("text", "steps", "lines"), [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_a_damaged_row_costs_that_row(tmp_path, text, steps, lines):
    path = tmp_path / "h.csv"
    path.write_text(text)
    with pytest.warns(
        RunReadWarning, match=rf"h\.csv: 1 damaged CSV record skipped \(2 read\), at line {lines[0]}:"
    ):
        run = read_run(path)
    assert run.steps.tolist() == steps
    assert csv_export_records(text)[1] == lines


# --- the parser and load_history ---------------------------------------------------------------

WANDB = (
    '"Step","exp-1 - train/reward","exp-1 - train/reward__MIN","exp-1 - train/reward__MAX",'
    '"exp-1 - train/kl"\n'
    '"1","0.5","0.4","0.6","0.01"\n'
    '"2","0.6","0.5","0.7",""\n'
    '"3","nan","","","0.03"\n'
)


@pytest.mark.parametrize(
    ("text", "name", "rows", "skipped"),
    [
        pytest.param(
            WANDB,
            "wandb_export",
            [
                {"step": 1, "train/reward": 0.5, "train/kl": 0.01},
                {"step": 2, "train/reward": 0.6},
                {"step": 3, "train/reward": math.nan, "train/kl": 0.03},
            ],
            0,
            id="wandb-panel",
        ),
        pytest.param(
            "Wall time,Step,Value\n1733000000.5,10,0.25\n1733000001.5,20,0.5\n",
            "run-grpo_seed0-tag-critic_score_mean",
            [{"step": 10, "critic_score_mean": 0.25}, {"step": 20, "critic_score_mean": 0.5}],
            0,
            id="tensorboard-scalar",
        ),
        pytest.param(
            "Wall time,Step,Value\n1.0,1,2.0\n",
            "entropy",
            [{"step": 1, "entropy": 2.0}],
            0,
            id="tensorboard-any-file-name",
        ),
        pytest.param(
            "key,value,step,timestamp\nloss,0.5,1,17\nreward,0.1,1,17\nloss,0.4,2,18\n",
            "mlflow",
            [{"step": 1, "loss": 0.5, "reward": 0.1}, {"step": 2, "loss": 0.4}],
            0,
            id="mlflow-long",
        ),
        pytest.param(
            "key,value,step\nby_src/a:2Fb/reward,0.5,1\nby_src/a_2Fb/reward,0.7,1\n",
            "mlflow",
            [{"step": 1, "by_src/a%2Fb/reward": 0.5, "by_src/a_2Fb/reward": 0.7}],
            0,
            id="mlflow-category-token-read-back",
        ),
        pytest.param(
            "step,by_src/x 20y/reward\n1,0.5\n",
            "mlflow-pandas-windows",
            [{"step": 1, "by_src/x%20y/reward": 0.5}],
            0,
            id="wide-category-token-read-back",
        ),
        pytest.param(
            "key,value,step\nloss,0.5,1\nloss,,2\nreward,abc,2\nreward,0.2,3\n",
            "mlflow-pandas",
            [{"step": 1, "loss": 0.5}, {"step": 2, "loss": math.nan}, {"step": 3, "reward": 0.2}],
            0,
            id="long-empty-value-is-nan-text-missing",
        ),
        pytest.param(
            "step\tactor/entropy\tcritic/score/mean\n1\t0.9\t0.1\n2\t0.8\t0.2\n",
            "pandas",
            [
                {"step": 1, "actor/entropy": 0.9, "critic/score/mean": 0.1},
                {"step": 2, "actor/entropy": 0.8, "critic/score/mean": 0.2},
            ],
            0,
            id="tab-separated",
        ),
        pytest.param(
            "_step,loss\n1,0.5\n1.5,0.4\n,0.3\nx,0.2\n3,inf\n\n",
            "damaged",
            [{"step": 1, "loss": 0.5}, {"step": 3, "loss": math.inf}],
            3,
            id="damaged-steps-skipped",
        ),
        pytest.param(
            "global_step,loss,note\n1,0.5,hello\n2,,\n",
            "words",
            [{"step": 1, "loss": 0.5}],
            0,
            id="non-numbers-are-missing",
        ),
    ],
)
def test_csv_exports_parse(text, name, rows, skipped):
    assert is_csv_export(text)
    got, bad = parse_csv_export(text, name=name)
    assert bad == skipped
    assert [
        {k: (str(v) if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in got
    ] == [{k: (str(v) if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]


@pytest.mark.parametrize(
    "text",
    ["step:1 - actor/entropy:0.4\n", "{'loss': 0.1}\n", "a,b\n1,2\n", "just words\n", ""],
    ids=["verl-console", "trl-dict", "no-step-column", "words", "empty"],
)
def test_other_text_is_not_a_csv_export(text):
    assert not is_csv_export(text)
    assert parse_csv_export(text) == ([], 0)


def test_load_history_reads_a_csv_export_by_content(tmp_path):
    path = tmp_path / "export.txt"  # the name says nothing: the content does
    path.write_text(WANDB)
    history, kind = load_history(path)
    assert kind == CSV_EXPORT
    assert history["train/kl"][0].tolist() == [1, 3] and history["train/reward"][1][:2].tolist() == [0.5, 0.6]


def test_damaged_rows_cost_one_warning(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("step,loss\n1,0.5\nbad,0.4\n2,0.3\n")
    with pytest.warns(RuntimeWarning, match=r"1 damaged CSV record skipped \(2 read\)"):
        history, _ = load_history(path)
    assert history["loss"][0].tolist() == [1, 2]


def test_a_csv_without_a_step_is_not_a_run(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(RunReadError, match=r"no text log was recognised.*CSV export"):
        load_history(path)


def _tensorboard_downloads(folder, run="grpo", tags=("critic_score_mean", "actor_entropy")):
    folder.mkdir(exist_ok=True)
    for i, tag in enumerate(tags):
        text = f"Wall time,Step,Value\n1.7e9,1,{i}.5\n1.7e9,2,nan\n"
        (folder / f"run-{run}-tag-{tag}.csv").write_text(text)
    return folder


def test_a_folder_of_tensorboard_downloads_is_one_run(tmp_path):
    folder = _tensorboard_downloads(tmp_path / "csv")
    run = read_run(folder)
    assert (run.format, run.path, run.n_steps) == (CSV_EXPORT, folder, 2)
    assert run.series["critic_score_mean"][1][0] == 0.5 and run.series["actor_entropy"][1][0] == 1.5
    (folder / "run-grpo-tag-loss.csv").write_text("Wall time,Step,Value\n1.7e9,1,0.1\nx,bad,0.2\n")
    with pytest.warns(RunReadWarning, match=r"run-grpo-tag-loss\.csv.*1 damaged CSV record skipped"):
        assert read_run(folder).series["loss"][0].tolist() == [1]


@pytest.mark.parametrize(
    ("other", "match"),
    [
        ("run-other-tag-actor_entropy.csv", r"the tag 'actor_entropy' of 'run-other-tag-actor_entropy\.csv'"),
        ("notes.csv", r"no run in this directory"),
    ],
    ids=["two-runs-one-tag", "another-csv-beside"],
)
def test_a_folder_of_downloads_that_is_not_one_run_is_an_error(tmp_path, other, match):
    folder = _tensorboard_downloads(tmp_path / "csv")
    tensorboard = other.startswith("run-")
    (folder / other).write_text("Wall time,Step,Value\n1.7e9,1,0.5\n" if tensorboard else "a,b\n1,2\n")
    with pytest.raises(RunReadError, match=match):
        read_run(folder)


finite = st.floats(allow_nan=False, allow_infinity=False, width=32)


@given(
    st.dictionaries(
        st.integers(0, 10**9), st.lists(st.one_of(finite, st.none()), min_size=3, max_size=3), max_size=30
    ),
    st.sampled_from(["wide", "wandb", "long"]),
)
@settings(max_examples=80, deadline=None)
def test_property_any_history_written_in_a_layout_reads_back(table, layout):
    keys = ["actor/entropy", "critic/score/mean", "loss"]
    out = io.StringIO()
    writer = csv.writer(out)
    if layout == "long":
        writer.writerow(["key", "value", "step"])
        for step, values in table.items():
            writer.writerows([k, repr(v), step] for k, v in zip(keys, values) if v is not None)
    else:
        prefix = "run-7 - " if layout == "wandb" else ""
        writer.writerow(
            ["Step", *(prefix + k for k in keys), *([prefix + keys[0] + "__MIN"] if prefix else [])]
        )
        for step, values in table.items():
            writer.writerow(
                [step, *("" if v is None else repr(v) for v in values), *(["0"] if prefix else [])]
            )
    rows, skipped = parse_csv_export(out.getvalue())
    expected = [
        {"step": s, **{k: v for k, v in zip(keys, values) if v is not None}}
        for s, values in sorted(table.items())
        if any(v is not None for v in values)
    ]
    assert skipped == 0 and rows == expected


def test_a_nan_loss_exported_by_pandas_as_an_empty_cell_is_found(tmp_path):
    """MLflow's history through pandas' to_csv: the NaN loss at step 6 is an empty cell."""
    from rlmetrics.health.rules import diagnose
    from rlmetrics.health.sources import load_history

    rows = [f"loss,{'' if s == 6 else 0.5 - s / 100},{s}" for s in range(1, 13)]
    path = tmp_path / "history.csv"
    path.write_text("key,value,step\n" + "\n".join(rows) + "\n")
    history, fmt = load_history(path)
    assert fmt == "csv-export"
    (finding,) = [f for f in diagnose(history).findings if f.kind == "nonfinite"]
    assert finding.step == 6 and finding.severity == "error"
