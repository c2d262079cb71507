"""Validation rollout dumps: find them, learn their keys, read only the columns needed.

verl writes one validation dump per step, ``<dump_dir>/<global_step>.jsonl``: one JSON object
per line with ``input``, ``output``, ``gts``, ``score``, ``step`` and the reward's extra keys
(``acc``, ``pred``, ...), often ``data_source`` and ``uid``. Parquet files with the same
columns are read too.

* :func:`find_dumps`: a file, or every dump file under a folder, with the step of verl's names.
* :func:`schema_keys`: the keys of some dumps and their kinds, from the Parquet schema or the
  first lines of a JSONL file (no data read), so that a caller picks its keys first.
* :func:`load_rollouts`: the columns of some dumps, restricted to ``keys=``; Parquet is read in
  record batches of those columns only, JSONL in chunks of lines whose other columns are
  dropped at once (then not even built), so the text columns (``input``, ``output``) are never
  held whole.
* :func:`iter_steps`: a folder's dumps grouped by step, one step in memory at a time.

Columns come back as numpy arrays (numeric columns without nulls), :class:`_Coded` (string
columns without nulls: int64 codes into the distinct values, in order of first appearance) or
Python lists (anything with nulls, nested values), the same for every format and reader. Bad
input raises :class:`DumpError` naming the file (and the line, for JSONL).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator
from itertools import groupby
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlmetrics.errors import DumpError

__all__ = [
    "DUMP_SUFFIXES",
    "Dump",
    "DumpError",
    "StepDump",
    "ValidateInputError",
    "find_dumps",
    "iter_steps",
    "load_rollouts",
    "schema_keys",
]

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
#: the file name endings (case-insensitive) that :func:`find_dumps` takes for dumps
DUMP_SUFFIXES = JSONL_SUFFIXES + PARQUET_SUFFIXES

_CHUNK_BYTES = 1 << 24  # JSONL lines parsed at a time (whole lines; a longer line is one chunk)
_BLOCK_BYTES = 1 << 22  # pyarrow.json's block within a chunk (parsed in parallel)
_BATCH_ROWS = 1 << 16  # Parquet record batch
_PROGRESS_BYTES = 1 << 20  # the line reader reports progress in steps of this size
#: Deepest nesting of arrays and objects accepted in a JSONL line. pyarrow's JSON parser
#: recurses once per level and crashes the whole process (a segmentation fault) near 10,000
#: levels, Python's ``json`` raises RecursionError near 1000: deeper lines are refused, with
#: their line number, before any parser sees them.
MAX_NESTING = 512

Progress = Callable[[int], object]


#: the name the ``validate`` command has used for :class:`DumpError` (one class, two names)
ValidateInputError = DumpError


class Dump(NamedTuple):
    """One dump file and its step (the integer stem of verl's ``<global_step>.jsonl``, else None)."""

    path: Path
    step: int | None


class StepDump(NamedTuple):
    """The dumps of one step, read: the columns of its files, concatenated in path order."""

    step: int | None
    files: tuple[Path, ...]
    #: key -> (n_rows,) numpy array, :class:`_Coded` or list (see the module's docstring)
    columns: dict[str, Any]
    n_rows: int


# ----------------------------------------------------------------------------- finding dumps
def _as_path(source: Any, what: str) -> Path:
    if isinstance(source, Dump):
        return source.path
    if isinstance(source, str | os.PathLike):
        return Path(source)
    raise TypeError(f"{what} must be a path (str or os.PathLike) or a Dump; got {type(source).__name__}")


def _step_of(path: Path) -> int | None:
    stem = path.stem
    return int(stem) if stem.isascii() and stem.isdigit() else None


def _check_suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in DUMP_SUFFIXES:
        raise DumpError(f"{path}: unknown file type {suffix!r}; expected .jsonl or .parquet")
    return suffix


def _order(dump: Dump) -> tuple[bool, int, Path]:
    """Numbered steps first, in step order; then the files without a step; by path within."""
    return (dump.step is None, dump.step if dump.step is not None else 0, dump.path)


def find_dumps(path: str | os.PathLike[str]) -> list[Dump]:
    """The dump files at ``path``: that file, or every dump file under that folder.

    A folder is searched recursively for ``.jsonl``, ``.json``, ``.ndjson``, ``.parquet`` and
    ``.pq`` files (any case), skipping hidden files and folders (names starting with ``.``);
    other files are ignored.

    Parameters
    ----------
    path : str or os.PathLike
        A dump file or a folder of them (e.g. verl's ``validation_data_dir``).

    Returns
    -------
    list of Dump
        ``(path, step)``, ``step = int(stem)`` when the file's stem is an integer (verl's
        ``<global_step>.jsonl``), else None; sorted by step, the files without a step last,
        by path within a step.

    Raises
    ------
    DumpError
        ``path`` does not exist, is a file of another type, or is a folder without dump files.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> d = Path(tmp.name)
    >>> for name in ("10.jsonl", "2.jsonl", "notes.txt", "extra.parquet"):
    ...     _ = (d / name).write_text("")
    >>> [(p.name, step) for p, step in find_dumps(d)]
    [('2.jsonl', 2), ('10.jsonl', 10), ('extra.parquet', None)]
    >>> tmp.cleanup()
    """
    root = _as_path(path, "path")
    if not root.exists():
        raise DumpError(f"{root}: no such file or folder")
    if not root.is_dir():
        _check_suffix(root)
        return [Dump(root, _step_of(root))]
    found: list[Dump] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if not name.startswith(".")]
        for name in filenames:
            if not name.startswith(".") and name.lower().endswith(DUMP_SUFFIXES):
                file = Path(folder, name)
                found.append(Dump(file, _step_of(file)))
    if not found:
        raise DumpError(
            f"{root}: no dump file in this folder or below (looked for {', '.join(DUMP_SUFFIXES)}; "
            "hidden files and folders are skipped)"
        )
    return sorted(found, key=_order)


# ----------------------------------------------------------------------------- kinds of values
def _describe_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def _kind_of(col: Any) -> str:
    """'number', 'string', 'null' or 'mixed' for a column (numpy, _Coded or list).

    A list of nested values gives their type's name ('list', 'dict').
    """
    if isinstance(col, _Coded):
        return "string"
    if isinstance(col, np.ndarray):
        return "number" if col.dtype.kind in "biuf" else "mixed"
    kinds = {_describe_type(v) for v in col} - {"null"}
    kinds = {"number" if k == "bool" else k for k in kinds}
    if not kinds:
        return "null"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _arrow_kind(typ: Any) -> str:
    """The :func:`_kind_of` of a column of Arrow type ``typ``."""
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ):
        return "number"
    if _is_arrow_string(typ):
        return "string"
    if pa.types.is_null(typ):
        return "null"
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return "list"
    if pa.types.is_struct(typ) or pa.types.is_map(typ):
        return "dict"
    return str(typ)


def _is_arrow_string(typ: Any) -> bool:
    import pyarrow as pa

    is_view = getattr(pa.types, "is_string_view", None)
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ) or (is_view and is_view(typ)))


def _merge_kind(seen: str | None, kind: str) -> str:
    if seen is None or seen == "null" or seen == kind:
        return kind
    return seen if kind == "null" else "mixed"


def schema_keys(files: Iterable[str | os.PathLike[str] | Dump], *, n_lines: int = 1000) -> dict[str, str]:
    """The keys of some dumps and the kind of each, without reading their data.

    Parquet: the file's schema (its footer). JSONL: the first ``n_lines`` non-empty lines, so a
    key that first appears further down is not seen, and a key that is null in those lines is
    ``'null'``. Use it to choose the keys to pass to :func:`load_rollouts`.

    Parameters
    ----------
    files : iterable of str, os.PathLike or Dump
    n_lines : int, keyword-only
        Lines of each JSONL file looked at (>= 1).

    Returns
    -------
    dict
        key -> ``'number'`` (numbers and bools), ``'string'``, ``'null'`` (no value seen),
        ``'list'``, ``'dict'``, another Arrow type's name, or ``'mixed'`` (kinds that differ
        between lines or files); keys in order of first appearance.

    Raises
    ------
    DumpError
        A missing file, a file of another type, a malformed line among the first ones, or an
        unreadable Parquet file.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> p = Path(tmp.name, "0.jsonl")
    >>> _ = p.write_text('{"uid": "a", "acc": true, "pred": null}\\n{"uid": "a", "acc": 0.5, "pred": "7"}\\n')
    >>> schema_keys([p])
    {'uid': 'string', 'acc': 'number', 'pred': 'string'}
    >>> tmp.cleanup()
    """
    if isinstance(n_lines, bool) or not isinstance(n_lines, int) or n_lines < 1:
        raise ValueError(f"n_lines must be an integer >= 1; got {n_lines!r}")
    kinds: dict[str, str] = {}
    for path in _file_list(files):
        if _check_suffix(path) in PARQUET_SUFFIXES:
            pq = _pyarrow("reading Parquet")[1]
            try:
                schema = pq.read_schema(path)
            except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
                raise DumpError(f"{path}: not a readable Parquet file ({err})") from None
            file_kinds = {name: _arrow_kind(schema.field(name).type) for name in schema.names}
        else:
            file_kinds = _jsonl_head_kinds(path, n_lines)
        for key, kind in file_kinds.items():
            kinds[key] = _merge_kind(kinds.get(key), kind)
    return kinds


def _jsonl_head_kinds(path: Path, n_lines: int) -> dict[str, str]:
    kinds: dict[str, str] = {}
    seen = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            obj = _parse_line(raw, path, lineno)
            for key, value in obj.items():
                kind = _describe_type(value)
                kinds[key] = _merge_kind(kinds.get(key), "number" if kind == "bool" else kind)
            seen += 1
            if seen >= n_lines:
                break
    return kinds


# ----------------------------------------------------------------------------- columns
class _Coded:
    """A string column as integer codes into ``values`` (cheap to concatenate and group)."""

    def __init__(self, codes: np.ndarray, values: list[str]) -> None:
        self.codes = np.asarray(codes, dtype=np.int64)
        self.values = values

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def __repr__(self) -> str:
        return f"_Coded({len(self)} rows, {len(self.values)} distinct)"

    def tolist(self) -> list[str]:
        return np.asarray(self.values, dtype=object)[self.codes].tolist()


class _Retry(Exception):
    """A reader's shortcut does not apply to this file: read it the next, slower way."""


class _ArrowColumn:
    """One column read as Arrow arrays batch by batch, made into numpy / _Coded / a list once.

    Numbers and the int64 codes of strings are written into one array of ``size`` rows when
    the rows are known (Parquet, a whole table), else kept as numpy chunks and concatenated
    once. Strings are coded at once through one value -> code dict for the whole column (each
    batch's distinct values remapped), so no batch's text outlives the batch.
    """

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self.kind: str | None = None  # 'number', 'string', 'null' or 'other'
        self.out: np.ndarray | None = None  # the preallocated array (size known)
        self.chunks: list[Any] = []  # numpy chunks (size unknown) or lists ('other')
        self.null_at: list[np.ndarray] = []  # row numbers of the nulls of a numeric column
        self.dtype: np.dtype[Any] | None = None
        self.code_of: dict[str, int] = {}
        self.has_null = False
        self.n = 0

    def add(self, arr: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(arr, pa.ChunkedArray):
            for chunk in arr.chunks:
                self.add(chunk)
            return
        if pa.types.is_dictionary(arr.type) and not _is_arrow_string(arr.type.value_type):
            arr = arr.dictionary_decode()
        kind = _arrow_kind(arr.type)
        kind = kind if kind in ("number", "string", "null") else "other"
        if kind == "null":
            self.add_nulls(len(arr))
            return
        if self.kind == "null":  # the nulls so far become nulls of this type
            pending, self.kind, self.n = self.n, None, 0
            self.add(pa.nulls(pending, type=arr.type))
        if self.kind is None:
            self.kind = kind
        elif self.kind != kind:  # one schema per file: only JSONL chunks could disagree
            raise _Retry(f"a column changed from {self.kind} to {kind} between batches")
        if kind == "number":
            if arr.null_count:
                self.has_null = True
                mask = arr.is_null().to_numpy(zero_copy_only=False)
                self.null_at.append(np.flatnonzero(mask) + self.n)
                zero = pa.scalar(False if pa.types.is_boolean(arr.type) else 0, type=arr.type)
                arr = pc.fill_null(arr, zero)
            self._put(arr.to_numpy(zero_copy_only=False))
        elif kind == "string":
            self._put(self._codes(arr))
        elif kind == "other":
            self.chunks.append(arr.to_pylist())
        self.n += len(arr)

    def add_nulls(self, count: int) -> None:
        """``count`` nulls (a batch in which the column is absent or has no value)."""
        if self.kind is None or self.kind == "null":
            self.kind = "null"
        elif self.kind == "number":
            assert self.dtype is not None
            self.has_null = True
            self.null_at.append(np.arange(self.n, self.n + count))
            self._put(np.zeros(count, dtype=self.dtype))
        elif self.kind == "string":
            self.has_null = self.has_null or count > 0
            self._put(np.full(count, -1, dtype=np.int64))
        else:
            self.chunks.append([None] * count)
        self.n += count

    def _put(self, values: np.ndarray) -> None:
        self.dtype = values.dtype
        if self.size is None:
            self.chunks.append(values)
            return
        if self.out is None:
            self.out = np.empty(self.size, dtype=values.dtype)
        self.out[self.n : self.n + values.shape[0]] = values

    def _codes(self, arr: Any) -> np.ndarray:
        """int64 codes of a string array in the column's value -> code dict (-1: null)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        given = pa.types.is_dictionary(arr.type)
        if not given:
            if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
                arr = arr.cast(pa.large_string())  # string_view
            arr = pc.dictionary_encode(arr)  # the batch's distinct values, in order of appearance
        indices = arr.indices
        idx = (pc.fill_null(indices, -1) if indices.null_count else indices).to_numpy()
        dictionary = arr.dictionary
        if given:
            # A dictionary read from a file may hold values this batch does not use, in any
            # order: take the used ones in order of first appearance.
            used, first = np.unique(idx[idx >= 0], return_index=True)
            order = used[np.argsort(first, kind="stable")]
            distinct = dictionary.take(pa.array(order)).to_pylist()
        else:
            order = np.arange(len(dictionary))
            distinct = dictionary.to_pylist()
        code_of = self.code_of
        remap = np.full(len(dictionary) + 1, -1, dtype=np.int64)  # the last entry: index -1, null
        remap[order] = np.fromiter(
            (-1 if v is None else code_of.setdefault(v, len(code_of)) for v in distinct),
            dtype=np.int64,
            count=len(distinct),
        )
        codes = remap[idx]
        self.has_null = self.has_null or bool((codes < 0).any())
        return codes

    def finish(self) -> Any:
        if self.kind in ("number", "string"):
            if self.out is not None:
                values, self.out = self.out[: self.n], None
            else:
                values = np.concatenate(self.chunks) if self.chunks else np.zeros(0, dtype=np.int64)
            self.chunks = []
            if self.kind == "number":
                if not self.has_null:
                    return values
                out = values.tolist()
                for i in np.concatenate(self.null_at).tolist():
                    out[i] = None
                return out
            distinct = list(self.code_of)
            if not self.has_null:
                return _Coded(values, distinct)
            return np.asarray([*distinct, None], dtype=object)[values].tolist()  # code -1: None
        if self.kind == "other":
            items: list[Any] = []
            for chunk in self.chunks:
                items.extend(chunk)
            return items
        return [None] * self.n


def _columns_of_table(table: Any, keys: Collection[str] | None = None) -> dict[str, Any]:
    """Arrow table (or record batch) -> columns (numpy, _Coded or lists), those in ``keys`` only."""
    out: dict[str, Any] = {}
    for name in table.column_names:
        if keys is None or name in keys:
            col = _ArrowColumn(table.num_rows)
            col.add(table.column(name))
            out[name] = col.finish()
    return out


def _column_of_list(values: list[Any]) -> Any:
    """A column read line by line, in the form the Arrow readers give (numpy / _Coded / list)."""
    types = set(map(type, values))
    if types == {str}:
        code_of: dict[str, int] = {}
        codes = np.fromiter(
            (code_of.setdefault(v, len(code_of)) for v in values), dtype=np.int64, count=len(values)
        )
        return _Coded(codes, list(code_of))
    if types and types <= {bool, int, float}:
        dtype = bool if types == {bool} else np.int64 if types == {int} else np.float64
        try:
            return np.asarray(values, dtype=dtype)
        except OverflowError:  # an integer beyond int64: keep the Python ints
            return values
    return values


# ----------------------------------------------------------------------------- reading one file
def _pyarrow(what: str) -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"{what} needs pyarrow: pip install 'rlmetrics[io]'") from None
    return pa, pq


class _Meter:
    """Progress of one file in bytes, reported once however often a reader restarts it."""

    def __init__(self, progress: Progress | None, size: int) -> None:
        self.progress = progress
        self.size = size
        self.pos = 0
        self.reported = 0

    def advance(self, nbytes: int) -> None:
        self.pos = min(self.pos + nbytes, self.size)
        if self.progress is not None and self.pos > self.reported:
            self.progress(self.pos - self.reported)
            self.reported = self.pos

    def restart(self) -> None:
        self.pos = 0

    def finish(self) -> None:
        self.advance(self.size)


# ----------------------------------------------------------------------------- nesting
def _too_deep_error(path: Path, lineno: int) -> DumpError:
    return DumpError(
        f"{path}:{lineno}: nested deeper than {MAX_NESTING} levels of arrays/objects; such a line is "
        "refused before parsing (JSON parsers recurse per level: pyarrow's would crash the process)"
    )


def _deep_line(chunk: bytes) -> int | None:
    """The index (0-based) of the first line of ``chunk`` (whole lines) nested deeper than
    :data:`MAX_NESTING`, or None.

    A line cannot be nested deeper than it has ``[`` and ``{`` bytes, counted for every line
    at once; only the rare lines with more are scanned exactly (brackets inside strings do not
    count; a quote is escaped by an odd run of backslashes). Up to a line's first syntax error
    (where any parser stops) the scan sees the nesting a parser sees.
    """
    b = np.frombuffer(chunk, dtype=np.uint8)
    if b.size == 0:
        return None
    ends = np.flatnonzero(b == 10)
    if ends.size == 0 or ends[-1] != b.size - 1:
        ends = np.append(ends, b.size - 1)
    starts = np.concatenate([[0], ends[:-1] + 1])
    open_at = np.flatnonzero((b | 32) == 123)  # '[' | 32 == '{'
    opens = np.diff(np.searchsorted(open_at, ends, side="right"), prepend=0)
    flagged = np.flatnonzero(opens > MAX_NESTING)
    if flagged.size == 0:
        return None
    lines = [chunk[starts[i] : ends[i] + 1] for i in flagged.tolist()]
    deep = _first_deep(np.frombuffer(b"".join(lines), dtype=np.uint8), [len(x) for x in lines])
    return None if deep is None else int(flagged[deep])


def _first_deep(b: np.ndarray, lengths: list[int]) -> int | None:
    """The first of these lines (bytes ``b``, one after another) nested deeper than MAX_NESTING.

    Every array is the size of the quotes, backslashes or brackets, none the size of ``b``.
    """
    ends = np.cumsum(lengths) - 1
    starts = ends - np.asarray(lengths) + 1
    quotes = np.flatnonzero(b == 34)
    slashes = np.flatnonzero(b == 92)
    if quotes.size and slashes.size:
        # the run of backslashes just before each quote: odd escapes it
        prev = np.searchsorted(slashes, quotes) - 1  # the last backslash before the quote
        adjacent = (prev >= 0) & (slashes[np.maximum(prev, 0)] == quotes - 1)
        breaks = np.ones(slashes.size, dtype=bool)
        breaks[1:] = np.diff(slashes) != 1
        run_start = np.maximum.accumulate(np.where(breaks, np.arange(slashes.size), 0))
        run = np.where(adjacent, prev - run_start[np.maximum(prev, 0)] + 1, 0)
        quotes = quotes[run % 2 == 0]  # the quotes that open or close a string
    low = b | 32
    brackets = np.flatnonzero((low == 123) | (low == 125))
    line_of = np.searchsorted(ends, brackets)
    quotes_before = np.searchsorted(quotes, brackets) - np.searchsorted(quotes, starts[line_of])
    outside = quotes_before % 2 == 0
    brackets, line_of = brackets[outside], line_of[outside]
    if brackets.size == 0:
        return None
    delta = np.where(low[brackets] == 123, 1, -1)
    level = np.cumsum(delta)
    first = np.searchsorted(line_of, line_of)  # each line's first bracket
    depth = level - (level[first] - delta[first])
    deep = np.flatnonzero(depth > MAX_NESTING)
    return None if deep.size == 0 else int(line_of[deep[0]])


def _check_nesting(chunk: bytes, path: Path, first_lineno: int) -> None:
    """:func:`_deep_line` of a chunk whose first line is line ``first_lineno`` of ``path``."""
    deep = _deep_line(chunk)
    if deep is not None:
        raise _too_deep_error(path, first_lineno + deep)


def _check_nesting_file(path: Path) -> None:
    """:func:`_check_nesting` over a whole file, chunk by chunk."""
    lineno = 1
    for chunk in _line_chunks(path, _CHUNK_BYTES):
        _check_nesting(chunk, path, lineno)
        lineno += chunk.count(b"\n")


def _parse_line(raw: bytes, path: Path, lineno: int) -> dict[str, Any]:
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING and _deep_line(raw) is not None:
        raise _too_deep_error(path, lineno)
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DumpError(f"{path}:{lineno}: malformed JSON line ({err})") from None
    except RecursionError:
        raise _too_deep_error(path, lineno) from None
    if not isinstance(obj, dict):
        raise DumpError(f"{path}:{lineno}: each line must be a JSON object; got {_describe_type(obj)}")
    return obj


def _read_jsonl_lines(
    path: Path, progress: Any = None, keys: Collection[str] | None = None
) -> tuple[dict[str, Any], int]:
    """Line-by-line JSONL reader: exact file/line of malformed lines and inconsistent types.

    Only the keys in ``keys`` (all when None) are kept and type-checked.
    """
    meter = progress if isinstance(progress, _Meter) else _Meter(progress, path.stat().st_size)
    columns: dict[str, list[Any]] = {}
    kinds: dict[str, tuple[str, int]] = {}
    n_rows = 0
    pending = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            pending += len(raw)
            if pending >= _PROGRESS_BYTES:
                meter.advance(pending)
                pending = 0
            if not raw.strip():
                continue
            obj = _parse_line(raw, path, lineno)
            for key, value in obj.items():
                if keys is not None and key not in keys:
                    continue
                kind = _describe_type(value)
                if kind in ("number", "bool", "string"):
                    seen = kinds.get(key)
                    compatible = seen is None or seen[0] == kind or {seen[0], kind} == {"number", "bool"}
                    if not compatible:
                        assert seen is not None
                        raise DumpError(
                            f"{path}:{lineno}: key {key!r} is a {kind} ({value!r}) but it is a {seen[0]} "
                            f"on line {seen[1]}; a key must hold one type (numbers/bools or strings) "
                            "in all lines"
                        )
                    if seen is None:
                        kinds[key] = (kind, lineno)
                col = columns.get(key)
                if col is None:
                    col = columns[key] = [None] * n_rows
                col.append(value)
            n_rows += 1
            for col in columns.values():
                if len(col) < n_rows:
                    col.append(None)
    meter.finish()
    return {key: _column_of_list(col) for key, col in columns.items()}, n_rows


def _read_jsonl(
    path: Path, progress: Any = None, keys: Collection[str] | None = None
) -> tuple[dict[str, Any], int]:
    """JSONL through pyarrow when it can: in chunks of whole lines (other columns dropped per
    chunk), else whole (types promoted across blocks), else line by line (exact errors; no
    pyarrow needed)."""
    meter = _Meter(progress, path.stat().st_size)
    try:
        import pyarrow as pa
        import pyarrow.json as pa_json
    except ImportError:
        return _read_jsonl_lines(path, meter, keys)
    arrow_errors = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, _Retry)
    try:
        return _read_jsonl_chunks(path, meter, keys)
    except arrow_errors:
        # The types of the first chunks do not hold for a later one (an int column with a
        # float, a string in a number column): the whole-file reader promotes where it can.
        meter.restart()
    _check_nesting_file(path)  # this reader sees the whole file, past where the chunks stopped
    try:
        table = pa_json.read_json(path, read_options=pa_json.ReadOptions(block_size=_BLOCK_BYTES))
    except arrow_errors:
        # Locate the problem precisely (and read the file when it is only a type mix).
        meter.restart()
        return _read_jsonl_lines(path, meter, keys)
    n_rows = table.num_rows
    columns = _columns_of_table(table, keys)
    del table
    meter.finish()
    return columns, n_rows


def _line_chunks(path: Path, size: int) -> Iterator[bytes]:
    """The file in pieces of about ``size`` bytes, each ending at the end of a line."""
    rest = b""
    with path.open("rb") as fh:
        while True:
            buf = fh.read(size)
            if not buf:
                if rest.strip():
                    yield rest
                return
            buf = rest + buf if rest else buf
            cut = buf.rfind(b"\n") + 1
            if cut == 0:  # no end of line yet: a line longer than size
                rest = buf
                continue
            rest = buf[cut:]
            yield buf[:cut]


def _read_jsonl_chunks(path: Path, meter: _Meter, keys: Collection[str] | None) -> tuple[dict[str, Any], int]:
    """pyarrow.json over chunks of whole lines, each chunk parsed with the types seen so far.

    Memory holds one chunk (its text columns) besides the columns kept. pyarrow's own
    streaming reader (``open_json``) reads ahead without bound, up to the whole file.
    """
    import pyarrow as pa
    import pyarrow.json as pa_json

    cols: dict[str, _ArrowColumn] = {}
    schema = None  # the typed columns so far (null-typed ones are inferred again)
    n_rows = 0
    lineno = 1  # of the chunk's first line
    for chunk in _line_chunks(path, _CHUNK_BYTES):
        _check_nesting(chunk, path, lineno)
        lineno += chunk.count(b"\n")
        if schema is None:
            parse = pa_json.ParseOptions()
        elif keys is not None and all(key in schema.names for key in keys):
            # every key wanted has its type: the other keys are skipped, not even built
            parse = pa_json.ParseOptions(
                explicit_schema=pa.schema([schema.field(key) for key in keys]),
                unexpected_field_behavior="ignore",
            )
        else:
            parse = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
        block = _BLOCK_BYTES if len(chunk) > _BLOCK_BYTES else len(chunk) + 1
        try:
            table = pa_json.read_json(
                pa.BufferReader(chunk),
                read_options=pa_json.ReadOptions(block_size=block),
                parse_options=parse,
            )
        except pa.ArrowInvalid as err:
            if "straddl" not in str(err):  # a line longer than a block: that chunk in one block
                raise
            table = pa_json.read_json(
                pa.BufferReader(chunk),
                read_options=pa_json.ReadOptions(block_size=len(chunk) + 1),
                parse_options=parse,
            )
        schema = pa.schema([f for f in table.schema if not pa.types.is_null(f.type)])
        for name in table.column_names:
            if keys is None or name in keys:
                col = cols.get(name)
                if col is None:
                    col = cols[name] = _ArrowColumn()
                    col.add_nulls(n_rows)
                col.add(table.column(name))
        n_rows += table.num_rows
        for col in cols.values():
            if col.n < n_rows:  # absent from this chunk (a null-typed key not in the schema)
                col.add_nulls(n_rows - col.n)
        del table
        meter.advance(len(chunk))
    meter.finish()
    return {name: col.finish() for name, col in cols.items()}, n_rows


def _read_parquet(
    path: Path, progress: Any = None, keys: Collection[str] | None = None
) -> tuple[dict[str, Any], int]:
    """Parquet in record batches of the columns in ``keys`` (all when None)."""
    pa, pq = _pyarrow("reading Parquet")
    meter = _Meter(progress, path.stat().st_size)
    try:
        with pq.ParquetFile(path) as pf:
            n_rows = pf.metadata.num_rows
            names = [name for name in pf.schema_arrow.names if keys is None or name in keys]
            cols = {name: _ArrowColumn(n_rows) for name in names}
            if names and n_rows:
                for batch in pf.iter_batches(batch_size=_BATCH_ROWS, columns=names):
                    for name, col in cols.items():
                        col.add(batch.column(name))
                    meter.advance(meter.size * batch.num_rows // n_rows)
    except (pa.ArrowException, OSError) as err:
        raise DumpError(f"{path}: not a readable Parquet file ({err})") from None
    meter.finish()
    return {name: col.finish() for name, col in cols.items()}, n_rows


# ----------------------------------------------------------------------------- several files
def _concat(parts: list[tuple[Path, Any]], key: str) -> Any:
    kinds = {_kind_of(col) for _, col in parts} - {"null"}
    if len(kinds) > 1:
        where = ", ".join(f"{path} has {_kind_of(col)}s" for path, col in parts)
        raise DumpError(f"key {key!r} holds different types across files: {where}")
    if len(parts) == 1:
        return parts[0][1]
    if all(isinstance(col, np.ndarray) for _, col in parts):
        return np.concatenate([col for _, col in parts])
    if all(isinstance(col, _Coded) for _, col in parts):
        code_of: dict[str, int] = {}
        codes = []
        for _, col in parts:
            remap = np.asarray([code_of.setdefault(v, len(code_of)) for v in col.values], dtype=np.int64)
            codes.append(remap[col.codes] if col.codes.size else col.codes)
        return _Coded(np.concatenate(codes), list(code_of))
    out: list[Any] = []
    for _, col in parts:
        out.extend(col.tolist() if hasattr(col, "tolist") else col)
    return out


def _file_list(files: Any) -> list[Path]:
    if isinstance(files, str | os.PathLike | Dump):
        raise TypeError(
            "files must be a list of paths or Dumps; got a single path (wrap it in a list, or "
            "use find_dumps for a folder)"
        )
    paths = [_as_path(source, "each of files") for source in files]
    for path in paths:
        if not path.exists():
            raise DumpError(f"{path}: no such file")
        if path.is_dir():
            raise DumpError(f"{path}: is a folder; find_dumps() lists the dump files in it")
    return paths


def _key_set(keys: Iterable[str] | None) -> frozenset[str] | None:
    if keys is None:
        return None
    if isinstance(keys, str | bytes):
        raise TypeError(f"keys must be an iterable of column names, not a single string; got {keys!r}")
    out = frozenset(keys)
    bad = [k for k in out if not isinstance(k, str)]
    if bad:
        raise TypeError(f"keys must be column names (str); got {type(bad[0]).__name__} {bad[0]!r}")
    return out


def load_rollouts(
    files: Iterable[str | os.PathLike[str] | Dump],
    *,
    keys: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], int]:
    """Read JSONL/Parquet rollout files into columns (same keys across files, None where absent).

    Parameters
    ----------
    files : iterable of str, os.PathLike or Dump
        ``.jsonl`` / ``.json`` / ``.ndjson`` (one JSON object per line) or ``.parquet`` / ``.pq``
        files, concatenated in this order.
    keys : iterable of str, optional, keyword-only
        The columns to read; None reads them all. Parquet reads only these columns; JSONL drops
        the others chunk by chunk (16 MB of lines). Keys in no file are absent from the result.
    progress : callable, optional, keyword-only
        Called with a number of bytes as the files are read (the calls of a file add up to its
        size).

    Returns
    -------
    (columns, n_rows)
        ``columns``: key -> (n_rows,) numpy array (numbers without nulls), ``_Coded`` (strings
        without nulls: ``.codes`` int64, ``.values``) or list (nulls, nested or mixed values),
        in order of first appearance; ``n_rows``: the rows of all files.

    Raises
    ------
    DumpError
        A missing file, a file of another type, a file without rows, a malformed line
        (``file:line``), a key of two types, an unreadable Parquet file.
    TypeError
        ``files`` or ``keys`` given as a single string.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> p = Path(tmp.name, "0.jsonl")
    >>> _ = p.write_text('{"input": "long text", "uid": "a", "acc": 1.0}\\n{"uid": "b", "acc": 0.0}\\n')
    >>> columns, n_rows = load_rollouts([p], keys=["uid", "acc"])
    >>> n_rows, sorted(columns), columns["acc"].tolist(), columns["uid"].tolist()
    (2, ['acc', 'uid'], [1.0, 0.0], ['a', 'b'])
    >>> tmp.cleanup()
    """
    paths = _file_list(files)
    wanted = _key_set(keys)
    per_file: list[tuple[Path, dict[str, Any], int]] = []
    for path in paths:
        if _check_suffix(path) in JSONL_SUFFIXES:
            cols, n_rows = _read_jsonl(path, progress, wanted)
        else:
            cols, n_rows = _read_parquet(path, progress, wanted)
        if n_rows == 0:
            raise DumpError(f"{path}: no rows")
        per_file.append((path, cols, n_rows))
    names: dict[str, None] = {}
    for _, cols, _ in per_file:
        names.update(dict.fromkeys(cols))
    merged: dict[str, Any] = {}
    for key in names:
        parts = [(path, cols.pop(key) if key in cols else [None] * n) for path, cols, n in per_file]
        merged[key] = _concat(parts, key)
        del parts
    return merged, sum(n for _, _, n in per_file)


# ----------------------------------------------------------------------------- step by step
def iter_steps(
    path: str | os.PathLike[str],
    *,
    keys: Iterable[str] | None = None,
    progress: Progress | None = None,
) -> Iterator[StepDump]:
    """The dumps at ``path`` grouped by step and read one step at a time.

    Memory holds one step's columns (those in ``keys``) at a time: drop each :class:`StepDump`
    before taking the next.

    Parameters
    ----------
    path : str or os.PathLike
        A dump file or a folder of them (see :func:`find_dumps`).
    keys, progress : keyword-only
        As in :func:`load_rollouts`.

    Returns
    -------
    iterator of StepDump
        In the order of :func:`find_dumps`: the numbered steps ascending (the files of a step,
        e.g. one per rank or format, together), then all files without a step as one
        ``step=None``.

    Raises
    ------
    DumpError
        At the call, as :func:`find_dumps`; while iterating, as :func:`load_rollouts`.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> for step in (0, 20, 10):
    ...     _ = Path(tmp.name, f"{step}.jsonl").write_text(f'{{"acc": {step / 20}}}\\n' * 2)
    >>> [(s.step, s.n_rows, s.columns["acc"].tolist()) for s in iter_steps(tmp.name, keys=["acc"])]
    [(0, 2, [0.0, 0.0]), (10, 2, [0.5, 0.5]), (20, 2, [1.0, 1.0])]
    >>> tmp.cleanup()
    """
    groups = [(step, [d.path for d in dumps]) for step, dumps in groupby(find_dumps(path), key=_step)]
    return _load_steps(groups, _key_set(keys), progress)


def _step(dump: Dump) -> int | None:
    return dump.step


def _load_steps(
    groups: list[tuple[int | None, list[Path]]], keys: frozenset[str] | None, progress: Progress | None
) -> Iterator[StepDump]:
    for step, files in groups:
        columns, n_rows = load_rollouts(files, keys=keys, progress=progress)
        yield StepDump(step, tuple(files), columns, n_rows)
