"""Metrics read back from the text a trainer prints to its console.

Two formats are read, both as users paste them (a terminal capture, a job log, a notebook cell):

**verl console** (``trainer.logger=['console']``): one record per training step,

.. code-block:: text

    step:12 - actor/entropy:0.452 - critic/score/mean:0.300 - timing_s/gen:1.204

* a record starts with ``step:N`` (an integer) at the start of a line, or after a space, ``]``,
  ``|`` or ``>`` (a logging prefix, a progress bar), and goes on as ``" - "``-separated
  ``key:value`` fields; a value is a number (``0.45``, ``-3``, ``1e-05``), ``nan``, ``inf`` or
  ``-inf``; other values (``[1, 2]``, ``None``, a word) are skipped with their key;
* ANSI colour codes (also with the ESC character lost, ``[36m``) and Ray's line prefixes
  (``(TaskRunner pid=222265)``, ``(WorkerDict pid=1609, ip=10.0.0.1)``) are removed from every
  line, and so is the ``[repeated 3x across cluster]`` of Ray's log deduplication; ``\\r`` (a
  progress bar redrawn) ends a line;
* a record hard-wrapped at a fixed width (broken anywhere, in a key, a number or ``step:`` itself,
  each piece on a line of its own, with or without the Ray prefix repeated) is joined back: a
  line continues the open record when the record joined with it still reads as one, and it is not
  a new record; whitespace lost at a break around ``" - "`` is tolerated;
* lines of other processes (another Ray prefix) between the pieces are passed over, any other
  line ends the record (config dumps, warnings and progress bars around records are ignored);
* a step printed twice (verl prints the validation record of a step, then its training record)
  gives two rows of one step (:func:`~rlmetrics.health.findings.as_history` merges them).

**TRL / transformers printed dicts** (the HF ``Trainer``'s ``print(logs)`` / ``tqdm.write``):

.. code-block:: text

    {'loss': 0.0123, 'grad_norm': 0.31, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': 0.01}

* a dict is read as a Python literal: bare ``nan`` / ``inf`` / ``-inf``, ``np.float64(0.5)`` or
  ``tensor(0.5)`` are numbers; strings, ``None`` and nested containers are skipped;
* a dict may sit inside progress-bar output (``\\r`` redraws, a tqdm bar before or after it on
  its line) and may be spread over several lines (a ``pprint``, or a hard wrap in the middle of a
  key or number: the lines are joined as they are);
* a dict whose opening brace a paste lost (``'loss': 0.1, ..., 'epoch': 0.1}``), or both of its
  braces (``'loss': 0.1, 'reward': 0.5`` to the end of its line or a ``\\r``), is read from its
  first quoted key (at a line's start or after a space, ``]``, ``|``, ``>``; two items at least;
  not an item of a dict whose brace is there, of a damaged one or of a ``pprint``);
* only a trainer's log dict is a row: one with a key a trainer logs (``loss``, ``grad_norm``,
  ``learning_rate``, ``epoch``, ``reward``, ``kl``, ``entropy``, ``eval_*``, ``rewards/*``, ...);
  other dicts (a config) are ignored, and so is the summary dict of the end of training
  (``train_runtime``, ``train_samples_per_second``: not a step);
* the dicts hold no step: they are numbered 1, 2, 3, ... in order, unless a dict holds ``step``
  or ``global_step`` (or ms-swift's ``'global_step/max_steps': '2/4389'``), which is used (and
  numbering goes on from it), else the step of ms-swift's progress bar (``Train:  1%|...| 2/4389``)
  before it, when the bar has moved on since the dict before; an evaluation dict (only
  ``eval_*`` keys, besides ``epoch``) belongs to the step before it;
* a notebook progress table, as copied from the cell (a header ``Step | Training Loss | reward
  ...``, then one row of numbers per logged step; cells separated by ``|``, tabs or spaces;
  ``No log`` is a missing value; a rule of dashes, ``-- | --`` as GitHub writes a pasted HTML
  table, and a row ``...`` for rows left out are passed over) gives one row per line, at the
  step of its first column;
  ``Training Loss`` is read as ``loss``, ``Validation Loss`` as ``eval_loss``.

A record cut off at its end (a paste that stops inside it, a terminal capture, a crash: a verl
record whose text stops inside a field or after a ``" -"``, a trainer dict that does not close on
its line) is read up to the cut: its whole fields, the one cut in two left out (``0.0`` of
``0.052`` is no value), and the read warns once per file with the line numbers. A damaged
record (a verl record with a field that does not read back, a trainer dict that closes but is
not a Python literal) is skipped and counted: every parser returns its rows and the count of records skipped
(``*_records`` the line number where each starts);
:func:`read_verl_console` and :func:`read_trl_printed` (the readers :func:`rlmetrics.readers.read_run`
uses) warn once per file with the count and the line numbers.

Every parser here is pure: text in, rows out (dicts with an int ``step`` and float values, NaN
and +/-inf included, as :func:`~rlmetrics.readers.as_history` takes them).
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, NamedTuple

from rlmetrics import keys as K
from rlmetrics.readers._history import as_history
from rlmetrics.readers._run import Notes, Parsed, Source

__all__ = [
    "NUMBER",
    "TRL_PRINTED",
    "VERL_CONSOLE",
    "clean_line",
    "is_trl_printed",
    "is_verl_console",
    "numbered_lines",
    "parse_trl_printed",
    "parse_verl_console",
    "read_trl_printed",
    "read_verl_console",
    "split_lines",
    "trl_printed_records",
    "verl_console_records",
]

VERL_CONSOLE = "verl-console"
TRL_PRINTED = "trl-printed"

_Rows = list[dict[str, Any]]

# ---------------------------------------------------------------------------------------------
# Lines
# ---------------------------------------------------------------------------------------------

# CSI (colours, cursor moves), OSC (titles, links) and two-character escapes; then SGR codes whose
# ESC was lost in a copy ("[36m(TaskRunner pid=1)[0m")
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|\[[0-9;]{0,12}m"
)
_RAY_PREFIX = re.compile(r"[ \t]*(\((?:[\w.<>:-]+ )?pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?\)) ?")
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, a ``\\r`` (a redrawn progress bar) ending a line as ``\\n`` does.

    Examples
    --------
    >>> split_lines("a\\r\\nb\\rc\\nd")
    ['a', 'b', 'c', 'd']
    """
    return _LINE_BREAK.split(text)


def clean_line(line: str) -> tuple[str, str]:
    """A console line without its colour codes, split into its Ray prefix and its content.

    Parameters
    ----------
    line : str
        One line, without its line break.

    Returns
    -------
    prefix : str
        Ray's ``(name pid=N)`` (``(name pid=N, ip=...)``) that starts the line, or ``""``.
    content : str
        The rest of the line: without the prefix and the one space after it, without colour
        codes and without Ray's ``[repeated Nx across cluster]``; other whitespace is kept.

    Examples
    --------
    >>> clean_line("\\x1b[36m(TaskRunner pid=222265)\\x1b[0m step:1 - a:0.5")
    ('(TaskRunner pid=222265)', 'step:1 - a:0.5')
    >>> clean_line("  plain line ")
    ('', '  plain line ')
    """
    line = _ANSI.sub("", line)
    m = _RAY_PREFIX.match(line)
    prefix, content = (m.group(1), line[m.end() :]) if m else ("", line)
    return prefix, _RAY_REPEATED.sub("", content)


# ---------------------------------------------------------------------------------------------
# verl console
# ---------------------------------------------------------------------------------------------

_NUM = r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
#: A printed number, as a regular expression: ``0.45``, ``-3``, ``1e-05``, ``nan``, ``inf``, ``-Infinity``.
NUMBER = _NUM
# values that are no number: a list, a tuple, a dict, a word (None, True, a name) or a call
_OTHER = r"\[[^\[\]]*\]|\([^()]*\)|\{[^{}]*\}|[A-Za-z_][\w.\-/]*(?:\([^()]*\))?"
_KEY = r"[^\s:]+"
_SEP = re.compile(r"\s+-\s*|\s*-\s+")  # " - ", tolerating a space lost at a wrap
_FIELD = re.compile(rf"({_KEY}):(?:({_NUM})|{_OTHER})")
_PARTIAL_VALUE = (
    r"[-+]?(?:\d+\.?\d*|\.\d*)?(?:[eE][-+]?\d*)?|[-+]?[A-Za-z_][\w.\-/]*(?:\([^()]*\)?)?"
    r"|\[[^\[\]]*\]?|\([^()]*\)?|\{[^{}]*\}?"
)
_PARTIAL_FIELD = re.compile(rf"[^\s:]*|{_KEY}:(?:{_PARTIAL_VALUE})")
_PARTIAL_SEP = re.compile(r"\s*-?\s*")
_HEAD = re.compile(r"step:(\d+)")
_PARTIAL_HEAD = re.compile(r"s(?:t(?:e(?:p(?::)?)?)?)?")
_LINE_START = re.compile(r"step:\d+(?:\s*-|\s*$)")
_START_INSIDE = re.compile(r"(?<=[\s\]|>])step:\d+\s*-\s")


def _fields(text: str) -> tuple[int, list[str]] | None:
    """The step and the field texts of a record text ``step:N - ...``; None if it has no head."""
    m = _HEAD.match(text)
    if m is None:
        return None
    rest = text[m.end() :]
    parts = _SEP.split(rest)
    return int(m.group(1)), parts


def _complete(text: str) -> bool:
    """Whether ``text`` (stripped) reads as a whole record."""
    split = _fields(text.strip())
    if split is None:
        return False
    _, parts = split
    if parts == [""]:
        return True
    return parts[0] == "" and all(_FIELD.fullmatch(p) for p in parts[1:])


def _readable_start(text: str) -> bool:
    """Whether ``text`` is the start of some record (it may stop anywhere, also in ``step:``)."""
    text = text.lstrip()
    if _PARTIAL_HEAD.fullmatch(text):
        return True
    split = _fields(text)
    if split is None:
        return False
    _, parts = split
    if len(parts) == 1:  # no whole separator yet: the rest is the start of one
        return _PARTIAL_SEP.fullmatch(parts[0]) is not None
    if parts[0] != "" or not all(_FIELD.fullmatch(p) for p in parts[1:-1]):
        return False
    last = parts[-1]
    if _PARTIAL_FIELD.fullmatch(last):
        return True
    # a whole field, then the start of a separator (" ", " -", "-")
    m = _FIELD.match(last)
    while m is not None:  # the longest whole field that the rest can follow
        if _PARTIAL_SEP.fullmatch(last[m.end() :]):
            return True
        m = _FIELD.match(last[: m.end() - 1]) if m.end() > 1 else None
    return False


_MAX_RECORD_CHARS = 1 << 16  # a record is a few KB: what grows past this is no record
_MAX_FIELD_CHARS = 1 << 12
_LAST_NUMBER = re.compile(rf"(?<![^\s]){_KEY}:({_NUM})$")
_NUMBER_START = re.compile(
    r"[-+]?(?:(?:\d+\.?\d*|\.\d*)(?:[eE][-+]?\d*)?|[nN](?:[aA][nN]?)?|[iI](?:[nN](?:[fF]\w*)?)?)"
)
_LEADING = re.compile(r"\S*")


def _continues(text: str, content: str) -> bool:
    """Whether the line ``content`` goes on with the open record ``text`` (a wrap).

    ``text`` reads as the start of a record already: only its last field and what follows are
    read again, so a record of many pieces costs a pass over each piece, not over the record.
    """
    if len(text) + len(content) > _MAX_RECORD_CHARS:
        return False
    window = text[-_MAX_FIELD_CHARS:]
    seps = [m.start() for m in _SEP.finditer(window)]
    if seps:
        window = "step:0" + window[seps[-1] :]
    elif len(text) > len(window):  # one field longer than any: no record
        return False
    if not _readable_start(window + content):
        return False
    # a number that ends the text stays one ("nan" + "Done" is no value, "1.5" + "e-3" is)
    m = _LAST_NUMBER.search(window)
    if m is None:
        return True
    lead = _LEADING.match(content)
    follow = lead.group().rstrip("-") if lead else ""
    return _NUMBER_START.fullmatch(m.group(1) + follow) is not None


def _record_start(content: str) -> int | None:
    """Where a record starts in the line ``content``, or None."""
    stripped = content.lstrip()
    if stripped and (_PARTIAL_HEAD.fullmatch(stripped) or _LINE_START.match(stripped)):
        return len(content) - len(stripped)
    m = _START_INSIDE.search(content)
    return m.start() if m else None


def _verl_row(text: str) -> dict[str, Any] | None:
    """The row of a whole record text; None if it is damaged."""
    if not _complete(text):
        return None
    split = _fields(text.strip())
    assert split is not None
    step, parts = split
    row: dict[str, Any] = {}
    for part in parts[1:]:
        m = _FIELD.fullmatch(part)
        assert m is not None
        key, number = m.group(1), m.group(2)
        if number is not None and key != "step":
            row[key] = float(number)
    row["step"] = step
    return row


def _cut_row(text: str) -> dict[str, Any] | None:
    """The row of a record text cut off at its end (it reads as the start of a record): its whole
    fields before the cut, the last (cut in two, or a separator) left out; None if it is no such
    start or keeps no field."""
    text = text.strip()
    if not _readable_start(text):
        return None
    split = _fields(text)
    if split is None:
        return None
    step, parts = split
    row: dict[str, Any] = {}
    for part in parts[1:-1]:  # _readable_start: every part but the last is a whole field
        m = _FIELD.fullmatch(part)
        if m is not None and m.group(2) is not None and m.group(1) != "step":
            row[m.group(1)] = float(m.group(2))
    if not row:
        return None
    row["step"] = step
    return row


class _Record:
    """An open record: the pieces (lines) read so far, the line number of each, and the Ray prefix
    of its first line."""

    __slots__ = ("linenos", "pieces", "prefix")

    def __init__(self, prefix: str, pieces: list[str], linenos: list[int]) -> None:
        self.prefix, self.pieces, self.linenos = prefix, pieces, linenos

    def add(self, content: str, lineno: int) -> None:
        self.pieces.append(content)
        self.linenos.append(lineno)

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def split_off(self, content: str, lineno: int) -> _Record | None:
        """The record that starts in a later piece and goes on with ``content``, the pieces
        before it left as a whole record (a record wrapped at a narrow width, whose first pieces
        ``s``, ``st``, ... also read as the end of a word or ``nan`` of the record before)."""
        for k in range(len(self.pieces) - 1, 0, -1):
            tail = "".join(self.pieces[k:])
            if tail.lstrip()[:1] == "s" and _readable_start(tail + content) and _complete(self.text_to(k)):
                rest = _Record(self.prefix, [*self.pieces[k:], content], [*self.linenos[k:], lineno])
                del self.pieces[k:], self.linenos[k:]
                return rest
        return None

    def text_to(self, k: int) -> str:
        return "".join(self.pieces[:k])


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """The lines of ``text`` as :func:`split_lines` cuts them, each with its line number in the file
    (from 1; the pieces of a line that ``\\r`` redraws share its number).

    Examples
    --------
    >>> numbered_lines("a\\r\\nb\\rc\\nd")
    [(1, 'a'), (2, 'b'), (2, 'c'), (3, 'd')]
    """
    out: list[tuple[int, str]] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        out.extend((lineno, piece) for piece in line.removesuffix("\r").split("\r"))
    return out


def parse_verl_console(text: str) -> tuple[_Rows, int]:
    """The rows of the ``step:N - key:value`` records of a verl console log.

    Parameters
    ----------
    text : str
        The log, whole (any other lines around the records are ignored).

    Returns
    -------
    rows : list of dict
        One dict per record, in order: ``step`` (int) and every numeric field as a float (NaN and
        +/-inf included); fields that are no number are left out.
    skipped : int
        How many damaged records were skipped (a record with a field broken); a record cut off
        at its end is read up to the cut (its last field, cut in two, left out).

    Examples
    --------
    >>> log = ("\\x1b[36m(TaskRunner pid=7)\\x1b[0m step:1 - actor/entropy:0.45 - critic/score/m\\n"
    ...        "\\x1b[36m(TaskRunner pid=7)\\x1b[0m ean:nan - timing_s/gen:1.2e+00\\n"
    ...        "Training Progress:  10%|#         | 1/10\\n"
    ...        "step:2 - actor/entropy:-inf - note:[1, 2]\\n"
    ...        "step:3 - actor/entropy:0.4 - critic/score/m\\n"
    ...        "step:4 - actor/entropy:0.4 - critic/score/mean:1e+-3 - timing_s/gen:2\\n")
    >>> parse_verl_console(log)
    ([{'actor/entropy': 0.45, 'critic/score/mean': nan, 'timing_s/gen': 1.2, 'step': 1},
      {'actor/entropy': -inf, 'step': 2}, {'actor/entropy': 0.4, 'step': 3}], 1)
    """
    rows, damaged = verl_console_records(text)
    return rows, len(damaged)


def verl_console_records(text: str) -> tuple[_Rows, list[int]]:
    """:func:`parse_verl_console`, with the line number where each damaged record starts.

    Examples
    --------
    >>> verl_console_records("step:1 - a:0.5\\nnoise\\nstep:2 - a:1e-\\nstep:3 - a:nan\\n")
    ([{'a': 0.5, 'step': 1}, {'a': nan, 'step': 3}], [3])
    """
    rows, damaged, _ = _verl_records(text)
    return rows, damaged


def _verl_records(text: str) -> tuple[_Rows, list[int], list[int]]:
    """The rows, the lines of the damaged records, and those of the records cut off at their end
    (read up to the cut: a paste or a terminal capture that stops inside a record)."""
    rows: _Rows = []
    damaged: list[int] = []
    cut: list[int] = []
    cur: _Record | None = None

    def close(record: _Record) -> None:
        body = record.text.strip()
        if _HEAD.match(body) is None:  # a line that only looked like the start of "step:"
            return
        row = _verl_row(body)
        if row is None:
            row = _cut_row(body)
            (damaged if row is None else cut).append(record.linenos[0])
        if row is not None and len(row) > 1:
            rows.append(row)

    for lineno, line in numbered_lines(text):
        prefix, content = clean_line(line)
        if cur is not None:
            if prefix and cur.prefix and prefix != cur.prefix:  # another process, in between
                if _record_start(content) is None:
                    continue
                close(cur)
                cur = None
            elif not content:
                if _complete(cur.text):
                    close(cur)
                    cur = None
                continue
            else:
                text_so_far = cur.text
                start = _record_start(content)
                new = start is not None and content[start:].startswith("step:")
                if not (new and _complete(text_so_far)) and _continues(text_so_far, content):
                    cur.add(content, lineno)
                    continue
                rest = None if new else cur.split_off(content, lineno)
                close(cur)
                cur = rest
                if rest is not None:
                    continue
        start = _record_start(content)
        if start is not None:
            cur = _Record(prefix, [content[start:]], [lineno])
    if cur is not None:
        close(cur)
    return rows, damaged, cut


def is_verl_console(text: str) -> bool:
    """Whether ``text`` (a whole log or its start) holds a verl console record.

    Examples
    --------
    >>> is_verl_console("config ...\\nstep:0 - actor/entropy:0.9\\n"), is_verl_console("hello\\n")
    (True, False)
    """
    return bool(parse_verl_console(text)[0])


# ---------------------------------------------------------------------------------------------
# TRL / transformers printed dicts
# ---------------------------------------------------------------------------------------------

_DICT_START = re.compile(r"\{\s*(?:['\"]|$)")  # a key's quote after it, or a line break
_MAX_DICT_LINES = 5000  # a dict hard-wrapped at a narrow width spans many lines
_MAX_DICT_CHARS = 1 << 16
_BRACKETS = re.compile(r"[{}\[\]()'\",\\]")
_TRAINER_KEYS = frozenset(
    {"loss", "grad_norm", "learning_rate", "epoch", "reward", "reward_std", "kl", "entropy", "train_loss"}
)
_TRAINER_PREFIXES = (
    K.TRL_EVAL_PREFIX,
    f"{K.TRL_REWARDS_GROUP}/",
    K.TRL_COMPLETIONS_PREFIX,
    f"{K.TRL_PPO_OBJECTIVE_GROUP}/",
)
_SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second"})
_STEP_KEYS = (K.TRACKING_STEP, K.HF_GLOBAL_STEP, K.SWIFT_STEP_COUNTER)
_META_KEYS = frozenset({"epoch", *_STEP_KEYS})
_LOOKS_LIKE_LOG = re.compile(
    r"['\"](?:(?:eval_)?loss|grad_norm|learning_rate|epoch|reward|train_runtime)['\"]\s*:"
)
_NAMED_NUMBERS = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}


def _is_trainer_key(key: str) -> bool:
    return key in _TRAINER_KEYS or key.startswith(_TRAINER_PREFIXES)


def _number(node: ast.expr) -> float | None:
    """The number a printed value stands for (``0.5``, ``nan``, ``-inf``, ``np.float64(0.5)``)."""
    if isinstance(node, ast.Constant):
        v = node.value
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
    if isinstance(node, ast.Name):
        return _NAMED_NUMBERS.get(node.id.lower())
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _number(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.Call) and len(node.args) >= 1 and isinstance(node.func, ast.Name | ast.Attribute):
        return _number(node.args[0])  # np.float64(0.5), tensor(0.5, device='cuda:0')
    return None


class _Scan(NamedTuple):
    """What :func:`_scan` found of a bracketed literal."""

    #: (line index, column after it) of the closing bracket; None when it does not close
    end: tuple[int, int] | None
    #: (line index, column) of every ``,`` at the literal's own level: its item boundaries
    commas: list[tuple[int, int]]
    #: characters scanned
    size: int


def _scan(lines: list[str], i: int, col: int, *, depth: int = 0, joined_by: str = "") -> _Scan:
    """Scan the bracketed literal that starts at ``lines[i][col]`` (quotes, escapes and nesting
    followed) up to the bracket that closes it, within :data:`_MAX_DICT_LINES` lines and
    :data:`_MAX_DICT_CHARS` characters (a line is scanned whole).

    Parameters
    ----------
    lines : list of str
        The text, line by line.
    i, col : int
        Where the literal starts: its opening bracket, or its first item when ``depth=1``.
    depth : int, keyword-only
        The brackets open before ``col``: 0 from the opening bracket; 1 for a dict whose opening
        brace was lost (``'loss': 0.1, ...}``).
    joined_by : {"", "\\n"}, keyword-only
        How the lines read as one text, which decides what a backslash ending a line escapes
        inside a string: ``""``, the lines are the pieces of one hard-wrapped line, joined as they
        are, and the backslash escapes the first character of the next line; ``"\\n"``, the lines
        are lines, and the backslash escapes the line break between them (the next line starts
        unescaped).

    Returns
    -------
    _Scan
        Where it closes (None if it does not), its item boundaries, the characters scanned.
    """
    quote = ""
    commas: list[tuple[int, int]] = []
    size = 0
    carry = False  # a backslash ended the line before and escapes this line's first character
    for j in range(i, min(len(lines), i + _MAX_DICT_LINES)):
        line = lines[j]
        begin = col if j == i else 0
        skip = begin + 1 if carry else begin  # the escaped character's column, passed over
        carry = False
        for m in _BRACKETS.finditer(line, begin):
            k, c = m.start(), m.group()
            if k < skip:  # the character after a backslash
                continue
            if quote:
                if c == "\\":
                    skip = k + 2
                    carry = k + 1 == len(line) and not joined_by  # else it escapes the line break
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c in "{[(":
                depth += 1
            elif c in "}])":
                depth -= 1
                if depth == 0:
                    return _Scan((j, k + 1), commas, size + k + 1 - begin)
            elif c == "," and depth == 1:
                commas.append((j, k))
        size += len(line) - begin
        if size > _MAX_DICT_CHARS:
            break
    return _Scan(None, commas, size)


def _text(lines: list[str], start: tuple[int, int], end: tuple[int, int], joined_by: str = "") -> str:
    """The text of ``lines`` from ``start`` to ``end`` (both (line index, column)), lines joined by
    ``joined_by``."""
    (i, col), (j, stop) = start, end
    if i == j:
        return lines[i][col:stop]
    return joined_by.join([lines[i][col:], *lines[i + 1 : j], lines[j][:stop]])


def _step_counter(node: ast.expr) -> float | None:
    """The step of ms-swift's ``'2/4389'`` (step / steps), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        m = _STEP_COUNTER.fullmatch(node.value)
        return float(m.group(1)) if m else None
    return None


def _trainer_dict(text: str) -> dict[str, float] | None:
    """The numeric items of the printed dict ``text``; None if it is no Python literal dict."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    node = tree.body
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, float] = {}
    for key, value in zip(node.keys, node.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        number = _step_counter(value) if key.value == K.SWIFT_STEP_COUNTER else _number(value)
        if number is not None:
            out[key.value] = number
    return out


_MAX_CUT_TRIES = 8  # item boundaries tried back from a cut: the last whole items are near it


def _cut_dict(text: str) -> dict[str, float] | None:
    """The items of a dict ``text`` cut off before its closing brace (it starts at ``{``): those
    before the last item boundary (``,`` at the dict's own level) that reads back closed there;
    None if none does."""
    lines = text.split("\n")
    commas = _scan(lines, 0, 0, joined_by="\n").commas
    for comma in reversed(commas[-_MAX_CUT_TRIES:]):
        numbers = _trainer_dict(_text(lines, (0, 0), comma, "\n") + "}")
        if numbers:
            return numbers
    return None


#: a quoted key and its colon: where a dict whose opening brace was lost starts (at a line's start,
#: after a space, ``]``, ``|`` or ``>``: a logging prefix, a progress bar)
_BRACELESS_START = re.compile(r"(?:^|(?<=[\s\]|>]))(['\"])[A-Za-z_][^'\"\n]{0,200}\1\s*:[ \t]*\S")
_MIN_BRACELESS_ITEMS = 2  # a single quoted item is more likely a piece of some other text
#: ms-swift's training progress bar, ``Train:   1%|...| 2/4389 [...]``: the step it is at
_SWIFT_BAR = re.compile(r"\bTrain:\s*\d+%\|[^|\n]*\|\s*(\d+)/\d+")
_STEP_COUNTER = re.compile(r"\s*(\d+)\s*/\s*\d+\s*")
_Found = tuple[int | None, bool, dict[str, float], int | None]


def _braceless_start(lines: list[str], i: int, col: int, stop: int) -> re.Match[str] | None:
    """Where a dict whose opening brace was lost starts in ``lines[i][col:stop]``, or None.

    Only its first item is such a start: not one after a ``,`` or ``:`` (an item of a dict whose
    brace is there, or of one damaged), nor the first of a line that goes on with a dict of the
    line before (one ending with ``,`` or ``{``: a pprint, a hard wrap).
    """
    line = lines[i]
    m = _BRACELESS_START.search(line, col, stop)
    if m is None or "{" in line[col : m.start()]:
        return None
    before = line[: m.start()].rstrip()
    if before:
        return None if before[-1] in ",:{" else m
    above = lines[i - 1].rstrip() if i > 0 else ""
    return None if above[-1:] in (",", "{") else m


def _braceless(lines: list[str], i: int, col: int) -> tuple[dict[str, float], tuple[int, int], bool] | None:
    """The numbers of the dict without its opening brace at ``lines[i][col]``, where it ends, and
    whether it was cut (its end no dict): up to its closing brace if it has one (on this line or a
    wrap), else to the end of the line or a ``\\r`` in it (both braces lost), else up to the last
    item that reads."""
    scan = _scan(lines, i, col, depth=1)
    if scan.end is not None:
        numbers = _trainer_dict("{" + _text(lines, (i, col), scan.end))
        if numbers is not None and len(numbers) >= _MIN_BRACELESS_ITEMS:
            return numbers, scan.end, False
    rest = lines[i][col:].split("\r", 1)[0].rstrip().removesuffix(",")  # a bar redrawn after it
    numbers = _trainer_dict("{" + rest + "}")
    cut = False
    if numbers is None:
        numbers, cut = _cut_dict("{" + rest), True
    if numbers is None or len(numbers) < _MIN_BRACELESS_ITEMS:
        return None
    return numbers, (i, len(lines[i])), cut


def _dict_rows(lines: list[str]) -> tuple[list[_Found], list[int], list[int]]:
    """The trainer dicts of ``lines``: (step held or None, evaluation only, numbers, the step of
    ms-swift's progress bar before it or None); the line numbers (from 1) of the damaged ones, and
    of those cut off (read up to the cut)."""
    found: list[_Found] = []
    damaged: list[int] = []
    cut: list[int] = []
    bars = [
        (j, m.start(), int(m.group(1))) for j, line in enumerate(lines) for m in _SWIFT_BAR.finditer(line)
    ]
    n_bars = 0  # the bars before the dict at hand
    i, col = 0, 0
    guard = (0, 0)  # no brace-less dict before this (the inside of a damaged dict)
    # the characters that dicts which do not close may scan, all together: text with many
    # unmatched braces costs a few passes over it, not one per brace
    budget = 4 * sum(map(len, lines)) + _MAX_DICT_CHARS
    while i < len(lines) and budget > 0:
        line = lines[i]
        m = _DICT_START.search(line, col)
        b = None if (i, col) < guard else _braceless_start(lines, i, col, m.start() if m else len(line))
        if b is not None:
            got = _braceless(lines, i, b.start())
            if got is None:
                col = b.end()
                continue
            numbers, (end_line, end_col), was_cut = got
            budget -= sum(map(len, lines[i : end_line + 1]))
            if was_cut:
                cut.append(i + 1)
            start = b.start()
        elif m is None:
            i, col = i + 1, 0
            continue
        else:
            start = m.start()
            scan = _scan(lines, i, start)
            closed = _trainer_dict(_text(lines, (i, start), scan.end)) if scan.end else None
            if closed is not None and scan.end is not None:
                numbers, (end_line, end_col) = closed, scan.end
            else:
                budget -= scan.size
                looks = _LOOKS_LIKE_LOG.search(line, start) is not None
                # a dict that does not close: cut off (a paste, a crash), read up to the cut
                read = _cut_dict(line[start:]) if looks and scan.end is None else None
                if read is None:
                    # a dict broken: one record lost if it was a trainer's (else: some text)
                    if looks:
                        damaged.append(i + 1)
                    col = m.end()
                    guard = max(guard, scan.end or (i, len(line)))
                    continue
                cut.append(i + 1)
                numbers, end_line, end_col = read, i, len(line)
        while n_bars < len(bars) and bars[n_bars][:2] < (i, start):
            n_bars += 1
        i, col = end_line, end_col
        record = _trainer_record(numbers, bars[n_bars - 1][2] if n_bars else None)
        if record is not None:
            found.append(record)
    return found, damaged, cut


def _trainer_record(numbers: dict[str, float], bar: int | None) -> _Found | None:
    """A dict's ``numbers`` as a trainer's record (its step keys taken out of ``numbers``), with
    ``bar``, the step of the progress bar before it; None for a summary or a dict of no trainer."""
    keys = set(numbers)
    if keys & _SUMMARY_KEYS or not any(_is_trainer_key(k) for k in keys):
        return None
    step = None
    for name in _STEP_KEYS:
        v = numbers.pop(name, None)
        if step is None and v is not None and math.isfinite(v) and v == int(v) and v >= 0:
            step = int(v)
    evaluation = all(k.startswith("eval_") for k in numbers if k not in _META_KEYS)
    return (step, evaluation and bool(numbers.keys() - _META_KEYS), numbers, bar)


_TABLE_HEAD = re.compile(r"\s*\|?\s*step\s*(?:\||\t| )", re.IGNORECASE)
# a rule under the header: dashes (``|---|``, ``+---+``; ``-- | --`` where a notebook's HTML
# table was pasted into a GitHub comment, which writes two dashes a cell)
_TABLE_RULE = re.compile(r"[\s|:+-]*-{2,}[\s|:+-]*")
# a row that stands for rows left out (``...``, ``…``), in a table written out by hand
_TABLE_ELISION = re.compile(r"[\s|]*(?:\.{3,}|…)[\s|.…]*")
_NO_LOG = re.compile(r"no log", re.IGNORECASE)
_TABLE_NAMES = {"training loss": "loss", "validation loss": "eval_loss", "step": "step", "epoch": "epoch"}
_MULTIWORD = re.compile(r"(training|validation)\s+loss", re.IGNORECASE)


def _table_cells(line: str, *, header: bool) -> list[str]:
    s = line.strip()
    if "|" in s:
        return [c.strip() for c in s.strip("|").split("|")]
    if "\t" in s:
        return [c.strip() for c in s.split("\t")]
    if header:  # names may hold spaces: "Training Loss", "rewards / xmlcount_reward_func"
        s = _MULTIWORD.sub(lambda m: f"{m.group(1)}\x00loss", s)
        s = re.sub(r"\s*/\s*", "/", s)
        return [c.replace("\x00", " ") for c in s.split()]
    return _NO_LOG.sub("\x00", s).split()


def _table_name(cell: str) -> str:
    name = re.sub(r"\s*/\s*", "/", cell.strip())
    return _TABLE_NAMES.get(name.lower(), name)


def _table_value(cell: str) -> float | None:
    cell = cell.strip()
    if cell in ("", "\x00") or _NO_LOG.fullmatch(cell):
        return None
    if re.fullmatch(_NUM, cell) is None:
        raise ValueError(cell)
    return float(cell)


def _table_rows(lines: list[str]) -> _Rows:
    """The rows of the notebook progress tables among ``lines``."""
    rows: _Rows = []
    i = 0
    while i < len(lines):
        if not _TABLE_HEAD.match(lines[i]):
            i += 1
            continue
        names = [_table_name(c) for c in _table_cells(lines[i], header=True)]
        i += 1
        if len(names) < 2 or names[0] != "step" or len(set(names)) != len(names):
            continue
        while i < len(lines):
            line = lines[i]
            if not line.strip() or _TABLE_RULE.fullmatch(line) or _TABLE_ELISION.fullmatch(line):
                i += 1
                continue
            cells = _table_cells(line, header=False)
            if len(cells) != len(names) or not re.fullmatch(r"\d+", cells[0]):
                break
            try:
                values = [_table_value(c) for c in cells[1:]]
            except ValueError:
                break
            row: dict[str, Any] = {n: v for n, v in zip(names[1:], values) if v is not None}
            row["step"] = int(cells[0])
            rows.append(row)
            i += 1
    return rows


def parse_trl_printed(text: str) -> tuple[_Rows, int]:
    """The rows of the log dicts (and progress tables) a TRL / transformers trainer printed.

    Parameters
    ----------
    text : str
        The log, whole (progress bars and any other lines around the dicts are ignored).

    Returns
    -------
    rows : list of dict
        One dict per trainer log dict, in order: ``step`` (int; the dict's ``step`` or
        ``global_step``, else the one after the row before, from 1) and every numeric item as a
        float; then one per row of a progress table.
    skipped : int
        How many damaged trainer dicts were skipped (closed, but not a Python literal); a dict
        that does not close on its line is cut off, and read up to the cut.

    Examples
    --------
    >>> log = ("\\r 10%|#  | 1/10 [00:01<00:09]{'loss': 0.5, 'grad_norm': nan, 'epoch': 0.1}\\r 20%|\\n"
    ...        "{'loss': 0.4, 'grad_no\\nrm': inf, 'learning_rate': 1e-06, 'ep\\n"
    ...        "{'loss': -0.25, 'epoch': 0.3}\\n"
    ...        "{'train_runtime': 12.5, 'train_samples_per_second': 3.2, 'epoch': 0.3}\\n"
    ...        "{'loss': 0.3, 'grad_norm': 1 2}\\n")
    >>> parse_trl_printed(log)
    ([{'loss': 0.5, 'grad_norm': nan, 'epoch': 0.1, 'step': 1}, {'loss': 0.4, 'step': 2},
      {'loss': -0.25, 'epoch': 0.3, 'step': 3}], 1)
    """
    rows, damaged = trl_printed_records(text)
    return rows, len(damaged)


def trl_printed_records(text: str) -> tuple[_Rows, list[int]]:
    """:func:`parse_trl_printed`, with the line number where each damaged dict starts.

    Examples
    --------
    >>> trl_printed_records("{'loss': 0.5}\\n{'loss': 0.\\n{'loss': 0.25, 'reward': 1.}\\n")
    ([{'loss': 0.5, 'step': 1}, {'loss': 0.25, 'reward': 1.0, 'step': 2}], [2])
    """
    rows, damaged, _ = _trl_records(text)
    return rows, damaged


def _trl_records(text: str) -> tuple[_Rows, list[int], list[int]]:
    """The rows, the lines of the damaged dicts, and those of the dicts cut off (read up to the
    cut: ``{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate'`` gives loss and grad_norm)."""
    # a "\r" inside a line is a progress bar redrawn: the dicts are read from the whole line, each
    # from its opening brace to its closing one, so the bars around them need no cutting
    lines = [clean_line(line.removesuffix("\r"))[1] for line in text.split("\n")]
    found, damaged, cut = _dict_rows(lines)
    rows: _Rows = []
    last = 0
    for step, evaluation, numbers, bar in found:
        if step is None:  # else ms-swift's bar (when it moved on), else numbered after the dict before
            step = last if evaluation else bar if bar is not None and bar > last else last + 1
        row: dict[str, Any] = dict(numbers)
        row["step"] = step
        rows.append(row)
        last = step
    rows.extend(_table_rows([clean_line(line)[1] for line in split_lines(text)]))
    return rows, damaged, cut


def is_trl_printed(text: str) -> bool:
    """Whether ``text`` (a whole log or its start) holds a trainer's log dict or progress table.

    Examples
    --------
    >>> is_trl_printed("  5%|#  | 1/20\\r{'loss': 0.1, 'epoch': 0.05}\\n"), is_trl_printed("{'lr': 1}\\n")
    (True, False)
    """
    return bool(parse_trl_printed(text)[0])


# ---------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------


def read_verl_console(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """A verl console log: its records' history; damaged records skipped with one warning."""
    rows, damaged, cut = _verl_records(src.text())
    notes.damaged(src.name, damaged, len(rows), "verl console")
    notes.cut(src.name, cut, "verl console")
    return Parsed(as_history(rows))


def read_trl_printed(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """A TRL / transformers console log: its log dicts' history; damaged dicts skipped with one warning."""
    rows, damaged, cut = _trl_records(src.text())
    notes.damaged(src.name, damaged, len(rows), "TRL printed")
    notes.cut(src.name, cut, "TRL printed")
    return Parsed(as_history(rows))
