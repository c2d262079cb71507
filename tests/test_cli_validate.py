"""``rlmetrics validate`` through typer's CliRunner: good files, bad files, outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app
from rlmetrics.validation.summary import summarize_validation

runner = CliRunner()


def rollouts(seed: int = 0, n_prompts: int = 12, n: int = 4):
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        for _ in range(n):
            pred = str(int(rng.integers(0, 3)))
            acc = pred == "0"
            rows.append(
                {
                    "input": f"question {p}",
                    "output": f"answer {pred}",
                    "gts": "0",
                    "score": float(acc),
                    "step": 7,
                    "acc": acc,
                    "pred": pred,
                    "data_source": "gsm8k" if p % 3 else "math",
                }
            )
    return rows


def write_jsonl(path: Path, rows, extra_lines=()):
    with path.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        for line in extra_lines:
            fh.write(line + "\n")
    return path


def run(*args):
    return runner.invoke(app, ["validate", *map(str, args)])


def test_jsonl_summary_json_matches_library(tmp_path):
    rows = rollouts()
    src = write_jsonl(tmp_path / "0.jsonl", rows)
    out = tmp_path / "summary.json"
    res = run(src, "--json", out, "-k", 1, "-k", 2, "-k", 4)
    assert res.exit_code == 0, res.output
    assert "gsm8k / acc" in res.output and "pass@k" in res.output and "maj@k" in res.output
    payload = json.loads(out.read_text())
    want = summarize_validation(
        [r["data_source"] for r in rows],
        [r["input"] for r in rows],
        {
            "score": [r["score"] for r in rows],
            "acc": [r["acc"] for r in rows],
            "pred": [r["pred"] for r in rows],
        },
        ks=[1, 2, 4],
    )
    got = payload["summary"]
    assert set(got) == set(want)
    for src_name in want:
        for var in want[src_name]:
            for name, stat in want[src_name][var]["metrics"].items():
                assert got[src_name][var]["metrics"][name]["value"] == pytest.approx(stat["value"], abs=1e-12)
    assert payload["n_samples"] == len(rows)


def test_parquet_uid_key_value_key_and_verl_keys(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = rollouts(1)
    for i, row in enumerate(rows):
        row["uid"] = f"u{i // 4}"
    path = tmp_path / "val.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    out = tmp_path / "o.json"
    res = run(path, "--value-key", "acc", "--verl", "--json", out)
    assert res.exit_code == 0, res.output
    payload = json.loads(out.read_text())
    assert list(payload["summary"]["gsm8k"]) == ["acc"]
    assert "val-core/gsm8k/acc/mean@4" in payload["verl"]
    assert "val-core/gsm8k/acc/mean@4" in res.output


def test_multiple_files_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    a = write_jsonl(tmp_path / "a.jsonl", rollouts(2, n_prompts=4))
    b = write_jsonl(tmp_path / "b.jsonl", rollouts(3, n_prompts=4))
    png = tmp_path / "k.png"
    res = run(a, b, "--plot", png)
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "32 samples from 2 file(s)" in res.output


def test_missing_uid_and_source_fall_back_to_input_and_one_source(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "data_source"} for r in rollouts(4)]
    res = run(write_jsonl(tmp_path / "x.jsonl", rows))
    assert res.exit_code == 0, res.output
    assert "all / acc: 12 prompts (4 samples each)" in res.output


@pytest.mark.parametrize(
    ("extra", "args", "match"),
    [
        (
            [
                '{"input": "q", "score": 1.0',
            ],
            (),
            r"bad\.jsonl:49: malformed JSON line",
        ),
        (["[1, 2]"], (), r"bad\.jsonl:49: each line must be a JSON object"),
        (
            ['{"input": "q", "score": "high", "acc": true, "pred": "1"}'],
            (),
            r"bad\.jsonl:49: key 'score' is a string \('high'\) but it is a number on line 1",
        ),
        (
            [],
            ("--uid-key", "qid"),
            r"the prompt id key 'qid' is not in the files \(nor 'input'\); keys present: acc,",
        ),
        ([], ("--source-key", "ds"), r"the data source key 'ds' is not in the files"),
        (
            [],
            ("--value-key", "reward"),
            r"value key 'reward' is not in the files; keys present: acc, data_source",
        ),
        (
            [],
            ("--value-key", "output"),
            r"value key 'output' must hold numbers or bools; it holds string values",
        ),
        ([], ("-k", "0"), r"--k values must be >= 1"),
    ],
    ids=[
        "malformed-json",
        "not-an-object",
        "inconsistent-type",
        "missing-uid-key",
        "missing-source-key",
        "missing-value-key",
        "text-value-key",
        "bad-k",
    ],
)
def test_bad_input_exit_code_message_and_nothing_written(tmp_path, extra, args, match):
    src = write_jsonl(tmp_path / "bad.jsonl", rollouts(5), extra_lines=extra)
    out = tmp_path / "out.json"
    res = run(src, *args, "--json", out)
    assert res.exit_code == 1
    assert pytest.importorskip("re").search(match, " ".join(res.output.split())), res.output
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.jsonl"]


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("data.csv", "a,b\n", r"unknown file type '\.csv'"),
        ("empty.jsonl", "", r"empty\.jsonl: no rows"),
        ("broken.parquet", "not parquet", r"broken\.parquet: not a readable Parquet file"),
    ],
    ids=["unknown-extension", "empty-file", "broken-parquet"],
)
def test_bad_files(tmp_path, name, content, match):
    path = tmp_path / name
    path.write_text(content)
    res = run(path)
    assert res.exit_code == 1
    assert pytest.importorskip("re").search(match, " ".join(res.output.split())), res.output


def test_missing_file_and_missing_output_dir(tmp_path):
    res = run(tmp_path / "nope.jsonl")
    assert res.exit_code == 1 and "no such file" in res.output
    src = write_jsonl(tmp_path / "ok.jsonl", rollouts(6))
    res = run(src, "--json", tmp_path / "missing" / "o.json")
    assert res.exit_code == 1 and "does not exist" in " ".join(res.output.split())


def test_inconsistent_types_across_files(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", rollouts(7, n_prompts=2))
    rows = rollouts(8, n_prompts=2)
    for r in rows:
        r["acc"] = "yes"
    b = write_jsonl(tmp_path / "b.jsonl", rows)
    res = run(a, b)
    assert res.exit_code == 1
    assert "key 'acc' holds different types across files" in " ".join(res.output.split())


def test_outputs_get_a_normal_file_mode(tmp_path):
    import os
    import stat

    from typer.testing import CliRunner

    from rlmetrics.cli.app import app

    src = tmp_path / "val.jsonl"
    src.write_text("\n".join(f'{{"input": "q{i % 3}", "score": {i % 2}}}' for i in range(12)) + "\n")
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(app, ["validate", str(src), "--json", str(out)])
    assert result.exit_code == 0, result.output
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def _step_folder(tmp_path, steps=(0, 10, 20), n_prompts=20):
    folder = tmp_path / "val_generations"
    folder.mkdir()
    for i, step in enumerate(steps):
        rows = rollouts(seed=i, n_prompts=n_prompts)
        for r in rows:
            r["step"] = step
        write_jsonl(folder / f"{step}.jsonl", rows)
    return folder


def test_a_folder_of_steps_gives_curves_against_the_step(tmp_path):
    folder = _step_folder(tmp_path)
    out, png = tmp_path / "steps.json", tmp_path / "steps.png"
    res = run(folder, "--value-key", "acc", "--json", out, "--plot", png)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "240 samples in 3 steps" in text and "gsm8k / acc by step" in text and "step 20 in full" in text
    payload = json.loads(out.read_text())
    assert [s["step"] for s in payload["steps"]] == [0, 10, 20]
    assert payload["n_samples"] == 240 and all(s["n_samples"] == 80 for s in payload["steps"])
    # each step's summary is the library's on that step's file alone
    rows = [json.loads(line) for line in (folder / "10.jsonl").read_text().splitlines()]
    want = summarize_validation(
        [r["data_source"] for r in rows], [r["input"] for r in rows], {"acc": [r["acc"] for r in rows]}
    )
    got = payload["steps"][1]["summary"]["gsm8k"]["acc"]["metrics"]["mean@4"]
    assert got["value"] == pytest.approx(want["gsm8k"]["acc"]["metrics"]["mean@4"]["value"], abs=1e-12)
    assert png.stat().st_size > 5_000


def test_steps_mixed_with_unnumbered_dumps_are_refused(tmp_path):
    folder = _step_folder(tmp_path, steps=(0, 10))
    write_jsonl(folder / "extra.jsonl", rollouts(9))
    res = run(folder)
    assert res.exit_code == 1
    assert "1 dump(s) without a step in their name" in " ".join(res.output.split())


@pytest.mark.parametrize("ci", ["wilson", "t", "bootstrap"], ids=["wilson", "t", "bootstrap"])
def test_ci_option_names_the_method(tmp_path, ci):
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    out = tmp_path / "s.json"
    res = run(src, "--value-key", "acc", "--ci", ci, "--json", out)
    assert res.exit_code == 0, res.output
    body = json.loads(out.read_text())["summary"]["gsm8k"]["acc"]
    assert body["ci"]["method"] == ci
    assert {m["method"] for m in body["metrics"].values()} == {ci}


def test_cluster_key_and_k_above_samples_warning(tmp_path):
    rows = rollouts(n_prompts=12)
    for r in rows:
        r["passage"] = int(r["input"].split()[-1]) // 3
    src = write_jsonl(tmp_path / "0.jsonl", rows)
    out = tmp_path / "s.json"
    res = run(src, "--value-key", "acc", "--cluster-key", "passage", "-k", "8", "--json", out)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "warning: a requested k is above the samples of some prompts" in text and "k=8" in text
    assert "clusters of prompts" in text
    body = json.loads(out.read_text())["summary"]["gsm8k"]["acc"]
    assert body["ci"]["n_clusters"] == 4 and "pass@8" not in body["metrics"]  # gsm8k: prompts 1, 2, 4 ... 11


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("--ci", "normal"), "--ci must be one of wilson, t, bootstrap"),
        (("--confidence", "0"), "--confidence must be"),
    ],
    ids=["ci", "confidence"],
)
def test_interval_option_errors(tmp_path, args, match):
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    res = run(src, *args)
    assert res.exit_code == 1 and match in " ".join(res.output.split())
