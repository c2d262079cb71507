"""Text statistics of a step's rollouts: repetition, a gibberish proxy, stop reasons, format, thinking.

Numbers say that something changed; the text says what. This family measures the responses
themselves, from decoded text (a list of strings) or from token ids alone (a ``(B, T)`` integer
array and its response mask), as mergeable sums, maxima and minima (a
:class:`~rlmetrics._core.stats.Stats`): micro-batches merge and data-parallel ranks all-reduce
exactly, as for every batch family.

Definitions
-----------
A response is a sequence of **units**: for token ids, the tokens its mask selects, in order; for
text (:func:`text_units`), its words, in three steps:

1. the text is cut at whitespace (``str.split()``);
2. in a piece, each character of a script written without spaces between words (the ranges of
   :data:`CHARACTER_SCRIPTS`: CJK ideographs, kana, Hangul, Bopomofo, Thai, Lao, Khmer, Myanmar)
   is a unit of its own, with the punctuation and marks (characters neither word characters nor
   whitespace) right after it, and before it at the start of the piece, attached as punctuation is
   to an English word (``'我不知道。'``: ``我 不 知 道。``); each stretch of the piece's other
   characters is one unit (``'用Python写'``: ``用 Python 写``);
3. a unit that holds a **degenerate run**, one block of at most :data:`RUN_MAX_BLOCK` (16)
   characters repeated back to back at least 4 times and over at least :data:`RUN_MIN_CHARS` (32)
   characters (``xxxx…``, ``!!!!…``, ``hahaha…``), is read as its characters, one unit each.
   No word, URL, identifier or number a model means to write repeats itself so (a float has at
   most 17 significant digits); a long divider (``----…``, 32 or more) or a repeating decimal
   written to 32 digits does.

Text with neither script characters nor runs, ordinary English, gets exactly ``str.split()``.
A response's **length** is in characters for text (``len(text)``) and in tokens for ids.

* **empty**: no unit (text that is empty or only whitespace; a row the mask selects nothing of).
* **loop** (``repetition/loop_ratio``): a response of ``L`` units ends in a loop when, for some
  period ``p`` in ``1..loop_max_period`` with ``L >= loop_repeats * p``, its last
  ``loop_repeats * p`` units are ``loop_repeats`` copies of one ``p``-unit block (unit ``j``
  equals unit ``j - p`` over the last ``(loop_repeats - 1) * p`` units). A generation stuck
  repeating itself until the length limit ends so, even when cut in the middle of a block; a
  block repeated one time fewer (a near loop) does not count.
* **distinct-n** (``repetition/distinct_ngram/mean``): per response of ``L >= n`` units, the
  number of distinct ``n``-grams over the ``L - n + 1`` it has; the exact mean of these ratios
  over the responses with at least ``n`` units (shorter ones are left out). For token ids the
  n-grams are compared as integer codes: exact (the ids packed) when ``n`` times the bits of
  the largest id fits 64 bits, or when it does once the ids of a block of 128 responses are
  replaced by their ranks among that block's distinct ids (a 4-gram of a block using at most
  65,535 distinct ids, a 3-gram of at most 2**21 - 1); otherwise a 64-bit multiply-xor hash,
  where two n-grams differing in one position never share a code and others do by chance,
  heuristically about ``2**-64`` a pair (not a proven bound): a response of 4,096 tokens is
  miscounted with a probability under ``2**-40``. With numba (``rlmetrics[fast]``) and at least
  :data:`~rlmetrics._core.kernels.FUSED_MIN_ELEMENTS` tokens, a compiled kernel computes every
  statistic but the compression ratio a row at a time instead, distinct-n always exactly (a hash
  set whose equal hashes are confirmed on the ids); the numbers are the same.
* **compression ratio** (on by default for text only; ``compression=True`` for token ids): per
  non-empty response, the size of its raw DEFLATE stream (zlib level :data:`COMPRESSION_LEVEL`,
  no header) over the size of its bytes: UTF-8 for text, the ids as little-endian ``uint32``
  for tokens. Low values are repetition, high values random-looking bytes (gibberish); the
  mean, maximum and minimum over non-empty responses. No vectorised proxy of the same meaning
  exists (DEFLATE is a sequential match search), so on long token rows it is one zlib call per
  response, several times the cost of every other statistic together: opt-in there.
* **non-word ratio** (text only): per non-empty response, the share of its units that are not a
  word, a word being letters (with inner ``'`` or ``-``) or a number (``3``, ``3.14``), with
  leading and trailing punctuation allowed (a CJK character with its punctuation is a word); the
  mean over non-empty responses.
* **stop reasons** (with ``stop_reasons=``): the share of responses whose reason is, case
  insensitive, ``stop`` (``"stop"``, ``"eos"``, ``"end_of_sequence"``), ``length``, ``abort``
  (``"abort"``, ``"aborted"``), ``error``, ``tool_call`` (``"tool_call"``, ``"tool_calls"``),
  and ``other`` for any other string.
* **format** (with ``format_pattern=``, text only): the share of responses whose *answer*
  (below; the whole response without ``think_span``) contains a match of the pattern
  (``re.search``).
* **thinking** (with ``think_span=(open, close)``): a response is *closed* when it holds the
  closing tag. Closed: the thinking span runs from the end of the opening tag before it (or from
  the start, for templates that open it in the prompt) to the closing tag, the answer from the
  closing tag's end to the response's end. Opened but not closed: the thinking span runs to the
  end and the answer is empty. Neither tag: no thinking, the whole response is the answer.
  ``think/share`` is the length inside thinking spans over the total length; lengths exclude
  the tags. For token ids, give each tag as its token id or ids (the default string tags apply
  to text only and are skipped for ids).

Every share is over all responses of the batch (the union of shards); with no response the
metrics are NaN with an :class:`~rlmetrics.errors.UndefinedMetricWarning`.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    check_dense,
    check_mask,
    describe,
    is_array,
    is_torch_array,
    raise_invalid_mask,
)
from rlmetrics._core.checks import check_int, warn_undefined
from rlmetrics._core.kernels import FUSED_MIN_ELEMENTS, text_rows_kernel
from rlmetrics._core.stats import Stats, check_prefix, metrics_from, with_prefix

__all__ = [
    "CHARACTER_SCRIPTS",
    "COMPRESSION_LEVEL",
    "DEFAULT_LOOP_MAX_PERIOD",
    "DEFAULT_LOOP_REPEATS",
    "DEFAULT_NGRAM",
    "RUN_MAX_BLOCK",
    "RUN_MIN_CHARS",
    "STOP_REASONS",
    "compute_text_metrics",
    "ends_in_loop",
    "stop_category",
    "text_statistics",
    "text_units",
]

#: The defaults of ``ngram=``, ``loop_repeats=`` and ``loop_max_period=`` (one place for the rules'
#: example rows, :mod:`rlmetrics.health.examples`, to score a row as the statistics do).
DEFAULT_NGRAM, DEFAULT_LOOP_REPEATS, DEFAULT_LOOP_MAX_PERIOD = 4, 4, 64
#: zlib level of the compression ratio (1: the fastest; the ratio is a proxy, not a size).
COMPRESSION_LEVEL = 1
#: The stop-reason categories, in the order of their keys.
STOP_REASONS = ("stop", "length", "abort", "error", "tool_call", "other")


def stop_category(reason: str | None) -> str | None:
    """The :data:`STOP_REASONS` category a stop reason is counted under (``"EOS"`` -> ``"stop"``,
    ``"tool_calls"`` -> ``"tool_call"``, an unknown one -> ``"other"``); None stays None.

    >>> stop_category("EOS"), stop_category("max_tokens"), stop_category(None)
    ('stop', 'other', None)
    """
    return None if reason is None else _STOP_ALIASES.get(reason.strip().lower(), "other")


_STOP_ALIASES = {
    "stop": "stop",
    "eos": "stop",
    "end_of_sequence": "stop",
    "length": "length",
    "abort": "abort",
    "aborted": "abort",
    "error": "error",
    "tool_call": "tool_call",
    "tool_calls": "tool_call",
}
_STOP_KEYS = dict(zip(STOP_REASONS, K.TEXT_STOP_REASON_KEYS))
_DEFAULT_THINK_SPAN = ("<think>", "</think>")
#: A whitespace-separated word: optional punctuation, letters (inner ' or -) or a number, punctuation.
_WORD = re.compile(r"[^\w\s]*(?:[^\W\d_]+(?:['\u2019-][^\W\d_]+)*|\d+(?:[.,]\d+)*)[^\w\s]*")
#: Scripts written without spaces between words (or, for Hangul, in short syllable blocks): each of
#: their characters is a unit of its own. Inclusive code-point ranges: Thai, Lao, Myanmar, Hangul
#: jamo, Khmer, CJK radicals, 々〆〇, kana, Bopomofo, Hangul compatibility jamo, Bopomofo extended,
#: katakana extensions, CJK ideographs (extension A, unified), Hangul jamo extended A, Hangul
#: syllables, jamo extended B, compatibility ideographs, halfwidth katakana and Hangul, kana
#: supplements, CJK ideographs of extensions B to H and their compatibility supplement.
CHARACTER_SCRIPTS = (
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1100, 0x11FF),
    (0x1780, 0x17FF),
    (0x2E80, 0x2FDF),
    (0x3005, 0x3007),
    (0x3040, 0x30FF),
    (0x3100, 0x318F),
    (0x31A0, 0x31BF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFFDC),
    (0x1B000, 0x1B16F),
    (0x20000, 0x2FA1F),
    (0x30000, 0x323AF),
)
_SCRIPT_CLASS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in CHARACTER_SCRIPTS)
_SCRIPT_CHAR = re.compile(f"[{_SCRIPT_CLASS}]")
#: A superset of :data:`_SCRIPT_CHAR` that scans faster (its BMP ranges and any astral character: an
#: emoji takes the exact path, which gives ``str.split()``'s pieces where no script character is).
_MAYBE_SCRIPT = re.compile(
    "["
    + "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in CHARACTER_SCRIPTS if hi <= 0xFFFF)
    + "\\U00010000-\\U0010ffff]"
)
#: A unit of a whitespace piece holding script characters: one of them, with the punctuation (neither
#: word character nor space) right before and after it; or a run of the piece's other characters.
_PIECE_UNIT = re.compile(f"[^\\w\\s]*[{_SCRIPT_CLASS}][^\\w\\s]*|[^\\s{_SCRIPT_CLASS}]+")
#: A degenerate run: a unit this long or longer may hold one (a cheap filter before :data:`_RUN`).
RUN_MIN_CHARS = 32
#: The longest block of a degenerate run, in characters.
RUN_MAX_BLOCK = 16
#: One block of ``p <= RUN_MAX_BLOCK`` characters repeated back to back, at least 4 times and over at
#: least ``RUN_MIN_CHARS`` characters.
_RUN = re.compile(
    "|".join(f"(.{{{p}}})\\{p}{{{max(4, -(-RUN_MIN_CHARS // p)) - 1}}}" for p in range(1, RUN_MAX_BLOCK + 1)),
    re.DOTALL,
)
_ROW_BLOCK = 128  # rows of token ids per block: bounds the n-gram codes' memory (rows x T x 8 bytes)
_RANK_LIMIT = 2**24  # ids ranked through a lookup table (at most 16 MB) when too wide to pack
_RANK_MAX = 2**16 - 1  # a block whose distinct ids are this many or fewer holds their ranks as uint16
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier (golden ratio), a bijection mod 2**64
_ID_LIMIT = 2**32  # token ids travel as uint32 bytes for the compression ratio
#: The per-row table of the token-id path (both the numpy blocks and numba's kernel fill it).
_ROW_COLUMNS = ("length", "distinct", "loop", "closed", "think", "answer")
_WIDE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# --- argument checks ------------------------------------------------------------------------------


def _check_strings(values: Any, name: str) -> list[str]:
    """``values`` as a list of strings, or an error naming ``name`` (and the first bad item)."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(
            f"{name} must be a sequence of strings (one per response); got {type(values).__name__}"
        )
    out = list(values)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise TypeError(f"{name}[{i}] must be a string; got {type(v).__name__} {v!r:.60}")
    return out


def _check_pattern(pattern: Any) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, str):
            raise TypeError("format_pattern must be a str pattern, not a bytes one")
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(
            f"format_pattern must be a regular expression (str or re.Pattern); got {type(pattern).__name__}"
        )
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(
            f"format_pattern is not a valid regular expression ({err}); got {pattern!r}"
        ) from None


def _tag_ids(tag: Any, name: str) -> tuple[int, ...]:
    """One thinking tag of the token-id path as a non-empty tuple of ids >= 0."""
    items = [tag] if isinstance(tag, int | np.integer) else tag
    if isinstance(items, str | bytes) or not isinstance(items, Sequence | np.ndarray) or len(items) == 0:
        raise TypeError(f"{name} must be a token id or a non-empty sequence of token ids; got {tag!r}")
    return tuple(check_int(v, name, minimum=0) for v in items)


def _check_think_span(span: Any, on_ids: bool) -> tuple[Any, Any] | None:
    """``(open, close)``: two non-empty strings for text, two id tuples for ids; ``None`` for none."""
    if span is None:
        return None
    if isinstance(span, str | bytes) or not isinstance(span, Sequence) or len(span) != 2:
        raise TypeError(f"think_span must be a pair (open, close) or None; got {span!r}")
    if on_ids:
        if tuple(span) == _DEFAULT_THINK_SPAN:
            return None  # the default tags are text: with ids alone there is nothing to look for
        if any(isinstance(t, str) for t in span):
            raise TypeError(
                "think_span must hold token ids when the responses are token ids (token_ids=); "
                f"got {span!r}: pass the tags' ids, e.g. tokenizer.convert_tokens_to_ids"
            )
        return _tag_ids(span[0], "think_span[0]"), _tag_ids(span[1], "think_span[1]")
    for i, tag in enumerate(span):
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"think_span[{i}] must be a non-empty string; got {tag!r}")
    return str(span[0]), str(span[1])


#: The keywords an integration's ``text_options=`` takes: those of :func:`compute_text_metrics` that
#: choose the statistics (not its input, stop reasons, prefix or process group).
_TEXT_OPTIONS = frozenset(
    {"format_pattern", "think_span", "ngram", "loop_repeats", "loop_max_period", "compression"}
)


def _check_text_options(options: Any, *, id_tags: bool = False) -> dict[str, Any]:
    """An integration's ``text_options=``, checked once (the TRL callback, the verl patch).

    A mapping of keywords of :data:`_TEXT_OPTIONS` whose values :func:`compute_text_metrics`
    accepts; returned as a new dict, the numbers as ``int`` and ``think_span`` as a tuple (of two
    strings, or with ``id_tags`` of two tuples of token ids when neither tag is a string);
    ``format_pattern`` as given. ``None`` is ``{}``.

    Raises
    ------
    TypeError, ValueError
        Not a mapping, an unknown keyword (naming it and the known ones), a bad value (as
        :func:`compute_text_metrics` names it).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"text_options must be a dict of compute_text_metrics options; got {options!r}")
    unknown = sorted(repr(k) for k in options if k not in _TEXT_OPTIONS)
    if unknown:
        raise TypeError(
            f"text_options: unknown option(s) {', '.join(unknown)}; "
            f"they are {', '.join(sorted(_TEXT_OPTIONS))}"
        )
    out = dict(options)
    numbers: dict[str, Any] = {"ngram": 4, "loop_repeats": 4, "loop_max_period": 64, "compression": None}
    numbers |= {k: v for k, v in out.items() if k in numbers} | {"prefix": K.TEXT_PREFIX}
    checked = _options(False, False, out.get("format_pattern"), None, **numbers)
    out |= {k: checked[k] for k in ("ngram", "loop_repeats", "loop_max_period") if k in out}
    if "think_span" in out:
        span = out["think_span"]
        on_ids = (
            id_tags
            and isinstance(span, Sequence)
            and not isinstance(span, str | bytes)
            and not any(isinstance(t, str) for t in span)
        )
        out["think_span"] = _check_think_span(span, on_ids)
    return out


def _host_ids(token_ids: Any, response_mask: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """``token_ids`` and the mask as host numpy arrays, their shapes and the ids' dtype checked (the
    mask's values and the ids' range are checked where they are read)."""
    arrays: list[np.ndarray | None] = []
    for name, x in (("token_ids", token_ids), ("response_mask", response_mask)):
        if x is None:
            arrays.append(None)
            continue
        if not is_array(x):
            raise TypeError(f"{name} must be a numpy array or a torch tensor; got {type(x).__name__}")
        x = check_dense(x, name)
        if is_torch_array(x):
            x = x.detach().cpu()
            # numpy has no bfloat16: such a tensor goes over as float32 (0/1 masks stay exact)
            arrays.append((x.float() if str(x.dtype) == "torch.bfloat16" else x).numpy())
        else:
            arrays.append(np.asarray(x))
    ids, mask = arrays
    assert ids is not None
    if ids.ndim != 2:
        raise ValueError(f"token_ids must have shape (B, T); got {describe(ids)}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"token_ids must hold integers; got {describe(ids)}")
    if mask is not None and tuple(mask.shape) != tuple(ids.shape):
        raise ValueError(
            f"response_mask and token_ids must have the same shape; got {mask.shape} and {ids.shape}"
        )
    return ids, mask


# --- decoded text -----------------------------------------------------------------------------------


def text_units(text: str) -> list[str]:
    """The units of a decoded response, as the module docstring defines them.

    Whitespace-separated pieces (``str.split()``), where each character of the scripts of
    :data:`CHARACTER_SCRIPTS` (CJK ideographs, kana, Hangul, Thai ...) is a unit of its own with
    the punctuation around it, and a unit holding a degenerate run (a block of at most
    :data:`RUN_MAX_BLOCK` characters repeated at least 4 times over at least
    :data:`RUN_MIN_CHARS` characters) is its characters. Text with neither (ordinary English) gets
    exactly ``str.split()``.

    Examples
    --------
    >>> text_units("I think 答案是4。Done!")
    ['I', 'think', '答', '案', '是', '4。Done!']
    >>> text_units("ok " + "!" * 40) == ["ok"] + ["!"] * 40
    True
    """
    if text.isascii() or _MAYBE_SCRIPT.search(text) is None:
        units = text.split()  # no script character: the same as the exact path, 5x faster
    else:
        units = _PIECE_UNIT.findall(text)
    if len(max(units, key=len, default="")) < RUN_MIN_CHARS:
        return units  # no unit long enough to hold a run: the common case, a C-level check
    out: list[str] = []
    for u in units:
        if len(u) >= RUN_MIN_CHARS and _RUN.search(u):
            out.extend(u)
        else:
            out.append(u)
    return out


def ends_in_loop(units: Sequence[Any], repeats: int, max_period: int) -> bool:
    """Whether the last ``repeats * p`` units are ``repeats`` copies of one ``p``-unit block, some ``p``.

    ``p`` runs over ``1..max_period``. Works on any sequence (a list of words, a string of
    characters, a list of token ids).

    Examples
    --------
    >>> ends_in_loop("so : and then and then and then and then".split(), 4, 8)
    True
    >>> ends_in_loop("so : and then and then and then".split(), 4, 8)
    False
    """
    n = len(units)
    for p in range(1, min(max_period, n // repeats) + 1):
        if units[n - 1] != units[n - 1 - p]:  # cheap rejection of most periods
            continue
        if units[n - (repeats - 1) * p :] == units[n - repeats * p : n - p]:
            return True
    return False


def _non_words(units: list[str]) -> int:
    """How many of ``units`` are not a word (letters alone are; the others go through the regex)."""
    return sum(1 for u in itertools.filterfalse(str.isalpha, units) if _WORD.fullmatch(u) is None)


def _deflate_ratio(data: bytes) -> float:
    """Raw DEFLATE size over raw size (``data`` non-empty)."""
    packer = zlib.compressobj(COMPRESSION_LEVEL, zlib.DEFLATED, -15)
    return (len(packer.compress(data)) + len(packer.flush())) / len(data)


def _split_think(text: str, span: tuple[str, str] | None) -> tuple[bool, int, str]:
    """(closed, thinking length, answer text) of one response, as the module docstring defines."""
    if span is None:
        return False, 0, text
    opening, closing = span
    end = text.find(closing)
    if end >= 0:
        start = text.find(opening, 0, end)
        start = 0 if start < 0 else start + len(opening)
        return True, end - start, text[end + len(closing) :]
    start = text.find(opening)
    if start >= 0:
        return False, len(text) - start - len(opening), ""
    return False, 0, text


def _text_sums(texts: list[str], o: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """Sums and per-response extremes of decoded responses (one Python pass per response)."""
    n, repeats, period = o["ngram"], o["loop_repeats"], o["loop_max_period"]
    span, pattern = o["think_span"], o["_pattern"]
    s = dict.fromkeys(_sum_names(o), 0.0)
    ext: dict[str, float] = {"len_max": -math.inf, "len_min": math.inf, "comp_max": -math.inf}
    ext |= {"comp_min": math.inf, "think_max": -math.inf, "answer_max": -math.inf}
    for text in texts:
        units = text_units(text)
        size = len(text)
        s["n"] += 1
        s["len_sum"] += size
        ext["len_max"], ext["len_min"] = max(ext["len_max"], size), min(ext["len_min"], size)
        if units:
            s["loop"] += ends_in_loop(units, repeats, period)
            if len(units) >= n:
                grams = set(units) if n == 1 else set(zip(*(units[k:] for k in range(n))))
                s["distinct_sum"] += len(grams) / (len(units) - n + 1)
                s["distinct_n"] += 1
            s["non_word_sum"] += _non_words(units) / len(units)
            if o["compression"]:
                ratio = _deflate_ratio(text.encode("utf-8"))
                s["comp_sum"] += ratio
                ext["comp_max"], ext["comp_min"] = max(ext["comp_max"], ratio), min(ext["comp_min"], ratio)
        else:
            s["empty"] += 1
        closed, think, answer = _split_think(text, span)
        if span is not None:
            s["closed"] += closed
            s["think_sum"] += think
            s["answer_sum"] += len(answer)
            ext["think_max"], ext["answer_max"] = (
                max(ext["think_max"], think),
                max(ext["answer_max"], len(answer)),
            )
        if pattern is not None:
            s["format"] += pattern.search(answer) is not None
    return s, ext


# --- token ids --------------------------------------------------------------------------------------


def _lengths(ids: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """Tokens per row, and whether each row's tokens are a prefix of it (verl's left-aligned mask)."""
    n_rows, width = ids.shape
    if mask is None:
        return np.full(n_rows, width, dtype=np.int64), True
    lengths = np.count_nonzero(mask, axis=1).astype(np.int64)
    if width == 0:
        return lengths, True
    # A prefix row's first unselected column is its length (argmin of a bool row stops at its first False).
    first_off = np.argmin(mask, axis=1)
    return lengths, bool(np.all((lengths == width) | (first_off == lengths)))


def _check_id_range(ids: np.ndarray, mask: np.ndarray | None) -> tuple[int, bool]:
    """(a bound on the ids to size a rank table with, whether every id, padding included, is in range).

    Raises the ``ValueError`` for a selected id outside ``[0, 2**32)``. When every id is in range the
    bound is the bitwise or of all of them (padding too; at least their maximum, under twice it),
    else the largest selected id.
    """
    if ids.size == 0:
        return 0, True
    bits = int(np.bitwise_or.reduce(ids, axis=None))  # one pass; negative when an id is
    if 0 <= bits < _ID_LIMIT:
        return bits, True  # every id is in range, padding included: no masked pass needed
    selected = ids if mask is None else ids[mask]
    bad = selected[(selected < 0) | (selected >= _ID_LIMIT)]
    if bad.size:
        raise ValueError(f"token_ids must be in [0, 2**32) where response_mask selects them; found {bad[0]}")
    return (int(selected.max()) if selected.size else 0), False


def _rank_table(values: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(rank of each id in ``[0, top]`` among ``values``' distinct ids, from 1; which are present).

    ``None`` when they are more than :data:`_RANK_MAX` or ``top`` is past :data:`_RANK_LIMIT`.
    """
    if top >= _RANK_LIMIT:
        return None
    present = np.zeros(top + 1, dtype=bool)
    present[values] = True
    distinct = np.flatnonzero(present)
    if distinct.size > _RANK_MAX:
        return None
    ranks = np.zeros(top + 1, dtype=np.uint16)
    ranks[distinct] = np.arange(1, distinct.size + 1, dtype=np.uint16)
    return ranks, present


def _block(
    ids: np.ndarray,
    mask: np.ndarray | None,
    rows: np.ndarray,
    lens: np.ndarray,
    bounds: tuple[int, bool, bool],
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """The rows' selected tokens left-aligned in a ``(len(rows), max(lens) + 3)`` block, zeros after.

    The tokens are their ranks among the block's distinct ids (uint16, 1 and up, with the rank
    table) when these are at most :data:`_RANK_MAX`, else the ids plus one (int64). Zero, the
    padding, differs from every token; the 3 zero columns let a window of 4 ranks start anywhere.
    """
    top, clean, prefix = bounds
    width = int(lens.max()) if lens.size else 0
    if prefix and clean:  # one gather: the rows' first columns, padding included (in range)
        raw = ids[rows, :width]
        table = _rank_table(raw, top)
        block = np.zeros((rows.size, width + 3), dtype=np.int64 if table is None else np.uint16)
        block[:, :width] = raw.astype(np.int64) + 1 if table is None else table[0][raw]
        for j, n in enumerate(lens.tolist()):
            block[j, n:width] = 0  # the columns past each row's length
        return block, table
    assert mask is not None  # a missing mask is a prefix, and then every id was checked in range
    parts = [ids[i, :n] if prefix else ids[i][mask[i]] for i, n in zip(rows.tolist(), lens.tolist())]
    table = _rank_table(np.concatenate(parts), top) if parts else None
    block = np.zeros((rows.size, width + 3), dtype=np.int64 if table is None else np.uint16)
    for j, src in enumerate(parts):
        block[j, : src.size] = src.astype(np.int64) + 1 if table is None else table[0][src]
    return block, table


def _exact_bits(block: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """The block and the bits per id of its n-gram codes: ``n * bits <= 64`` is an exact packing.

    When the ids are too wide, the block's distinct values are replaced by their ranks (0 stays
    0, the order is kept) if that makes the packing exact; else the bits of the ids as they are
    (the codes are then hashed).
    """
    top = int(block.max()) if block.size else 0
    bits = max(1, top.bit_length())
    if n * bits <= 64 or top >= _RANK_LIMIT:
        return block, bits
    present = np.zeros(top + 1, dtype=bool)
    present[block] = True
    present[0] = True
    distinct = int(np.count_nonzero(present))
    ranked_bits = max(1, (distinct - 1).bit_length())
    if n * ranked_bits > 64:
        return block, bits
    ranks = np.cumsum(present, dtype=np.int64) - 1
    return ranks[block], ranked_bits


def _ngram_codes(block: np.ndarray, n: int, bits: int) -> np.ndarray:
    """One uint64 code per n-gram start (exact packing when ``n * bits <= 64``, else a 64-bit hash)."""
    width = block.shape[1] - n + 1
    u = block.view(np.uint64)
    packed = n * bits <= 64
    if n == 1:
        return u.copy()
    # The first step out of place (one pass fewer than a copy), the others in place.
    code = u[:, :width] << np.uint64(bits) if packed else u[:, :width] * _HASH_MUL
    for k in range(1, n):
        if k > 1:
            if packed:
                code <<= np.uint64(bits)
            else:  # multiply-xor chain: each step is a bijection of the running code for a fixed next id
                code *= _HASH_MUL
        if packed:
            code |= u[:, k : k + width]
        else:
            code ^= u[:, k : k + width]
    return code


def _window_codes(block: np.ndarray, n: int) -> np.ndarray:
    """The n-gram codes of a uint16 rank block, ``n <= 4``: the 8 bytes at each column, read as one
    uint64 (4 ranks: an exact packing), cut to the n-gram's ``16 * n`` bits; no arithmetic pass."""
    rows, cols = block.shape
    windows = np.ndarray((rows, cols - 3), dtype=np.uint64, buffer=block, strides=(block.strides[0], 2))
    code = np.array(windows)
    if n < 4:
        code &= np.uint64((1 << (16 * n)) - 1)
    return code


def _distinct_counts(block: np.ndarray, lengths: np.ndarray, n: int) -> np.ndarray:
    """Number of distinct n-grams per row of a left-aligned block (0 for rows under ``n`` tokens).

    Every code of a row is sorted, its distinct values counted, and those of the ``Q`` windows that
    end in the padding taken off: ``min(Q, n - 1)`` distinct values (one per number of trailing
    zeros, which no n-gram of tokens has) plus the all-zero one when ``Q >= n``.
    """
    if block.dtype == np.uint16 and n <= 4:
        code = _window_codes(block, n) if n > 1 else block[:, :-3].astype(np.uint64)
    else:
        wide, bits = _exact_bits(block.astype(np.int64, copy=False), n)
        code = _ngram_codes(wide, n, bits)
    if code.shape[1] <= 0:
        return np.zeros(block.shape[0], dtype=np.int64)
    code.sort(axis=1)
    total = 1 + np.count_nonzero(code[:, 1:] != code[:, :-1], axis=1)
    q = code.shape[1] - (lengths - n + 1)
    return np.where(lengths >= n, total - np.minimum(q, n - 1) - (q >= n), 0)


def _tails(block: np.ndarray, lens: np.ndarray, span: int) -> np.ndarray:
    """Each row's last ``span`` tokens, right-aligned in a ``(rows, span)`` int64 array (zeros first)."""
    at = lens[:, None] - span + np.arange(span)[None, :]
    short = lens.size and int(lens.min()) < span
    tails = np.take_along_axis(block, np.maximum(at, 0) if short else at, axis=1).astype(np.int64)
    if short:
        tails[at < 0] = 0
    return tails


def _loops(tails: np.ndarray, lengths: np.ndarray, repeats: int, max_period: int) -> np.ndarray:
    """:func:`ends_in_loop` of every row, from its right-aligned tail, vectorised over rows."""
    width = tails.shape[1]
    found = np.zeros(tails.shape[0], dtype=bool)
    for p in range(1, min(max_period, width // repeats) + 1):
        cand = np.flatnonzero(~found & (lengths >= repeats * p) & (tails[:, -1] == tails[:, -1 - p]))
        if cand.size:
            tail = tails[cand, width - repeats * p :]  # the candidates' last repeats * p tokens
            found[cand] = np.all(tail[:, p:] == tail[:, :-p], axis=1)
    return found


def _first_match(block: np.ndarray, tag: tuple[int, ...] | None) -> np.ndarray:
    """Column of the first occurrence of ``tag`` per row, or -1 (``None``: a tag absent from the block)."""
    k = 1 if tag is None else len(tag)
    width = block.shape[1] - k + 1
    if tag is None or width <= 0:
        return np.full(block.shape[0], -1, dtype=np.int64)
    hit = block[:, :width] == tag[0]  # the zero padding never matches a token (>= 1)
    for q in range(1, k):
        hit &= block[:, q : q + width] == tag[q]
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def _tag_values(tag: tuple[int, ...], table: tuple[np.ndarray, np.ndarray] | None) -> tuple[int, ...] | None:
    """A tag's ids as the block holds them (plus one, or their ranks); ``None`` if one is absent."""
    if table is None:
        return tuple(t + 1 for t in tag)
    ranks, present = table
    if any(t >= present.size or not present[t] for t in tag):
        return None
    return tuple(int(ranks[t]) for t in tag)


def _think_ids(
    block: np.ndarray, lengths: np.ndarray, span: tuple[tuple[int, ...], tuple[int, ...]], table: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(closed, thinking length, answer length) per row of a left-aligned block (tokens)."""
    n_open, n_close = len(span[0]), len(span[1])
    end = _first_match(block, _tag_values(span[1], table))
    closed = end >= 0
    first_open = _first_match(block, _tag_values(span[0], table))
    # The first opening tag ending before the closing one is the first opening tag, if that one does.
    before = np.where(closed & (first_open >= 0) & (first_open <= end - n_open), first_open, -1)
    think_from = np.where(before >= 0, before + n_open, 0)
    opened = first_open >= 0
    think = np.where(closed, end - think_from, np.where(opened, lengths - first_open - n_open, 0))
    answer = np.where(closed, lengths - end - n_close, np.where(opened, 0, lengths))
    return closed, think, answer


def _compression_ratios(
    ids: np.ndarray, mask: np.ndarray | None, lengths: np.ndarray, prefix: bool
) -> list[float]:
    """The compression ratio of every non-empty row: its selected ids as little-endian uint32 bytes."""
    rows = (ids[i, :n] if prefix or mask is None else ids[i][mask[i]] for i, n in enumerate(lengths.tolist()))
    return [_deflate_ratio(row.astype("<u4").tobytes()) for row in rows if row.size]


def _id_sums(
    ids: np.ndarray, mask: np.ndarray | None, o: Mapping[str, Any]
) -> tuple[dict[str, float], dict[str, float]]:
    """Sums and extremes of token rows: per-row statistics (numba's kernel where it pays, else
    whole-block numpy passes), then their sums."""
    kernel = None
    # numba reads no float16 (a mask of them takes numpy's path, as any other type it lacks)
    if ids.size >= FUSED_MIN_ELEMENTS and (
        mask is None or mask.dtype.kind in "biu" or mask.dtype in _WIDE_FLOATS
    ):
        kernel = text_rows_kernel()
    if kernel is None:
        mask = None if mask is None else check_mask(mask, "response_mask")
        table, prefix = _id_rows(ids, mask, o)
    else:
        table = _id_rows_fused(kernel, ids, mask, o)
        prefix = mask is None
    ratios: list[float] = []
    if o["compression"]:
        selected = None if mask is None else mask.astype(bool, copy=False)  # checked 0/1 by now
        ratios = _compression_ratios(ids, selected, table[:, 0], prefix)
    return _row_sums(table, ratios, o)


def _row_sums(
    table: np.ndarray, ratios: list[float], o: Mapping[str, Any]
) -> tuple[dict[str, float], dict[str, float]]:
    """Sums and extremes of the per-row table (columns :data:`_ROW_COLUMNS`) and compression ratios.

    Exact whatever the rows' order (integer sums, ``math.fsum``): both paths give the same numbers.
    """
    lengths, n = table[:, 0], o["ngram"]
    s = dict.fromkeys(_sum_names(o), 0.0)
    s["n"], s["len_sum"] = float(lengths.size), float(lengths.sum())
    s["empty"] = float(np.count_nonzero(lengths == 0))
    has = lengths >= n
    s["distinct_sum"] = math.fsum((table[has, 1] / (lengths[has] - n + 1)).tolist())
    s["distinct_n"] = float(np.count_nonzero(has))
    s["loop"] = float(np.count_nonzero(table[:, 2]))
    s["comp_sum"] = math.fsum(ratios)
    some = lengths.size > 0
    ext = {
        "len_max": float(lengths.max()) if some else -math.inf,
        "len_min": float(lengths.min()) if some else math.inf,
        "comp_max": max(ratios, default=-math.inf),
        "comp_min": min(ratios, default=math.inf),
        "think_max": float(table[:, 4].max()) if some else -math.inf,
        "answer_max": float(table[:, 5].max()) if some else -math.inf,
    }
    if o["think_span"] is not None:
        s["closed"], s["think_sum"], s["answer_sum"] = (float(v) for v in table[:, 3:6].sum(axis=0))
    return s, ext


def _id_rows_fused(kernel: Any, ids: np.ndarray, mask: np.ndarray | None, o: Mapping[str, Any]) -> np.ndarray:
    """The per-row table from numba's kernel (one pass over each row; the errors as numpy's path)."""
    span = o["think_span"] or ((), ())
    # A tag id past the ids' range matches nothing: 2**32 stands for it (int64 holds it).
    tags = [np.array([min(t, _ID_LIMIT) for t in tag], dtype=np.int64) for tag in span]
    every = np.zeros((ids.shape[0], 0), dtype=bool)  # zero width: every token selected
    table, bad_mask, bad_ids = kernel(
        np.ascontiguousarray(ids),
        every if mask is None else np.ascontiguousarray(mask),
        o["ngram"],
        o["loop_repeats"],
        o["loop_max_period"],
        *tags,
    )
    if bad_mask:
        raise_invalid_mask(mask, "response_mask")
    if bad_ids:
        _check_id_range(ids, None if mask is None else mask != 0)  # raises, naming an id
    return table


def _id_rows(ids: np.ndarray, mask: np.ndarray | None, o: Mapping[str, Any]) -> tuple[np.ndarray, bool]:
    """The per-row table (columns :data:`_ROW_COLUMNS`) in blocks of rows of similar lengths, and
    whether every row's tokens are a prefix of it.

    Rows are taken shortest first; each block holds its rows' tokens left-aligned (zeros after
    them), as ranks among the block's distinct ids where these fit 16 bits, and is cut to its
    longest row, so the n-gram sort and the comparisons skip most of the padding. Every statistic
    is a few whole-block numpy passes; loops are found once over every row's tail.
    """
    top, clean = _check_id_range(ids, mask)
    lengths, prefix = _lengths(ids, mask)
    table = np.zeros((lengths.size, len(_ROW_COLUMNS)), dtype=np.int64)
    table[:, 0] = lengths
    order = np.argsort(lengths, kind="stable")
    n, repeats = o["ngram"], o["loop_repeats"]
    tails = np.zeros((lengths.size, repeats * min(o["loop_max_period"], ids.shape[1] // repeats)), np.int64)
    for first in range(0, lengths.size, _ROW_BLOCK):
        rows = order[first : first + _ROW_BLOCK]
        lens = lengths[rows]
        block, ranks = _block(ids, mask, rows, lens, (top, clean, prefix))
        tails[first : first + rows.size] = _tails(block, lens, tails.shape[1])
        if np.any(lens >= n):
            table[rows, 1] = _distinct_counts(block, lens, n)
        if o["think_span"] is not None:
            table[rows, 3:6] = np.stack(_think_ids(block, lens, o["think_span"], ranks), axis=1)
    table[order, 2] = _loops(tails, lengths[order], repeats, o["loop_max_period"])
    return table, prefix


# --- the statistics and the metrics -------------------------------------------------------------------


def _sum_names(o: Mapping[str, Any]) -> list[str]:
    """The sums this option set keeps, in layout order."""
    names = ["n", "empty", "len_sum", "loop", "distinct_sum", "distinct_n", "comp_sum"]
    if o["unit"] == "characters":
        names.append("non_word_sum")
    if o["stop_reasons"]:
        names += [f"stop_{r}" for r in STOP_REASONS]
    if o["format_pattern"] is not None:
        names.append("format")
    if o["think_span"] is not None:
        names += ["closed", "think_sum", "answer_sum"]
    return names


def _options(on_ids: bool, has_stops: bool, pattern: Any, think_span: Any, **numbers: Any) -> dict[str, Any]:
    if on_ids and pattern is not None:
        raise ValueError("format_pattern needs decoded text: pass responses= (the strings), not token_ids=")
    compiled = _check_pattern(pattern)
    o: dict[str, Any] = {
        "unit": "tokens" if on_ids else "characters",
        "ngram": check_int(numbers["ngram"], "ngram", minimum=1),
        "loop_repeats": check_int(numbers["loop_repeats"], "loop_repeats", minimum=2),
        "loop_max_period": check_int(numbers["loop_max_period"], "loop_max_period", minimum=1),
        "compression": (not on_ids) if numbers["compression"] is None else numbers["compression"],
        "stop_reasons": has_stops,
        "format_pattern": None if compiled is None else (compiled.pattern, int(compiled.flags)),
        "think_span": _check_think_span(think_span, on_ids),
        "prefix": check_prefix(numbers["prefix"]),
    }
    if not isinstance(o["compression"], bool):
        raise TypeError(f"compression must be True, False or None; got {o['compression']!r}")
    return o | {"_pattern": compiled}


def text_statistics(
    responses: Sequence[str] | None = None,
    *,
    token_ids: Any = None,
    response_mask: Any = None,
    stop_reasons: Sequence[str] | None = None,
    format_pattern: str | re.Pattern[str] | None = None,
    think_span: tuple[Any, Any] | None = _DEFAULT_THINK_SPAN,
    ngram: int = DEFAULT_NGRAM,
    loop_repeats: int = DEFAULT_LOOP_REPEATS,
    loop_max_period: int = DEFAULT_LOOP_MAX_PERIOD,
    compression: bool | None = None,
    prefix: str = K.TEXT_PREFIX,
) -> Stats:
    """Mergeable sums, maxima and minima behind :func:`compute_text_metrics` (host numpy vectors).

    Arguments as :func:`compute_text_metrics`. Statistics of decoded text and of token ids do
    not merge (their lengths are in different units), nor do those of different options.

    Examples
    --------
    >>> a = text_statistics(["The answer is 4."], stop_reasons=["stop"])
    >>> b = text_statistics(["ha ha ha ha ha"], stop_reasons=["length"])
    >>> m = (a + b).finalize()
    >>> m["text/num_responses"], m["text/repetition/loop_ratio"], m["text/stop_reason/length"]
    (2.0, 0.5, 0.5)
    """
    on_ids = token_ids is not None
    if on_ids == (responses is not None):
        raise TypeError("give exactly one of responses (decoded strings) and token_ids (a (B, T) array)")
    if response_mask is not None and not on_ids:
        raise TypeError("response_mask goes with token_ids; decoded responses need no mask")
    numbers = {"ngram": ngram, "loop_repeats": loop_repeats, "loop_max_period": loop_max_period}
    o = _options(
        on_ids,
        stop_reasons is not None,
        format_pattern,
        think_span,
        compression=compression,
        prefix=prefix,
        **numbers,
    )
    if on_ids:
        ids, mask = _host_ids(token_ids, response_mask)
        sums, ext = _id_sums(ids, mask, o)
    else:
        sums, ext = _text_sums(_check_strings(responses, "responses"), o)
    if stop_reasons is not None:
        reasons = _check_strings(stop_reasons, "stop_reasons")
        if len(reasons) != sums["n"]:
            raise ValueError(
                f"stop_reasons must have one entry per response ({sums['n']:g}); got {len(reasons)}"
            )
        for r in reasons:
            sums["stop_" + str(stop_category(r))] += 1
    maxes = {k: ext[k] for k in ("len_max", "comp_max")}
    if o["think_span"] is not None:
        maxes |= {"think_max": ext["think_max"], "answer_max": ext["answer_max"]}
    mins = {"len_min": ext["len_min"], "comp_min": ext["comp_min"]}
    options = {k: v for k, v in o.items() if not k.startswith("_")}
    return Stats.pack("text", sums, maxes, mins, finaliser=_finalize, options=options)


def _finalize(
    s: dict[str, float], hi: dict[str, float], lo: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """The metric dictionary from the host statistics (NaN, with one warning, where undefined)."""
    n = s["n"]
    undefined: list[str] = []

    def part(num: float, den: float, key: str) -> float:
        if den > 0:
            return num / den
        undefined.append(key.removeprefix(K.TEXT_PREFIX))
        return math.nan

    def extreme(v: float) -> float:
        return v if math.isfinite(v) else math.nan

    non_empty = n - s["empty"]
    out = {K.TEXT_NUM_RESPONSES: n, K.TEXT_EMPTY_RATIO: part(s["empty"], n, K.TEXT_EMPTY_RATIO)}
    out[K.TEXT_LENGTH_MEAN] = part(s["len_sum"], n, K.TEXT_LENGTH_MEAN)
    out[K.TEXT_LENGTH_MAX], out[K.TEXT_LENGTH_MIN] = extreme(hi["len_max"]), extreme(lo["len_min"])
    out[K.TEXT_LOOP_RATIO] = part(s["loop"], n, K.TEXT_LOOP_RATIO)
    out[K.TEXT_DISTINCT_NGRAM_MEAN] = part(s["distinct_sum"], s["distinct_n"], K.TEXT_DISTINCT_NGRAM_MEAN)
    if options["compression"]:
        out[K.TEXT_COMPRESSION_RATIO_MEAN] = part(s["comp_sum"], non_empty, K.TEXT_COMPRESSION_RATIO_MEAN)
        out[K.TEXT_COMPRESSION_RATIO_MAX] = extreme(hi["comp_max"])
        out[K.TEXT_COMPRESSION_RATIO_MIN] = extreme(lo["comp_min"])
    if "non_word_sum" in s:
        out[K.TEXT_NON_WORD_RATIO_MEAN] = part(s["non_word_sum"], non_empty, K.TEXT_NON_WORD_RATIO_MEAN)
    if options["stop_reasons"]:
        for reason in STOP_REASONS:
            out[_STOP_KEYS[reason]] = s["stop_" + reason] / n if n > 0 else math.nan
    if options["format_pattern"] is not None:
        out[K.TEXT_FORMAT_MATCH_RATIO] = s["format"] / n if n > 0 else math.nan
    if options["think_span"] is not None:
        out[K.TEXT_THINK_CLOSED_RATIO] = s["closed"] / n if n > 0 else math.nan
        out[K.TEXT_THINK_SHARE] = part(s["think_sum"], s["len_sum"], K.TEXT_THINK_SHARE)
        out[K.TEXT_THINK_LENGTH_MEAN] = s["think_sum"] / n if n > 0 else math.nan
        out[K.TEXT_THINK_LENGTH_MAX] = extreme(hi["think_max"])
        out[K.TEXT_ANSWER_LENGTH_MEAN] = s["answer_sum"] / n if n > 0 else math.nan
        out[K.TEXT_ANSWER_LENGTH_MAX] = extreme(hi["answer_max"])
    if n == 0:
        warn_undefined("no responses: the text statistics are undefined (NaN)", stacklevel=None)
    elif undefined:
        warn_undefined(f"undefined on these responses (NaN): {', '.join(undefined)}", stacklevel=None)
    return with_prefix(out, K.TEXT_PREFIX, options["prefix"])


@metrics_from(text_statistics)
def compute_text_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    responses: Sequence[str] | None = None,
    *,
    token_ids: Any = None,
    response_mask: Any = None,
    stop_reasons: Sequence[str] | None = None,
    format_pattern: str | re.Pattern[str] | None = None,
    think_span: tuple[Any, Any] | None = _DEFAULT_THINK_SPAN,
    ngram: int = DEFAULT_NGRAM,
    loop_repeats: int = DEFAULT_LOOP_REPEATS,
    loop_max_period: int = DEFAULT_LOOP_MAX_PERIOD,
    compression: bool | None = None,
    prefix: str = K.TEXT_PREFIX,
    process_group: Any = None,
) -> dict[str, float]:
    """Text statistics of a step's responses: repetition, gibberish proxies, stops, format, thinking.

    The definitions are in the module docstring (:mod:`rlmetrics.training.text`).

    Parameters
    ----------
    responses : sequence of str of length ``B``, optional
        The decoded responses (without the prompt), cut into units by :func:`text_units`
        (words; each character of CJK, kana, Hangul, Thai ...; a degenerate run's characters).
        Exactly one of ``responses`` and ``token_ids``.
    token_ids : integer array of shape ``(B, T)``, optional, keyword-only
        The responses as token ids (numpy or torch, any device: read on the host), ids in
        ``[0, 2**32)`` where ``response_mask`` selects them.
    response_mask : array of shape ``(B, T)``, optional, keyword-only
        Bool or 0/1: the tokens of each response (its order kept; padding anywhere). Default:
        every token.
    stop_reasons : sequence of str of length ``B``, optional, keyword-only
        Why each generation stopped (vLLM's / SGLang's ``finish_reason``): ``stop`` / ``eos``,
        ``length``, ``abort``, ``error``, ``tool_call``; any other string counts as ``other``.
    format_pattern : str or re.Pattern, optional, keyword-only
        A regular expression the answer must contain (``re.search``), e.g. ``r"\\boxed\\{.+\\}"``;
        decoded text only.
    think_span : (open, close) or None, keyword-only
        The thinking tags (default ``("<think>", "</think>")``); for token ids, each tag as a
        token id or a sequence of ids (the default string tags are skipped there). ``None``:
        no thinking statistics, the format check reads the whole response.
    ngram : int, keyword-only
        The ``n`` of distinct-n (default 4).
    loop_repeats, loop_max_period : int, keyword-only
        A response ends in a loop when its last ``loop_repeats * p`` units are ``loop_repeats``
        copies of one block of ``p <= loop_max_period`` units (defaults 4 and 64).
    compression : bool or None, keyword-only
        Compute the compression ratios (zlib, one call per response). Default ``None``: on for
        decoded text, off for token ids, where zlib alone costs more than every other statistic
        together (pass ``True`` to have them).
    prefix : str, keyword-only
        Prepended to every key instead of ``"text/"``.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' responses (a rank
        with none still takes part; a rank whose input is bad makes every rank raise).

    Returns
    -------
    dict[str, float]
        ``num_responses``, ``empty_ratio``, ``length/{mean,max,min}``,
        ``repetition/loop_ratio``, ``repetition/distinct_ngram/mean``,
        ``compression_ratio/{mean,max,min}`` (with ``compression``: by default for text only),
        ``non_word_ratio/mean``
        (text); with ``stop_reasons``: ``stop_reason/{stop,length,abort,error,tool_call,other}``;
        with ``format_pattern``: ``format/match_ratio``; with ``think_span``:
        ``think/{closed_ratio,share}``, ``think/length/{mean,max}``, ``answer/length/{mean,max}``.
        Lengths are characters for text and tokens for ids; means are over all responses except
        distinct-n (responses of at least ``ngram`` units) and the compression and non-word
        ratios (non-empty responses). NaN with an ``UndefinedMetricWarning`` when undefined.

    Raises
    ------
    TypeError, ValueError
        Bad arguments, naming the argument: both or neither of ``responses`` and ``token_ids``,
        a non-string response or stop reason, ``stop_reasons`` of another length, an invalid
        regular expression, ids out of range, a mask of another shape or not 0/1.

    Examples
    --------
    >>> m = compute_text_metrics(
    ...     ["<think>2+2 is 4</think> \\\\boxed{4}", "<think>hmm hmm hmm hmm hmm"],
    ...     stop_reasons=["stop", "length"],
    ...     format_pattern=r"\\\\boxed\\{.+\\}",
    ... )
    >>> m["text/think/closed_ratio"], m["text/format/match_ratio"], m["text/repetition/loop_ratio"]
    (0.5, 0.5, 0.5)
    >>> m["text/think/length/mean"], m["text/answer/length/mean"]
    (13.5, 5.0)
    >>> ids = compute_text_metrics(token_ids=np.array([[5, 6, 6, 6, 6], [7, 8, 9, 0, 0]]),
    ...                            response_mask=np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), ngram=2)
    >>> ids["text/length/mean"], ids["text/repetition/loop_ratio"], ids["text/repetition/distinct_ngram/mean"]
    (4.0, 0.5, 0.75)
    """
