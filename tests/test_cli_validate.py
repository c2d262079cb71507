"""``rlmetrics validate`` through typer's CliRunner: good files, bad files, outputs."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlmetrics.cli import _files
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
        ([], ("-k", "0"), r"--k values must be integers in \[1, 2\*\*63 - 1\]; got 0"),
        (
            [],
            ("-k", str(2**70)),
            r"--k values must be integers in \[1, 2\*\*63 - 1\]; got 1180591620717411303424",
        ),
        ([], ("-k", "2", "-k", "8"), r"--k 8: above the samples of every prompt \(at most 4\)"),
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
        "k-2**70",
        "k-above-every-prompt",
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
    rows = rollouts(n_prompts=12, n=5)
    rows = [r for i, r in enumerate(rows) if not (i % 5 == 4 and i < 15)]  # prompts 0-2: 4 samples
    for r in rows:
        r["passage"] = int(r["input"].split()[-1]) // 3
    src = write_jsonl(tmp_path / "0.jsonl", rows)
    out = tmp_path / "s.json"
    res = run(src, "--value-key", "acc", "--cluster-key", "passage", "-k", "5", "--json", out)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "warning: a requested k is above the samples of some prompts" in text and "k=5" in text
    # the prompts left out are named by their uid (here 'input'), not by a per-file code
    assert "2 prompt(s) ('question 1', 'question 2'; fewest 4)" in text
    assert "clusters of prompts" in text
    body = json.loads(out.read_text())["summary"]["gsm8k"]["acc"]
    # gsm8k: prompts 1, 2, 4 ... 11 in 4 passages; prompts 1 and 2 have 4 samples, below k = 5
    assert body["ci"]["n_clusters"] == 4 and body["metrics"]["pass@5"]["n_prompts"] == 6


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


# ----------------------------------------------------------------------------- exit codes, outputs
def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FullDiskFile:
    """A file object whose writes fail as on a full disk (the first write, or at close)."""

    def __init__(self, path, *args, **kwargs):
        self._fh = open(path, *args, **kwargs)  # closed by close() or __exit__

    def write(self, text):
        self._fh.write(text[: len(text) // 2])  # half of it reached the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self):
        self._fh.flush()

    def close(self):
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


@pytest.mark.parametrize("output", ["--json", "--plot"])
@pytest.mark.parametrize("fault", ["write", "sync", "rename"])
def test_full_disk_exits_1_and_leaves_no_file(tmp_path, monkeypatch, output, fault):
    """--json / --plot onto a full disk said "wrote ..." and exited 0; now exit 1, a message,
    and neither the output nor a temporary file left (an older output stays as it was)."""
    if output == "--plot":
        pytest.importorskip("matplotlib")
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    target = tmp_path / ("out.json" if output == "--json" else "out.png")
    target.write_text("old")
    if fault == "write" and output == "--json":
        monkeypatch.setattr(_files, "open", FullDiskFile, raising=False)
    elif fault == "write":  # matplotlib writes the image itself: fail its savefig
        import matplotlib.figure

        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", enospc)
    elif fault == "sync":
        monkeypatch.setattr(_files.os, "fsync", enospc)
    else:
        monkeypatch.setattr(_files.os, "replace", enospc)
    res = run(src, output, target)
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert f"error: {output}: could not write" in text and "No space left on device" in text, text
    assert f"wrote {target}" not in text
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.jsonl", target.name]


def test_full_disk_for_real_on_a_tiny_tmpfs(tmp_path):
    """The real thing, where a private mount is allowed: a 4 kB tmpfs, the command in a subprocess."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare and mount")
    src = write_jsonl(tmp_path / "0.jsonl", rollouts(n_prompts=40))
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (
        f"mount -t tmpfs -o size=4k tmpfs {disk} || exit 99; "
        f"{sys.executable} -m rlmetrics validate {src} --json {disk}/out.json; rc=$?; "
        f"echo ---; ls -A {disk}; exit $rc"
    )
    res = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    if res.returncode == 99 or "unshare:" in res.stderr:
        pytest.skip(f"no private mount here: {res.stderr.strip()[-200:]}")
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    assert "error: --json: could not write" in res.stderr and "No space left on device" in res.stderr
    assert "Traceback" not in res.stderr and "wrote" not in res.stderr
    assert res.stdout.split("---")[-1].split() == []  # neither out.json nor a temporary file


@pytest.mark.parametrize(
    ("target", "match"),
    [("/dev/full", "/dev/full is not a regular file"), (".", "is a folder, not a file")],
    ids=["device", "folder"],
)
def test_outputs_that_are_not_files_are_refused_first(tmp_path, target, match):
    """Renaming onto /dev/full replaced the device (as root) and said "wrote"; now refused upfront."""
    if target == "/dev/full" and not Path(target).exists():
        pytest.skip("no /dev/full")
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    res = run(src, "--json", tmp_path if target == "." else target)
    assert res.exit_code == 1 and match in " ".join(res.output.split()), res.output
    assert Path("/dev/full").is_char_device() or target == "."


def test_unknown_plot_format_exits_1(tmp_path):
    pytest.importorskip("matplotlib")
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    res = run(src, "--plot", tmp_path / "curve.xyz")
    assert res.exit_code == 1 and "--plot:" in res.output and "xyz" in res.output
    assert [p.name for p in tmp_path.iterdir()] == ["0.jsonl"]


def test_huge_k_with_replacement_is_bounded(tmp_path):
    """With --replace every k is defined: k = 2**63 - 1 computes in closed form / by vote counts."""
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    out = tmp_path / "s.json"
    res = run(src, "--replace", "-k", str(2**63 - 1), "--json", out)
    assert res.exit_code == 0, res.output
    metrics = json.loads(out.read_text())["summary"]["gsm8k"]["acc"]["metrics"]
    # a prompt solved once is solved almost surely in that many draws; one never solved, never
    assert metrics[f"pass@{2**63 - 1}"]["value"] == pytest.approx(1 - metrics["none_solved"]["value"])


def test_deep_nesting_is_a_line_numbered_error_not_a_crash(tmp_path):
    """100k nested arrays crashed the process (SIGSEGV in pyarrow): in a subprocess, so that a
    crash fails this test rather than the worker."""
    src = write_jsonl(
        tmp_path / "deep.jsonl",
        rollouts(2),
        extra_lines=['{"input": "q", "acc": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"],
    )
    out = tmp_path / "s.json"
    res = subprocess.run(
        [sys.executable, "-m", "rlmetrics", "validate", str(src), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    assert "deep.jsonl:49: nested deeper than 512" in " ".join(res.stderr.split())
    assert not out.exists()


def test_unreadable_input_exits_1(tmp_path, monkeypatch):
    src = write_jsonl(tmp_path / "0.jsonl", rollouts())
    from rlmetrics.readers import dumps as dumps_module

    def eio(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(src))

    monkeypatch.setattr(dumps_module, "_read_jsonl", eio)
    res = run(src)
    assert res.exit_code == 1 and "cannot read the input" in res.output and "Input/output error" in res.output


def test_plot_without_matplotlib_fails_before_any_work(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    monkeypatch.setattr("rlmetrics.cli.validate.find_dumps", None)  # reading would fail loudly
    res = run(tmp_path / "any.jsonl", "--plot", tmp_path / "p.png")
    assert res.exit_code == 1 and "--plot needs matplotlib: pip install 'rlmetrics[plot]'" in res.output
