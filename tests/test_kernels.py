"""Tests of rlmetrics._core.kernels: the fused numba row kernels against slow per-row loops.

The reference for every row is written the obvious way (boolean selection, float64 sums,
two-pass centred second moments, numpy max/min); the kernel must agree on every column of its
sums, extremes and sequence tables, for masks of any dtype, partial column blocks, NaN inputs
and the optional critic / sequence inputs. :func:`float_keys_to_values` is plain numpy and is
tested even without numba.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlmetrics._core.kernels import (
    ROW_KEY_FIELDS,
    ROW_SEQ_FIELDS,
    ROW_SUM_FIELDS,
    attention_lengths_kernel,
    float_keys_to_values,
    text_rows_kernel,
    token_rows_kernel,
    variance_rows_kernel,
)

# token_rows_kernel() is None when numba is missing or RLMETRICS_NO_NUMBA is set
needs_kernel = pytest.mark.skipif(
    token_rows_kernel() is None, reason="numba not installed or disabled with RLMETRICS_NO_NUMBA"
)

#: Extremes-table sentinels of a row without valid tokens (or of the critic without one).
LOWEST, HIGHEST = -(2**62), 2**62
SUM = {name: c for c, name in enumerate(ROW_SUM_FIELDS)}
KEY = {name: c for c, name in enumerate(ROW_KEY_FIELDS)}
SEQ = {name: c for c, name in enumerate(ROW_SEQ_FIELDS)}
NOTHING = np.zeros((0, 0), dtype=np.float32)


# ----------------------------------------------------------------------------- helpers
def float_keys(values: np.ndarray) -> np.ndarray:
    """The kernels' order-preserving map from float bits to integers (forward direction)."""
    int_type = np.int32 if values.dtype.itemsize == 4 else np.int64
    bits = values.view(int_type)
    magnitude = np.iinfo(int_type).max
    return np.where(bits < 0, bits ^ magnitude, bits).astype(np.int64)


def run_token_rows(adv, ret, val, mask, use_critic, scores=None, rewards=None, attention=None, split=0):
    """Call the token kernel as rlmetrics.training.data does (bit views, zero-width sequence inputs)."""
    kernel = token_rows_kernel()
    int_type = np.int32 if adv.dtype.itemsize == 4 else np.int64
    bits = [np.ascontiguousarray(x).view(int_type) for x in (adv, ret, val)]
    magnitude = (1 << (8 * adv.dtype.itemsize - 1)) - 1
    nothing = np.zeros((mask.shape[0], 0), dtype=np.float32)
    scores = nothing if scores is None else scores
    rewards = nothing if rewards is None else rewards
    attention = nothing if attention is None else attention
    return kernel(
        adv,
        ret,
        val,
        *bits,
        mask,
        use_critic,
        magnitude,
        scores,
        rewards,
        attention,
        split,
    )


def reference_rows(adv, ret, val, mask, use_critic):
    """Per row: the sums table (ROW_SUM_FIELDS) and the extremes (None for a row without tokens)."""
    sums = np.zeros((mask.shape[0], len(ROW_SUM_FIELDS)))
    extremes: list[list | None] = []
    for i in range(mask.shape[0]):
        on = mask[i] != 0
        n = int(on.sum())
        sums[i, SUM["n_invalid"]] = int((on & (mask[i] != 1)).sum())
        if n == 0:
            extremes.append(None)
            continue
        a, r, v = adv[i][on], ret[i][on], val[i][on]
        r64 = r.astype(np.float64)
        d64 = r64 - v.astype(np.float64)
        sums[i, SUM["n"]] = n
        sums[i, SUM["adv_sum"]] = a.astype(np.float64).sum()
        sums[i, SUM["ret_sum"]] = r64.sum()
        sums[i, SUM["ret_m2"]] = ((r64 - r64.mean()) ** 2).sum()
        row = [a.max(), a.min(), r.max(), r.min()]
        if use_critic:
            sums[i, SUM["val_sum"]] = v.astype(np.float64).sum()
            sums[i, SUM["diff_sum"]] = d64.sum()
            sums[i, SUM["diff_m2"]] = ((d64 - d64.mean()) ** 2).sum()
            row += [v.max(), v.min()]
        extremes.append(row)
    return sums, extremes


def make_values(rng: np.random.Generator, shape: tuple[int, int], dtype) -> tuple[np.ndarray, ...]:
    adv = rng.standard_normal(shape).astype(dtype)
    ret = (3.0 * rng.standard_normal(shape) + 100.0).astype(dtype)  # offset: tests the centring
    val = (ret + rng.standard_normal(shape)).astype(dtype)
    return adv, ret, val


def make_mask(rng: np.random.Generator, n_rows: int, width: int) -> np.ndarray:
    """Response-style prefixes, random holes, an all-zero row and an all-one row (bool)."""
    lengths = rng.integers(0, width + 1, n_rows)
    mask = np.arange(width)[None, :] < lengths[:, None]
    holes = rng.random((n_rows, width)) < 0.5
    mask[n_rows // 2 :] = holes[n_rows // 2 :]
    mask[0] = False
    if n_rows > 1:
        mask[1] = True
    return mask


def assert_rows_match(got, adv, ret, val, mask, use_critic):
    """Every column of the kernel's sums and extremes equals the reference's."""
    sums, keys, seq = got
    n_rows = mask.shape[0]
    assert sums.shape == (n_rows, len(ROW_SUM_FIELDS)) and sums.dtype == np.float64
    assert keys.shape == (n_rows, len(ROW_KEY_FIELDS)) and keys.dtype == np.int64
    assert seq.shape == (n_rows, len(ROW_SEQ_FIELDS)) and seq.dtype == np.float64
    want_sums, want_ext = reference_rows(adv, ret, val, mask, use_critic)
    np.testing.assert_array_equal(sums[:, SUM["n"]], want_sums[:, SUM["n"]])
    np.testing.assert_array_equal(sums[:, SUM["n_invalid"]], want_sums[:, SUM["n_invalid"]])
    np.testing.assert_allclose(sums, want_sums, rtol=1e-11, atol=1e-9)
    n_ext = 6 if use_critic else 4
    for i, row in enumerate(want_ext):
        if row is None:
            assert keys[i].tolist() == [LOWEST, HIGHEST] * 3, f"row {i}"
            continue
        values = float_keys_to_values(keys[i, :n_ext], adv.dtype)
        assert values.dtype == adv.dtype
        np.testing.assert_array_equal(values, np.array(row, dtype=adv.dtype), err_msg=f"row {i}")
        if not use_critic:
            assert keys[i, 4:].tolist() == [LOWEST, HIGHEST], f"row {i}"
    np.testing.assert_array_equal(seq, 0.0)  # zero-width sequence inputs: skipped


# ----------------------------------------------------------------------------- float keys
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_float_keys_round_trip_and_order(dtype):
    info = np.finfo(dtype)
    values = np.array(
        [
            *(-np.inf, -info.max, -1e3, -1.5, -info.tiny, -info.smallest_subnormal, -0.0),
            *(0.0, info.smallest_subnormal, info.tiny, 1.0, 2.5, 1e3, info.max, np.inf),
        ],
        dtype=dtype,
    )
    keys = float_keys(values)
    # strictly increasing keys for ascending values (-0.0 just below +0.0)
    assert (np.diff(keys) > 0).all()
    back = float_keys_to_values(keys, dtype)
    assert back.dtype == dtype
    int_type = np.int32 if dtype == np.float32 else np.int64
    np.testing.assert_array_equal(back.view(int_type), values.view(int_type))  # bitwise: -0.0 kept
    assert np.signbit(float_keys_to_values(float_keys(np.array([-0.0], dtype)), dtype))[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_float_keys_round_trip_random_and_nan(dtype):
    rng = np.random.default_rng(7)
    values = (rng.standard_normal(1000) * 10.0 ** rng.integers(-30, 30, 1000)).astype(dtype)
    values[:3] = [np.nan, -np.inf, np.inf]
    int_type = np.int32 if dtype == np.float32 else np.int64
    back = float_keys_to_values(float_keys(values), dtype)
    np.testing.assert_array_equal(back.view(int_type), values.view(int_type))
    finite = values[3:]
    order = np.argsort(finite, kind="stable")
    assert (np.diff(float_keys(finite[order])) >= 0).all()
    # max/min over keys equal max/min over the floats
    assert float_keys_to_values(float_keys(finite).max(keepdims=True), dtype)[0] == finite.max()
    assert float_keys_to_values(float_keys(finite).min(keepdims=True), dtype)[0] == finite.min()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_float_keys_of_2d_kernel_table(dtype):
    values = np.array([[-2.0, 3.0], [-0.0, np.inf]], dtype=dtype)
    back = float_keys_to_values(float_keys(values).reshape(2, 2), dtype)
    assert back.shape == (2, 2)
    np.testing.assert_array_equal(back, values)


# ----------------------------------------------------------------------------- token kernel
TOKEN_CASES = [
    *[(w, np.float32, np.bool_, True) for w in (0, 1, 255, 256, 257, 700)],
    *[(w, np.float64, np.int64, True) for w in (1, 255, 256, 257, 700)],
    (700, np.float32, np.int8, True),
    (700, np.float32, np.float32, True),
    (513, np.float64, np.bool_, True),
    (257, np.float32, np.float32, True),
    (700, np.float32, np.bool_, False),
    (300, np.float64, np.int64, False),
]


@needs_kernel
@pytest.mark.parametrize(
    ("width", "dtype", "mask_dtype", "use_critic"),
    TOKEN_CASES,
    ids=[
        f"w{w}-{np.dtype(d).name}-mask_{np.dtype(m).name}-{'critic' if c else 'nocritic'}"
        for w, d, m, c in TOKEN_CASES
    ],
)
def test_token_rows_match_reference(width, dtype, mask_dtype, use_critic):
    rng = np.random.default_rng(width * 31 + np.dtype(dtype).itemsize)
    n_rows = 9
    adv, ret, val = make_values(rng, (n_rows, width), dtype)
    mask = make_mask(rng, n_rows, width).astype(mask_dtype)
    if not use_critic:
        val = np.full_like(ret, np.nan)  # never read without the critic
    got = run_token_rows(adv, ret, val, mask, use_critic)
    assert_rows_match(got, adv, ret, val, mask, use_critic)
    if not use_critic:
        np.testing.assert_array_equal(got[0][:, [SUM["val_sum"], SUM["diff_sum"], SUM["diff_m2"]]], 0.0)


@needs_kernel
@pytest.mark.parametrize(
    ("dtype", "mask_dtype", "odd"),
    [
        (np.float32, np.int8, [2, -1, 7]),
        (np.float64, np.int64, [2, -5, 1 << 40]),
        (np.float32, np.float32, [0.5, -1.0, 2.0]),
    ],
    ids=["int8", "int64", "float32"],
)
def test_token_rows_count_invalid_mask_entries(dtype, mask_dtype, odd):
    rng = np.random.default_rng(3)
    n_rows, width = 6, 600
    adv, ret, val = make_values(rng, (n_rows, width), dtype)
    mask = make_mask(rng, n_rows, width).astype(mask_dtype)
    # odd entries in a fully on block, a partial block and an otherwise empty row
    mask[1, [5, 300, 599]] = odd
    mask[2, [0, 1]] = odd[:2]
    mask[0, 400] = odd[2]
    got = run_token_rows(adv, ret, val, mask, True)
    assert got[0][:, SUM["n_invalid"]].tolist()[:3] == [1, 3, 2]
    assert_rows_match(got, adv, ret, val, mask, True)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_token_rows_masked_out_nan_does_not_leak(dtype):
    rng = np.random.default_rng(11)
    n_rows, width = 4, 700
    adv, ret, val = make_values(rng, (n_rows, width), dtype)
    mask = np.zeros((n_rows, width), dtype=bool)
    mask[0, :100] = True  # columns 256.. are skipped blocks
    mask[1, 10:600:3] = True  # partial blocks only
    mask[2] = True
    mask[2, [7, 300]] = False  # holes in otherwise full blocks
    for x in (adv, ret, val):
        x[0, [100, 600]] = np.nan
        x[1, [3, 11, 401]] = np.nan
        x[2, [7, 300]] = [np.nan, np.inf]
        x[3, :] = np.nan  # a row without tokens
    got = run_token_rows(adv, ret, val, mask, True)
    assert np.isfinite(got[0]).all()
    assert_rows_match(got, adv, ret, val, mask, True)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("column", [0, 5, 256, 699], ids=lambda c: f"col{c}")
def test_token_rows_valid_nan_propagates(dtype, column):
    rng = np.random.default_rng(column)
    n_rows, width = 3, 700
    adv, ret, val = make_values(rng, (n_rows, width), dtype)
    mask = np.ones((n_rows, width), dtype=bool)
    mask[:, 600:650] = False  # column 699 lies in a partial block, 0/5/256 in full ones
    adv[0, column] = np.nan
    ret[1, column] = np.nan
    val[2, column] = np.nan
    sums, _, _ = run_token_rows(adv, ret, val, mask, True)
    nan = np.isnan(sums)
    expect = np.zeros_like(nan)
    expect[0, SUM["adv_sum"]] = True
    expect[1, [SUM["ret_sum"], SUM["ret_m2"], SUM["diff_sum"], SUM["diff_m2"]]] = True
    expect[2, [SUM["val_sum"], SUM["diff_sum"], SUM["diff_m2"]]] = True
    np.testing.assert_array_equal(nan, expect)


@needs_kernel
def test_token_rows_signed_zero_and_infinite_extremes():
    adv = np.array([[-0.0, -0.0, 1.0], [-np.inf, np.inf, 0.0], [-3.0, -0.0, 0.0]], dtype=np.float32)
    mask = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1]], dtype=bool)
    _, keys, _ = run_token_rows(adv, adv, adv, mask, True)
    hi = float_keys_to_values(keys[:, KEY["adv_max"]], np.float32)
    lo = float_keys_to_values(keys[:, KEY["adv_min"]], np.float32)
    assert hi.tolist() == [0.0, np.inf, 0.0] and lo.tolist() == [0.0, -np.inf, -3.0]
    assert np.signbit(hi[0]) and np.signbit(lo[0])  # a row of -0.0 keeps its sign
    assert not np.signbit(hi[2])


@needs_kernel
def test_token_rows_no_rows():
    empty = np.zeros((0, 5), dtype=np.float32)
    sums, keys, seq = run_token_rows(empty, empty, empty, np.zeros((0, 5), dtype=bool), True)
    assert sums.shape == (0, 8) and keys.shape == (0, 6) and seq.shape == (0, 5)


def reference_attention(attention: np.ndarray, split: int) -> np.ndarray:
    split = min(max(split, 0), attention.shape[1])
    out = np.zeros((attention.shape[0], 3))
    for i, row in enumerate(attention):
        for j, v in enumerate(row.tolist()):
            out[i, 0 if j < split else 1] += v != 0
            out[i, 2] += v != 0 and v != 1
    return out


SPLITS = [-3, 0, 1, 40, 299, 300, 305]


@needs_kernel
@pytest.mark.parametrize("split", SPLITS, ids=[f"split{s}" for s in SPLITS])
def test_token_rows_sequence_table(split):
    rng = np.random.default_rng(split + 10)
    n_rows, prompt, width = 7, 40, 260
    adv, ret, val = make_values(rng, (n_rows, width), np.float32)
    mask = make_mask(rng, n_rows, width)
    scores = rng.standard_normal((n_rows, width)).astype(np.float32)
    rewards = rng.standard_normal((n_rows, width))
    attention = (rng.random((n_rows, prompt + width)) < 0.7).astype(np.int64)
    attention[2, [0, 50]] = [2, -1]
    attention[3, :] = 0
    sums, keys, seq = run_token_rows(adv, ret, val, mask, True, scores, rewards, attention, split)
    np.testing.assert_allclose(
        seq[:, SEQ["score_sum"]], scores.astype(np.float64).sum(axis=1), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(seq[:, SEQ["reward_sum"]], rewards.sum(axis=1), rtol=1e-12, atol=1e-12)
    want = reference_attention(attention, split)
    cols = [SEQ["prompt_len"], SEQ["response_len"], SEQ["attention_invalid"]]
    np.testing.assert_array_equal(seq[:, cols], want)
    assert seq[2, SEQ["attention_invalid"]] == 2
    # the token tables are unaffected by the sequence inputs
    plain = run_token_rows(adv, ret, val, mask, True)
    np.testing.assert_array_equal(sums, plain[0])
    np.testing.assert_array_equal(keys, plain[1])


@needs_kernel
@pytest.mark.parametrize(
    "dtype", [np.bool_, np.int8, np.int64, np.float32], ids=["bool", "int8", "int64", "float32"]
)
@pytest.mark.parametrize("split", SPLITS, ids=[f"split{s}" for s in SPLITS])
def test_attention_lengths_kernel(dtype, split):
    rng = np.random.default_rng(5)
    attention = rng.random((6, 300)) < 0.6
    attention[0] = False
    attention[1] = True
    attention = attention.astype(dtype)
    if dtype != np.bool_:
        attention[4, [0, 100, 299]] = [2, -1, 3]
    got = attention_lengths_kernel()(attention, split)
    assert got.shape == (6, 3) and got.dtype == np.float64
    np.testing.assert_array_equal(got, reference_attention(attention, split))


@needs_kernel
def test_attention_lengths_kernel_zero_width():
    got = attention_lengths_kernel()(np.zeros((3, 0), dtype=np.int64), 0)
    np.testing.assert_array_equal(got, np.zeros((3, 3)))


def assert_second_process_compiles_nothing(script: str, cache_dir: Path) -> None:
    """Run ``script`` in two fresh processes on one numba cache: the first fills it, the second
    must find every kernel there and write nothing."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    env.pop("RLMETRICS_NO_NUMBA", None)

    def files() -> dict[str, int]:
        return {str(p): p.stat().st_mtime_ns for p in cache_dir.rglob("*") if p.is_file()}

    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=600)
    first = files()
    assert any(name.endswith(".nbc") for name in first), "the first process cached nothing"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=600)
    assert files() == first, "the second process compiled again (new or rewritten cache files)"


def test_token_kernels_load_from_numba_cache_in_a_new_process(tmp_path):
    """A second process compiles nothing and writes nothing to numba's cache (a kernel defined
    in a closure over other kernels would compile again in every process)."""
    pytest.importorskip("numba")
    script = (
        "import numpy as np\n"
        "import rlmetrics\n"
        "from rlmetrics._core import kernels, lengths\n"
        "from rlmetrics.training import data\n"
        "data.FUSED_MIN_ELEMENTS = lengths.FUSED_MIN_ELEMENTS = 0\n"
        "B, P, R = 4, 3, 5\n"
        "f = np.ones((B, R), np.float32)\n"
        "i = np.ones((B, R), np.int64)\n"
        "batch = {'prompts': np.zeros((B, P), np.int64), 'responses': 0 * i,\n"
        "         'attention_mask': np.ones((B, P + R), np.int64), 'response_mask': i,\n"
        "         'token_level_scores': f, 'token_level_rewards': f, 'advantages': f, 'returns': f,\n"
        "         'values': f}\n"
        "rlmetrics.compute_data_metrics(batch, use_critic=True)\n"
        "kernels.attention_lengths_kernel()(batch['attention_mask'], P)\n"
        "one, c = np.float32(1), np.float32(1e-10)\n"
        "kernels.variance_rows_kernel()(i, f, f, f, f, True, one, c, np.empty((B, 5)), 0)\n"
        "tag = np.array([1], np.int64)\n"
        "kernels.text_rows_kernel()(i, i, 4, 4, 64, tag, tag)\n"
    )
    assert_second_process_compiles_nothing(script, tmp_path / "cache")


def variance_reference(mask, e, spi, adv, rho):
    """Per-row (count, sum adv, sum W [rho^2], sum W min(rho^2, 1e-10), sum rho), W in e's dtype."""
    one = e.dtype.type(1)
    clamp = e.dtype.type(1e-10)
    out = np.zeros((mask.shape[0], 5))
    for i in range(mask.shape[0]):
        on = mask[i] != 0
        w = (one - (e[i] + e[i])) + spi[i]
        out[i, 0] = on.sum()
        out[i, 1] = adv[i][on].astype(np.float64).sum()
        if rho is None:
            out[i, 2] = w[on].astype(np.float64).sum()
            continue
        r2 = rho[i] * rho[i]
        out[i, 2] = (w * r2)[on].astype(np.float64).sum()
        out[i, 3] = (w * np.minimum(r2, clamp))[on].astype(np.float64).sum()
        out[i, 4] = rho[i][on].astype(np.float64).sum()
    return out


@needs_kernel
@pytest.mark.parametrize("with_is", [False, True], ids=["on-policy", "is-weights"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_variance_rows_kernel_matches_a_row_loop(with_is, dtype):
    rng = np.random.default_rng(3)
    n, r = 6, 300
    mask = (np.arange(r) < rng.integers(0, r + 1, n)[:, None]).astype(np.int64)
    e, spi, rho = (rng.random((n, r)).astype(dtype) for _ in range(3))
    adv = rng.standard_normal((n, r)).astype(dtype)
    spi[mask == 0] = np.nan  # masked-out NaN never reaches a sum
    out = np.full((n + 2, 5), -1.0)
    one, clamp = dtype(1), dtype(1e-10)
    bad = variance_rows_kernel()(mask, e, spi, adv, rho if with_is else e, with_is, one, clamp, out, 2)
    assert bad == 0
    np.testing.assert_array_equal(out[:2], -1.0)  # rows before row0 untouched
    expected = variance_reference(mask, e, spi, adv, rho if with_is else None)
    np.testing.assert_allclose(out[2:], expected, rtol=1e-12, atol=1e-12)


@needs_kernel
@pytest.mark.parametrize("value", [2, -1, 3, -(2**62)], ids=["two", "minus-one", "three", "large-negative"])
def test_variance_rows_kernel_flags_mask_values_other_than_0_and_1(value):
    mask = np.ones((3, 40), np.int64)
    mask[2, 39] = value
    x = np.ones((3, 40), np.float32)
    out = np.empty((3, 5))
    bad = variance_rows_kernel()(mask, x, x, x, x, False, np.float32(1), np.float32(1e-10), out, 0)
    assert bad != 0


# ----------------------------------------------------------------------------- text_rows
def text_row_reference(units: list[int], n: int, repeats: int, period: int, tags) -> list[int]:
    """(length, distinct n-grams, loop, closed, thinking length, answer length) of one row, by hand."""
    length = len(units)
    distinct = len({tuple(units[j : j + n]) for j in range(length - n + 1)})
    loop = any(
        length >= repeats * p and units[length - repeats * p :] == units[length - p :] * repeats
        for p in range(1, period + 1)
    )
    if tags is None:
        return [length, distinct, int(loop), 0, 0, 0]
    opening, closing = (list(t) for t in tags)

    def find(start: int, end: int, tag: list[int]) -> int:
        return next((j for j in range(start, end - len(tag) + 1) if units[j : j + len(tag)] == tag), -1)

    c = find(0, length, closing)
    if c >= 0:
        o = find(0, c, opening)
        return [
            length,
            distinct,
            int(loop),
            1,
            c - (o + len(opening) if o >= 0 else 0),
            length - c - len(closing),
        ]
    o = find(0, length, opening)
    think = (0, length - o - len(opening), 0) if o >= 0 else (0, 0, length)
    return [length, distinct, int(loop), *think]


def text_rows_case(seed: int, ids_dtype, mask_dtype, width: int):
    """Rows over a vocabulary of 4 (many repeated n-grams, hash-set collisions on equal codes) with
    looping tails, the tags planted, holes in the mask; a row of nothing, a row of everything."""
    rng = np.random.default_rng(seed)
    rows = 9
    ids = rng.integers(0, 4, size=(rows, width)).astype(ids_dtype)
    for i in range(0, rows, 3):
        p = int(rng.integers(1, 5))
        ids[i, width // 2 :] = np.resize(ids[i, width // 2 : width // 2 + p], width - width // 2)
    ids[1, 3:6] = [7, 8, 9]  # open (7,) ... close (8, 9)
    ids[2, 10:12] = [8, 9]
    mask = rng.random((rows, width)) < 0.85
    mask[4], mask[5] = False, True
    return ids, mask.astype(mask_dtype)


@needs_kernel
@pytest.mark.parametrize("n", [1, 2, 4, 7], ids=lambda n: f"n{n}")
@pytest.mark.parametrize(
    ("ids_dtype", "mask_dtype"),
    [(np.int64, np.int64), (np.int64, bool), (np.uint32, np.float32), (np.int32, None)],
    ids=["int64-ids-int64-mask", "bool-mask", "uint32-ids-float-mask", "int32-ids-no-mask"],
)
@pytest.mark.parametrize("tags", [None, ((7,), (8, 9))], ids=["no-tags", "tags"])
def test_text_rows_kernel_matches_a_row_loop(n, ids_dtype, mask_dtype, tags):
    width = 300
    ids, mask = text_rows_case(n, ids_dtype, mask_dtype or bool, width)
    if mask_dtype is None:
        mask = np.ones(ids.shape, dtype=bool)
        kernel_mask = np.zeros((ids.shape[0], 0), dtype=bool)
    else:
        kernel_mask = mask
    empty = np.zeros(0, dtype=np.int64)
    open_tag, close_tag = (empty, empty) if tags is None else (np.array(t, dtype=np.int64) for t in tags)
    table, bad_mask, bad_ids = text_rows_kernel()(ids, kernel_mask, n, 4, 16, open_tag, close_tag)
    want = [text_row_reference(ids[i][mask[i] != 0].tolist(), n, 4, 16, tags) for i in range(ids.shape[0])]
    np.testing.assert_array_equal(table, np.array(want, dtype=np.int64))
    assert (bad_mask, bad_ids) == (0, 0)


@needs_kernel
def test_text_rows_kernel_counts_bad_mask_entries_and_ids_out_of_range():
    ids = np.array([[1, -1, 5, 2**32], [2**32 - 1, 0, -7, 3]], dtype=np.int64)
    mask = np.array([[1, 1, 2, 0], [1, 1, 0, 1]], dtype=np.int64)  # -1 selected, 2**32 not, -7 not
    empty = np.zeros(0, dtype=np.int64)
    table, bad_mask, bad_ids = text_rows_kernel()(ids, mask, 2, 4, 64, empty, empty)
    assert (bad_mask, bad_ids) == (1, 1)
    np.testing.assert_array_equal(table[:, 0], [3, 3])
    _, _, every_bad = text_rows_kernel()(ids, np.zeros((2, 0), dtype=bool), 2, 4, 64, empty, empty)
    assert every_bad == 3  # no mask: every id is read, -1, 2**32 and -7 with it


@needs_kernel
def test_text_rows_kernel_long_rows_with_colliding_codes():
    """4,096 tokens over 2 ids (every 4-gram of 16 seen, the hash set's chains long) and a row of
    distinct ids (every n-gram new): counts against a set of tuples."""
    rng = np.random.default_rng(3)
    ids = np.stack([rng.integers(0, 2, 4096), np.arange(4096) * 1_000_003 % 2**32]).astype(np.int64)
    empty = np.zeros(0, dtype=np.int64)
    every = np.zeros((2, 0), dtype=bool)
    for n in (1, 4, 12):
        table, _, _ = text_rows_kernel()(ids, every, n, 4, 64, empty, empty)
        want = [len({tuple(r[j : j + n]) for j in range(4096 - n + 1)}) for r in ids.tolist()]
        np.testing.assert_array_equal(table[:, 1], want)
