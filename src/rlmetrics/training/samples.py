"""Sample tables: a small, deterministic sample of one step's rollouts to read beside the metrics.

:func:`select_samples` picks from a step's ``B`` rollouts the one with the highest reward, the one
with the lowest, the median one and ``n_random`` more drawn at random (from a generator seeded with
``(seed, step)``: the same run draws the same rows, the global RNG is left alone), never a row
twice, at most ``max_rows`` rows; it then cuts the longest prompts and responses so that the texts
kept fit ``max_bytes`` bytes of UTF-8 (each cut text ends with :data:`TRUNCATION_MARKER`). The
result is a :class:`SampleTable`, which :meth:`Tracker.log_samples
<rlmetrics.tracking.Tracker.log_samples>` writes to each backend in its own form and
:func:`rlmetrics.readers.samples.read_samples` reads back from ``samples.jsonl``.

Examples
--------
>>> table = select_samples(
...     ["1+1=", "2+2=", "3+3="], ["2", "5", "6"], [1.0, 0.0, 0.5], n_random=0, step=7
... )
>>> table.chosen, table.response, table.step
(('max', 'min', 'median'), ('2', '5', '6'), (7, 7, 7))
>>> table.rows()[0]["prompt"]
'1+1='
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import describe, is_torch_array
from rlmetrics._core.checks import check_int, check_seed

__all__ = [
    "CHOSEN_MAX",
    "CHOSEN_MEDIAN",
    "CHOSEN_MIN",
    "CHOSEN_RANDOM",
    "CHOSEN_VALUES",
    "MIN_CELL_BYTES",
    "TRUNCATION_MARKER",
    "SampleTable",
    "choose_samples",
    "select_samples",
]

#: Why a row was chosen (the ``chosen`` column), in the order rows are chosen.
CHOSEN_MAX, CHOSEN_MIN, CHOSEN_MEDIAN, CHOSEN_RANDOM = "max", "min", "median", "random"
CHOSEN_VALUES = (CHOSEN_MAX, CHOSEN_MIN, CHOSEN_MEDIAN, CHOSEN_RANDOM)

#: The end of a text cut to fit the byte budget.
TRUNCATION_MARKER = "…[truncated]"
_MARKER_BYTES = len(TRUNCATION_MARKER.encode("utf-8"))

#: The fewest bytes a cut text keeps (the marker included): rows the budget cannot give that
#: much are left out, the last chosen first.
MIN_CELL_BYTES = 64


@dataclasses.dataclass(frozen=True)
class SampleTable:
    """Rows of sample rollouts, column by column (every column a tuple of one length ``R``).

    Attributes
    ----------
    step : tuple of (int or None), shape (R,)
        The training step of each row (None: not given).
    prompt, response : tuple of str, shape (R,)
        The texts, cut to the byte budget (a cut text ends with :data:`TRUNCATION_MARKER`).
    reward : tuple of float, shape (R,)
    length : tuple of (int or None), shape (R,)
        The response length in tokens as given (None: not given).
    stop_reason, category : tuple of (str or None), shape (R,)
        Why generation stopped and the sample's category (data source, task), as given.
    chosen : tuple of str, shape (R,)
        Why the row was chosen: ``"max"``, ``"min"``, ``"median"`` (reward) or ``"random"``.

    Examples
    --------
    >>> t = SampleTable(step=(3,), prompt=("p",), response=("r",), reward=(1.0,), length=(None,),
    ...                 stop_reason=("stop",), category=(None,), chosen=("max",))
    >>> len(t), t.as_dict()["reward"]
    (1, [1.0])
    """

    step: tuple[int | None, ...]
    prompt: tuple[str, ...]
    response: tuple[str, ...]
    reward: tuple[float, ...]
    length: tuple[int | None, ...]
    stop_reason: tuple[str | None, ...]
    category: tuple[str | None, ...]
    chosen: tuple[str, ...]

    def __post_init__(self) -> None:
        sizes = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, str | bytes) or not isinstance(value, Sequence):
                raise TypeError(f"SampleTable.{field.name} must be a sequence; got {type(value).__name__}")
            object.__setattr__(self, field.name, tuple(value))
            sizes[field.name] = len(value)
        if len(set(sizes.values())) > 1:
            raise ValueError(f"SampleTable columns must have one length; got {sizes}")
        bad = [c for c in self.chosen if c not in CHOSEN_VALUES]
        if bad:
            raise ValueError(f"SampleTable.chosen must hold values of {CHOSEN_VALUES}; got {bad[0]!r}")

    def __len__(self) -> int:
        return len(self.chosen)

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names, in order (:data:`rlmetrics.keys.SAMPLES_COLUMNS`)."""
        return K.SAMPLES_COLUMNS

    def as_dict(self) -> dict[str, list[Any]]:
        """The columns as ``{name: list}``, in :data:`rlmetrics.keys.SAMPLES_COLUMNS` order."""
        return {name: list(getattr(self, name)) for name in K.SAMPLES_COLUMNS}

    def rows(self) -> list[dict[str, Any]]:
        """The rows as dicts ``{column: value}`` (the lines of ``samples.jsonl`` with their step)."""
        columns = [getattr(self, name) for name in K.SAMPLES_COLUMNS]
        return [dict(zip(K.SAMPLES_COLUMNS, values, strict=True)) for values in zip(*columns, strict=True)]

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]]) -> SampleTable:
        """The table of ``rows`` (dicts with the columns of :data:`rlmetrics.keys.SAMPLES_COLUMNS`;
        a missing one is None)."""
        columns: dict[str, Any] = {name: tuple(row.get(name) for row in rows) for name in K.SAMPLES_COLUMNS}
        return cls(**columns)


# --- argument checks ------------------------------------------------------------------------------


def _check_texts(values: Any, name: str, n: int | None, *, optional: bool = False) -> list[Any]:
    """``values`` as a list of ``n`` str (None too when ``optional``), or an error naming ``name``."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(f"{name} must be a sequence of str (one per rollout); got {type(values).__name__}")
    out = list(values)
    if n is not None and len(out) != n:
        raise ValueError(f"{name} must have one entry per prompt ({n}); got {len(out)}")
    for i, v in enumerate(out):
        if not (isinstance(v, str) or (optional and v is None)):
            what = "a str or None" if optional else "a str"
            raise TypeError(f"{name}[{i}] must be {what}; got {type(v).__name__} {v!r:.60}")
        if isinstance(v, str):
            out[i] = _valid_utf8(v)
    return out


def _valid_utf8(text: str) -> str:
    """``text`` with each lone surrogate (a str no backend can write as UTF-8) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return str(text)  # a numpy str_ as a plain str


def _host_vector(values: Any, name: str, n: int | None) -> np.ndarray:
    """``values`` as a 1-d float64 host array of ``n`` entries (None: any), or an error naming ``name``."""
    if is_torch_array(values):
        values = values.detach().to("cpu").double().numpy()
    if isinstance(values, str | bytes):
        raise TypeError(f"{name} must be a 1-d array of numbers; got {type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-d array of numbers; got {describe(values)}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must have shape ({'B' if n is None else n},); got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} must have one entry per prompt ({n}); got {arr.shape[0]}")
    return arr


def _check_rewards(rewards: Any, n: int | None) -> np.ndarray:
    arr = _host_vector(rewards, "rewards", n)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(f"rewards must be finite; rewards[{bad[0]}] is {arr[bad[0]]}")
    return arr


def _check_lengths(lengths: Any, n: int) -> list[int | None]:
    if lengths is None:
        return [None] * n
    arr = _host_vector(lengths, "lengths", n)
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0) | (arr != np.round(arr)))
    if bad.size:
        raise ValueError(f"lengths must be integers >= 0; lengths[{bad[0]}] is {arr[bad[0]]}")
    return [int(v) for v in arr]


# --- choosing the rows ----------------------------------------------------------------------------


def _choose(
    rewards: np.ndarray, n_random: int, max_rows: int, seed: int, step: int | None
) -> list[tuple[int, str]]:
    """(index, why) of the rows chosen, in order: max, min, median (the lower one), then random."""
    n = rewards.shape[0]
    if n == 0:
        return []
    order = np.argsort(rewards, kind="stable")  # ties in index order
    picks = [(int(np.argmax(rewards)), CHOSEN_MAX), (int(np.argmin(rewards)), CHOSEN_MIN)]
    picks.append((int(order[(n - 1) // 2]), CHOSEN_MEDIAN))
    chosen: list[tuple[int, str]] = []
    for index, why in picks:
        if all(index != i for i, _ in chosen) and len(chosen) < max_rows:
            chosen.append((index, why))
    taken = {i for i, _ in chosen}
    pool = np.array([i for i in range(n) if i not in taken], dtype=np.int64)
    k = min(n_random, pool.shape[0], max_rows - len(chosen))
    if k > 0:
        rng = np.random.default_rng((seed,) if step is None else (seed, step))
        drawn = np.sort(rng.choice(pool, size=k, replace=False))
        chosen.extend((int(i), CHOSEN_RANDOM) for i in drawn)
    return chosen


def _cap(sizes: list[int], budget: int) -> int:
    """The largest ``c`` with ``sum(min(s, c) for s in sizes) <= budget`` (at most ``max(sizes)``)."""
    top = max(sizes, default=0)
    if sum(sizes) <= budget:
        return top
    lo, hi = 0, top  # sum(min(s, lo)) <= budget < sum(min(s, hi))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sum(min(s, mid) for s in sizes) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def _cut(text: str, size: int, cap: int) -> str:
    """``text`` (``size`` bytes of UTF-8) cut to at most ``cap`` bytes, the marker included."""
    if size <= cap:
        return text
    head = text.encode("utf-8")[: max(cap - _MARKER_BYTES, 0)].decode("utf-8", errors="ignore")
    return head + TRUNCATION_MARKER


def _fit(prompts: list[str], responses: list[str], max_bytes: int) -> tuple[int, int]:
    """How many of the rows fit the budget, and the byte cap of each text."""
    sizes = [len(t.encode("utf-8")) for pair in zip(prompts, responses, strict=True) for t in pair]
    rows = len(prompts)
    while rows:
        cells = sizes[: 2 * rows]
        cap = _cap(cells, max_bytes)
        if cap >= MIN_CELL_BYTES or all(s <= cap for s in cells):
            return rows, cap
        rows -= 1
    return 0, 0


def choose_samples(
    rewards: Any, *, n_random: int = 4, max_rows: int = 16, seed: int = 0, step: int | None = None
) -> list[tuple[int, str]]:
    """The rows :func:`select_samples` picks with these arguments, before the byte budget.

    For a caller whose texts are costly to get (token ids to decode): decode the rows named here
    and give :func:`select_samples` the others as ``""`` (they are not chosen, whatever they hold).
    The byte budget can then leave out some of these rows, the last first.

    Parameters
    ----------
    rewards : array-like of float, shape (B,)
        As :func:`select_samples`; ``n_random``, ``max_rows``, ``seed``, ``step`` too.

    Returns
    -------
    list of (int, str)
        ``(row index, why)`` in the table's order.

    Examples
    --------
    >>> choose_samples([0.1, 0.9, 0.5, 0.3], n_random=0)
    [(1, 'max'), (0, 'min'), (3, 'median')]
    """
    reward_arr = _check_rewards(rewards, None)
    n_random = check_int(n_random, "n_random", minimum=0)
    max_rows = check_int(max_rows, "max_rows", minimum=1)
    seed = check_seed(seed)
    if step is not None:
        step = check_int(step, "step", minimum=0)
    return _choose(reward_arr, n_random, max_rows, seed, step)


def select_samples(
    prompts: Sequence[str],
    responses: Sequence[str],
    rewards: Any,
    *,
    lengths: Any = None,
    stop_reasons: Sequence[str | None] | None = None,
    categories: Sequence[str | None] | None = None,
    n_random: int = 4,
    max_rows: int = 16,
    max_bytes: int = 65536,
    seed: int = 0,
    step: int | None = None,
) -> SampleTable:
    """A small deterministic sample of one step's rollouts, as a :class:`SampleTable`.

    Parameters
    ----------
    prompts, responses : sequence of str, shape (B,)
        The decoded prompt and response of each rollout.
    rewards : array-like of float, shape (B,)
        The reward (score) of each rollout: finite numbers (a list, numpy array or torch tensor).
    lengths : array-like of int, shape (B,), optional, keyword-only
        The response lengths in tokens (kept as given; None: the ``length`` column is None).
    stop_reasons, categories : sequence of (str or None), shape (B,), optional, keyword-only
        Why each generation stopped (``"stop"``, ``"length"`` ...) and its category (data source,
        task); kept as given, not counted in the byte budget. In every text a lone surrogate
        (not UTF-8) becomes U+FFFD.
    n_random : int, keyword-only
        Rows drawn at random (without replacement) from those not chosen as max, min or median.
    max_rows : int, keyword-only
        The most rows of the table (>= 1): max, min and median come first, random rows fill the rest.
    max_bytes : int, keyword-only
        The most UTF-8 bytes of all prompts and responses kept together (>= ``2 * MIN_CELL_BYTES``).
        When they are longer, every text longer than a common cap is cut to the cap (the largest
        that fits, so short texts stay whole), ending with :data:`TRUNCATION_MARKER`; rows that
        would leave a cut text fewer than :data:`MIN_CELL_BYTES` bytes are left out, the last
        chosen first.
    seed : int, keyword-only
        The random rows come from ``np.random.default_rng((seed, step))`` (``(seed,)`` without a
        step): the same step of the same run draws the same rows.
    step : int, optional, keyword-only
        The training step (>= 0), the ``step`` column.

    Returns
    -------
    SampleTable
        Its rows in order: the highest reward (the first such rollout), the lowest (the first),
        the lower median (in a stable sort by reward), then the random ones in batch order; a
        rollout that is several of these appears once, under the first. Empty when ``B == 0``.

    Raises
    ------
    TypeError, ValueError
        An argument of the wrong type or length, a non-finite reward, a negative or fractional
        length, a count out of range; the message names the argument.

    Examples
    --------
    >>> t = select_samples(["q"] * 6, list("abcdef"), [0.1, 0.9, 0.5, 0.3, 0.7, 0.2],
    ...                    n_random=2, seed=1, step=3)
    >>> list(zip(t.chosen, t.response))[:3]
    [('max', 'b'), ('min', 'a'), ('median', 'd')]
    >>> len(t), sorted(t.response[3:]) == list(t.response[3:])
    (5, True)
    """
    prompt_list = _check_texts(prompts, "prompts", None)
    n = len(prompt_list)
    response_list = _check_texts(responses, "responses", n)
    reward_arr = _check_rewards(rewards, n)
    length_list = _check_lengths(lengths, n)
    stops = (
        [None] * n if stop_reasons is None else _check_texts(stop_reasons, "stop_reasons", n, optional=True)
    )
    cats = [None] * n if categories is None else _check_texts(categories, "categories", n, optional=True)
    n_random = check_int(n_random, "n_random", minimum=0)
    max_rows = check_int(max_rows, "max_rows", minimum=1)
    max_bytes = check_int(max_bytes, "max_bytes", minimum=2 * MIN_CELL_BYTES)
    seed = check_seed(seed)
    if step is not None:
        step = check_int(step, "step", minimum=0)

    chosen = _choose(reward_arr, n_random, max_rows, seed, step)
    picked_prompts = [prompt_list[i] for i, _ in chosen]
    picked_responses = [response_list[i] for i, _ in chosen]
    rows, cap = _fit(picked_prompts, picked_responses, max_bytes)
    chosen = chosen[:rows]
    prompt_out, response_out = [], []
    for p, r in zip(picked_prompts[:rows], picked_responses[:rows], strict=True):
        prompt_out.append(_cut(p, len(p.encode("utf-8")), cap))
        response_out.append(_cut(r, len(r.encode("utf-8")), cap))
    index = [i for i, _ in chosen]
    return SampleTable(
        step=tuple(step for _ in index),
        prompt=tuple(prompt_out),
        response=tuple(response_out),
        reward=tuple(float(reward_arr[i]) for i in index),
        length=tuple(length_list[i] for i in index),
        stop_reason=tuple(stops[i] for i in index),
        category=tuple(cats[i] for i in index),
        chosen=tuple(why for _, why in chosen),
    )
