"""Tests of rlmetrics.training.text: every statistic against a brute-force or hand computation,
merges of any split, the text and token-id paths against each other, errors, and 2 gloo ranks."""

from __future__ import annotations

import itertools
import math
import os
import pickle
import re
import sys
import time
import warnings
import zlib
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics._core.kernels import text_rows_kernel
from rlmetrics._core.stats import Stats
from rlmetrics.errors import UndefinedMetricWarning
from rlmetrics.training import text as text_module
from rlmetrics.training.text import (
    _SCRIPT_CHAR,
    CHARACTER_SCRIPTS,
    RUN_MAX_BLOCK,
    RUN_MIN_CHARS,
    STOP_REASONS,
    compute_text_metrics,
    ends_in_loop,
    text_statistics,
    text_units,
)

R4, P64 = 4, 64  # the default loop_repeats and loop_max_period

# Hand-made responses are often shorter than the default n of distinct-n (4 words): that NaN's
# warning is tested on its own (pytest.warns sees it regardless of this filter).
pytestmark = pytest.mark.filterwarnings(
    "ignore:undefined on these responses:rlmetrics.errors.UndefinedMetricWarning"
)

# --- brute-force references -------------------------------------------------------------------


def ref_loop(units: list, repeats: int = R4, max_period: int = P64) -> bool:
    """Some block of p <= max_period units, repeated ``repeats`` times, is the whole tail."""
    return any(
        len(units) >= repeats * p and list(units[-repeats * p :]) == list(units[-p:]) * repeats
        for p in range(1, max_period + 1)
    )


def ref_distinct(units: list, n: int) -> float | None:
    grams = [tuple(units[i : i + n]) for i in range(len(units) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def ref_compression(data: bytes) -> float:
    """zlib's stream less its 2-byte header and 4-byte checksum: the raw DEFLATE size."""
    return (len(zlib.compress(data, 1)) - 6) / len(data)


def ref_find(seq: list, tag: list, start: int = 0, end: int | None = None) -> int:
    end = len(seq) if end is None else end
    return next((i for i in range(start, end - len(tag) + 1) if seq[i : i + len(tag)] == tag), -1)


def ref_think(seq: list, opening: list, closing: list) -> tuple[bool, int, int]:
    """(closed, thinking length, answer length) of a list of units, by the module's definition."""
    c = ref_find(seq, closing)
    if c >= 0:
        o = ref_find(seq, opening, 0, c)
        return True, c - (o + len(opening) if o >= 0 else 0), len(seq) - c - len(closing)
    o = ref_find(seq, opening)
    return (False, len(seq) - o - len(opening), 0) if o >= 0 else (False, 0, len(seq))


def ref_id_metrics(
    rows: list[list[int]],
    n: int,
    span=None,
    *,
    compression: bool = True,
    repeats: int = R4,
    period: int = P64,
) -> dict:
    """The token-id metrics of ragged rows, one row at a time in plain Python."""
    full = [r for r in rows if r]
    ds = [d for d in (ref_distinct(r, n) for r in rows) if d is not None]
    out = {
        K.TEXT_NUM_RESPONSES: float(len(rows)),
        K.TEXT_EMPTY_RATIO: (len(rows) - len(full)) / len(rows),
        K.TEXT_LENGTH_MEAN: float(np.mean([len(r) for r in rows])),
        K.TEXT_LENGTH_MAX: float(max(len(r) for r in rows)),
        K.TEXT_LENGTH_MIN: float(min(len(r) for r in rows)),
        K.TEXT_LOOP_RATIO: float(np.mean([ref_loop(r, repeats, period) for r in rows])),
        K.TEXT_DISTINCT_NGRAM_MEAN: float(np.mean(ds)) if ds else math.nan,
    }
    if compression:
        comp = [ref_compression(np.asarray(r, dtype="<u4").tobytes()) for r in full]
        out[K.TEXT_COMPRESSION_RATIO_MEAN] = float(np.mean(comp)) if comp else math.nan
        out[K.TEXT_COMPRESSION_RATIO_MAX] = max(comp, default=math.nan)
        out[K.TEXT_COMPRESSION_RATIO_MIN] = min(comp, default=math.nan)
    if span is not None:
        th = [ref_think(r, list(span[0]), list(span[1])) for r in rows]
        out[K.TEXT_THINK_CLOSED_RATIO] = float(np.mean([t[0] for t in th]))
        out[K.TEXT_THINK_LENGTH_MEAN] = float(np.mean([t[1] for t in th]))
        out[K.TEXT_THINK_LENGTH_MAX] = float(max(t[1] for t in th))
        out[K.TEXT_ANSWER_LENGTH_MEAN] = float(np.mean([t[2] for t in th]))
        out[K.TEXT_ANSWER_LENGTH_MAX] = float(max(t[2] for t in th))
        total = sum(len(r) for r in rows)
        out[K.TEXT_THINK_SHARE] = sum(t[1] for t in th) / total if total else math.nan
    return out


def assert_close(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12, nan_ok=True), key


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return fn(*args, **kwargs)


#: The token-id paths: numpy's blocks (always) and numba's kernel (with numba; forced at any size).
ID_PATHS = [
    pytest.param("numpy", id="numpy"),
    pytest.param(
        "numba",
        id="numba",
        marks=pytest.mark.skipif(text_rows_kernel() is None, reason="numba missing or RLMETRICS_NO_NUMBA"),
    ),
]


def on_path(path: str, mp: pytest.MonkeyPatch) -> None:
    """Make ``compute_text_metrics`` take ``path`` for token ids whatever their size."""
    mp.setattr(text_module, "FUSED_MIN_ELEMENTS", 0 if path == "numba" else 2**62)


def both_paths(**kwargs) -> dict:
    """The token-id metrics on numpy's path; with numba, its kernel's must be the same, exactly."""
    with pytest.MonkeyPatch.context() as mp:
        on_path("numpy", mp)
        got = quiet(compute_text_metrics, **kwargs)
    if text_rows_kernel() is not None:
        with pytest.MonkeyPatch.context() as mp:
            on_path("numba", mp)
            np.testing.assert_equal(quiet(compute_text_metrics, **kwargs), got)
    return got


# --- the statistics on hand-made texts ----------------------------------------------------------

LOOPS = [
    pytest.param("a b a b a b a b", True, id="period-2-four-copies"),
    pytest.param("a b a b a b", False, id="near-loop-three-copies"),
    pytest.param("x y z b c a b c a b c a b c a", True, id="cut-mid-block"),
    pytest.param("one two three four " * 4, True, id="period-4"),
    pytest.param("word " * 3, False, id="three-words"),
    pytest.param("the end the end the end end", False, id="broken-at-the-end"),
    pytest.param("猫 猫 猫 猫", True, id="unicode"),
    pytest.param("", False, id="empty"),
    pytest.param(" ".join(str(i % 65) for i in range(65 * 4)), False, id="period-65-over-max"),
    pytest.param(" ".join(str(i % 64) for i in range(64 * 4)), True, id="period-64-at-max"),
]


@pytest.mark.parametrize(("text", "expected"), LOOPS)
def test_loop_against_hand_and_brute_force(text: str, expected: bool) -> None:
    units = text.split()
    assert ends_in_loop(units, R4, P64) is expected
    assert ref_loop(units) is expected
    m = compute_text_metrics([text], ngram=1) if units else quiet(compute_text_metrics, [text])
    assert m[K.TEXT_LOOP_RATIO] == float(expected)


DISTINCT = [
    pytest.param("a b c d e", 2, 1.0, id="all-distinct"),
    pytest.param("a a a a a", 2, 0.25, id="one-bigram"),
    pytest.param("a b a b a", 2, 0.5, id="two-bigrams"),
    pytest.param("a b a b a", 1, 0.4, id="unigrams"),
    pytest.param("é ü é ü é ü", 3, 0.5, id="unicode-trigrams"),
]


@pytest.mark.parametrize(("text", "n", "expected"), DISTINCT)
def test_distinct_n_against_hand(text: str, n: int, expected: float) -> None:
    assert ref_distinct(text.split(), n) == pytest.approx(expected)
    assert compute_text_metrics([text], ngram=n)[K.TEXT_DISTINCT_NGRAM_MEAN] == pytest.approx(expected)


def test_distinct_n_is_a_mean_of_per_response_ratios_over_long_enough_responses() -> None:
    texts = ["a a a a a", "a b c", "x"]  # 0.25, 1.0, left out (1 unit < 2)
    assert compute_text_metrics(texts, ngram=2)[K.TEXT_DISTINCT_NGRAM_MEAN] == pytest.approx(0.625)


NON_WORDS = [
    pytest.param("Hello, world!", 0.0, id="words-with-punctuation"),
    pytest.param("it's a well-known fact", 0.0, id="inner-apostrophe-and-hyphen"),
    pytest.param("pi is 3.14, not 3,000", 0.0, id="numbers"),
    pytest.param("héllo wörld 中文", 0.0, id="unicode-letters"),
    pytest.param("x^2 + y_1 = abc123", 1.0, id="math-and-mixed"),
    pytest.param("x^2 is big", 1 / 3, id="one-of-three"),
    pytest.param("asd#f $%& ok", 2 / 3, id="symbols"),
    pytest.param("\\boxed{4} done", 0.5, id="latex"),
]


@pytest.mark.parametrize(("text", "expected"), NON_WORDS)
def test_non_word_ratio_against_hand(text: str, expected: float) -> None:
    assert compute_text_metrics([text], ngram=1)[K.TEXT_NON_WORD_RATIO_MEAN] == pytest.approx(expected)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("The cat sat on the mat. " * 40, id="repetitive"),
        pytest.param(
            "q8#Zk!2@vP" * 3 + "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(300)), id="mixed"
        ),
        pytest.param("a", id="one-char"),
    ],
)
def test_compression_ratio_against_zlib(text: str) -> None:
    m = compute_text_metrics([text])
    want = ref_compression(text.encode("utf-8"))
    assert m[K.TEXT_COMPRESSION_RATIO_MEAN] == pytest.approx(want)
    assert m[K.TEXT_COMPRESSION_RATIO_MAX] == m[K.TEXT_COMPRESSION_RATIO_MIN] == pytest.approx(want)


def test_compression_ratio_orders_repetition_below_prose() -> None:
    loop = compute_text_metrics(["and so on " * 50])[K.TEXT_COMPRESSION_RATIO_MEAN]
    prose = compute_text_metrics([" ".join(f"w{i * 7919 % 1000}" for i in range(100))])
    assert loop < 0.2 < prose[K.TEXT_COMPRESSION_RATIO_MEAN]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        pytest.param(["", " \n\t", "a"], 2 / 3, id="empty-and-whitespace"),
        pytest.param(["\u3000"], 1.0, id="unicode-space"),
        pytest.param(["a", "b"], 0.0, id="none"),
    ],
)
def test_empty_ratio(texts: list[str], expected: float) -> None:
    assert quiet(compute_text_metrics, texts)[K.TEXT_EMPTY_RATIO] == pytest.approx(expected)


# --- units of decoded text: scripts without spaces, degenerate runs -----------------------------------


def ref_in_script(c: str) -> bool:
    return any(lo <= ord(c) <= hi for lo, hi in CHARACTER_SCRIPTS)


def ref_is_punct(c: str) -> bool:
    """Neither a word character (``re``'s ``\\w``: alphanumeric or ``_``) nor whitespace."""
    return not (c.isalnum() or c == "_" or c.isspace())


def ref_piece_units(piece: str) -> list[str]:
    """One whitespace piece cut as the module docstring says, one character at a time."""
    units, i = [], 0
    while i < len(piece):
        p = i
        while p < len(piece) and ref_is_punct(piece[p]):
            p += 1
        # the last script character reachable through punctuation from i (punctuation may be one)
        js = [j for j in range(i, min(p, len(piece) - 1) + 1) if ref_in_script(piece[j])]
        if js:
            k = js[-1] + 1
            while k < len(piece) and ref_is_punct(piece[k]):
                k += 1
        else:
            k = i
            while k < len(piece) and not ref_in_script(piece[k]):
                k += 1
        units.append(piece[i:k])
        i = k
    return units


def ref_has_run(unit: str) -> bool:
    """Some block of p <= 16 characters repeated back to back at least 4 times over >= 32 characters."""
    for p in range(1, RUN_MAX_BLOCK + 1):
        copies = max(4, -(-RUN_MIN_CHARS // p))
        for start in range(len(unit) - copies * p + 1):
            if unit[start : start + copies * p] == unit[start : start + p] * copies:
                return True
    return False


def ref_units(text: str) -> list[str]:
    pieces = [u for piece in text.split() for u in ref_piece_units(piece)]
    return [c for u in pieces for c in (list(u) if ref_has_run(u) else [u])]


def test_script_class_is_the_listed_ranges() -> None:
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    want = "".join(c for c in every if ref_in_script(c))
    assert "".join(_SCRIPT_CHAR.findall(every)) == want
    assert all(not c.isspace() for c in want)


UNITS = [
    pytest.param("猫猫猫猫猫猫", ["猫"] * 6, True, id="chinese-one-char-loop"),
    pytest.param("我不知道" * 6, list("我不知道") * 6, True, id="chinese-phrase-loop"),
    pytest.param("我不知道。" * 5, ["我", "不", "知", "道。"] * 5, True, id="chinese-with-punctuation"),
    pytest.param("わからない" * 4, list("わからない") * 4, True, id="japanese-kana-loop"),
    pytest.param(
        "ちょっと待ってください。" * 4, [*"ちょっと待ってくださ", "い。"] * 4, True, id="japanese-mixed"
    ),
    pytest.param("ㅋ" * 8, ["ㅋ"] * 8, True, id="korean-jamo-run"),
    pytest.param("감사합니다 " * 4, list("감사합니다") * 4, True, id="korean-spaced"),
    pytest.param("Let me 重新计算。" * 4, ["Let", "me", *"重新计", "算。"] * 4, True, id="mixed-en-zh"),
    pytest.param("用Python写代码", ["用", "Python", "写", "代", "码"], False, id="latin-inside-chinese"),
    pytest.param("「你好」，世界！", ["「你", "好」，", "世", "界！"], False, id="cjk-punctuation-attached"),
    pytest.param(
        "今天天气很好，我们去公园散步吧。然后回家做饭，晚上看一部电影。",
        None,
        False,
        id="chinese-prose-no-loop",
    ),
    pytest.param("x" * 40, ["x"] * 40, True, id="char-run"),
    pytest.param("The answer is " + "!" * 200, ["The", "answer", "is"] + ["!"] * 200, True, id="bang-run"),
    pytest.param("ha" * 20, ["h", "a"] * 20, True, id="two-char-run"),
    pytest.param("Answer:" + "z" * 33, list("Answer:" + "z" * 33), True, id="run-after-a-word"),
    pytest.param("x" * 31, ["x" * 31], False, id="run-under-32-chars-is-a-word"),
    pytest.param("Wow!!!!!!!!", ["Wow!!!!!!!!"], False, id="short-emphasis"),
    pytest.param(
        "see https://example.com/a/b/c/d/e/f/g/h/i/j/k?id=1000000000 now",
        None,
        False,
        id="url",
    ),
    pytest.param("The total is 1000000000000000000000000000000.", None, False, id="30-zeros-number"),
    pytest.param("so 1/3 = 0.3333333333333333 and 2/3 = 0.6666666666666666", None, False, id="floats"),
    pytest.param("f(g(h(i(j(k(l(m(n(o(p(q(r(x)))))))))))))", None, False, id="nested-parens"),
    pytest.param("Donaudampfschifffahrtsgesellschaftskapitän sprach", None, False, id="long-german-word"),
    pytest.param("aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IQ==", None, False, id="base64"),
    pytest.param("สวัสดีครับ", ["ส", "วั", "ส", "ดี", "ค", "รั", "บ"], False, id="thai-marks-attach"),
]


@pytest.mark.parametrize(("text", "units", "loop"), UNITS)
def test_units_and_loops_against_hand_and_brute_force(text: str, units: list | None, loop: bool) -> None:
    got = text_units(text)
    assert got == ref_units(text)
    if units is not None:
        assert got == units
    elif not any(map(ref_in_script, text)):  # no script character, no run: the pieces as before
        assert got == text.split()
    assert ref_loop(got) is loop
    m = quiet(compute_text_metrics, [text])
    assert m[K.TEXT_LOOP_RATIO] == float(loop)
    want = ref_distinct(got, 4)
    assert m[K.TEXT_DISTINCT_NGRAM_MEAN] == pytest.approx(math.nan if want is None else want, nan_ok=True)


def test_cjk_prose_and_runs_get_units_words_and_distinct_n() -> None:
    prose = "今天天气很好，我们去公园散步吧。然后回家做饭，晚上看一部电影。"
    m = compute_text_metrics([prose, "猫" * 50, "x" * 50])
    assert m[K.TEXT_LOOP_RATIO] == pytest.approx(2 / 3)
    assert m[K.TEXT_NON_WORD_RATIO_MEAN] == 0.0  # a character with its punctuation is a word
    # distinct-4: prose all distinct (27 four-grams), each run one four-gram of 47
    assert m[K.TEXT_DISTINCT_NGRAM_MEAN] == pytest.approx((1 + 2 / 47) / 3)
    assert compute_text_metrics(["!" * 40])[K.TEXT_NON_WORD_RATIO_MEAN] == 1.0


#: Characters of every kind for the tokeniser's property: Latin, accented, digits, punctuation,
#: spaces, CJK, kana, Hangul, Thai (marks among them), CJK and fullwidth punctuation, Cyrillic, an
#: emoji and an ideograph of extension B (astral).
_MIXED = "ab xyz é9_0 .,!?-'()\t\n猫我不知道わかカナ한국ㅋสวัดี、。「」！，ЖЯ😀𠀀"
_mixed_texts = st.lists(
    st.one_of(
        st.text(alphabet=_MIXED, max_size=12),
        st.builds(lambda c, k: c * k, st.sampled_from(_MIXED), st.integers(28, 40)),
        st.builds(lambda b, k: b * k, st.text(alphabet=_MIXED, min_size=2, max_size=5), st.integers(5, 20)),
    ),
    max_size=6,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_mixed_texts)
def test_units_equal_the_brute_force_tokeniser(text: str) -> None:
    assert text_units(text) == ref_units(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x2FF, blacklist_categories=("Cs",)), max_size=200))
def test_units_of_text_without_script_characters_or_runs_are_str_split(text: str) -> None:
    pieces = text.split()
    if not any(ref_has_run(p) for p in pieces):
        assert text_units(text) == pieces


#: One unit of any script, as that script writes it: a space-delimited word, or one character of
#: a script without spaces (with or without a space after it).
_latin = st.text(alphabet="abcdefghijklmnopqrstuvwxyzäöü", min_size=1, max_size=8)
_word = st.one_of(
    _latin,
    st.text(alphabet="абвгдежзийклмн", min_size=1, max_size=8),
    st.text(alphabet="αβγδεζηθικλμν", min_size=1, max_size=8),
    st.text(alphabet="ابتثجحخدذرزسشص", min_size=1, max_size=8),
    st.builds("{}{}".format, _latin, st.sampled_from(".,!?:;")),
).map(lambda w: w + " ")
_script_char = st.sampled_from([*"猫我不知道是的", *"あいうえおカキク", *"가나다라한국", *"ㅋㅎ", *"กขคง"])
_unit_text = st.one_of(_word, st.builds("{}{}".format, _script_char, st.sampled_from(["", " ", "。", "，"])))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_unit_text, max_size=5).map("".join),
    st.lists(_unit_text, min_size=1, max_size=10),
    st.data(),
)
def test_a_block_of_any_script_repeated_enough_times_is_a_loop(prefix: str, block: list[str], data) -> None:
    copies = data.draw(st.integers(R4, R4 + 3))
    text = prefix + " " + "".join(block) * copies
    units = text_units(text)
    assert units == ref_units(text)
    assert ends_in_loop(units, R4, P64)  # the block's units (<= 10 <= 64) repeated R4 times or more
    assert compute_text_metrics([text])[K.TEXT_LOOP_RATIO] == 1.0
    m = quiet(compute_text_metrics, [text], ngram=1)
    assert m[K.TEXT_DISTINCT_NGRAM_MEAN] == pytest.approx(ref_distinct(units, 1))


@settings(max_examples=100, deadline=None)
@given(
    st.text(max_size=30),
    st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")).filter(lambda c: not c.isspace()),
    st.integers(RUN_MIN_CHARS, 3 * RUN_MIN_CHARS),
)
def test_one_character_of_any_script_typed_over_and_over_is_a_loop(prefix: str, char: str, k: int) -> None:
    text = prefix + " " + char * k
    assert text_units(text)[-k:] == [char] * k
    assert compute_text_metrics([text])[K.TEXT_LOOP_RATIO] == 1.0


def test_stop_reasons_as_rates() -> None:
    reasons = [
        "stop",
        "EOS",
        "length",
        "abort",
        "aborted",
        "error",
        "tool_calls",
        "tool_call",
        "weird",
        "end",
    ]
    m = compute_text_metrics(["x"] * len(reasons), stop_reasons=reasons)
    want = {"stop": 2, "length": 1, "abort": 2, "error": 1, "tool_call": 2, "other": 2}
    got = {r: m[key] for r, key in zip(STOP_REASONS, K.TEXT_STOP_REASON_KEYS)}
    assert got == {r: c / len(reasons) for r, c in want.items()}
    assert sum(got.values()) == pytest.approx(1.0)
    assert K.TEXT_STOP_REASON_STOP not in compute_text_metrics(["x"])


THINK = [
    pytest.param("<think>abc</think>de", True, 3, 2, id="closed"),
    pytest.param("abc</think>de", True, 3, 2, id="opened-in-prompt"),
    pytest.param("<think>abcde", False, 5, 0, id="unclosed"),
    pytest.param("plain answer", False, 0, 12, id="no-thinking"),
    pytest.param("x<think>ab</think></think>y", True, 2, 9, id="first-close-wins"),
    pytest.param("ab</think>c<think>d", True, 2, 9, id="open-after-close"),
    pytest.param("<think>思考</think>答", True, 2, 1, id="unicode"),
    pytest.param("", False, 0, 0, id="empty"),
]


@pytest.mark.parametrize(("text", "closed", "think", "answer"), THINK)
def test_thinking_span_against_hand_and_reference(text: str, closed: bool, think: int, answer: int) -> None:
    assert ref_think(list(text), list("<think>"), list("</think>")) == (closed, think, answer)
    m = quiet(compute_text_metrics, [text])
    assert m[K.TEXT_THINK_CLOSED_RATIO] == float(closed)
    assert (m[K.TEXT_THINK_LENGTH_MEAN], m[K.TEXT_ANSWER_LENGTH_MEAN]) == (think, answer)
    if text:
        assert m[K.TEXT_THINK_SHARE] == pytest.approx(think / len(text))


def test_think_share_pools_lengths_and_maxima() -> None:
    m = compute_text_metrics(["<think>aaaa</think>b", "cc"])  # 4 of 20 + 2 characters
    assert m[K.TEXT_THINK_SHARE] == pytest.approx(4 / 22)
    assert (m[K.TEXT_THINK_LENGTH_MAX], m[K.TEXT_ANSWER_LENGTH_MAX]) == (4.0, 2.0)
    assert K.TEXT_THINK_SHARE not in compute_text_metrics(["x"], think_span=None)


@pytest.mark.parametrize(
    ("texts", "span", "expected"),
    [
        pytest.param(
            ["The answer is \\boxed{4}.", "four", "\\boxed{}"], ("<think>", "</think>"), 1 / 3, id="plain"
        ),
        pytest.param(
            ["<think>\\boxed{1}</think> no", "<think>x</think>\\boxed{2}"],
            ("<think>", "</think>"),
            0.5,
            id="answer-only",
        ),
        pytest.param(["<think>\\boxed{1}</think> no"], None, 1.0, id="whole-without-span"),
        pytest.param(
            ["<think>\\boxed{1} never closed"], ("<think>", "</think>"), 0.0, id="unclosed-no-answer"
        ),
    ],
)
def test_format_check(texts: list[str], span, expected: float) -> None:
    for pattern in (r"\\boxed\{.+\}", re.compile(r"\\boxed\{.+\}")):
        m = compute_text_metrics(texts, format_pattern=pattern, think_span=span)
        assert m[K.TEXT_FORMAT_MATCH_RATIO] == pytest.approx(expected)


def test_lengths_are_characters_for_text() -> None:
    m = compute_text_metrics(["ab", "cdef", "héllo"], ngram=1)
    assert (m[K.TEXT_LENGTH_MEAN], m[K.TEXT_LENGTH_MAX], m[K.TEXT_LENGTH_MIN]) == (11 / 3, 5.0, 2.0)


def test_prefix_replaces_text() -> None:
    m = compute_text_metrics(["a b"], ngram=1, prefix="rollout/text/")
    assert set(m) == {
        "rollout/text/" + k.removeprefix(K.TEXT_PREFIX) for k in compute_text_metrics(["a b"], ngram=1)
    }


# --- token ids against brute force --------------------------------------------------------------


def random_rows(seed: int, b: int, t: int, vocab: int, *, loops: bool = True):
    """(ids, mask, ragged rows): uneven masks with holes, some rows looping, one empty."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(b, t))
    for i in range(0, b, 3):
        if loops:  # a looping tail of period 1..5
            p = int(rng.integers(1, 6))
            block = rng.integers(0, vocab, size=p)
            ids[i, t // 2 :] = np.resize(block, t - t // 2)
    mask = rng.random((b, t)) < 0.9
    mask[:, t // 2 :] = True  # holes only before the tail (masked tool output, say)
    mask[1] = False
    rows = [ids[i][mask[i]].tolist() for i in range(b)]
    return ids, mask, rows


@pytest.mark.parametrize(
    ("n", "vocab", "b", "t"),
    [
        pytest.param(1, 5, 17, 40, id="unigrams"),
        pytest.param(3, 7, 17, 40, id="trigrams-packed"),
        pytest.param(4, 2**20, 17, 40, id="4grams-ranked"),
        pytest.param(8, 3, 17, 40, id="8grams-packed"),
        pytest.param(8, 2**20, 40, 60, id="8grams-hashed-too-many-ranks"),
        pytest.param(4, 2**32, 17, 40, id="4grams-hashed-ids-past-the-rank-table"),
    ],
)
def test_token_ids_against_brute_force(n: int, vocab: int, b: int, t: int) -> None:
    ids, mask, rows = random_rows(n, b, t, vocab)
    span = ((0, 1), (2,))
    got = both_paths(token_ids=ids, response_mask=mask, ngram=n, think_span=span, compression=True)
    assert_close(got, ref_id_metrics(rows, n, span))


@pytest.mark.parametrize("path", ID_PATHS)
@pytest.mark.parametrize("float_type", [np.float16, np.float32], ids=["float16-mask", "float32-mask"])
def test_token_ids_without_mask_and_as_torch(path: str, float_type, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    on_path(path, monkeypatch)
    ids, _, _ = random_rows(3, 9, 30, 11)
    want = ref_id_metrics(ids.tolist(), 2, compression=False)
    assert_close(compute_text_metrics(token_ids=ids, ngram=2), want)
    ones = torch.ones(ids.shape, dtype=torch.int64)
    assert_close(compute_text_metrics(token_ids=torch.from_numpy(ids), response_mask=ones, ngram=2), want)
    float_mask = np.ones(ids.shape, dtype=float_type)  # numba has no float16: numpy's path takes it
    assert_close(
        compute_text_metrics(token_ids=ids, response_mask=float_mask, ngram=2, compression=True),
        ref_id_metrics(ids.tolist(), 2),
    )
    bf16_mask = torch.ones(ids.shape, dtype=torch.bfloat16)  # numpy has no bfloat16
    assert_close(
        compute_text_metrics(token_ids=torch.from_numpy(ids), response_mask=bf16_mask, ngram=2), want
    )


def test_token_ids_default_string_tags_are_skipped() -> None:
    m = compute_text_metrics(token_ids=np.array([[1, 2, 3]]), ngram=1)
    assert K.TEXT_THINK_CLOSED_RATIO not in m and K.TEXT_NON_WORD_RATIO_MEAN not in m


def test_compression_is_on_for_text_and_opt_in_for_token_ids() -> None:
    ids = np.array([[1, 2, 3]])
    assert K.TEXT_COMPRESSION_RATIO_MEAN in compute_text_metrics(["a b c"])
    assert K.TEXT_COMPRESSION_RATIO_MEAN not in compute_text_metrics(["a b c"], compression=False)
    m = compute_text_metrics(token_ids=ids, ngram=1)
    assert K.TEXT_COMPRESSION_RATIO_MEAN not in m and m[K.TEXT_LENGTH_MEAN] == 3.0
    on = compute_text_metrics(token_ids=ids, ngram=1, compression=True)
    assert on[K.TEXT_COMPRESSION_RATIO_MEAN] == ref_compression(np.asarray([1, 2, 3], dtype="<u4").tobytes())


@st.composite
def id_batches(draw) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """Small (B, T) batches: rows empty, full, prefix or with holes; some ending in a loop; ids from a
    tiny vocabulary (packed), a wide one (ranked) or past the rank table (hashed), in any int dtype."""
    b, t = draw(st.integers(1, 7)), draw(st.integers(0, 24))
    high = draw(st.sampled_from([2, 5, 300, 2**20, 2**32]))
    rows_ids, masks = [], []
    for _ in range(b):
        row = draw(st.lists(st.integers(0, high - 1), min_size=t, max_size=t))
        p = draw(st.integers(1, 4))
        if draw(st.booleans()) and t >= p:  # a looping tail (maybe cut mid-block), or a near loop
            start = draw(st.integers(0, t - p))
            row[start:] = (row[start : start + p] * t)[: t - start]
        kind = draw(st.sampled_from(["empty", "full", "prefix", "holes"]))
        if kind == "holes":
            m = draw(st.lists(st.booleans(), min_size=t, max_size=t))
        else:
            k = {"empty": 0, "full": t}[kind] if kind != "prefix" else draw(st.integers(0, t))
            m = [j < k for j in range(t)]
        rows_ids.append(row)
        masks.append(m)
    dtypes = {2**32: [np.int64, np.uint64], 2**20: [np.int64, np.int32]}.get(high, [np.int64, np.uint16])
    dtype = draw(st.sampled_from(dtypes))
    ids = np.array(rows_ids, dtype=dtype).reshape(b, t)
    mask = np.array(masks, dtype=bool).reshape(b, t)
    return ids, mask, [[v for v, keep in zip(r, m) if keep] for r, m in zip(rows_ids, masks)]


@settings(max_examples=150, deadline=None)
@given(id_batches(), st.integers(1, 5), st.integers(2, 4), st.integers(1, 6), st.booleans())
def test_vectorised_token_id_path_equals_brute_force(
    batch, n: int, repeats: int, period: int, comp: bool
) -> None:
    ids, mask, rows = batch
    span = ((0,), (1, 0))
    opts = {"ngram": n, "loop_repeats": repeats, "loop_max_period": period, "think_span": span}
    got = both_paths(token_ids=ids, response_mask=mask, compression=comp, **opts)
    want = ref_id_metrics(rows, n, span, compression=comp, repeats=repeats, period=period)
    assert_close(got, want)


@st.composite
def planted_loop_batches(draw, n: int) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """Batches whose rows have the edge lengths 0, 1, n - 1, n (or any up to T), a planted looping
    tail of period 1..6 (whole, cut mid-block, or one repeat short) or tags; prefix masks (the
    gathered fast path) or holes (the per-row path)."""
    b, t = draw(st.integers(1, 9)), draw(st.integers(n, 40))
    high = draw(st.sampled_from([3, 300, 70_000, 2**20, 2**32]))
    holes = draw(st.booleans())
    ids = np.array(
        draw(st.lists(st.integers(0, high - 1), min_size=b * t, max_size=b * t)), np.int64
    ).reshape(b, t)
    mask = np.zeros((b, t), dtype=bool)
    for i in range(b):
        length = draw(st.sampled_from([0, 1, max(n - 1, 0), n, draw(st.integers(0, t))]))
        p, repeats = draw(st.integers(1, 6)), draw(st.sampled_from([3, 4, 5]))
        start = length - repeats * p - draw(st.integers(0, p - 1))
        if draw(st.booleans()) and start >= 0:  # a loop of `repeats` copies (4: a loop; 3: a near one)
            ids[i, start:length] = np.resize(ids[i, start : start + p], length - start)
        if draw(st.booleans()) and length >= 3:  # the thinking tags somewhere in the row
            ids[i, draw(st.integers(0, length - 3)) :][:3] = [0, 1, 0][: min(3, length)]
        mask[i, :length] = True
        if holes and 0 < length < t:  # move the last selected token past a gap: not a prefix
            mask[i, length - 1], mask[i, length] = False, True
    rows = [ids[i][mask[i]].tolist() for i in range(b)]
    return ids, mask, rows


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5], ids=lambda n: f"n{n}")
@settings(max_examples=60, deadline=None)
@given(data=st.data(), row_block=st.sampled_from([1, 2, 128]), rank_max=st.sampled_from([3, 2**16 - 1]))
def test_token_id_fast_path_equals_per_row_brute_force_on_planted_loops(
    n: int, data, row_block: int, rank_max: int
) -> None:
    """Blocks of 1, 2 or 128 rows; ranks as uint16 (4-gram windows) or, with a rank cap of 3, the
    int64 ids (packed or hashed codes); with numba, its kernel gives the same numbers, exactly."""
    ids, mask, rows = data.draw(planted_loop_batches(n))
    span = ((0,), (1, 0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(text_module, "_ROW_BLOCK", row_block)
        mp.setattr(text_module, "_RANK_MAX", rank_max)
        got = both_paths(token_ids=ids, response_mask=mask, ngram=n, think_span=span)
    assert_close(got, ref_id_metrics(rows, n, span, compression=False))


# --- properties ------------------------------------------------------------------------------------

WORDS = ["a", "b", "c", "<think>", "</think>", "x1"]
word_lists = st.lists(st.lists(st.sampled_from(WORDS), max_size=14), min_size=1, max_size=12)
reasons = st.sampled_from(["stop", "length", "abort", "error", "tool_call", "other", "EOS"])


def _metrics(stats: Stats) -> dict:
    return quiet(stats.finalize)


@settings(max_examples=60, deadline=None)
@given(word_lists, st.data())
def test_merge_of_any_split_equals_the_whole(responses: list[list[str]], data) -> None:
    texts = [" ".join(w) for w in responses]
    stops = data.draw(st.lists(reasons, min_size=len(texts), max_size=len(texts)))
    cut = sorted(data.draw(st.lists(st.integers(0, len(texts)), max_size=3)))
    bounds = [0, *cut, len(texts)]
    opts = {"format_pattern": "b c", "ngram": 2, "loop_repeats": 2}
    parts = [
        text_statistics(texts[a:b], stop_reasons=stops[a:b], **opts) for a, b in itertools.pairwise(bounds)
    ]
    whole = _metrics(text_statistics(texts, stop_reasons=stops, **opts))
    merged = _metrics(Stats.merge(*parts))
    assert merged.keys() == whole.keys()
    for key in whole:
        assert merged[key] == pytest.approx(whole[key], rel=1e-12, nan_ok=True), key
    # The same on the token-id path.
    width = max(len(w) for w in responses) or 1
    ids = np.array([[WORDS.index(w) for w in r] + [0] * (width - len(r)) for r in responses])
    mask = np.array([[1] * len(r) + [0] * (width - len(r)) for r in responses])
    id_parts = [
        text_statistics(token_ids=ids[a:b], response_mask=mask[a:b], ngram=2)
        for a, b in itertools.pairwise(bounds)
    ]
    id_whole = _metrics(text_statistics(token_ids=ids, response_mask=mask, ngram=2))
    for key, value in _metrics(Stats.merge(*id_parts)).items():
        assert value == pytest.approx(id_whole[key], rel=1e-12, nan_ok=True), key


#: What the text (units: words) and token-id (units: tokens) paths share when each word is a token.
SHARED = [
    K.TEXT_NUM_RESPONSES,
    K.TEXT_EMPTY_RATIO,
    K.TEXT_LOOP_RATIO,
    K.TEXT_DISTINCT_NGRAM_MEAN,
    K.TEXT_THINK_CLOSED_RATIO,
    *K.TEXT_STOP_REASON_KEYS,
]


@settings(max_examples=60, deadline=None)
@given(word_lists, st.integers(1, 4), st.integers(2, 4), st.data())
def test_text_and_token_id_paths_agree(responses: list[list[str]], n: int, repeats: int, data) -> None:
    stops = data.draw(st.lists(reasons, min_size=len(responses), max_size=len(responses)))
    texts = [" ".join(w) for w in responses]
    width = max(len(w) for w in responses) + 2
    ids = np.full((len(responses), width), 99)
    mask = np.zeros(ids.shape, dtype=bool)
    for i, words in enumerate(responses):  # left padding: the mask marks where the tokens are
        ids[i, width - len(words) :] = [WORDS.index(w) for w in words]
        mask[i, width - len(words) :] = True
    opts = {"stop_reasons": stops, "ngram": n, "loop_repeats": repeats, "loop_max_period": 3}
    from_text = quiet(compute_text_metrics, texts, **opts)
    from_ids = quiet(compute_text_metrics, token_ids=ids, response_mask=mask, think_span=((3,), (4,)), **opts)
    for key in SHARED:
        assert from_ids[key] == pytest.approx(from_text[key], rel=1e-12, nan_ok=True), key
    word_lengths = [len(w) for w in responses]  # token lengths are the word counts
    assert from_ids[K.TEXT_LENGTH_MEAN] == pytest.approx(np.mean(word_lengths))


# --- undefined values ---------------------------------------------------------------------------


def test_no_responses_give_nan_and_one_warning() -> None:
    with pytest.warns(UndefinedMetricWarning, match="no responses") as record:
        m = compute_text_metrics([], stop_reasons=[], format_pattern="x")
    assert len(record) == 1
    assert m[K.TEXT_NUM_RESPONSES] == 0.0
    assert all(math.isnan(v) for k, v in m.items() if k != K.TEXT_NUM_RESPONSES)
    with pytest.warns(UndefinedMetricWarning, match="no responses"):
        ids = compute_text_metrics(token_ids=np.zeros((0, 5), dtype=np.int64))
    assert ids[K.TEXT_NUM_RESPONSES] == 0.0 and math.isnan(ids[K.TEXT_LOOP_RATIO])


def test_short_responses_leave_distinct_n_undefined() -> None:
    with pytest.warns(UndefinedMetricWarning, match="repetition/distinct_ngram/mean"):
        m = compute_text_metrics(["a b", "c"], ngram=3)
    assert math.isnan(m[K.TEXT_DISTINCT_NGRAM_MEAN]) and m[K.TEXT_LOOP_RATIO] == 0.0


def test_only_empty_responses_leave_the_ratios_undefined() -> None:
    with pytest.warns(UndefinedMetricWarning, match="compression_ratio/mean"):
        m = compute_text_metrics(["", " "])
    assert m[K.TEXT_EMPTY_RATIO] == 1.0 and math.isnan(m[K.TEXT_NON_WORD_RATIO_MEAN])
    assert math.isnan(m[K.TEXT_COMPRESSION_RATIO_MAX])


# --- errors ------------------------------------------------------------------------------------------

ERRORS = [
    pytest.param({}, TypeError, "exactly one of responses", id="neither"),
    pytest.param(
        {"responses": ["a"], "token_ids": np.zeros((1, 1), int)}, TypeError, "exactly one", id="both"
    ),
    pytest.param(
        {"responses": ["a"], "response_mask": np.ones((1, 1))},
        TypeError,
        "response_mask goes with",
        id="mask-without-ids",
    ),
    pytest.param({"responses": "abc"}, TypeError, "responses must be a sequence of strings", id="one-string"),
    pytest.param({"responses": ["a", 3]}, TypeError, r"responses\[1\] must be a string", id="non-string"),
    pytest.param(
        {"responses": ["a"], "stop_reasons": ["stop", "length"]},
        ValueError,
        "stop_reasons must have one entry per response",
        id="stop-length",
    ),
    pytest.param(
        {"responses": ["a"], "stop_reasons": [None]},
        TypeError,
        r"stop_reasons\[0\] must be a string",
        id="stop-none",
    ),
    pytest.param(
        {"responses": ["a"], "format_pattern": "("},
        ValueError,
        "format_pattern is not a valid",
        id="bad-regex",
    ),
    pytest.param(
        {"responses": ["a"], "format_pattern": 3}, TypeError, "format_pattern must be", id="regex-type"
    ),
    pytest.param(
        {"token_ids": np.zeros((1, 2), int), "format_pattern": "x"},
        ValueError,
        "format_pattern needs decoded text",
        id="regex-with-ids",
    ),
    pytest.param(
        {"token_ids": np.zeros((1, 2), int), "think_span": ("<t>", "</t>")},
        TypeError,
        "think_span must hold token ids",
        id="string-tags-with-ids",
    ),
    pytest.param(
        {"token_ids": np.zeros((1, 2), int), "think_span": ((), (1,))},
        TypeError,
        r"think_span\[0\] must be a token id",
        id="empty-id-tag",
    ),
    pytest.param(
        {"token_ids": np.zeros((1, 2), int), "think_span": (1, -2)},
        ValueError,
        r"think_span\[1\] must be an integer >= 0",
        id="negative-id-tag",
    ),
    pytest.param(
        {"responses": ["a"], "think_span": ("<t>", "")},
        TypeError,
        r"think_span\[1\] must be a non-empty",
        id="empty-tag",
    ),
    pytest.param(
        {"responses": ["a"], "think_span": "<t>"}, TypeError, "think_span must be a pair", id="one-tag"
    ),
    pytest.param(
        {"token_ids": np.zeros(3, int)}, ValueError, r"token_ids must have shape \(B, T\)", id="ids-1d"
    ),
    pytest.param({"token_ids": np.zeros((1, 2))}, TypeError, "token_ids must hold integers", id="ids-float"),
    pytest.param({"token_ids": [[1, 2]]}, TypeError, "token_ids must be a numpy array", id="ids-list"),
    pytest.param(
        {"token_ids": np.array([[1, -1]])},
        ValueError,
        r"token_ids must be in \[0, 2\*\*32\)",
        id="ids-negative",
    ),
    pytest.param(
        {"token_ids": np.array([[1, 2**40]], dtype=np.uint64)},
        ValueError,
        r"token_ids must be in \[0, 2\*\*32\).*found 1099511627776",
        id="ids-too-large",
    ),
    pytest.param(
        {"token_ids": np.array([[1, 2**63 + 5]], dtype=np.uint64)},
        ValueError,
        r"found 9223372036854775813",
        id="ids-uint64-top-bit",
    ),
    pytest.param(
        {"token_ids": np.array([[1, -1]]), "response_mask": np.array([[1, 0]])},
        None,
        None,
        id="negative-padding-is-fine",
    ),
    pytest.param(
        {"token_ids": np.zeros((2, 2), int), "response_mask": np.ones((2, 3))},
        ValueError,
        "response_mask and token_ids must have the same shape",
        id="mask-shape",
    ),
    pytest.param(
        {"token_ids": np.zeros((1, 2), int), "response_mask": np.array([[1, 2]])},
        ValueError,
        "response_mask must hold only 0 and 1",
        id="mask-values",
    ),
    pytest.param({"responses": ["a"], "ngram": 0}, ValueError, "ngram must be an integer >= 1", id="ngram"),
    pytest.param(
        {"responses": ["a"], "loop_repeats": 1},
        ValueError,
        "loop_repeats must be an integer >= 2",
        id="repeats",
    ),
    pytest.param(
        {"responses": ["a"], "loop_max_period": 2.0},
        TypeError,
        "loop_max_period must be an integer",
        id="period-float",
    ),
    pytest.param(
        {"responses": ["a"], "compression": 1},
        TypeError,
        "compression must be True, False or None",
        id="compression",
    ),
    pytest.param({"responses": ["a"], "prefix": None}, TypeError, "prefix must be a string", id="prefix"),
]


@pytest.mark.parametrize("path", ID_PATHS)
@pytest.mark.parametrize(("kwargs", "exc", "match"), ERRORS)
def test_errors_name_the_argument(kwargs: dict, exc, match, path: str, monkeypatch) -> None:
    on_path(path, monkeypatch)
    if exc is None:
        assert compute_text_metrics(**kwargs, ngram=1)[K.TEXT_LENGTH_MEAN] == 1.0
        return
    with pytest.raises(exc, match=match):
        compute_text_metrics(**kwargs)


def test_text_and_id_statistics_do_not_merge() -> None:
    with pytest.raises(ValueError, match="cannot merge"):
        Stats.merge(text_statistics(["a"], think_span=None), text_statistics(token_ids=np.zeros((1, 1), int)))
    with pytest.raises(ValueError, match="cannot merge"):
        Stats.merge(text_statistics(["a"]), text_statistics(["a"], stop_reasons=["stop"]))


def test_process_group_none_needs_no_distributed_setup() -> None:
    assert compute_text_metrics(["a"], process_group=None)[K.TEXT_NUM_RESPONSES] == 1.0


# --- two gloo ranks ---------------------------------------------------------------------------------

SHARDS = [3, 9]


def dist_inputs() -> dict:
    """Texts, stop reasons and token ids of the whole batch (12 responses)."""
    ids, mask, _ = random_rows(11, sum(SHARDS), 24, 6)
    texts = [
        ("<think>" + "hm " * (i % 4) + "</think> " if i % 3 else "") + " ".join(map(str, ids[i][mask[i]]))
        for i in range(sum(SHARDS))
    ]
    stops = [STOP_REASONS[i % len(STOP_REASONS)] for i in range(sum(SHARDS))]
    return {"texts": texts, "stops": stops, "ids": ids, "mask": mask}


def dist_metrics(a: dict, lo: int, hi: int, process_group=None) -> dict:
    out = {
        "text": compute_text_metrics(
            a["texts"][lo:hi],
            stop_reasons=a["stops"][lo:hi],
            format_pattern=r"\d \d",
            process_group=process_group,
        ),
        "ids": compute_text_metrics(
            token_ids=a["ids"][lo:hi],
            response_mask=a["mask"][lo:hi],
            think_span=(1, 2),
            process_group=process_group,
        ),
    }
    # Rank 1 holds everything, rank 0 nothing: the empty shard still joins the collectives.
    return out


def _worker(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=20)
    )
    try:
        a = dist_inputs()
        lo = sum(SHARDS[:rank])
        res = dist_metrics(a, lo, lo + SHARDS[rank], dist.group.WORLD)
        res["empty_shard"] = dist_metrics(a, 0, sum(SHARDS) if rank else 0, dist.group.WORLD)
        try:
            bad = ["x"] * SHARDS[rank] if rank == 0 else [1] * SHARDS[rank]
            compute_text_metrics(bad, process_group=dist.group.WORLD)
            res["error"] = None
        except TypeError as err:
            res["error"] = str(err)
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(res, fh)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # leave before gloo's teardown can abort the process (see test_distributed.py)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    tmp = pytest.importorskip("torch.multiprocessing")
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_text import _worker as worker  # an importable name for the spawned children

    path = tmp_path_factory.mktemp("text_world2")
    ctx = tmp.spawn(worker, args=(2, str(path / "store"), str(path)), nprocs=2, join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            pytest.fail("the 2 ranks did not finish within 120 s (hang)")
    out = []
    for r in range(2):
        with open(path / f"rank{r}.pkl", "rb") as fh:
            out.append(pickle.load(fh))
    return out


def test_two_gloo_ranks_equal_the_single_process_result(two_ranks: list[dict]) -> None:
    a = dist_inputs()
    want = dist_metrics(a, 0, sum(SHARDS))
    for res in two_ranks:
        for part in ("text", "ids"):
            assert_close(res[part], want[part])
            assert_close(res["empty_shard"][part], want[part])
    assert want["text"][K.TEXT_THINK_CLOSED_RATIO] > 0 and want["ids"][K.TEXT_LOOP_RATIO] > 0


def test_a_bad_rank_makes_both_raise_the_same_error(two_ranks: list[dict]) -> None:
    errors = [res["error"] for res in two_ranks]
    assert errors[0] == errors[1] and errors[0] is not None
    assert re.search(r"rank 1: responses\[0\] must be a string", errors[0])
