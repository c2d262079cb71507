"""Metrics read back from printed ``key: value`` summaries (format ``"key-value"``).

Some trainers, custom loops and W&B print a step's metrics, or a run's last ones, as plain
``key: value`` text rather than a dict or a verl record:

.. code-block:: text

    Step 12/100 | reward: 0.53 | kl: 0.012 | loss: 0.0311
    ***** train metrics *****
      epoch      =  3.0
      train_loss =  0.1234
    wandb: Run summary:
    wandb:   train/reward 0.53

* a line is read when all of it is ``key: value`` (or ``key = value``) fields, separated by
  ``|``, ``,``, ``;``, ``" - "`` or whitespace, with at most a step marker before them
  (``Step 12``, ``[step 12/100]``, ``Epoch 1/3``, ``Iter 5:``); a value is a number
  (``0.53``, ``-1e-05``, ``nan``, ``inf``); other values (a word, ``0:01:23``, ``3.2%``) are
  skipped with their key; a line holding anything else is not read;
* ANSI colours, Ray's prefixes (as :func:`~rlmetrics.readers.textlogs.clean_line` removes
  them), a ``wandb:`` prefix and a logging prefix (``2024-06-01 10:00:00,123 - INFO - ``) are
  removed first; in W&B's ``Run summary:`` a field is ``key value``;
* a line hard-wrapped in a key or a number is joined back: a line that does not read (or whose
  next line does not) is joined with the next as they are when the two read as one;
* consecutive read lines are a block; a step marker (a line ``Step 12`` / ``=== step 12 ===``
  before the block, a marker starting its line, or a field ``step``, ``global_step``,
  ``_step``, ``train/global_step``, ms-swift's ``global_step/max_steps: 2/4389``) gives its
  step, and every block is the record of its step (a block without one, after one with a step,
  goes on with that step unless it logs a key again); without any step marker the blocks are one
  record (a key logged again starts the next, numbered 1, 2, 3, ...);
* only a block with a metric name (``loss``, ``reward``, ``kl``, ``entropy``, ``grad_norm``,
  ``accuracy``, ``score`` and their ``*_loss``-like forms, or a namespaced ``train/reward``) is a
  record: a printed config (``learning_rate: 1e-06``, the indented lines under a YAML
  ``section:``) is not;
* a line with a number broken (``reward: 0.3.1``) is damaged: skipped with one warning naming
  it; the last line of a text cut inside a field (``kl: 0.0``... ``kl:``) is read up to the cut,
  the field cut left out.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from rlmetrics import keys as K
from rlmetrics.readers._history import as_history
from rlmetrics.readers._run import Notes, Parsed, Source
from rlmetrics.readers.textlogs import NUMBER, clean_line, numbered_lines

__all__ = ["KEY_VALUE", "is_key_value", "key_value_records", "parse_key_value", "read_key_value"]

KEY_VALUE = "key-value"

_Rows = list[dict[str, Any]]

_KEY = r"[A-Za-z_][\w.\-/@()\[\]]*"
_FIELD = re.compile(rf"({_KEY})\s*[:=]\s*([^\s|,;]+)")
# what a field's match reads before its value: where it stops, a failed match stops too
_FIELD_HEAD = re.compile(rf"(?:{_KEY}\s*(?:[:=]\s*)?)?")
_LOOSE_FIELD = re.compile(rf"({_KEY})\s+([^\s|,;]+)\s*")  # W&B's run summary: "key value"
_SEP = re.compile(r"\s*[|,;]\s*|\s+-\s+|\s+")
_MARKER = re.compile(
    r"\[?\s*(global[ _]step|step|iter(?:ation)?|epoch)\s*[:#=]?\s*(\d+)(?:\s*/\s*\d+)?(?![\w.])(?:\s*\])?:?",
    re.IGNORECASE,
)
_MARKER_LINE = re.compile(rf"[^\w\[]*(?:{_MARKER.pattern}[\s,;|]*)+[\W_]*", re.IGNORECASE)
_NUMBER = re.compile(NUMBER)
_BROKEN_NUMBER = re.compile(r"[-+]?[\d.][\d.eE+\-]*")  # number characters only, yet no number
_STEP_COUNTER = re.compile(r"(\d+)/\d+")
_LEVEL = r"\[?(?:INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL)\]?"
_LOG_PREFIX = re.compile(
    r"\s*(?:\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*(?:[-|]\s*)?(?:[\w.]+\s*[-|]\s*)?)?"
    rf"{_LEVEL}\s*(?:[-|:]\s*)?|\s*\[?\d{{4}}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*(?:[-|]\s+)?"
)
_WANDB_PREFIX = re.compile(r"\s*wandb:\s?")
_WANDB_SUMMARY = re.compile(r"\s*Run summary:\s*")
_YAML_HEADER = re.compile(r"(\s*)[\w.\-]+:\s*")  # a mapping's name, its items indented below it
_TRAILING = re.compile(rf"\s*(?:[|,;]\s*)?{_KEY}(?:\s*[:=]\s*\S*)?$")  # a field cut at the text's end

# transformers' step under W&B is ``train/global_step`` (composed: "train" is no group of rlmetrics' keys)
_STEP_FIELDS = frozenset(
    {K.TRACKING_STEP, K.HF_GLOBAL_STEP, K.WANDB_STEP, "/".join(("train", K.HF_GLOBAL_STEP))}
)
_METRIC_NAMES = frozenset(
    {K.TRL_LOSS, K.TRL_REWARD, K.TRL_REWARD_STD, K.TRL_KL, K.TRL_ENTROPY, K.TRL_GRAD_NORM}
    | {K.TRL_FRAC_REWARD_ZERO_STD, K.OPENRLHF_RETURN}
)
# a word of a metric's name (``eval_loss``, ``mean_reward``, ``train_accuracy_mean``)
_METRIC_WORD = re.compile(
    r"(?:^|_)(?:loss|reward|rewards|kl|entropy|accuracy|acc|score|grad_norm|perplexity|ppl|return)"
    r"(?:$|_(?:mean|std|avg|max|min))"
)
# names of settings, not of metrics (``max_grad_norm``, ``use_kl_loss``, ``num_rewards``)
_SETTING_PREFIXES = ("max_", "min_", "num_", "use_", "init_", "target_", "clip_")
_MAX_WRAP_PIECES = 64  # the pieces of one hard-wrapped line joined back, at most
_LOST_AT_BREAK = 2  # spaces an editor may strip at the end of a piece


def _is_metric(key: str) -> bool:
    k = key.lower()
    if k in _METRIC_NAMES or "/" in k:
        return True
    return not k.startswith(_SETTING_PREFIXES) and _METRIC_WORD.search(k) is not None


class _Line(NamedTuple):
    """A line read: its step marker (None if none), its fields (key, value text)."""

    step: int | None
    fields: list[tuple[str, str]]


def _read_line(text: str, *, loose: bool = False) -> _Line | None:
    """The fields of ``text`` if all of it is fields (after at most some step markers), else None.

    ``loose``: one field ``key value`` (W&B's run summary) is read too.
    """
    return _parse_line(text, loose=loose)[0]


def _parse_line(text: str, *, loose: bool = False) -> tuple[_Line | None, bool]:
    """:func:`_read_line`, and whether a text that does not read fails for good: at a field that
    no text appended after it can mend (a wrapped line is not looked for past it, :func:`_unwrap`)."""
    text = text.strip()
    if loose and (m := _LOOSE_FIELD.fullmatch(text)) is not None and _FIELD.fullmatch(text) is None:
        return _Line(None, [(m.group(1), m.group(2))]), False
    pos, step = 0, None
    while (m := _MARKER.match(text, pos)) is not None:
        if step is None and m.group(1).lower() != "epoch":
            step = int(m.group(2))
        sep = _SEP.match(text, m.end())
        pos = sep.end() if sep else m.end()
    fields: list[tuple[str, str]] = []
    while pos < len(text):
        m = _FIELD.match(text, pos)
        if m is None:
            return None, not loose and _fails_for_good(text, pos)
        fields.append((m.group(1), m.group(2)))
        pos = m.end()
        sep = _SEP.match(text, pos)
        if sep is None or not sep.group():
            if pos < len(text):
                return None, False
            break
        pos = sep.end()
    return (_Line(step, fields), False) if fields else (None, False)


def _fails_for_good(text: str, pos: int) -> bool:
    """Whether a field that does not read at ``pos`` of ``text`` (stripped) stays unread whatever
    is appended: its match stopped inside the text, not at a key or ``key:`` cut at the end, and
    no separator or step counter before it can take the text's last character (``a: 1 -`` reads
    on as ``a: 1 - b: 2``; ``Step 10/`` as ``Step 10/200``)."""
    head = _FIELD_HEAD.match(text, pos)
    return head is not None and head.end() < len(text) and pos <= len(text) - 2 and text[-1] not in "-/"


class _Block:
    """Consecutive lines read: the step (None if none), the numbers, the line where it starts."""

    __slots__ = ("lineno", "numbers", "step")

    def __init__(self, step: int | None, lineno: int) -> None:
        self.step, self.lineno = step, lineno
        self.numbers: dict[str, float] = {}

    def takes(self, read: tuple[int | None, dict[str, float]]) -> bool:
        """Whether the numbers ``read`` of a line go on with this block: no key again, no other step."""
        step, numbers = read
        other_step = step is not None and self.step is not None and step != self.step
        return not other_step and not numbers.keys() & self.numbers.keys()

    def add(self, read: tuple[int | None, dict[str, float]]) -> None:
        step, numbers = read
        if step is not None and self.step is None:
            self.step = step
        self.numbers.update(numbers)

    @property
    def is_record(self) -> bool:
        return any(_is_metric(k) for k in self.numbers)


def _numbers(line: _Line) -> tuple[int | None, dict[str, float]] | None:
    """The step of ``line`` (its marker, else a step field; None if none) and its numbers; None if
    a number in it is broken."""
    numbers: dict[str, float] = {}
    step = line.step
    for key, value in line.fields:
        if _NUMBER.fullmatch(value):
            number = float(value)
            if key in _STEP_FIELDS and math.isfinite(number) and number == int(number) and number >= 0:
                step = int(number) if step is None else step
            elif not key.startswith("_"):  # W&B's _runtime, _timestamp
                numbers[key] = number
        elif key == K.SWIFT_STEP_COUNTER and (m := _STEP_COUNTER.fullmatch(value)):
            step = int(m.group(1)) if step is None else step
        elif _BROKEN_NUMBER.fullmatch(value) and _is_metric(key):
            return None
    return step, numbers


def _pieces(text: str) -> list[tuple[int, str, str]]:
    """The lines of ``text``: (line number, Ray prefix, content without colours and prefixes)."""
    out = []
    for lineno, line in numbered_lines(text):
        prefix, content = clean_line(line)
        if (m := _WANDB_PREFIX.match(content)) is not None:
            content = "\x00" + content[m.end() :]  # W&B's: marked, for its run summary
        elif (m := _LOG_PREFIX.match(content)) is not None and m.end() < len(content):
            content = content[m.end() :]
        out.append((lineno, prefix, content))
    return out


def _blocks(text: str) -> tuple[list[_Block], list[int], list[int]]:
    """The blocks of ``text`` that are records; the lines damaged, and the line cut at the end."""
    lines = _pieces(text)
    blocks: list[_Block] = []
    damaged: list[int] = []
    cut: list[int] = []
    cur: _Block | None = None
    marker: int | None = None  # the step of a marker line, for the block after it
    yaml: int | None = None  # the indent of a YAML section's name: its items are a config
    wandb = False  # inside W&B's run summary
    last = max((i for i, (_, _, c) in enumerate(lines) if c.strip()), default=-1)

    def close() -> None:
        nonlocal cur
        if cur is not None and cur.is_record:
            blocks.append(cur)
        cur = None

    i = 0
    while i < len(lines):
        lineno, prefix, content = lines[i]
        i += 1
        was_wandb = content.startswith("\x00")
        content = content.lstrip("\x00")
        if not content.strip():
            close()
            wandb = False  # a blank line (a blank wandb: line) ends W&B's run summary
            continue
        if was_wandb and _WANDB_SUMMARY.fullmatch(content):
            close()
            wandb = True
            continue
        wandb = wandb and was_wandb
        content, line, i, was_cut = _joined_line(
            lines, i, prefix, content, loose=wandb, last=last, in_block=cur is not None
        )
        if was_cut:
            cut.append(lineno)
        indent = len(content) - len(content.lstrip())
        if yaml is not None and (line is None or indent <= yaml):
            yaml = None
        if line is None:
            close()
            yaml, marker = _between_records(content, marker)  # a line that does not read ended any section
            continue
        if yaml is not None:
            continue  # an item of a config's section
        read = _numbers(line)
        if read is None:
            damaged.append(lineno)
            continue
        if line.step is not None or marker is not None or (cur is not None and not cur.takes(read)):
            close()
        if cur is None:
            cur = _Block(marker, lineno)
            marker = None
        cur.add(read)
    close()
    return blocks, damaged, cut


def _joined_line(
    lines: list[tuple[int, str, str]],
    i: int,
    prefix: str,
    content: str,
    *,
    loose: bool,
    last: int,
    in_block: bool,
) -> tuple[str, _Line | None, int, bool]:
    """The piece ``content`` (the one before ``lines[i]``) read as a line: (its text, read, the
    index after it, whether it was read up to a field cut at the text's end).

    Outside W&B's run summary (``loose``, read as ``key value``) a hard-wrapped line is joined
    with its pieces after it (:func:`_unwrap`). The text's last line (its last piece at index
    ``last``) that does not read while a block is open (``in_block``) is read without its cut
    last field.
    """
    line = _read_line(content, loose=loose)
    if not loose:  # a line hard-wrapped: joined with the pieces after it while they read as one
        content, line, i = _unwrap(lines, i, prefix, content, line)
    if line is None and i - 1 == last and in_block:  # cut inside its last field
        line = _read_line(_TRAILING.sub("", content))
        return content, line, i, line is not None
    return content, line, i, False


def _between_records(content: str, marker: int | None) -> tuple[int | None, int | None]:
    """A line that is no record's: (the indent of the YAML section's name it is, else None; the
    step of the marker line it is, else ``marker``, for the block after it)."""
    header = _YAML_HEADER.fullmatch(content)
    if header is not None:
        return len(header.group(1)), marker
    if _MARKER_LINE.fullmatch(content) is not None:
        steps = [int(s) for name, s in _MARKER.findall(content) if name.lower() != "epoch"]
        return None, steps[0] if steps else marker
    return None, marker


def _unwrap(
    lines: list[tuple[int, str, str]], i: int, prefix: str, content: str, line: _Line | None
) -> tuple[str, _Line | None, int]:
    """The line ``content`` (read as ``line``) joined with the pieces of it wrapped onto the lines
    from ``lines[i]``: (its text, read, the index after its last piece).

    The pieces of a wrap are as long as the first (the last may be shorter, and a space lost at a
    break is tolerated); of the runs of such pieces, the longest whose text, joined as it is,
    reads and keeps every field a break falls in a number (``0.5`` + ``3``; ``clip`` + ``ped`` +
    ``_ratio: 1``) is the line: two lines of their own joined give a word (``0.5reward:``).
    """
    width = len(content)
    pieces = [content]
    best = (content, line, i)
    for j in range(i, min(len(lines), i + _MAX_WRAP_PIECES)):
        _, other, piece = lines[j]
        full = len(pieces) == 1 or abs(len(pieces[-1]) - width) <= _LOST_AT_BREAK
        if not full or (prefix and other and other != prefix) or not piece.strip():
            break
        if len(piece) > width + _LOST_AT_BREAK:
            break
        pieces.append(piece)
        text = "".join(pieces)
        joined, for_good = _parse_line(text)
        if for_good:  # no more pieces can make it read
            break
        if joined is not None and _whole_at_breaks(text, pieces):
            best = (text, joined, j + 1)
    return best


def _whole_at_breaks(text: str, pieces: list[str]) -> bool:
    """Whether every field of ``text`` that a break between ``pieces`` falls in has a number."""
    breaks, at = set(), 0
    for piece in pieces[:-1]:
        at += len(piece)
        breaks.add(at)
    for m in _FIELD.finditer(text):
        if any(m.start() < b < m.end() for b in breaks):
            value = m.group(2)
            if not (_NUMBER.fullmatch(value) or _STEP_COUNTER.fullmatch(value)):
                return False
    return True


def _records(blocks: list[_Block]) -> _Rows:
    """The rows of the blocks: one a step when some has a step, else the blocks merged."""
    rows: _Rows = []
    last = 0
    row: dict[str, Any] | None = None
    for block in blocks:
        again = row is not None and bool(block.numbers.keys() & row.keys())
        if block.step is not None:
            row = {**block.numbers, K.TRACKING_STEP: block.step}
            rows.append(row)
            last = block.step
        elif row is None or again:
            last += 1
            row = {**block.numbers, K.TRACKING_STEP: last}
            rows.append(row)
        else:
            row.update(block.numbers)
    return rows


def key_value_records(text: str) -> tuple[_Rows, list[int], list[int]]:
    """The rows of the ``key: value`` summaries of ``text``; the damaged lines; the line cut.

    Returns
    -------
    rows : list of dict
        One per record, in order: ``step`` (int) and every numeric field (float).
    damaged : list of int
        The line numbers (from 1) of the lines skipped for a broken number.
    cut : list of int
        The line of the text's end cut inside a field (read up to the cut), if any.

    Examples
    --------
    >>> log = "Step 1 | reward: 0.5 | kl: 0.01\\nStep 2 | reward: 0.6 | kl: 0.0.2\\n"
    >>> key_value_records(log + "Step 3 | reward: 0.7 | kl: 0.0\\nStep 4 | reward: 0.8 | kl:")
    ([{'reward': 0.5, 'kl': 0.01, 'step': 1}, {'reward': 0.7, 'kl': 0.0, 'step': 3},
      {'reward': 0.8, 'step': 4}], [2], [4])
    """
    blocks, damaged, cut = _blocks(text)
    return _records(blocks), damaged, cut


def parse_key_value(text: str) -> tuple[_Rows, int]:
    """The rows of ``text`` (see :func:`key_value_records`) and the count of damaged lines.

    Examples
    --------
    >>> parse_key_value("completions/mean_length: 256   reward: 0\\nreward_std: 0   loss: 0\\n")
    ([{'completions/mean_length': 256.0, 'reward': 0.0, 'reward_std': 0.0, 'loss': 0.0, 'step': 1}], 0)
    >>> parse_key_value("trainer:\\n  lr: 1e-06\\n  loss_scale: 1.0\\nseed: 1\\n")
    ([], 0)
    """
    rows, damaged, _ = key_value_records(text)
    return rows, len(damaged)


def is_key_value(text: str) -> bool:
    """Whether ``text`` (a whole log or its start) holds a ``key: value`` summary of metrics.

    Examples
    --------
    >>> is_key_value("train/reward: 0.5\\n"), is_key_value("learning_rate: 1e-06\\nseed: 3\\n")
    (True, False)
    """
    return bool(key_value_records(text)[0])


def read_key_value(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """Printed ``key: value`` summaries: their history; damaged lines skipped with one warning."""
    rows, damaged, cut = key_value_records(src.text())
    notes.damaged(src.name, damaged, len(rows), "key-value")
    notes.cut(src.name, cut, "key-value")
    return Parsed(as_history(rows))
