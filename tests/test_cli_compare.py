"""``rlmetrics compare`` through typer's CliRunner: tables, --json, --plot, folders, summaries, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app

runner = CliRunner()


def _dump(path, rates, n, seed, *, source_of=lambda i: "math", uid_prefix="q"):
    rng = np.random.default_rng(seed)
    with path.open("w") as fh:
        for i, rate in enumerate(rates):
            for _ in range(n):
                ok = int(rng.random() < rate)
                row = {
                    "input": f"{uid_prefix}{i}",
                    "output": "...",
                    "data_source": source_of(i),
                    "acc": ok,
                    "score": ok * 2.0,
                }
                fh.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.beta(0.6, 1.2, 120)
    rl = np.where(rng.random(120) < 0.3, 0.0, rng.beta(6, 2, 120))
    return _dump(tmp_path / "base.jsonl", base, 16, 1), _dump(tmp_path / "rl.jsonl", rl, 16, 2)


def test_table_json_and_plot(pair, tmp_path):
    a, b = pair
    out_json, out_png = tmp_path / "cmp.json", tmp_path / "passk.png"
    result = runner.invoke(
        app,
        [
            "compare",
            str(a),
            str(b),
            "--value-key",
            "acc",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
            "--n-boot",
            "300",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "A = base" in result.output and "B = rl" in result.output
    assert "math / acc: 120 prompts in both (0 only in base, 0 only in rl)" in result.output
    assert "pass@k for k = 1..16: B better on k in [1," in result.output
    payload = json.loads(out_json.read_text())
    assert [r["name"] for r in payload["runs"]] == ["base", "rl"]
    (table,) = payload["comparisons"][0]["tables"]
    d = table["metrics"]["mean@16"]
    assert d["ci_low"] < d["diff"] < d["ci_high"] and 0 <= d["p_value"] <= 1 and d["n"] == 120
    assert table["curve"]["ks"] == list(range(1, 17)) and table["curve"]["crossover"] is not None
    assert out_png.stat().st_size > 10_000


def test_folder_of_steps_takes_the_last_or_the_one_asked(tmp_path):
    folder = tmp_path / "val_generations"
    folder.mkdir()
    rates = np.linspace(0.1, 0.9, 30)
    for step, shift in ((10, 0.0), (20, 0.05), (30, 0.1)):
        _dump(folder / f"{step}.jsonl", np.clip(rates + shift, 0, 1), 4, step)
    result = runner.invoke(
        app, ["compare", str(folder), str(folder), "--step", "10", "--value-key", "acc", "--no-curves"]
    )
    assert result.exit_code == 0, result.output
    assert "step 10 of 3" in result.output
    result = runner.invoke(
        app, ["compare", str(folder / "10.jsonl"), str(folder), "--value-key", "acc", "--no-curves"]
    )
    assert result.exit_code == 0, result.output
    assert "step 30 of 3" in result.output


def test_validate_summaries_are_compared_unpaired(pair, tmp_path):
    a, b = pair
    summary = tmp_path / "a_summary.json"
    assert (
        runner.invoke(app, ["validate", str(a), "--value-key", "acc", "--json", str(summary)]).exit_code == 0
    )
    result = runner.invoke(app, ["compare", str(summary), str(b), "--value-key", "acc"])
    assert result.exit_code == 0, result.output
    assert "a validate summary: unpaired comparison" in result.output
    assert "unpaired (Welch), from summaries" in result.output
    out = tmp_path / "cmp.json"
    result = runner.invoke(
        app, ["compare", str(summary), str(b), "--value-key", "acc", "--margin", "0.05", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    (table,) = json.loads(out.read_text())["comparisons"][0]["tables"]
    assert table["n_matched"] is None and table["family"]["method"] == "holm"
    assert set(table["margins"]) == set(table["adjusted"]) == set(table["metrics"])
    assert "B - A against the margin ±0.05" in result.output
    # a sign-flip test needs the prompts of both runs
    result = runner.invoke(
        app, ["compare", str(summary), str(b), "--value-key", "acc", "--test", "sign-flip"]
    )
    assert result.exit_code == 2
    assert "--test sign-flip needs the prompts of both runs" in " ".join(result.output.split())
    # so does Newcombe's interval: asked for, it fails; by default, the summary's t is named
    result = runner.invoke(
        app, ["compare", str(summary), str(b), "--value-key", "acc", "--interval", "newcombe"]
    )
    assert result.exit_code == 2
    assert "--interval newcombe needs the prompts of both runs" in " ".join(result.output.split())
    assert {d["ci_method"] for d in table["metrics"].values()} == {"Student t"}


def test_unmatched_prompts_are_counted(tmp_path):
    a = _dump(tmp_path / "a.jsonl", [0.5] * 20, 4, 0)
    b = _dump(tmp_path / "b.jsonl", [0.5] * 25, 4, 1)
    result = runner.invoke(app, ["compare", str(a), str(b), "--value-key", "acc", "--no-curves"])
    assert result.exit_code == 0, result.output
    assert "20 prompts in both (0 only in a, 5 only in b)" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{a}"], "compare needs at least two runs"),
        (["{a}", "{missing}"], "no such file"),
        (["{a}", "{b}", "--confidence", "1.5"], r"--confidence must be in \(0, 1\)"),
        (["{a}", "{b}", "--value-key", "nope"], "value key 'nope' is not in the files"),
        (["{a}", "{b}", "--step", "7"], "no dump of step 7"),
        (["{a}", "{b}", "--json", "{nodir}"], "--json: the directory"),
        (["{a}", "{b}", "--n-boot", "5"], "--n-boot must be at least 100"),
        (["{a}", "{b}", "-k", str(2**70)], r"--k values must be integers in \[1, 2\*\*63 - 1\]"),
        (["{a}", "{b}", "-k", "2", "-k", "17"], r"--k 17: above the samples of every prompt \(at most 16\)"),
        (["{a}", "{b}", "--json", "/dev/null"], "/dev/null is not a regular file"),
        (["{a}", "{b}", "--json", "{tmp}"], "is a folder, not a file"),
        (["{a}", "{deep}"], r"deep\.jsonl:2: nested deeper than 512"),
        (
            ["{a}", "{b}", "--adjust", "bonferroni"],
            "--adjust must be one of holm, bh, none; got 'bonferroni'",
        ),
        (
            ["{a}", "{b}", "--margin", "0"],
            r"--margin must be > 0 \(the difference that does not matter\); got 0",
        ),
        (["{a}", "{b}", "--margin", "-0.01"], "--margin must be"),
        (["{a}", "{b}", "--margin", "nan"], "--margin must be"),
        (
            ["{a}", "{b}", "--test", "wilcoxon"],
            "--test must be one of t, sign-flip, signed-rank; got 'wilcoxon'",
        ),
        (
            ["{a}", "{b}", "--interval", "wilson"],
            "--interval must be one of t, inverted, newcombe; got 'wilson'",
        ),
    ],
    ids=[
        "one-run",
        "missing",
        "confidence",
        "value-key",
        "step",
        "json-dir",
        "n-boot",
        "k-2**70",
        "k-above-every-prompt",
        "json-device",
        "json-folder",
        "deep-nesting",
        "adjust-unknown",
        "margin-zero",
        "margin-negative",
        "margin-nan",
        "test-unknown",
        "interval-unknown",
    ],
)
def test_bad_input_exits_2_with_a_message(pair, tmp_path, args, message):
    import re

    a, b = pair
    deep = tmp_path / "deep.jsonl"
    deep.write_text(
        '{"input": "q", "acc": 1}\n{"input": "q", "acc": 0, "x": ' + "[" * 600 + "]" * 600 + "}\n"
    )
    names = {
        "a": a,
        "b": b,
        "missing": tmp_path / "missing.jsonl",
        "nodir": tmp_path / "no" / "x.json",
        "tmp": tmp_path,
        "deep": deep,
    }
    result = runner.invoke(app, ["compare", *[x.format(**names) for x in args]])
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("output", ["--json", "--plot"])
@pytest.mark.parametrize("fault", ["fsync", "replace"])
def test_outputs_that_cannot_be_written_exit_2_and_leave_nothing(pair, tmp_path, monkeypatch, output, fault):
    """A full disk (at the sync or the rename) is an error, not "wrote ..."; no file is left."""
    import errno
    import os

    from rlmetrics.cli import _files

    if output == "--plot":
        pytest.importorskip("matplotlib")

    def enospc(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    a, b = pair
    target = tmp_path / ("cmp.json" if output == "--json" else "cmp.png")
    monkeypatch.setattr(_files.os, fault, enospc)
    result = runner.invoke(
        app, ["compare", str(a), str(b), "--value-key", "acc", "--n-boot", "200", output, str(target)]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"{output}: could not write" in text and "No space left on device" in text and "wrote" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.jsonl", "rl.jsonl"]


# ----------------------------------------------------------------------------- pairing by uid value


def _rows(rates, n, seed, *, uid_key):
    """Rows of a dump, grouped by prompt: ``{prompt index: [rows]}`` (samples in their order)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, rate in enumerate(rates):
        acc = (rng.random(n) < rate).astype(int).tolist()
        pred = ["right" if a else str(rng.integers(3)) for a in acc]
        out[i] = [
            {uid_key: f"prompt-{i}", "output": "...", "data_source": "math", "acc": a, "pred": p}
            for a, p in zip(acc, pred)
        ]
    return out


def _write_rows(path, rows, order):
    with path.open("w") as fh:
        for i in order:
            for row in rows[i]:
                fh.write(json.dumps(row) + "\n")
    return path


def _tables(payload):
    return [t for c in payload["comparisons"] for t in c["tables"]]


@pytest.mark.parametrize("uid_key", ["uid", "input"], ids=["uid-key", "by-input"])
@pytest.mark.parametrize("order", ["reversed", "shuffled"], ids=["reversed", "shuffled"])
def test_prompts_are_paired_by_uid_not_by_file_order(tmp_path, uid_key, order):
    """B's dump listing the prompts in another order than A's pairs the same prompts (issue 26).

    Run B's rows are A's prompts written in a different order (each prompt's samples kept in
    order): the comparison must be that of B written in A's order, and that of the Python API on
    the uid strings, number for number.
    """
    from rlmetrics.validation.comparison.tables import compare_tables
    from rlmetrics.validation.exact.summary import prompt_estimates

    p, n = 40, 8
    rng = np.random.default_rng(7)
    rates_a = rng.beta(0.6, 1.2, p)
    rates_b = np.clip(rates_a + np.linspace(-0.4, 0.4, p), 0, 1)  # per-prompt shifts: order matters
    rows_a, rows_b = _rows(rates_a, n, 1, uid_key=uid_key), _rows(rates_b, n, 2, uid_key=uid_key)
    moved = list(range(p))[::-1] if order == "reversed" else rng.permutation(p).tolist()
    a = _write_rows(tmp_path / "a.jsonl", rows_a, range(p))
    b_same = _write_rows(tmp_path / "b_same.jsonl", rows_b, range(p))
    b_moved = _write_rows(tmp_path / "b_moved.jsonl", rows_b, moved)
    payloads = []
    for b in (b_same, b_moved):
        out = tmp_path / f"{b.stem}.json"
        args = ["compare", str(a), str(b), "--value-key", "acc", "--n-boot", "200", "--json", str(out)]
        result = runner.invoke(app, [*args, *(["--uid-key", uid_key] if uid_key != "input" else [])])
        assert result.exit_code == 0, result.output
        assert f"{p} prompts in both (0 only in a, 0 only in {b.stem})" in result.output
        payloads.append(json.loads(out.read_text()))
    same, moved_tables = _tables(payloads[0]), _tables(payloads[1])
    assert moved_tables == same

    def api(rows, order):
        flat = [row for i in order for row in rows[i]]
        return prompt_estimates(
            [r["data_source"] for r in flat],
            [r[uid_key] for r in flat],
            {"acc": [r["acc"] for r in flat], "pred": [r["pred"] for r in flat]},
        )

    (ref,) = compare_tables(api(rows_a, range(p)), api(rows_b, moved), n_boot=200)
    (table,) = moved_tables
    for name, d in ref.metrics.items():
        got = table["metrics"][name]
        assert got["diff"] == pytest.approx(d.diff, abs=1e-12), name
        assert got["p_value"] == pytest.approx(d.p_value, rel=1e-9, abs=1e-15), name
    # the true difference: prompt by prompt, B's estimate minus A's, on A's order
    acc_a = np.array([[r["acc"] for r in rows_a[i]] for i in range(p)])
    acc_b = np.array([[r["acc"] for r in rows_b[i]] for i in range(p)])
    assert table["metrics"][f"mean@{n}"]["diff"] == pytest.approx(acc_b.mean() - acc_a.mean(), abs=1e-12)
    assert table["metrics"][f"mean@{n}"]["correlation"] == pytest.approx(
        np.corrcoef(acc_a.mean(axis=1), acc_b.mean(axis=1))[0, 1], abs=1e-9
    )


# ----------------------------------------------------------------------------- --adjust and --margin


@pytest.fixture
def three(tmp_path):
    """A and two Bs: one better on most prompts, one about the same."""
    rng = np.random.default_rng(3)
    base = rng.beta(0.6, 1.2, 60)
    better = np.clip(base + rng.normal(0.15, 0.1, 60), 0, 1)
    same = np.clip(base + rng.normal(0.0, 0.05, 60), 0, 1)
    return [
        _dump(tmp_path / f"{name}.jsonl", rates, 8, seed)
        for name, rates, seed in (("a", base, 1), ("b", better, 2), ("c", same, 3))
    ]


def _run_json(tmp_path, paths, *extra):
    out = tmp_path / "cmp.json"
    args = ["compare", *map(str, paths), "--value-key", "acc", "--no-curves", "--json", str(out), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output, json.loads(out.read_text())


def _api(paths, method, margin=None, interval="newcombe"):
    """The comparisons the command makes, through the Python API: A against every B, one family."""
    from rlmetrics.cli._rollouts import KeyOptions, load_run
    from rlmetrics.validation.comparison.family import adjust_comparisons
    from rlmetrics.validation.comparison.tables import compare_tables
    from rlmetrics.validation.exact.summary import prompt_estimates

    opts = KeyOptions(value_keys=["acc"])
    tables = []
    for path in paths:
        i = load_run(path, opts).inputs
        tables.append(prompt_estimates(i.sources, i.uids, i.infos))
    joined = [
        c
        for t in tables[1:]
        for c in compare_tables(tables[0], t, curves=False, adjust="none", interval=interval)
    ]
    return adjust_comparisons(joined, method=method, margin=margin)


def _row(output, name):
    """The cells of the first table row of metric ``name``."""
    line = next(x for x in output.splitlines() if x.startswith(f"│ {name} "))
    return [cell.strip() for cell in line.strip("│").split("│")]


def _distinct(tables):
    """The family counted here: one hypothesis per distinct (table, difference, SE, n, df), its p."""
    distinct: dict[tuple, float] = {}
    for i, t in enumerate(tables):
        for m in t["metrics"].values():
            distinct.setdefault(_hypothesis(i, m), m["p_value"])
    return distinct


def _hypothesis(i, m):
    return (i, round(m["diff"], 12), round(m["se"], 12), m["n"], m["df"])


@pytest.mark.parametrize("method", ["holm", "bh", "none"], ids=["holm", "bh", "none"])
def test_adjust_is_one_family_over_every_b(three, tmp_path, method):
    """--adjust: the p-values of every metric of A vs B and A vs C adjusted together, as the API does;
    the family's size is the number of distinct hypotheses; the table shows both p-values."""
    output, payload = _run_json(tmp_path, three, "--adjust", method)
    tables = _tables(payload)
    ref = _api(three, method)
    assert [(c["source"], c["variable"]) for c in tables] == [(c.source, c.variable) for c in ref]
    family = payload["family"]
    assert family["method"] == method and family == vars(ref[0].family)
    for got, want in zip(tables, ref):
        assert got["family"] == family
        for name, adj in want.adjusted.items():
            assert got["adjusted"][name]["p_value"] == pytest.approx(adj.p_value, rel=1e-12), name
            assert got["metrics"][name]["p_value"] == pytest.approx(want.metrics[name].p_value, rel=1e-12)
    distinct = _distinct(tables)
    assert family["size"] == len(distinct) > sum(key[0] == 0 for key in distinct) > 5  # both Bs
    if method == "none":
        for t in tables:
            for name, m in t["metrics"].items():
                assert t["adjusted"][name]["p_value"] == m["p_value"]
    # the tables: the adjusted p-value beside the unadjusted one, the method and family stated
    text = " ".join(output.split())
    first = ref[0].metrics["mean@8"], ref[0].adjusted["mean@8"]
    cells = _row(output, "mean@8")
    if method == "none":
        assert "p none" not in output and len(cells) == 9
        assert f"p-values not adjusted (--adjust none) for the family of {family['size']} distinct" in text
        assert cells[-1] == _sig(first[0].diff, first[0].p_value)
    else:
        assert f"p {method}" in output and len(cells) == 11
        assert cells[5:7] == [_fmt_p(first[0].p_value), _fmt_p(first[1].p_value)]
        assert f"{method} verdict" in " ".join(output.split())
    # the verdict of each p-value side by side, checked against the p-values of the API
    shown = [n for n in ref[0].metrics if f"│ {n} " in output]
    assert "mean@8" in shown and len(shown) >= 5
    for name in shown:
        d, adj = ref[0].metrics[name], ref[0].adjusted[name]
        want = [_sig(d.diff, d.p_value)] + ([_sig(d.diff, adj.p_value)] if method != "none" else [])
        assert _row(output, name)[8 if method == "none" else 9 :] == want, name  # after corr
    if method == "holm":
        differ = [
            n
            for c in ref
            for n in c.metrics
            if _sig(c.metrics[n].diff, c.metrics[n].p_value) != _sig(c.metrics[n].diff, c.adjusted[n].p_value)
        ]
        assert differ  # Holm's adjustment changes some verdict here: the two columns differ
        assert f"adjusted over a family of {family['size']} distinct comparisons" in text
        assert ("Holm's step-down" if method == "holm" else "Benjamini-Hochberg") in text
        assert "every metric of the 2 tables above" in text


@pytest.mark.parametrize(
    ("method", "statsmodels_name"), [("holm", "holm"), ("bh", "fdr_bh")], ids=["holm", "bh"]
)
def test_adjusted_p_values_match_statsmodels(three, tmp_path, method, statsmodels_name):
    """The family's adjusted p-values are statsmodels' multipletests of its distinct p-values."""
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    _, payload = _run_json(tmp_path, three, "--adjust", method)
    tables = _tables(payload)
    distinct = _distinct(tables)
    _, p_adj, _, _ = multitest.multipletests(list(distinct.values()), method=statsmodels_name)
    by_key = dict(zip(distinct, p_adj))
    for i, t in enumerate(tables):
        for name, m in t["metrics"].items():
            assert t["adjusted"][name]["p_value"] == pytest.approx(by_key[_hypothesis(i, m)], rel=1e-9), name
    assert min(p_adj) < 0.05 < max(p_adj)  # both kinds of result in the family


def _sig(diff, p):
    """The verdict of a p-value at 5%, written independently of the command."""
    if math.isnan(p):
        return "nan"
    return ("B > A" if diff > 0 else "B < A") if p <= 0.05 and diff != 0 else "n.s."


def _fmt_p(p):
    from rlmetrics.cli.compare import _fmt_p as fmt

    return fmt(p)


def _tost(d, margin):
    """The two one-sided t tests, from scipy: P(T >= t) of H0 diff <= -margin and diff >= margin."""
    from scipy import stats

    low = stats.t.sf((d["diff"] + margin) / d["se"], d["df"])
    high = stats.t.sf((margin - d["diff"]) / d["se"], d["df"])
    return low, high


def _verdict(low, high, margin):
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    if low > -margin:
        return f"equivalent within {margin:g}" if high < margin else f"no worse than {margin:g}"
    return "inconclusive"


@pytest.mark.parametrize("margin", [0.02, 0.1, 0.5], ids=["tight", "moderate", "wide"])
@pytest.mark.parametrize(
    ("method", "interval"),
    [("holm", "newcombe"), ("none", "newcombe"), ("holm", "t"), ("none", "t")],
    ids=["holm", "none", "holm-t", "none-t"],
)
def test_margin_gives_two_one_sided_tests_and_verdicts(three, tmp_path, margin, method, interval):
    """--margin: each metric's TOST (with --interval t: against scipy's t; by default: by inclusion
    in Newcombe's interval), its verdict from the 95% interval and (adjusted) from the family's
    interval, in --json and in the tables."""
    extra = ("--interval", "t") if interval == "t" else ()
    output, payload = _run_json(tmp_path, three, "--margin", str(margin), "--adjust", method, *extra)
    assert payload["margin"] == margin and payload["interval"] == interval
    ref = _api(three, method, margin, interval)
    verdicts = set()
    for got, want in zip(_tables(payload), ref):
        for name, d in got["metrics"].items():
            t = got["margins"][name]
            assert t == {**want.margins[name]._asdict()}
            if interval == "t":
                assert [t["p_noninferior"], t["p_nonsuperior"]] == pytest.approx(_tost(d, margin), rel=1e-9)
            else:  # the one-sided tests agree with the interval shown
                assert d["ci_method"] == "Newcombe (method 10) on wilson-edge intervals"
                assert (t["p_noninferior"] < 0.025) == (d["ci_low"] > -margin)
                assert (t["p_nonsuperior"] < 0.025) == (d["ci_high"] < margin)
            assert t["p_equivalent"] == max(t["p_noninferior"], t["p_nonsuperior"])
            assert t["verdict"] == _verdict(d["ci_low"], d["ci_high"], margin)
            adj = got["adjusted"][name]
            assert adj["verdict"] == _verdict(adj["ci_low"], adj["ci_high"], margin)
            if method == "none":
                assert adj["verdict"] == t["verdict"]
            verdicts.add(t["verdict"])
    assert "better" in verdicts and len(verdicts) >= 2
    text = " ".join(output.split())
    assert f"B - A against the margin ±{margin:g}" in text
    assert f"margin ±{margin:g}: p non-inf. tests H0 B - A <= -{margin:g}" in text
    want = ref[0].margins["mean@8"]
    titles = [c for c in output.splitlines() if "against the margin" in c]
    assert len(titles) == 2  # one margin table per comparison
    margin_rows = [x for x in output.splitlines() if x.startswith("│ mean@8 ")][1]  # after the differences
    row = [cell.strip() for cell in margin_rows.strip("│").split("│")]
    assert row[2:5] == [_fmt_p(want.p_noninferior), _fmt_p(want.p_equivalent), want.verdict]
    if method == "holm":
        assert row[6] == ref[0].adjusted["mean@8"].verdict and "Bonferroni (simultaneous) interval" in text
    else:
        assert len(row) == 5


def test_margin_of_identical_runs_is_equivalent(pair, tmp_path):
    """B = A: every difference is 0 with no spread. The t interval is the point 0: equivalent
    within any margin, adjusted or not. Newcombe's, at correlation 1, is as wide as the gap
    between each run's Wilson bounds' widths down and up (asymmetric near an edge): equivalent
    within one point for mean@16, inconclusive for all_solved (almost every prompt at 0)."""
    a, _ = pair
    _, payload = _run_json(tmp_path, [a, a], "--margin", "0.01", "--interval", "t")
    (table,) = _tables(payload)
    assert {t["verdict"] for t in table["margins"].values()} == {"equivalent within 0.01"}
    assert {x["verdict"] for x in table["adjusted"].values()} == {"equivalent within 0.01"}
    _, payload = _run_json(tmp_path, [a, a], "--margin", "0.01")
    (table,) = _tables(payload)
    for name, d in table["metrics"].items():
        inside = -0.01 < d["ci_low"] and d["ci_high"] < 0.01
        want = "equivalent within 0.01" if inside else "inconclusive"
        assert table["margins"][name]["verdict"] == want, (name, d["ci_low"], d["ci_high"])
        assert d["ci_low"] <= 0.0 <= d["ci_high"] and d["diff"] == 0.0
    assert table["margins"]["mean@16"]["verdict"] == "equivalent within 0.01"
    assert table["margins"]["all_solved"]["verdict"] == "inconclusive"  # most prompts at 0


@pytest.mark.parametrize("test", ["t", "sign-flip"], ids=["t", "sign-flip"])
def test_the_test_option_picks_the_paired_test_of_every_p_value(three, tmp_path, test):
    """--test: each metric's p-value that of paired_difference(test=...) on the matched
    per-prompt estimates (seeded as the command), the method named; the default is the sign-flip
    test; the interval is Newcombe's (the default --interval) either way, and named."""
    from rlmetrics.cli._rollouts import KeyOptions, load_run
    from rlmetrics.validation.comparison.paired import paired_difference
    from rlmetrics.validation.exact.summary import prompt_estimates

    output, payload = _run_json(tmp_path, three, "--test", test)
    _, default = _run_json(tmp_path, three)
    same = []
    for got, d_got in zip(_tables(payload), _tables(default), strict=True):
        for name, d in got["metrics"].items():
            base = d_got["metrics"][name]
            for key in ("mde", "se", "ci_low", "ci_high"):
                assert d[key] == base[key], key
            assert ("sign-flip" in d["method"]) == (test == "sign-flip"), d["method"]
            assert d["ci_method"] == "Newcombe (method 10) on wilson-edge intervals"
            same.append(d["p_value"] == base["p_value"])
    assert all(same) if test == "sign-flip" else not any(same)
    # mean@8 of A vs B through paired_difference directly, on the per-prompt estimates
    inputs = [load_run(path, KeyOptions(value_keys=["acc"])).inputs for path in three[:2]]
    ta, tb = (prompt_estimates(i.sources, i.uids, i.infos)["math"]["acc"] for i in inputs)
    assert list(ta.keys) == list(tb.keys)  # the same prompts in the same order in these dumps
    col = list(ta.names).index("mean@8")
    want = paired_difference(ta.values[:, col], tb.values[:, col], test=test, seed=0)
    got = _tables(payload)[0]["metrics"]["mean@8"]
    assert got["p_value"] == pytest.approx(want.p_value, rel=1e-12)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((want.ci_low, want.ci_high), rel=1e-12)
    assert ("paired sign-flip" in output) == (test == "sign-flip")
    assert "interval: Newcombe (method 10) on wilson-edge intervals" in output


@pytest.mark.parametrize("interval", ["t", "newcombe", "inverted"], ids=["t", "newcombe", "inverted"])
def test_the_interval_option_picks_every_interval(three, tmp_path, interval):
    """--interval: each metric's interval that of paired_difference(interval=...) on the matched
    per-prompt estimates, named under the table and in --json (ci_method, and the option at the
    top); the p-values are the test's whatever the interval; the adjusted (Holm) interval is the
    same method at the family's level and holds the unadjusted one."""
    from rlmetrics.cli._rollouts import KeyOptions, load_run
    from rlmetrics.validation.comparison.paired import paired_difference
    from rlmetrics.validation.exact.summary import prompt_estimates

    output, payload = _run_json(tmp_path, three, "--interval", interval)
    _, default = _run_json(tmp_path, three)
    assert payload["interval"] == interval and default["interval"] == "newcombe"
    inputs = [load_run(path, KeyOptions(value_keys=["acc"])).inputs for path in three[:2]]
    ta, tb = (prompt_estimates(i.sources, i.uids, i.infos)["math"]["acc"] for i in inputs)
    col = list(ta.names).index("mean@8")
    want = paired_difference(ta.values[:, col], tb.values[:, col], interval=interval, seed=0)
    got, base = _tables(payload)[0], _tables(default)[0]
    d = got["metrics"]["mean@8"]
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((want.ci_low, want.ci_high), rel=1e-12)
    assert d["ci_method"] == want.ci_method and f"interval: {want.ci_method}" in " ".join(output.split())
    assert d["p_value"] == base["metrics"]["mean@8"]["p_value"]
    level = payload["family"]["level"]
    adj = got["adjusted"]["mean@8"]
    fresh = paired_difference(ta.values[:, col], tb.values[:, col], interval=interval, confidence=level)
    assert adj["ci_low"] == pytest.approx(min(fresh.ci_low, d["ci_low"]), rel=1e-12)
    assert adj["ci_high"] == pytest.approx(max(fresh.ci_high, d["ci_high"]), rel=1e-12)
    assert adj["ci_low"] <= d["ci_low"] and adj["ci_high"] >= d["ci_high"]
