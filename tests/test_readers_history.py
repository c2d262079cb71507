"""The history type (:mod:`rlmetrics.readers._history`): rows to series, the table path for runs of
rows with the same keys against the row-by-row rule, timestamps, the mapping form, errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.health import findings
from rlmetrics.readers import as_history, last_per_step
from rlmetrics.readers._history import rows_history


def _by_the_rule(rows: list[dict[str, Any]]) -> dict[str, tuple[list[int], list[float]]]:
    """The rule as documented, row by row: a step that is no finite number is the one before + 1;
    numeric fields but ``step``/``timestamp`` kept; of a step logged twice, the last value."""
    out: dict[str, dict[int, float]] = {}
    step = -1
    for row in rows:
        raw = row.get("step")
        ok = isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)
        step = int(raw) if ok else step + 1
        for key, value in row.items():
            if (
                key not in ("step", "timestamp")
                and isinstance(value, int | float)
                and not isinstance(value, bool)
            ):
                out.setdefault(key, {})[step] = float(value)
    return {k: (sorted(v), [v[s] for s in sorted(v)]) for k, v in out.items()}


_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.none(),
    st.just("text"),
)
_step = st.one_of(st.integers(0, 20), st.just(math.nan), st.just(2.7), st.none(), st.just(True))


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    shapes=st.lists(
        st.tuples(
            st.sampled_from([("step", "a", "b"), ("step", "b"), ("a",), ("step", "timestamp", "a")]),
            st.integers(1, 4),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_the_table_path_follows_the_rule(data, shapes):
    rows = []
    for keys, n in shapes:  # runs of rows with the same keys: the table path, unless a value is odd
        for _ in range(n):
            numeric = data.draw(st.booleans())
            row = {
                k: (
                    data.draw(st.integers(0, 20))
                    if k == "step" and numeric
                    else data.draw(_step if k == "step" else _value)
                )
                for k in keys
            }
            if numeric:
                row = {
                    k: (v if isinstance(v, int | float) and not isinstance(v, bool) else 0.5)
                    for k, v in row.items()
                }
            rows.append(row)
    history = as_history(rows)
    want = _by_the_rule(rows)
    assert list(history) == list(want)  # keys in the order first seen
    for key, (steps, values) in want.items():
        got_steps, got_values = history[key]
        assert got_steps.dtype == np.int64 and got_values.dtype == np.float64
        assert got_steps.tolist() == steps
        np.testing.assert_array_equal(got_values, values)


def test_timestamps_are_the_finite_ones_at_their_step():
    rows = [{"step": s, "timestamp": t, "a": 1.0} for s, t in [(1, 10.0), (2, math.nan), (3, 12.0)]]
    history, times = rows_history(rows)
    assert "timestamp" not in history and times[0].tolist() == [1, 3] and times[1].tolist() == [10.0, 12.0]
    assert rows_history([{"step": 1, "a": 1}])[1] is None


def test_the_mapping_form_and_the_old_home():
    h = as_history({"a": ([2, 1, 2], [0.5, 0.1, 0.7])})
    assert h["a"][0].tolist() == [1, 2] and h["a"][1].tolist() == [0.1, 0.7]
    assert findings.as_history is as_history and findings.last_per_step is last_per_step


@pytest.mark.parametrize(
    ("steps", "sorted_steps"),
    [([0, 1, 2], [0, 1, 2]), ([2, 0, 1], [0, 1, 2]), ([0, 1, 1], [0, 1])],
    ids=["in-order", "out-of-order", "step-twice"],
)
def test_keys_sharing_one_steps_array_are_each_put_in_order(steps, sorted_steps):
    shared = np.asarray(steps, dtype=np.int64)
    data = {"a": (shared, np.array([0.1, 0.2, 0.3])), "b": (shared, np.array([1.0, 2.0, 3.0]))}
    h = as_history(data)
    for key, (s, v) in h.items():
        expected = {st: val for st, val in zip(steps, data[key][1].tolist(), strict=True)}  # last kept
        assert s.tolist() == sorted_steps and v.tolist() == [expected[st] for st in sorted_steps]
    assert (h["a"][0] is shared) == (steps == sorted_steps)  # in order: the very array, not a copy


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        (3, TypeError, "history must be a list of rows or a mapping key -> .steps, values.; got int"),
        ([{"a": 1}, [1]], TypeError, "history rows must be dicts; got list"),
        ({"a": 1.0}, TypeError, r"history\['a'\] must be a \(steps, values\) pair; got float"),
        ({"a": ([1, 2], [1.0])}, ValueError, r"history\['a'\]: 2 steps but 1 values"),
    ],
    ids=["not-rows", "row-not-a-dict", "not-a-pair", "lengths-differ"],
)
def test_bad_histories(data, error, match):
    with pytest.raises(error, match=match):
        as_history(data)
