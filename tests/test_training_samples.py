"""Tests of rlmetrics.training.samples: the rows chosen against brute force, the row and byte
budgets (a Hypothesis property on unicode texts), determinism, the table type, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics.training.samples import (
    MIN_CELL_BYTES,
    TRUNCATION_MARKER,
    SampleTable,
    choose_samples,
    select_samples,
)

MARKER_BYTES = len(TRUNCATION_MARKER.encode("utf-8"))


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def reference_fixed(rewards: list[float], max_rows: int) -> list[tuple[int, str]]:
    """Max (first), min (first), lower median of a stable sort by reward; no duplicates; cut to max_rows."""
    n = len(rewards)
    if n == 0:
        return []
    top, bottom = max(rewards), min(rewards)
    picks = [
        (next(i for i in range(n) if rewards[i] == top), "max"),
        (next(i for i in range(n) if rewards[i] == bottom), "min"),
        (sorted(range(n), key=lambda i: (rewards[i], i))[(n - 1) // 2], "median"),
    ]
    out: list[tuple[int, str]] = []
    for i, why in picks:
        if i not in [j for j, _ in out]:
            out.append((i, why))
    return out[:max_rows]


def table_for(rewards, **kw):
    """A table whose responses name their batch index (so rows map back to rollouts)."""
    n = len(rewards)
    return select_samples([f"p{i}" for i in range(n)], [str(i) for i in range(n)], rewards, **kw)


def indices(table: SampleTable) -> list[int]:
    return [int(r) for r in table.response]


# --- which rows ---------------------------------------------------------------------------------


REWARD_CASES = {
    "distinct": [0.3, 0.9, 0.1, 0.5, 0.7],
    "ties-at-top-and-bottom": [1.0, 0.0, 1.0, 0.0, 0.5, 1.0],
    "all-equal": [0.5] * 7,
    "one": [2.0],
    "two": [1.0, 0.0],
    "two-equal": [1.0, 1.0],
    "binary-many": [0.0, 1.0] * 10,
    "negative": [-3.0, -1.0, -2.0, -1.0],
}


@pytest.mark.parametrize("rewards", list(REWARD_CASES.values()), ids=list(REWARD_CASES))
@pytest.mark.parametrize("max_rows", [1, 2, 3, 16], ids=lambda m: f"rows{m}")
def test_fixed_rows_match_brute_force(rewards, max_rows):
    table = table_for(rewards, n_random=0, max_rows=max_rows)
    expected = reference_fixed(rewards, max_rows)
    assert list(zip(indices(table), table.chosen, strict=True)) == expected
    assert list(table.reward) == [rewards[i] for i, _ in expected]


@pytest.mark.parametrize("rewards", list(REWARD_CASES.values()), ids=list(REWARD_CASES))
@pytest.mark.parametrize(("seed", "step"), [(0, None), (0, 5), (3, 5), (3, 1000)], ids=str)
def test_random_rows_are_the_seeded_draw_from_the_rest(rewards, seed, step):
    n_random, max_rows = 3, 5
    table = table_for(rewards, n_random=n_random, max_rows=max_rows, seed=seed, step=step)
    fixed = reference_fixed(rewards, max_rows)
    taken = [i for i, _ in fixed]
    pool = np.array([i for i in range(len(rewards)) if i not in taken])
    k = min(n_random, len(pool), max_rows - len(fixed))
    rng = np.random.default_rng((seed,) if step is None else (seed, step))
    drawn = sorted(rng.choice(pool, size=k, replace=False).tolist()) if k else []
    assert indices(table) == taken + drawn
    assert list(table.chosen) == [w for _, w in fixed] + ["random"] * k
    assert len(set(indices(table))) == len(table)  # never a row twice


def test_random_rows_are_deterministic_and_vary_with_step_and_seed():
    rewards = np.linspace(0, 1, 200)
    a = table_for(rewards, n_random=8, step=3, seed=1)
    assert a == table_for(rewards, n_random=8, step=3, seed=1)
    others = [indices(table_for(rewards, n_random=8, step=s, seed=1)) for s in range(4, 9)]
    others += [indices(table_for(rewards, n_random=8, step=3, seed=s)) for s in range(2, 7)]
    assert all(o != indices(a) for o in others)


def test_the_global_rng_is_left_alone():
    before = np.random.get_state()  # noqa: NPY002
    table_for(np.arange(50.0), n_random=10, step=2)
    after = np.random.get_state()  # noqa: NPY002
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]


def test_rows_budget_cuts_random_rows_first():
    table = table_for(np.arange(30.0), n_random=10, max_rows=5, step=0)
    assert list(table.chosen) == ["max", "min", "median", "random", "random"]


def test_empty_batch_gives_an_empty_table():
    table = select_samples([], [], [])
    assert len(table) == 0 and table.rows() == [] and all(v == [] for v in table.as_dict().values())


def test_columns_carry_the_given_fields():
    table = select_samples(
        ["a", "b", "c"],
        ["x", "y", "z"],
        torch.tensor([0.5, 1.0, 0.0]),
        lengths=np.array([3, 7, 11]),
        stop_reasons=["stop", "length", None],
        categories=["gsm8k", "math", "gsm8k"],
        n_random=0,
        step=12,
    )
    assert table.rows() == [
        {"step": 12, "prompt": "b", "response": "y", "reward": 1.0, "length": 7, "stop_reason": "length",
         "category": "math", "chosen": "max"},
        {"step": 12, "prompt": "c", "response": "z", "reward": 0.0, "length": 11, "stop_reason": None,
         "category": "gsm8k", "chosen": "min"},
        {"step": 12, "prompt": "a", "response": "x", "reward": 0.5, "length": 3, "stop_reason": "stop",
         "category": "gsm8k", "chosen": "median"},
    ]  # fmt: skip
    assert list(table.as_dict()) == list(K.SAMPLES_COLUMNS)
    assert all(type(v) is int for v in table.length) and all(type(v) is float for v in table.reward)


def test_without_lengths_and_labels_those_columns_are_none():
    table = table_for([0.0, 1.0], n_random=0)
    assert table.length == table.stop_reason == table.category == table.step == (None, None)


# --- the byte budget ----------------------------------------------------------------------------


def test_short_texts_stay_whole_and_long_ones_share_the_rest():
    # one row: a 10-byte prompt kept whole, the 1000-byte response cut to the 490 bytes left
    table = select_samples(["p" * 10], ["r" * 1000], [1.0], max_bytes=500)
    assert table.prompt == ("p" * 10,)
    assert table.response == ("r" * (490 - MARKER_BYTES) + TRUNCATION_MARKER,)
    assert nbytes(table.response[0]) == 490


def test_equal_long_texts_get_equal_shares():
    texts = ["é" * 400] * 4  # 800 bytes each, 2 bytes a character
    table = select_samples(texts[:2], texts[2:], [0.0, 1.0], n_random=0, max_bytes=1001)
    # the cap is 1001 // 4 = 250 bytes: 236 bytes of text before the marker, 118 characters
    for text in (*table.prompt, *table.response):
        assert text == "é" * 118 + TRUNCATION_MARKER


def test_cuts_never_split_a_character():
    emoji = "🙂" * 100  # 4 bytes each
    table = select_samples(["q"], [emoji], [1.0], max_bytes=200)
    head = table.response[0].removesuffix(TRUNCATION_MARKER)
    assert head == "🙂" * len(head) and nbytes(table.response[0]) <= 199
    assert nbytes(head) > 199 - MARKER_BYTES - 4


def test_rows_the_budget_cannot_hold_are_left_out():
    long = "x" * 1000
    # 3 rows -> 6 cells of 21 bytes, 2 rows -> 32 bytes: under MIN_CELL_BYTES; 1 row -> 64 bytes
    table = select_samples([long] * 3, [long] * 3, [0.0, 1.0, 0.5], n_random=0, max_bytes=2 * MIN_CELL_BYTES)
    assert table.chosen == ("max",)
    assert table.response == ("x" * (MIN_CELL_BYTES - MARKER_BYTES) + TRUNCATION_MARKER,)
    # short texts need no cut: all three rows fit
    short = select_samples(["a"] * 3, ["b"] * 3, [0.0, 1.0, 0.5], n_random=0, max_bytes=2 * MIN_CELL_BYTES)
    assert short.chosen == ("max", "min", "median")


def reference_rows(rewards, n_random, max_rows, seed, step) -> list[tuple[int, str]]:
    """Every row chosen before the byte budget: the fixed ones, then the seeded draw from the rest."""
    fixed = reference_fixed(list(rewards), max_rows)
    pool = np.array([i for i in range(len(rewards)) if i not in [j for j, _ in fixed]])
    k = min(n_random, len(pool), max_rows - len(fixed))
    if k <= 0:
        return fixed
    rng = np.random.default_rng((seed,) if step is None else (seed, step))
    return fixed + [(int(i), "random") for i in sorted(rng.choice(pool, size=k, replace=False))]


def brute_cap(sizes: list[int], budget: int) -> int:
    return max(c for c in range(max(sizes, default=0) + 1) if sum(min(s, c) for s in sizes) <= budget)


texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(texts, texts, st.floats(-10, 10)), max_size=12),
    st.integers(2 * MIN_CELL_BYTES, 3000),
    st.integers(0, 6),
    st.integers(1, 10),
)
def test_byte_budget_holds_and_cuts_are_prefixes(batch, max_bytes, n_random, max_rows):
    prompts, responses, rewards = ([b[j] for b in batch] for j in range(3))
    table = select_samples(
        prompts, responses, rewards, n_random=n_random, max_rows=max_rows, max_bytes=max_bytes, step=1
    )
    assert sum(nbytes(t) for t in (*table.prompt, *table.response)) <= max_bytes
    wanted = reference_rows(rewards, n_random, max_rows, 0, 1)
    assert len(table) <= len(wanted) and list(table.chosen) == [w for _, w in wanted[: len(table)]]
    cells = [(table.prompt[r], prompts[i]) for r, (i, _) in enumerate(wanted[: len(table)])]
    cells += [(table.response[r], responses[i]) for r, (i, _) in enumerate(wanted[: len(table)])]
    cap = brute_cap([nbytes(o) for _, o in cells], max_bytes)
    for got, original in cells:
        if nbytes(original) <= cap:
            assert got == original  # short texts stay whole
        else:
            assert got.endswith(TRUNCATION_MARKER) and nbytes(got) <= cap
            assert original.startswith(got.removesuffix(TRUNCATION_MARKER))
            assert nbytes(got) > cap - 4 and cap >= MIN_CELL_BYTES  # its share, less a split character
    if len(table) < len(wanted):  # a row is left out only when one more would cut a text below the floor
        more = [nbytes(t) for i, _ in wanted[: len(table) + 1] for t in (prompts[i], responses[i])]
        more_cap = brute_cap(more, max_bytes)
        assert more_cap < MIN_CELL_BYTES and max(more) > more_cap


# --- the table type -----------------------------------------------------------------------------


def test_table_round_trips_through_rows_and_is_frozen():
    table = select_samples(["a", "b"], ["x", "y"], [0.0, 1.0], lengths=[1, 2], step=4)
    assert SampleTable.from_rows(table.rows()) == table
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.prompt = ("z",)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("columns", "match"),
    [
        ({"prompt": ("a", "b")}, "one length"),
        ({"chosen": ("best",)}, r"chosen must hold values of"),
        ({"reward": 1.0}, r"SampleTable.reward must be a sequence"),
    ],
    ids=["lengths", "chosen", "scalar"],
)
def test_table_refuses_bad_columns(columns, match):
    base = dict(step=(0,), prompt=("a",), response=("b",), reward=(1.0,), length=(None,),
                stop_reason=(None,), category=(None,), chosen=("max",))  # fmt: skip
    with pytest.raises((TypeError, ValueError), match=match):
        SampleTable(**{**base, **columns})


# --- errors -------------------------------------------------------------------------------------

OK = {"prompts": ["a", "b"], "responses": ["x", "y"], "rewards": [0.0, 1.0]}


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"prompts": "ab"}, TypeError, r"prompts must be a sequence of str"),
        ({"prompts": ["a", 3]}, TypeError, r"prompts\[1\] must be a str; got int"),
        ({"responses": ["x"]}, ValueError, r"responses must have one entry per prompt \(2\); got 1"),
        ({"rewards": [0.0]}, ValueError, r"rewards must have one entry per prompt \(2\); got 1"),
        ({"rewards": [[0.0, 1.0]]}, ValueError, r"rewards must have shape \(2,\)"),
        ({"rewards": ["a", "b"]}, TypeError, r"rewards must be a 1-d array of numbers"),
        ({"rewards": [0.0, float("nan")]}, ValueError, r"rewards must be finite; rewards\[1\] is nan"),
        ({"lengths": [1, 2.5]}, ValueError, r"lengths must be integers >= 0; lengths\[1\] is 2.5"),
        ({"lengths": [-1, 2]}, ValueError, r"lengths must be integers >= 0; lengths\[0\]"),
        ({"stop_reasons": ["stop", 1]}, TypeError, r"stop_reasons\[1\] must be a str or None"),
        ({"categories": ["a"]}, ValueError, r"categories must have one entry per prompt"),
        ({"n_random": -1}, ValueError, r"n_random must be an integer >= 0"),
        ({"max_rows": 0}, ValueError, r"max_rows must be an integer >= 1"),
        ({"max_bytes": 100}, ValueError, r"max_bytes must be an integer >= 128"),
        ({"seed": 1.5}, TypeError, r"seed must be an integer"),
        ({"step": -2}, ValueError, r"step must be an integer >= 0"),
    ],
    ids=[
        "prompts-str", "prompt-item", "responses-len", "rewards-len", "rewards-2d", "rewards-text",
        "rewards-nan", "lengths-fraction", "lengths-negative", "stop-item", "categories-len",
        "n_random", "max_rows", "max_bytes", "seed", "step",
    ],
)  # fmt: skip
def test_errors_name_the_argument(change, error, match):
    args = {**OK, **change}
    with pytest.raises(error, match=match):
        select_samples(args.pop("prompts"), args.pop("responses"), args.pop("rewards"), **args)


@pytest.mark.parametrize("n_random,max_rows", [(0, 16), (4, 16), (10, 5)], ids=["none", "four", "capped"])
def test_choose_samples_names_the_rows_select_samples_picks(n_random, max_rows):
    rewards = np.random.default_rng(2).integers(0, 4, size=40).astype(float)  # many ties
    picks = choose_samples(rewards, n_random=n_random, max_rows=max_rows, seed=5, step=3)
    table = select_samples(
        [str(i) for i in range(40)],
        [str(i) for i in range(40)],
        rewards,
        n_random=n_random,
        max_rows=max_rows,
        seed=5,
        step=3,
    )
    assert [(int(r), c) for r, c in zip(table.response, table.chosen)] == picks
    # decoding only those rows (the others given as "") gives the same table
    only = [str(i) if i in {p for p, _ in picks} else "" for i in range(40)]
    assert select_samples(only, only, rewards, n_random=n_random, max_rows=max_rows, seed=5, step=3) == table


def test_choose_samples_checks_its_arguments():
    with pytest.raises(ValueError, match=r"rewards must be finite; rewards\[1\] is nan"):
        choose_samples([1.0, float("nan")])
    with pytest.raises(ValueError, match=r"rewards must have shape \(B,\); got shape \(2, 1\)"):
        choose_samples([[1.0], [2.0]])
