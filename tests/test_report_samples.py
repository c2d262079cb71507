"""Tests of rlmetrics.report.samples: the sample tables a page embeds (what, how compactly, under
which budget, escaped for the page), the findings' links to them, and a run without samples.

The browser itself (filters, search, side by side, clicks) is tested in
tests/test_report_browser.py.
"""

from __future__ import annotations

import html.parser
import json
import re
import warnings

import numpy as np
import pytest

from rlmetrics import keys as K
from rlmetrics.errors import RunReadWarning
from rlmetrics.health.findings import Diagnosis, Finding
from rlmetrics.readers import read_samples
from rlmetrics.report import write_report
from rlmetrics.report._assets import SAMPLES_SCRIPT
from rlmetrics.report.runs import RunCurves, load_run
from rlmetrics.report.samples import (
    MIN_TEXT_BYTES,
    embed_samples,
    finding_sample_steps,
    nearest_step,
    samples_json,
)
from rlmetrics.training.samples import TRUNCATION_MARKER, SampleTable

PLANTED = "</script><script>window.pwned = 1</script><!-- <img src=x onerror=alert(1)>"


def _metrics(path, steps=20):
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {"step": s, K.SCORE_MEAN: s / steps, K.ACTOR_ENTROPY: 2.0 - s / steps} for s in range(1, steps + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _sample_rows(steps, *, per_step=4, size=40, prompts=3):
    rows = []
    for step in steps:
        for i in range(per_step):
            rows.append(
                {
                    "step": step,
                    "prompt": f"prompt {i % prompts} " + "p" * size,
                    "response": f"response {step}.{i} " + "é" * (size // 2),
                    "reward": float(i) / per_step,
                    "length": 10 * i if i else None,
                    "stop_reason": ("stop", "length")[i % 2],
                    "category": ("gsm8k", None)[i % 2],
                    "chosen": ("max", "min", "median", "random")[min(i, 3)],
                }
            )
    return rows


def _write_samples(folder, rows):
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


class _Scripts(html.parser.HTMLParser):
    """The page's elements by id, and the text of each <script> as the HTML parser sees it."""

    def __init__(self):
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self.ids: set[str] = set()
        self._open = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "script":
            self._open = (attrs, [])

    def handle_data(self, data):
        if self._open is not None:
            self._open[1].append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._open is not None:
            self.scripts.append((self._open[0], "".join(self._open[1])))
            self._open = None


def _parse(page):
    p = _Scripts()
    p.feed(page)
    return p


def _embedded(page):
    """The samples JSON as the browser's parser would read it (the script element's text)."""
    found = [text for attrs, text in _parse(page).scripts if attrs.get("id") == "rlm-samples"]
    return json.loads(found[0]) if found else None


def _rows_of(data):
    """The embedded rows back as ``{step: [row, ...]}`` in the column names of samples.jsonl."""
    out = {}
    for entry in data["runs"]:
        for k, step in enumerate(entry["s"]):
            for i in range(entry["o"][k], entry["o"][k + 1]):
                label = lambda j: None if j < 0 else data["labels"][j]  # noqa: E731
                out.setdefault((entry["r"], step), []).append(
                    {
                        "step": step,
                        "prompt": data["prompts"][entry["p"][i]],
                        "response": entry["x"][i],
                        "reward": entry["w"][i],
                        "length": entry["n"][i],
                        "stop_reason": label(entry["q"][i]),
                        "category": label(entry["c"][i]),
                        "chosen": data["chosen"][entry["h"][i]],
                    }
                )
    return out


def test_the_page_embeds_every_sample_of_a_run(tmp_path):
    a = _metrics(tmp_path / "a" / "metrics.jsonl")
    rows = _sample_rows([2, 5, 9])
    rows[5]["response"] = PLANTED
    _write_samples(tmp_path / "a", rows)
    res = write_report([a], tmp_path / "out")
    page = res.html_path.read_text(encoding="utf-8")
    data = _embedded(page)
    assert data is not None and data["note"] is None and res.samples.cap is None
    want = {}
    for row in rows:
        want.setdefault((0, row["step"]), []).append(row)
    assert _rows_of(data) == want  # every row, every column, in the order written
    assert len(data["prompts"]) == 3  # a prompt repeated at every step is written once
    assert res.samples.steps == [(2, 5, 9)] and res.samples.total_steps == [3]
    parsed = _parse(page)
    assert {"samples", "rlm-s-step", "rlm-s-q", "rlm-s-vs"} <= parsed.ids
    assert '<a href="#samples">samples</a>' in page  # in the table of contents
    # the model's markup stays inside the JSON: the HTML parser sees no script it did not write
    assert [a.get("id") for a, _ in parsed.scripts] == [None, "rlm-data", None, "rlm-samples", None]
    assert "window.pwned" not in "".join(t for a, t in parsed.scripts if a.get("id") != "rlm-samples")
    assert PLANTED not in page
    assert res.samples.text_bytes == sum(len(p.encode()) for p in {r["prompt"] for r in rows}) + sum(
        len(r["response"].encode()) for r in rows
    )


def test_a_run_without_samples_gets_no_browser(tmp_path):
    a = _metrics(tmp_path / "a" / "metrics.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = write_report([a], tmp_path / "out")
    page = res.html_path.read_text()
    assert _embedded(page) is None
    assert 'id="samples"' not in page and SAMPLES_SCRIPT not in page and "slink" not in page
    assert res.samples.data is None and res.samples.steps == [()]
    assert load_run(a).samples == {}


def test_two_runs_one_with_samples(tmp_path):
    a = _metrics(tmp_path / "a" / "metrics.jsonl")
    b = _metrics(tmp_path / "b" / "metrics.jsonl")
    _write_samples(tmp_path / "b", _sample_rows([3, 4]))
    res = write_report([a, b], tmp_path / "out")
    data = _embedded(res.html_path.read_text())
    assert [e["r"] for e in data["runs"]] == [1]  # the page's index of run b
    assert set(_rows_of(data)) == {(1, 3), (1, 4)}
    assert res.samples.steps == [(), (3, 4)]


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(lambda root: root, id="the-run-folder"),
        pytest.param(lambda root: root / "metrics.jsonl", id="its-metrics-jsonl"),
    ],
)
def test_load_run_reads_the_samples_beside_the_metrics(tmp_path, where):
    _metrics(tmp_path / "metrics.jsonl")
    _write_samples(tmp_path, _sample_rows([1, 2]))
    run = load_run(where(tmp_path))
    assert {s: t.rows() for s, t in run.samples.items()} == {
        s: t.rows() for s, t in read_samples(tmp_path).items()
    }


def test_a_verl_file_logger_run_reads_the_samples_the_verl_patch_wrote(tmp_path, monkeypatch):
    """verl writes ``<root>/<project>/<experiment>.jsonl``; the patch its samples in the folder
    of that name without ``.jsonl`` (``_samples_dir``): the report finds them from the log."""
    from types import SimpleNamespace

    from rlmetrics.integrations.verl import VerlPatchOptions, _samples_dir

    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    trainer = SimpleNamespace(
        config=SimpleNamespace(trainer=SimpleNamespace(project_name="p", experiment_name="e"))
    )
    folder = _samples_dir(trainer, VerlPatchOptions())
    assert folder == tmp_path / "p" / "e"
    folder.mkdir(parents=True)
    log = tmp_path / "p" / "e.jsonl"
    log.write_text(
        "".join(json.dumps({"step": s, "data": {K.SCORE_MEAN: s / 4}}) + "\n" for s in range(1, 5))
    )
    _write_samples(folder, _sample_rows([2, 4]))
    run = load_run(log)
    assert run.source == "verl-jsonl"
    assert {s: t.rows() for s, t in run.samples.items()} == {
        s: t.rows() for s, t in read_samples(folder).items()
    }
    res = write_report([log], tmp_path / "out")
    assert res.samples.steps == [(2, 4)]


def test_a_file_not_named_metrics_jsonl_reads_no_samples(tmp_path):
    path = _metrics(tmp_path / "other.jsonl")
    _write_samples(tmp_path, _sample_rows([1]))  # another run's, perhaps
    assert load_run(path).samples == {}


def test_damaged_sample_lines_cost_those_lines_alone(tmp_path):
    a = _metrics(tmp_path / "metrics.jsonl")
    rows = _sample_rows([1, 2])
    (tmp_path / "samples.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "prompt": "cut off'
    )
    with pytest.warns(RunReadWarning, match="1 damaged line"):
        res = write_report([a], tmp_path / "out")
    assert res.samples.steps == [(1, 2)]


def test_a_lone_surrogate_in_a_response_is_written_as_u_fffd(tmp_path):
    a = _metrics(tmp_path / "metrics.jsonl")
    (tmp_path / "samples.jsonl").write_text(
        '{"step": 1, "prompt": "p", "response": "bad \\ud800 end", "reward": 1.0, "chosen": "max"}\n'
    )
    res = write_report([a], tmp_path / "out")
    data = _embedded(res.html_path.read_text(encoding="utf-8"))
    assert data["runs"][0]["x"] == ["bad \ufffd end"]


def _run(tables_rows, name="a"):
    by_step = {}
    for row in tables_rows:
        by_step.setdefault(row["step"], []).append(row)
    return RunCurves(name, ".", samples={s: SampleTable.from_rows(rows) for s, rows in by_step.items()})


def _brute_cap(sizes, budget):
    """The largest cap c with sum(min(s, c)) <= budget, by trying every c."""
    return max(c for c in range(max(sizes) + 1) if sum(min(s, c) for s in sizes) <= budget)


@pytest.mark.parametrize("budget", [30_000, 45_000, 60_000], ids=lambda b: f"budget-{b}")
def test_a_budget_cuts_the_longest_texts_to_one_cap(budget):
    rows = _sample_rows(range(1, 11), per_step=4, size=1500, prompts=2)  # 63 kB of text
    rows[3]["response"] = "short"
    run = _run(rows)
    e = embed_samples([run], [Diagnosis(())], max_bytes=budget)
    sizes = [len(p.encode()) for p in {r["prompt"] for r in rows}] + [
        len(r["response"].encode()) for r in rows
    ]
    want = _brute_cap(sizes, budget)
    assert want >= MIN_TEXT_BYTES and e.cap == want
    assert e.steps == [tuple(range(1, 11))] and e.kept_bytes <= budget
    got = _rows_of(e.data)
    for row in rows:
        kept = next(r for r in got[(0, row["step"])] if r["reward"] == row["reward"])
        for col in ("prompt", "response"):
            text = kept[col]
            assert len(text.encode()) <= want
            if len(row[col].encode()) <= want:
                assert text == row[col]  # short texts stay whole
            else:
                assert text.endswith(TRUNCATION_MARKER) and row[col].startswith(
                    text[: -len(TRUNCATION_MARKER)]
                )
    assert e.data["note"].startswith(f"samples cut to fit the page's budget of {budget:,} bytes of text")
    assert f"texts longer than {want:,} bytes cut" in e.data["note"]


def test_a_small_budget_keeps_steps_evenly_and_those_findings_point_at():
    rows = _sample_rows(range(0, 100), per_step=4, size=1000, prompts=4)
    for row in rows:
        row["prompt"] = f"{row['step']}: {row['prompt']}"  # no prompt in common: each step costs the same
    run = _run(rows)
    finding = Finding(
        "repetition_rise", "warning", 41, (K.SCORE_MEAN,), {"sample_steps": {"before": 7, "worst": 88}}
    )
    budget = 10 * 8 * MIN_TEXT_BYTES
    e = embed_samples([run], [Diagnosis((finding,))], max_bytes=budget)
    kept = e.steps[0]
    assert e.cap == MIN_TEXT_BYTES and e.kept_bytes <= budget
    assert {7, 41, 88} <= set(kept)  # the finding's steps

    # every text is longer than the least cap, so each step costs 8 x 512 bytes: 10 steps fit.
    # The reference: the largest m for which m evenly spaced steps and the finding's fit.
    def spread(m):
        return sorted({int(i) for i in np.round(np.linspace(0, 99, m))} | {7, 41, 88})

    m = max(m for m in range(1, 101) if len(spread(m)) * 8 * MIN_TEXT_BYTES <= budget)
    assert list(kept) == spread(m) and len(kept) == 10 and kept[0] == 0 and kept[-1] == 99
    assert f"{len(kept)} of 100 steps kept" in e.note(budget)
    assert set(k[1] for k in _rows_of(e.data)) == set(kept)


def test_a_budget_of_zero_embeds_no_samples(tmp_path):
    a = _metrics(tmp_path / "metrics.jsonl")
    _write_samples(tmp_path, _sample_rows([1]))
    res = write_report([a], tmp_path / "out", max_sample_bytes=0)
    assert _embedded(res.html_path.read_text()) is None and res.samples.steps == [()]


@pytest.mark.parametrize("value", [-1, 1.5, True], ids=["negative", "float", "bool"])
def test_max_sample_bytes_errors(tmp_path, value):
    a = _metrics(tmp_path / "metrics.jsonl")
    with pytest.raises(ValueError, match=r"max_sample_bytes must be an integer >= 0; got"):
        write_report([a], tmp_path / "out", max_sample_bytes=value)


@pytest.mark.parametrize(
    ("steps", "step"),
    [([5], 0), ([5], 9), ([2, 4], 3), ([2, 4], 3.5), ([1, 3, 10], 6), ([1, 3, 10], 7), ([], 1)],
    ids=["one-below", "one-above", "tie", "nearer-after", "nearer-before", "nearer-after-2", "empty"],
)
def test_nearest_step_against_a_scan(steps, step):
    want = min(steps, key=lambda s: (abs(s - step), s)) if steps else None
    assert nearest_step(steps, step) == want


@pytest.mark.parametrize(
    ("evidence", "want"),
    [
        ({}, {"onset": 9}),
        ({"sample_steps": {"before": 3, "onset": 9, "worst": 12}}, {"before": 3, "onset": 9, "worst": 12}),
        ({"sample_steps": {"before": "x", "worst": 12.0}}, {"onset": 9, "worst": 12}),
        ({"sample_steps": [1, 2]}, {"onset": 9}),
    ],
    ids=["none", "all", "odd-values", "not-a-dict"],
)
def test_finding_sample_steps(evidence, want):
    assert finding_sample_steps(Finding("x", "warning", 9, ("m",), evidence)) == want


def test_findings_link_to_the_nearest_steps_with_samples(tmp_path, monkeypatch):
    from rlmetrics import report

    a = _metrics(tmp_path / "metrics.jsonl")
    rows = _sample_rows([2, 4, 10, 16], prompts=2)
    _write_samples(tmp_path, rows)
    findings = (
        Finding(
            "repetition_rise", "warning", 11, (K.SCORE_MEAN,), {"sample_steps": {"before": 3, "worst": 15}}
        ),
        Finding("entropy_collapse", "warning", 7, (K.ACTOR_ENTROPY,), {}),
    )
    monkeypatch.setattr(report, "_diagnose", lambda run: Diagnosis(findings))
    page = write_report([a], tmp_path / "out").html_path.read_text()
    links = re.findall(
        r'<a href="#samples" class="slink" data-srun="(\d+)" data-sstep="(\d+)"'
        r'(?: data-svs="(\d+)")?(?: data-sfind="([\d:]+)")?>([^<]+)</a>',
        page,
    )
    assert links == [  # the first finding's example rows (at step 16, its worst) are marked: 0:0
        ("0", "2", "", "0:0", "before (step 2)"),  # 3: 2 and 4 as near, the earlier
        ("0", "10", "", "0:0", "onset (step 10)"),
        ("0", "16", "", "0:0", "worst (step 16)"),
        ("0", "2", "10", "0:0", "before | onset, side by side"),  # steps 2 and 10 share prompts
        ("0", "4", "", "", "onset (step 4)"),  # 7: 4 and 10, 4 nearer; no sample_steps, no examples
    ]


def test_the_page_data_carries_each_findings_example_rows(tmp_path, monkeypatch):
    """Per finding with examples, its rows (finding_examples, an independent ranking) as indices
    into the embedded rows, whose texts are those rows', with the reasons; none for the others."""
    from rlmetrics import report
    from rlmetrics.health.examples import finding_examples

    a = _metrics(tmp_path / "metrics.jsonl")
    rows = _sample_rows([2, 4, 10, 16], prompts=2)
    loop = "and then " * 12
    for row in rows:
        if row["step"] in (10, 16) and row["reward"] in (0.25, 0.75):
            row["response"] += " " + loop  # rows 1 and 3 of steps 10 and 16 end in a loop
    _write_samples(tmp_path, rows)
    findings = (
        Finding("entropy_collapse", "warning", 7, (K.ACTOR_ENTROPY,), {}),
        Finding(
            "repetition_rise", "warning", 10, (K.SCORE_MEAN,), {"sample_steps": {"onset": 10, "worst": 15}}
        ),
        Finding("stop_reason_shift", "warning", 4, (K.SCORE_MEAN,), {"sample_steps": {"onset": 4}}),
    )
    monkeypatch.setattr(report, "_diagnose", lambda run: Diagnosis(findings))
    res = write_report([a], tmp_path / "out")
    page = res.html_path.read_text()
    data = _embedded(page)
    tables = read_samples(tmp_path / "samples.jsonl")
    flat = [r for step in sorted(tables) for r in _rows_of(data)[(0, step)]]
    assert sorted(data["examples"]) == ["0:1", "0:2"]
    for key in ("0:1", "0:2"):
        want = finding_examples(findings[int(key[2:])], tables)
        got = data["examples"][key]
        assert [flat[i]["step"] for i, _ in got] == [e["step"] for e in want]
        assert [flat[i]["response"] for i, _ in got] == [e["response"] for e in want]
        assert [why for _, why in got] == [e["why"] for e in want]
    assert [flat[i]["response"].endswith(loop) for i, _ in data["examples"]["0:1"]] == [True, True]
    assert [why for _, why in data["examples"]["0:1"]] == ["caught in a loop"] * 2
    assert [why for _, why in data["examples"]["0:2"]] == ["cut by the length limit"] * 2
    assert page.count('data-sfind="0:1"') == 2 and page.count('data-sfind="0:2"') == 1
    assert 'data-sfind="0:0"' not in page


def test_no_side_by_side_link_between_steps_without_a_prompt_in_common(tmp_path, monkeypatch):
    from rlmetrics import report

    a = _metrics(tmp_path / "metrics.jsonl")
    rows = _sample_rows([2, 10])
    for row in rows:
        row["prompt"] += str(row["step"])
    _write_samples(tmp_path, rows)
    finding = Finding("gibberish_rise", "warning", 10, (K.SCORE_MEAN,), {"sample_steps": {"before": 2}})
    monkeypatch.setattr(report, "_diagnose", lambda run: Diagnosis((finding,)))
    page = write_report([a], tmp_path / "out").html_path.read_text()
    assert page.count('class="slink"') == 2 and "side by side</a>" not in page


@pytest.mark.parametrize(
    "text",
    ["</script>", "</SCRIPT >", "<!--", "<!-- <script>", "a</b", "\u2028", "é ✓ 🙂"],
    ids=["end-tag", "end-tag-upper", "comment", "comment-script", "any-end-tag", "line-separator", "unicode"],
)
def test_samples_json_cannot_end_its_script_element(text):
    out = samples_json({"x": [text]})
    assert "</" not in out and "<!--" not in out
    assert json.loads(out) == {"x": [text]}
