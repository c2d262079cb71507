"""Validation dumps: finding them, their keys, reading columns (keys=, batches, nulls), steps, errors.

The reference for every reader is the rows themselves (Python dicts): a column read back, as a
list, must equal ``[row.get(key) for row in rows]`` whatever the format (JSONL through pyarrow
streamed or whole, JSONL line by line, Parquet in many small batches).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlmetrics.readers import dumps
from rlmetrics.readers.dumps import (
    Dump,
    DumpError,
    StepDump,
    ValidateInputError,
    _Coded,
    find_dumps,
    iter_steps,
    load_rollouts,
    schema_keys,
)

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


# ----------------------------------------------------------------------------- helpers
def rows_of(n_prompts: int = 6, n: int = 4, seed: int = 0, step: int = 0) -> list[dict[str, Any]]:
    """verl-like dump rows: text, a prompt uid, a source, acc (bool), score (float), pred (str)."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        for _ in range(n):
            pred = str(int(rng.integers(0, 3)))
            rows.append(
                {
                    "input": f"question {p} " + "x" * int(rng.integers(0, 40)),
                    "output": f"the answer is {pred}",
                    "gts": "0",
                    "score": float(rng.normal()),
                    "step": step,
                    "acc": pred == "0",
                    "pred": pred,
                    "uid": f"u{seed}-{p}",
                    "data_source": "gsm8k" if p % 3 else "math",
                }
            )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]], extra_lines: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        for line in extra_lines:
            fh.write(line + "\n")
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = dict.fromkeys(key for row in rows for key in row)  # from_pylist takes the first row's
    table = pa.table({key: [row.get(key) for row in rows] for key in names} or {"a": pa.array([], "f8")})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def touch(path: Path, text: str = "") -> Path:
    path.write_text(text)
    return path


def as_list(col: Any) -> list[Any]:
    return col.tolist() if hasattr(col, "tolist") else list(col)


def expected(rows: list[dict[str, Any]], key: str) -> list[Any]:
    return [row.get(key) for row in rows]


def check_columns(columns: dict[str, Any], rows: list[dict[str, Any]], keys: list[str]) -> None:
    assert sorted(columns) == sorted(keys)
    for key in keys:
        assert as_list(columns[key]) == expected(rows, key), key


def check_coded(col: Any, values: list[Any]) -> None:
    """Codes into distinct values, in order of first appearance, that give back ``values``."""
    assert isinstance(col, _Coded)
    assert col.codes.dtype == np.int64
    assert col.values == list(dict.fromkeys(values))
    assert np.asarray(col.values, dtype=object)[col.codes].tolist() == values


def no_pyarrow_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.json", None)  # `import pyarrow.json` raises ImportError


def chunked_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if a JSONL file is read otherwise than in chunks (whole by pyarrow, or by lines)."""
    import pyarrow.json as pa_json

    read_json = pa_json.read_json

    def chunks_only(source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, str | Path):
            raise AssertionError(f"{source} read whole: the chunked reader should have read it")
        return read_json(source, *args, **kwargs)

    def no_line_reader(*args: Any) -> Any:
        raise AssertionError("the line reader is not needed")

    monkeypatch.setattr(pa_json, "read_json", chunks_only)
    monkeypatch.setattr(dumps, "_read_jsonl_lines", no_line_reader)


# ----------------------------------------------------------------------------- find_dumps
def test_find_dumps_order_steps_and_skipped_files(tmp_path):
    for rel in (
        "10.jsonl",
        "2.jsonl",
        "rank1/2.parquet",
        "sub/deeper/3.ndjson",
        "001.pq",
        "extra.json",
        "B.JSONL",
        "step_4.jsonl",
        "notes.txt",
        "plot.png",
        ".hidden.jsonl",
        ".cache/5.jsonl",
        "sub/.git/6.jsonl",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    got = [(p.relative_to(tmp_path).as_posix(), step) for p, step in find_dumps(tmp_path)]
    assert got == [
        ("001.pq", 1),
        ("2.jsonl", 2),
        ("rank1/2.parquet", 2),
        ("sub/deeper/3.ndjson", 3),
        ("10.jsonl", 10),
        ("B.JSONL", None),
        ("extra.json", None),
        ("step_4.jsonl", None),
    ]
    assert all(isinstance(d, Dump) and isinstance(d.path, Path) for d in find_dumps(str(tmp_path)))


@pytest.mark.parametrize(
    ("name", "step"),
    [("7.jsonl", 7), ("0.parquet", 0), ("val.jsonl", None), ("-1.jsonl", None), ("٣.jsonl", None)],
    ids=["integer", "zero", "named", "negative", "non-ascii-digit"],
)
def test_find_dumps_of_a_file(tmp_path, name, step):
    path = tmp_path / name
    path.write_text("")
    assert find_dumps(path) == [Dump(path, step)]


@pytest.mark.parametrize(
    ("setup", "exc", "match"),
    [
        (lambda d: d / "nope", DumpError, r"nope: no such file or folder"),
        (
            lambda d: d,
            DumpError,
            r"no dump file in this folder or below \(looked for \.jsonl, \.json, \.ndjson, \.parquet, "
            r"\.pq; hidden",
        ),
        (lambda d: touch(d / "a.csv"), DumpError, r"unknown file type '\.csv'"),
        (lambda d: 3, TypeError, r"path must be a path \(str or os\.PathLike\) or a Dump; got int"),
    ],
    ids=["missing", "no-dumps", "unknown-suffix", "not-a-path"],
)
def test_find_dumps_errors(tmp_path, setup, exc, match):
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "1.jsonl").write_text("")
    with pytest.raises(exc, match=match):
        find_dumps(setup(tmp_path))


def test_one_error_class_under_two_names():
    assert ValidateInputError is DumpError and issubclass(DumpError, ValueError)
    from rlmetrics.cli.validate import ValidateInputError as cli_error
    from rlmetrics.cli.validate import load_rollouts as cli_load

    assert cli_error is DumpError and cli_load is load_rollouts


# ----------------------------------------------------------------------------- load_rollouts
WRITERS = {
    "jsonl": lambda path, rows: write_jsonl(path.with_suffix(".jsonl"), rows),
    "parquet": lambda path, rows: write_parquet(path.with_suffix(".parquet"), rows),
    "parquet-row-groups": lambda path, rows: write_parquet(path.with_suffix(".parquet"), rows, 5),
}


@pytest.mark.parametrize("fmt", list(WRITERS))
@pytest.mark.parametrize(
    "keys",
    [["uid", "acc"], ["data_source", "score", "pred", "uid"], ["acc", "not-there"], []],
    ids=["two", "four", "absent-key", "none"],
)
def test_keys_restrict_the_full_read(tmp_path, fmt, keys):
    rows = rows_of(seed=1)
    path = WRITERS[fmt](tmp_path / "0", rows)
    full, n_full = load_rollouts([path])
    some, n_some = load_rollouts([path], keys=iter(keys))  # any iterable
    assert n_full == n_some == len(rows)
    check_columns(full, rows, list(rows[0]))
    kept = [k for k in full if k in keys]
    assert list(some) == kept  # the file's order, not the order of keys
    for key in kept:
        assert type(some[key]) is type(full[key])
        assert as_list(some[key]) == as_list(full[key])
    assert isinstance(full["score"], np.ndarray) and full["score"].dtype == np.float64
    assert isinstance(full["acc"], np.ndarray) and full["acc"].dtype == np.bool_
    check_coded(full["uid"], expected(rows, "uid"))
    check_coded(full["pred"], expected(rows, "pred"))


@pytest.mark.parametrize("batch_rows", [1, 3, 7, 1 << 16], ids=["1", "3", "7", "default"])
def test_parquet_batches_and_row_groups_give_consistent_codes(tmp_path, monkeypatch, batch_rows):
    monkeypatch.setattr(dumps, "_BATCH_ROWS", batch_rows)
    # uids recur far apart, so a value's code must be the same in batches that are far apart
    rows = [r | {"uid": f"u{i % 5}" if i % 7 else f"late{i}"} for i, r in enumerate(rows_of(8, 4, seed=2))]
    path = write_parquet(tmp_path / "x.parquet", rows, row_group_size=4)
    assert pq.ParquetFile(path).metadata.num_row_groups == 8
    columns, n_rows = load_rollouts([path], keys=["uid", "pred", "score", "step"])
    assert n_rows == len(rows)
    check_coded(columns["uid"], expected(rows, "uid"))
    check_coded(columns["pred"], expected(rows, "pred"))
    np.testing.assert_array_equal(columns["score"], expected(rows, "score"))
    assert columns["step"].dtype == np.int64
    # the same codes as the JSONL reader's (both: order of first appearance)
    jsonl, _ = load_rollouts([write_jsonl(tmp_path / "x.jsonl", rows)], keys=["uid"])
    np.testing.assert_array_equal(jsonl["uid"].codes, columns["uid"].codes)


def test_parquet_dictionary_column_keeps_only_used_values_in_appearance_order(tmp_path, monkeypatch):
    monkeypatch.setattr(dumps, "_BATCH_ROWS", 3)
    values = ["c", "a", "c", "b", "a", None, "c", "a"]
    dictionary = pa.array(["zz-unused", "b", "a", "c"])
    indices = pa.array([3, 2, 3, 1, 2, None, 3, 2], type=pa.int32())
    table = pa.table({"src": pa.DictionaryArray.from_arrays(indices, dictionary), "n": list(range(8))})
    path = tmp_path / "d.parquet"
    pq.write_table(table, path)
    columns, _ = load_rollouts([path])
    assert columns["src"] == values  # a null: a list
    pq.write_table(table.filter(pa.array([v is not None for v in values])), path)
    columns, _ = load_rollouts([path])
    check_coded(columns["src"], [v for v in values if v is not None])


def nulls_rows() -> list[dict[str, Any]]:
    rows = rows_of(3, 4, seed=3)
    for i, row in enumerate(rows):
        if i == len(rows) - 2:  # nulls late in the file: after the first batches
            row["pred"] = None
            row["score"] = None
        row["nothing"] = None
        if i % 2:
            del row["gts"]  # absent from some lines: None there
    return rows


@pytest.mark.parametrize("reader", ["jsonl", "jsonl-lines", "parquet-batches"])
def test_nulls(tmp_path, monkeypatch, reader):
    rows = nulls_rows()
    if reader == "parquet-batches":
        monkeypatch.setattr(dumps, "_BATCH_ROWS", 2)
        path = write_parquet(tmp_path / "n.parquet", rows, row_group_size=3)
    else:
        if reader == "jsonl-lines":
            no_pyarrow_json(monkeypatch)
        path = write_jsonl(tmp_path / "n.jsonl", rows)
    columns, n_rows = load_rollouts([path])
    assert n_rows == len(rows)
    check_columns(columns, rows, list(rows[0]))
    for key in ("pred", "score", "gts", "nothing"):
        assert isinstance(columns[key], list), key
    assert columns["nothing"] == [None] * len(rows)
    check_coded(columns["uid"], expected(rows, "uid"))


def test_key_absent_from_one_file_is_padded_with_none(tmp_path):
    a_rows, b_rows = rows_of(2, 2, seed=4), rows_of(2, 2, seed=5)
    for row in b_rows:
        del row["acc"]
    a = write_jsonl(tmp_path / "a.jsonl", a_rows)
    b = write_parquet(tmp_path / "b.parquet", b_rows)
    columns, n_rows = load_rollouts([Dump(a, None), b], keys={"acc", "uid"})
    assert n_rows == 8
    check_columns(columns, a_rows + b_rows, ["acc", "uid"])
    check_coded(columns["uid"], expected(a_rows + b_rows, "uid"))


def test_jsonl_types_that_change_after_the_first_block(tmp_path, monkeypatch):
    # The chunks are parsed with the types of the first; the whole-file read promotes.
    monkeypatch.setattr(dumps, "_CHUNK_BYTES", 512)
    rows = [{"uid": f"u{i // 4}", "reward": i % 3} for i in range(200)]
    rows[150]["reward"] = 0.5
    rows[160]["late"] = "x"
    path = write_jsonl(tmp_path / "t.jsonl", rows)

    def no_line_reader(*args: Any) -> Any:
        raise AssertionError("pyarrow reads this file whole; the line reader is not needed")

    monkeypatch.setattr(dumps, "_read_jsonl_lines", no_line_reader)
    calls: list[int] = []
    columns, n_rows = load_rollouts([path], progress=calls.append)
    assert n_rows == 200 and sum(calls) == path.stat().st_size  # the restarts are not counted twice
    assert columns["reward"].dtype == np.float64
    check_columns(columns, rows, ["uid", "reward", "late"])


@pytest.mark.parametrize(
    ("chunk", "block"), [(512, 256), (256, 128), (1 << 24, 1 << 22)], ids=["block", "chunk", "default"]
)
def test_jsonl_line_longer_than_a_block_or_a_chunk(tmp_path, monkeypatch, chunk, block):
    monkeypatch.setattr(dumps, "_CHUNK_BYTES", chunk)
    monkeypatch.setattr(dumps, "_BLOCK_BYTES", block)
    rows = [{"uid": f"u{i}", "input": "x" * (1000 if i == 5 else 10), "acc": i % 2} for i in range(50)]
    chunked_only(monkeypatch)
    calls: list[int] = []
    columns, n_rows = load_rollouts([write_jsonl(tmp_path / "long.jsonl", rows)], progress=calls.append)
    assert n_rows == 50 and sum(calls) == (tmp_path / "long.jsonl").stat().st_size
    check_columns(columns, rows, ["uid", "input", "acc"])
    check_coded(columns["input"], expected(rows, "input"))
    assert columns["acc"].dtype == np.int64


def test_jsonl_keys_first_seen_in_a_later_chunk_or_null_at_first(tmp_path, monkeypatch):
    monkeypatch.setattr(dumps, "_CHUNK_BYTES", 128)
    rows: list[dict[str, Any]] = [{"uid": f"u{i // 3}", "acc": None, "pred": None} for i in range(40)]
    for i in range(20, 40):
        rows[i] |= {"acc": float(i % 2), "pred": str(i % 3), "late": i}
    for i in range(25, 40, 2):
        del rows[i]["pred"]
    path = write_jsonl(tmp_path / "late.jsonl", rows)
    chunked_only(monkeypatch)
    columns, n_rows = load_rollouts([path])
    assert n_rows == 40
    check_columns(columns, rows, ["uid", "acc", "pred", "late"])
    some, _ = load_rollouts([path], keys=["late", "pred"])
    check_columns(some, rows, ["late", "pred"])


def test_jsonl_chunks_skip_the_keys_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(dumps, "_CHUNK_BYTES", 300)
    rows = rows_of(4, 4, seed=9)
    rows[-1]["output"] = 5  # a type mix in a key not read: no error, no slower reader
    path = write_jsonl(tmp_path / "s.jsonl", rows)
    with monkeypatch.context() as mp:
        chunked_only(mp)
        columns, n_rows = load_rollouts([path], keys=["uid", "acc", "score"])
    assert n_rows == len(rows)
    check_columns(columns, rows, ["uid", "acc", "score"])
    with pytest.raises(
        DumpError, match=r"s\.jsonl:16: key 'output' is a number \(5\) but it is a string on line 1"
    ):
        load_rollouts([path])


def test_jsonl_line_reader_matches_pyarrow(tmp_path, monkeypatch):
    rows = rows_of(5, 3, seed=6)
    rows[0]["big"] = 2**70  # beyond int64: Python ints from the line reader
    path = write_jsonl(tmp_path / "l.jsonl", [{k: v for k, v in r.items() if k != "big"} for r in rows])
    arrow, _ = load_rollouts([path])
    no_pyarrow_json(monkeypatch)
    lines, _ = load_rollouts([path])
    assert list(lines) == list(arrow)
    for key in arrow:
        assert type(lines[key]) is type(arrow[key]), key
        assert as_list(lines[key]) == as_list(arrow[key]), key
        if isinstance(arrow[key], np.ndarray):
            assert lines[key].dtype == arrow[key].dtype, key
    big, _ = load_rollouts([write_jsonl(tmp_path / "big.jsonl", rows)], keys=["big"])
    assert big["big"] == [2**70] + [None] * (len(rows) - 1)


@pytest.mark.parametrize("fmt", ["jsonl", "jsonl-lines", "parquet"])
def test_progress_adds_up_to_the_file_sizes(tmp_path, monkeypatch, fmt):
    monkeypatch.setattr(dumps, "_BATCH_ROWS", 5)
    monkeypatch.setattr(dumps, "_CHUNK_BYTES", 256)
    if fmt == "jsonl-lines":
        no_pyarrow_json(monkeypatch)
    writer = WRITERS["parquet-row-groups" if fmt == "parquet" else "jsonl"]
    paths = [writer(tmp_path / str(i), rows_of(seed=i)) for i in range(2)]
    calls: list[int] = []
    load_rollouts(paths, keys=["acc"], progress=calls.append)
    assert sum(calls) == sum(p.stat().st_size for p in paths)
    assert all(c > 0 for c in calls)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    kinds=st.lists(st.sampled_from(["float", "bool", "int", "str"]), min_size=1, max_size=4),
    n=st.integers(1, 30),
    batch_rows=st.integers(1, 8),
)
def test_every_reader_gives_back_the_rows(data, kinds, n, batch_rows):
    values = {
        "float": st.floats(allow_nan=False, allow_infinity=False, width=64),
        "bool": st.booleans(),
        "int": st.integers(-(2**40), 2**40),
        "str": st.text(alphabet="abc\u00e9", max_size=3),
    }
    rows = []
    for _ in range(n):
        row = {}
        for j, kind in enumerate(kinds):
            value = data.draw(st.none() | values[kind] if j % 2 else values[kind])
            if value is not None or data.draw(st.booleans()):  # absent or null
                row[f"k{j}"] = value
        rows.append(row)
    names = [f"k{j}" for j in range(len(kinds))]
    present = [k for k in names if any(k in r for r in rows)]
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(dumps, "_BATCH_ROWS", batch_rows)
        mp.setattr(dumps, "_CHUNK_BYTES", 64)  # a few lines a chunk
        mp.setattr(dumps, "_BLOCK_BYTES", 32)
        jsonl = write_jsonl(Path(tmp, "r.jsonl"), rows)
        results = [load_rollouts([jsonl])]
        if present:  # Parquet needs a column
            results.append(load_rollouts([write_parquet(Path(tmp, "r.parquet"), rows, 4)]))
        mp.setitem(sys.modules, "pyarrow.json", None)
        results.append(load_rollouts([jsonl]))
    for columns, n_rows in results:
        assert n_rows == n
        assert sorted(columns) == sorted(present)
        for key in present:
            assert as_list(columns[key]) == expected(rows, key)
            col_values = expected(rows, key)
            if all(isinstance(v, str) for v in col_values):
                check_coded(columns[key], col_values)
            elif all(v is not None for v in col_values):
                assert isinstance(columns[key], np.ndarray)


# ----------------------------------------------------------------------------- load_rollouts errors
@pytest.mark.parametrize(
    ("extra", "keys", "match"),
    [
        (('{"input": "q", "score": 1.0',), None, r"bad\.jsonl:25: malformed JSON line"),
        (('{"input": "q", "score": 1.0',), ["acc"], r"bad\.jsonl:25: malformed JSON line"),
        (("[1, 2]",), ["acc"], r"bad\.jsonl:25: each line must be a JSON object; got list"),
        (
            ('{"score": "high"}',),
            None,
            r"bad\.jsonl:25: key 'score' is a string \('high'\) but it is a number on line 1; a key must",
        ),
        (
            ('{"score": "high"}',),
            ["score", "uid"],
            r"bad\.jsonl:25: key 'score' is a string \('high'\) but it is a number on line 1",
        ),
    ],
    ids=["malformed", "malformed-keys", "not-an-object", "inconsistent", "inconsistent-keys"],
)
def test_malformed_jsonl_names_file_and_line(tmp_path, extra, keys, match):
    path = write_jsonl(tmp_path / "bad.jsonl", rows_of(), extra_lines=extra)
    with pytest.raises(DumpError, match=match):
        load_rollouts([path], keys=keys)


def test_a_type_mix_in_a_key_not_read_is_no_error(tmp_path):
    rows = rows_of()
    path = write_jsonl(tmp_path / "m.jsonl", rows, extra_lines=('{"score": "high", "acc": true}',))
    columns, n_rows = load_rollouts([path], keys=["acc"])
    assert n_rows == len(rows) + 1
    assert as_list(columns["acc"]) == [*expected(rows, "acc"), True]
    with pytest.raises(DumpError, match=r"key 'score' is a string"):
        load_rollouts([path])


@pytest.mark.parametrize(
    ("make", "kwargs", "exc", "match"),
    [
        (lambda d: [d / "nope.jsonl"], {}, DumpError, r"nope\.jsonl: no such file"),
        (lambda d: [d], {}, DumpError, r"is a folder; find_dumps\(\) lists the dump files"),
        (lambda d: [write_jsonl(d / "e.jsonl", [])], {}, DumpError, r"e\.jsonl: no rows"),
        (lambda d: [write_jsonl(d / "e.jsonl", [], ("", "  "))], {}, DumpError, r"e\.jsonl: no rows"),
        (lambda d: [write_parquet(d / "e.parquet", [])], {}, DumpError, r"e\.parquet: no rows"),
        (
            lambda d: [touch(d / "b.parquet", "not parquet")],
            {"keys": ["acc"]},
            DumpError,
            r"b\.parquet: not a readable Parquet file",
        ),
        (lambda d: [touch(d / "x.csv", "a")], {}, DumpError, r"unknown file type"),
        (lambda d: d / "a.jsonl", {}, TypeError, r"files must be a list of paths or Dumps; got a single"),
        (lambda d: [1], {}, TypeError, r"each of files must be a path .* got int"),
        (lambda d: [], {"keys": "acc"}, TypeError, r"keys must be an iterable of column names, not a single"),
        (lambda d: [], {"keys": ["acc", 1]}, TypeError, r"keys must be column names \(str\); got int 1"),
    ],
    ids=[
        "missing",
        "folder",
        "empty",
        "blank-lines",
        "empty-parquet",
        "broken-parquet",
        "unknown-suffix",
        "single-path",
        "not-a-path",
        "keys-string",
        "keys-not-str",
    ],
)
def test_load_rollouts_errors(tmp_path, make, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        load_rollouts(make(tmp_path), **kwargs)


def test_types_across_files(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", rows_of(seed=7))
    b = write_parquet(tmp_path / "b.parquet", [r | {"acc": "yes"} for r in rows_of(seed=8)])
    with pytest.raises(
        DumpError, match=r"key 'acc' holds different types across files: .*a\.jsonl has numbers"
    ):
        load_rollouts([a, b], keys=["acc"])


# ----------------------------------------------------------------------------- schema_keys
def test_schema_keys_of_parquet_is_its_schema(tmp_path):
    table = pa.table(
        {
            "i": pa.array([1, 2], pa.int32()),
            "f": [0.5, None],
            "b": [True, False],
            "s": ["a", "b"],
            "ls": pa.array(["a", "b"], pa.large_string()),
            "d": pa.array(["a", "b"]).dictionary_encode(),
            "l": [[1], []],
            "st": [{"x": 1}, {"x": 2}],
            "z": pa.array([None, None], pa.null()),
        }
    )
    path = tmp_path / "s.parquet"
    pq.write_table(table, path)
    assert schema_keys([path]) == {
        "i": "number",
        "f": "number",
        "b": "number",
        "s": "string",
        "ls": "string",
        "d": "string",
        "l": "list",
        "st": "dict",
        "z": "null",
    }
    columns, _ = load_rollouts([path])
    assert {k: dumps._kind_of(v) for k, v in columns.items()} == schema_keys([path])


def test_schema_keys_of_jsonl_reads_the_first_lines(tmp_path):
    rows: list[dict[str, Any]] = [
        {"uid": "a", "acc": None, "pred": None},
        {"uid": "b", "acc": True, "pred": "1"},
    ]
    rows += [{"uid": "c", "acc": 0.5, "pred": "2", "x": [1]}, {"uid": 3, "late": 1.0}]
    path = write_jsonl(tmp_path / "0.jsonl", rows)
    assert schema_keys([path], n_lines=2) == {"uid": "string", "acc": "number", "pred": "string"}
    assert schema_keys([path], n_lines=3) == {"uid": "string", "acc": "number", "pred": "string", "x": "list"}
    assert schema_keys([path]) == {
        "uid": "mixed",
        "acc": "number",
        "pred": "string",
        "x": "list",
        "late": "number",
    }


def test_schema_keys_merges_files(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"acc": 1, "p": None, "s": "x"}])
    b = write_parquet(tmp_path / "b.parquet", [{"acc": "yes", "p": 2.0, "t": 1}])
    assert schema_keys([Dump(a, None), b]) == {"acc": "mixed", "p": "number", "s": "string", "t": "number"}
    rows = rows_of()
    path = write_jsonl(tmp_path / "0.jsonl", rows)
    columns, _ = load_rollouts([path])
    assert schema_keys(find_dumps(path)) == {k: dumps._kind_of(v) for k, v in columns.items()}


@pytest.mark.parametrize(
    ("make", "kwargs", "exc", "match"),
    [
        (lambda d: [write_jsonl(d / "a.jsonl", [{"a": 1}])], {"n_lines": 0}, ValueError, r"n_lines must be"),
        (lambda d: [write_jsonl(d / "a.jsonl", [], ("{",))], {}, DumpError, r"a\.jsonl:1: malformed JSON"),
        (
            lambda d: [touch(d / "b.pq", "no")],
            {},
            DumpError,
            r"b\.pq: not a readable Parquet file",
        ),
        (lambda d: [d / "none.jsonl"], {}, DumpError, r"none\.jsonl: no such file"),
    ],
    ids=["n-lines", "malformed", "broken-parquet", "missing"],
)
def test_schema_keys_errors(tmp_path, make, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        schema_keys(make(tmp_path), **kwargs)


# ----------------------------------------------------------------------------- iter_steps
def test_iter_steps_groups_files_by_step(tmp_path):
    layout = {
        "10.jsonl": rows_of(2, 2, seed=10, step=10),
        "rank1/10.parquet": rows_of(2, 2, seed=11, step=10),
        "0.jsonl": rows_of(3, 2, seed=0, step=0),
        "5.parquet": rows_of(1, 2, seed=5, step=5),
        "misc.jsonl": rows_of(1, 1, seed=20, step=99),
        "other.jsonl": rows_of(1, 1, seed=21, step=98),
    }
    for rel, rows in layout.items():
        (write_parquet if rel.endswith(".parquet") else write_jsonl)(tmp_path / rel, rows)
    keys = (k for k in ["uid", "acc", "step"])  # a generator: used for every step, not once
    steps = list(iter_steps(tmp_path, keys=keys))
    assert [s.step for s in steps] == [0, 5, 10, None]
    assert all(isinstance(s, StepDump) for s in steps)
    groups = [["0.jsonl"], ["5.parquet"], ["10.jsonl", "rank1/10.parquet"], ["misc.jsonl", "other.jsonl"]]
    for s, group in zip(steps, groups):
        assert [p.relative_to(tmp_path).as_posix() for p in s.files] == group
        rows = [row for rel in group for row in layout[rel]]
        assert s.n_rows == len(rows)
        check_columns(s.columns, rows, ["uid", "acc", "step"])
    assert steps[2].columns["step"].tolist() == [10] * 8


def test_iter_steps_reads_lazily_and_fails_early_for_a_bad_path(tmp_path):
    write_jsonl(tmp_path / "1.jsonl", rows_of(seed=1))
    write_jsonl(tmp_path / "2.jsonl", rows_of(seed=2), extra_lines=("{oops",))
    it = iter_steps(tmp_path, keys=["acc"])
    first = next(it)
    assert first.step == 1 and first.n_rows == 24
    with pytest.raises(DumpError, match=r"2\.jsonl:25: malformed JSON line"):
        next(it)
    with pytest.raises(DumpError, match=r"no such file or folder"):
        iter_steps(tmp_path / "missing")  # at the call, before any iteration
    with pytest.raises(TypeError, match=r"keys must be an iterable of column names"):
        iter_steps(tmp_path, keys="acc")
    (single,) = iter_steps(tmp_path / "1.jsonl")
    assert single.step == 1 and single.files == (tmp_path / "1.jsonl",)


# ----------------------------------------------------------------------------- pathological nesting
def nested(depth: int, kind: str = "list") -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def parser_depth(line: bytes) -> int:
    """The deepest nesting a JSON parser reaches before its first error (a plain scanner)."""
    stack: list[int] = []
    deepest, in_string, escaped = 0, False, False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == 92:
                escaped = True
            elif ch == 34:
                in_string = False
            elif ch == 10:
                break
        elif ch == 34:
            in_string = True
        elif ch == 92:
            break  # a backslash outside a string: the parser stops
        elif ch in (91, 123):
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in (93, 125):
            if not stack or stack[-1] != ch - 2:
                break
            stack.pop()
    return deepest


json_values = st.recursive(
    st.one_of(st.none(), st.integers(-5, 5), st.text(alphabet='ab[]{}"\\\n', max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(alphabet='k[{"\\', max_size=3), inner, max_size=3),
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(json_values, min_size=1, max_size=4), limit=st.integers(0, 6))
def test_nesting_scan_is_exact_on_json(values, limit):
    """On JSON lines (brackets, quotes and backslashes inside strings) the scan finds the first
    line nested deeper than the limit, as a parser sees it."""
    lines = [json.dumps({"x": v}).encode() + b"\n" for v in values]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dumps, "MAX_NESTING", limit)
        got = dumps._deep_line(b"".join(lines))
    want = next((i for i, line in enumerate(lines) if parser_depth(line) > limit), None)
    assert got == want


@settings(max_examples=200, deadline=None)
@given(
    line=st.binary(max_size=40).map(lambda b: bytes(b'[]{}"\\ax'[c % 8] for c in b)), limit=st.integers(0, 4)
)
def test_nesting_scan_never_misses_what_a_parser_reaches(line, limit):
    """On any bytes (malformed lines) the scan flags every line a parser would nest too deep in."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dumps, "MAX_NESTING", limit)
        flagged = dumps._deep_line(line + b"\n") is not None
    assert flagged or parser_depth(line) <= limit


@pytest.mark.parametrize("reader", ["chunks", "whole-file", "lines", "schema"])
@pytest.mark.parametrize("kind", ["list", "object"])
def test_deep_line_refused_with_its_line_number_by_every_reader(tmp_path, monkeypatch, reader, kind):
    """A line nested deeper than MAX_NESTING is named (file:line) before a parser sees it; here the
    limit is lowered to 8 so that pyarrow, if it were reached, would not crash the test."""
    monkeypatch.setattr(dumps, "MAX_NESTING", 8)
    rows = [json.dumps({"uid": f"u{i}", "acc": i % 2, "s": "[[[[[[[[[[{{{{{{"}) for i in range(60)]
    if reader == "whole-file":
        monkeypatch.setattr(
            dumps, "_CHUNK_BYTES", 512
        )  # the chunks stop at a type change (int to float), before the line
        rows[20] = json.dumps({"uid": "u20", "acc": 0.5, "s": ""})
    at = 50 if reader != "schema" else 5
    rows[at - 1] = '{"uid": "x", "acc": 1, "deep": ' + nested(9, kind) + "}"
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(rows) + "\n")
    if reader == "lines":
        no_pyarrow_json(monkeypatch)
    call = (lambda: schema_keys([path])) if reader == "schema" else (lambda: load_rollouts([path]))
    with pytest.raises(DumpError, match=rf"d.jsonl:{at}: nested deeper than 8 levels"):
        call()
    rows[at - 1] = '{"uid": "x", "acc": 1, "deep": ' + nested(7, kind) + "}"  # 8 levels: read
    path.write_text("\n".join(rows) + "\n")
    assert call()


def test_hundred_thousand_levels_do_not_crash_the_process(tmp_path):
    """The issue's crash: 100k nested arrays took pyarrow down with a segmentation fault. In a
    subprocess, so that a crash fails this test instead of killing the test worker."""
    import subprocess

    path = tmp_path / "deep.jsonl"
    path.write_text('{"uid": "a", "acc": 1}\n' * 3 + '{"uid": "b", "acc": 0, "x": ' + nested(100_000) + "}\n")
    script = (
        "import sys\n"
        "from rlmetrics.readers.dumps import DumpError, load_rollouts, schema_keys\n"
        "for read in (lambda p: load_rollouts([p]), lambda p: schema_keys([p])):\n"
        "    try:\n"
        "        read(sys.argv[1])\n"
        "    except DumpError as err:\n"
        "        print(err)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
    assert res.stdout.count("deep.jsonl:4: nested deeper than 512 levels") == 2, res.stdout
