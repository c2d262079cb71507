"""Validation inputs as arrays: samples grouped into prompts, value columns, prediction codes.

verl's validation passes Python lists (one entry per sample) of data sources, prompt ids and
per-variable values. Here they become integer codes and float arrays once, in a few C-level
passes, and every later stage works on those.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "Column",
    "Predictions",
    "Prompts",
    "as_list",
    "factorize",
    "group_prompts",
    "local_codes",
    "predictions",
    "read_column",
    "unique_rows",
]

# Elements per block of the first-occurrence comparison (bounds its temporary to tens of MB).
_BLOCK = 1 << 22
_NUMERIC_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


def as_list(x: Any, name: str) -> list[Any]:
    """``x`` (a list, tuple, numpy array or torch tensor) as a list; a clear error otherwise.

    A list is returned as it is (a copy of a million items costs milliseconds and GC passes).

    Examples
    --------
    >>> as_list((1, 2), "sample_uids")
    [1, 2]
    >>> as_list("ab", "data_sources")
    Traceback (most recent call last):
    ...
    TypeError: data_sources must be a sequence with one entry per sample; got str
    """
    if isinstance(x, str | bytes) or not hasattr(x, "__len__"):
        raise TypeError(f"{name} must be a sequence with one entry per sample; got {type(x).__name__}")
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu().numpy()
    if type(x) is list:
        return x
    return x.tolist() if isinstance(x, np.ndarray) else list(x)


def factorize(items: Any, n: int, what: str) -> tuple[np.ndarray, dict[Any, int]]:
    """Codes ``0, 1, ...`` of hashable items in order of first appearance, and the item -> code dict.

    ``dict.setdefault`` is mapped over the items with a running counter (one C-level pass): each
    item gets the index of its first appearance, which is then ranked.

    Parameters
    ----------
    items : iterable of hashable, length n
    n : int
        Number of items.
    what : str
        The argument's name, for the error on unhashable items.

    Returns
    -------
    codes : (n,) int64
    code_of : dict, item -> code, in order of first appearance

    Examples
    --------
    >>> codes, code_of = factorize(["b", "a", "b"], 3, "x")
    >>> codes.tolist(), code_of
    ([0, 1, 0], {'b': 0, 'a': 1})
    """
    first_seen: dict[Any, int] = {}
    try:
        raw = np.fromiter(map(first_seen.setdefault, items, itertools.count()), dtype=np.int64, count=n)
    except TypeError as err:
        raise TypeError(f"{what} must hold hashable values ({err})") from None
    firsts = np.flatnonzero(raw == np.arange(n))
    rank = np.empty(n, dtype=np.int64)
    rank[firsts] = np.arange(firsts.shape[0])
    return rank[raw], dict(zip(first_seen, range(len(first_seen))))


class Prompts(NamedTuple):
    """Samples grouped into prompts ``(source, uid)``, numbered in order of first appearance
    (verl's nested-dict order)."""

    #: (n,) prompt of each sample
    pid: np.ndarray
    #: (n,) sample indices grouped by prompt, in sample order within a prompt
    order: np.ndarray
    #: (P,) samples per prompt
    sizes: np.ndarray
    #: (P,) source of each prompt, an index into ``sources``
    src_of: np.ndarray
    #: the distinct sources, in order of first appearance
    sources: list[Any]
    #: every prompt's ``(source, uid)``, built on demand
    keys: Callable[[], list[tuple[Any, Any]]]


def group_prompts(sources: list[Any], uids: list[Any], *, check_uids: bool = True) -> Prompts:
    """Group samples by ``(source, uid)``.

    When every uid belongs to one source (the usual case) the prompts are numbered like the
    uids, factorised alone (no tuple per sample); otherwise the pairs are factorised.

    Values are grouped by Python equality, and results are named by ``str()``: two sources
    that are distinct but print the same (``1`` and ``"1"``, two NaNs), or equal but print
    differently (``1`` and ``True`` or ``1.0``), would share a name or be merged unseen, so
    they are refused. The same holds for the uids of one source unless ``check_uids`` is
    False (for outputs that name no prompt). Strings and plain ints are checked at no cost.

    Raises
    ------
    TypeError
        An unhashable source or uid.
    ValueError
        Two sources (uids of one source) that print the same or are merged, as above.

    Examples
    --------
    >>> p = group_prompts(["a", "b", "a"], ["u", "u", "v"])
    >>> p.pid.tolist(), p.src_of.tolist(), p.sources, p.keys()
    ([0, 1, 2], [0, 1, 0], ['a', 'b'], [('a', 'u'), ('b', 'u'), ('a', 'v')])
    >>> group_prompts([1, "1"], ["u", "u"])
    Traceback (most recent call last):
    ...
    ValueError: data_sources holds 1 (int) and '1' (str): distinct values that print the same, ...
    """
    n = len(sources)
    what = "data_sources and sample_uids"
    uid_codes, uid_of = factorize(uids, n, what)
    try:
        distinct = set(sources)
    except TypeError as err:
        raise TypeError(f"{what} must hold hashable values ({err})") from None
    if len(distinct) == 1:  # a set keeps the first of equal items, as a dict does
        src_codes, src_code_of = np.zeros(n, dtype=np.int64), dict.fromkeys(distinct, 0)
    else:
        src_codes, src_code_of = factorize(sources, n, what)
    src_items = list(src_code_of)
    _check_names(sources, src_codes, src_items, None, "data_sources")
    src_of_uid = np.zeros(len(uid_of), dtype=np.int64)
    src_of_uid[uid_codes] = src_codes
    uid_items = list(uid_of)
    if np.array_equal(src_of_uid[uid_codes], src_codes):
        if check_uids:
            _check_names(uids, uid_codes, uid_items, (src_of_uid, src_items), "sample_uids")

        def uid_keys() -> list[tuple[Any, Any]]:
            return list(zip([src_items[c] for c in src_of_uid.tolist()], uid_of))

        return _prompts(uid_codes, src_of_uid, src_items, uid_keys)
    codes, pair_of = factorize(zip(sources, uids), n, what)
    keys = list(pair_of)
    src_index: dict[Any, int] = {}
    prompt_src = np.asarray([src_index.setdefault(k[0], len(src_index)) for k in keys], dtype=np.int64)
    if check_uids:
        _check_names(uids, codes, [k[1] for k in keys], (prompt_src, list(src_index)), "sample_uids")
    return _prompts(codes, prompt_src, list(src_index), lambda: list(keys))


def _check_names(
    items: list[Any],
    codes: np.ndarray,
    distinct: list[Any],
    within: tuple[np.ndarray, list[Any]] | None,
    what: str,
) -> None:
    """Refuse values whose ``str()`` does not tell them apart as grouping does (see group_prompts).

    ``codes[i]`` is the index in ``distinct`` of ``items[i]``; ``within``, the group (source
    code) of each distinct value and the groups' values, when names need only differ per group.
    """
    kinds = set(map(type, distinct))
    if kinds == {str}:
        return  # str() of a string is itself; no other common type equals a string
    n = len(items)
    if kinds == {int} and operator.countOf(map(type, items), int) == n:
        return  # one int type: equal exactly when they print alike
    names = list(map(str, distinct))
    groups = within[0].tolist() if within is not None else [0] * len(distinct)
    first_of: dict[tuple[int, str], int] = {}
    for i, key in enumerate(zip(groups, names)):
        j = first_of.setdefault(key, i)
        if j != i:
            where = f" in data source {within[1][groups[i]]!r}" if within is not None else ""
            if type(distinct[i]) is not type(distinct[j]):
                hint = "give them one type (e.g. all strings)"
            elif distinct[i] != distinct[i]:
                hint = "each NaN is a key of its own: give them a name"
            else:
                hint = "give them distinct names"
            raise ValueError(
                f"{what} holds {_shown(distinct[j])} and {_shown(distinct[i])}{where}: distinct values "
                f"that print the same, so their results would share one name; {hint}"
            )
    code_list = codes.tolist()
    for item, code in zip(items, code_list):
        if str(item) != names[code]:
            raise ValueError(
                f"{what} holds {_shown(distinct[code])} and {_shown(item)}: equal as Python values, so "
                "grouped together, but they print differently; give them one type (e.g. all strings)"
            )


def _shown(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _prompts(
    pid: np.ndarray, src_of: np.ndarray, sources: list[Any], keys: Callable[[], list[tuple[Any, Any]]]
) -> Prompts:
    order = np.argsort(pid, kind="stable")
    sizes = np.bincount(pid, minlength=src_of.shape[0])
    return Prompts(pid, order, sizes, src_of, sources, keys)


# ----------------------------------------------------------------------------- value columns
@dataclass(frozen=True, slots=True)
class Column:
    """One ``infos_dict`` variable, converted once.

    ``narrow`` holds float32 values when every non-None value is a float32 (verl's ``np.mean``
    then computes in float32). ``items`` keeps the raw values of mixes whose per-prompt dtype verl
    infers differently (float16, float32 among other numbers): those prompts take a per-prompt
    path for mean and std.
    """

    #: (n,) float64, 0 where None or a string
    values: np.ndarray
    #: (n,) bool
    is_none: np.ndarray
    #: (n,) bool
    is_str: np.ndarray
    #: (n,) float32 or None
    narrow: np.ndarray | None = None
    #: the raw values when their per-prompt dtype varies, else None
    items: list[Any] | None = None

    @property
    def exotic(self) -> bool:
        """Whether mean and std need the per-prompt path (see :attr:`items`)."""
        return self.items is not None


def _plain(values: np.ndarray) -> Column:
    n = values.shape[0]
    return Column(values, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))


def _text(n: int) -> Column:
    return Column(np.zeros(n), np.zeros(n, dtype=bool), np.ones(n, dtype=bool))


def read_column(col: Any, name: str, n: int) -> Column:
    """Convert one ``infos_dict`` variable of ``n`` samples (list, tuple, numpy array or tensor).

    Raises
    ------
    ValueError
        Not one value per sample, or not one-dimensional.
    TypeError
        A value that is not a number, bool, string or None.

    Examples
    --------
    >>> c = read_column([1.0, None, "x"], "acc", 3)
    >>> c.values.tolist(), c.is_none.tolist(), c.is_str.tolist()
    ([1.0, 0.0, 0.0], [False, True, False], [False, False, True])
    """
    if hasattr(col, "detach") and hasattr(col, "cpu"):
        col = col.detach().cpu().numpy()
    if len(col) != n:
        raise ValueError(
            f"infos_dict[{name!r}] must have one value per sample ({n}, the length of data_sources); "
            f"got {len(col)}"
        )
    if isinstance(col, np.ndarray) and col.dtype.kind in "biuf":
        if col.ndim != 1:
            raise ValueError(f"infos_dict[{name!r}] must be one-dimensional; got shape {col.shape}")
        values = col.astype(np.float64)
        if col.dtype == np.float32:
            return Column(values, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), narrow=col)
        if col.dtype == np.float16:
            return Column(values, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), items=list(col))
        return _plain(values)
    items = col.tolist() if isinstance(col, np.ndarray) else col if isinstance(col, list) else list(col)
    fast = _fast_numbers(items, n)
    if fast is not None:
        return _plain(fast)
    first_type = type(items[0]) if items else float
    # one type throughout (the usual case) is checked by identity, cheaper than a set of types
    types = {first_type} if operator.countOf(map(type, items), first_type) == n else set(map(type, items))
    if types <= {bool, int, float}:
        if types == {float}:
            return _plain(np.fromiter(items, dtype=np.float64, count=n))
        return _plain(np.asarray(items, dtype=np.float64) if items else np.zeros(0))
    if types == {str}:  # a text column (e.g. predictions): nothing numeric to convert
        return _text(n)
    return _mixed(items, name, n)


def _fast_numbers(items: list[Any], n: int) -> np.ndarray | None:
    """float64 values of a list of small ints or of bools in one C pass, or None."""
    first_type = type(items[0]) if items else float
    if first_type is bool or first_type is int:
        # bytes() takes exactly the integers 0 .. 255 (bools among them); anything else raises
        try:
            return np.frombuffer(bytes(items), dtype=np.uint8).astype(np.float64)
        except (TypeError, ValueError):
            pass
    if first_type is bool:
        # numpy infers bool only when every item is a bool
        try:
            as_bool = np.asarray(items)
        except (TypeError, ValueError):  # ragged items: the checks after this name the culprit
            return None
        if as_bool.dtype == np.bool_ and as_bool.shape == (n,):
            return as_bool.astype(np.float64)
    return None


def _mixed(items: list[Any], name: str, n: int) -> Column:
    """A column mixing None, strings and numbers of several types (checked one by one)."""
    is_none = np.fromiter((v is None for v in items), dtype=bool, count=n)
    is_str = np.fromiter((isinstance(v, str) for v in items), dtype=bool, count=n)
    values = np.zeros(n, dtype=np.float64)
    numeric = ~(is_none | is_str)
    kept = [v for v, ok in zip(items, numeric.tolist()) if ok]
    bad = [v for v in kept if not isinstance(v, _NUMERIC_TYPES)]
    if bad:
        raise TypeError(
            f"infos_dict[{name!r}] must hold numbers, bools, strings or None; found "
            f"{type(bad[0]).__name__} {bad[0]!r}"
        )
    if kept:
        values[numeric] = np.asarray(kept, dtype=np.float64)
    kinds = {type(v) for v in kept}
    if kinds == {np.float32}:
        narrow = np.zeros(n, dtype=np.float32)
        narrow[numeric] = values[numeric]
        return Column(values, is_none, is_str, narrow=narrow)
    if np.float32 in kinds or np.float16 in kinds:
        return Column(values, is_none, is_str, items=items)
    return Column(values, is_none, is_str)


# ----------------------------------------------------------------------------- predictions
class Predictions(NamedTuple):
    """The answers voted on for maj@k, as codes."""

    #: (n,) code of each sample's prediction in grouped (``Prompts.order``) order, -1 for None
    codes: np.ndarray
    #: (P,) whether a prompt's predictions hold no None
    complete: np.ndarray


def predictions(raw: Any, prompts: Prompts, name: str) -> Predictions:
    """Codes of the predictions ``infos_dict[name]`` (hashable values, None for missing).

    Examples
    --------
    >>> p = group_prompts(["s"] * 4, ["a", "b", "a", "b"])
    >>> pr = predictions(["x", None, "y", "x"], p, "pred")
    >>> pr.codes.tolist(), pr.complete.tolist()
    ([0, 2, -1, 0], [True, False])
    """
    items = as_list(raw, f"infos_dict[{name!r}]")
    n = prompts.pid.shape[0]
    if len(items) != n:
        raise ValueError(f"infos_dict[{name!r}] must have one value per sample ({n}); got {len(items)}")
    codes, code_of = factorize(items, n, f"infos_dict[{name!r}]")
    if None in code_of:
        codes[codes == code_of[None]] = -1
    has_none = np.bincount(prompts.pid[codes < 0], minlength=prompts.sizes.shape[0]) > 0
    return Predictions(codes[prompts.order], ~has_none)


def local_codes(codes: np.ndarray) -> np.ndarray:
    """Per row, each code replaced by the position of its first occurrence in the row.

    Parameters
    ----------
    codes : (Q, n) int

    Returns
    -------
    (Q, n) int64

    Examples
    --------
    >>> local_codes(np.array([[7, 3, 7, 3, 5]])).tolist()
    [[0, 1, 0, 1, 4]]
    """
    q, n = codes.shape
    out = np.empty((q, n), dtype=np.int64)
    if n == 0:
        return out
    step = max(1, _BLOCK // max(n * n, 1))
    for start in range(0, q, step):
        c = codes[start : start + step]
        out[start : start + step] = np.argmax(c[:, :, None] == c[:, None, :], axis=1)
    return out


def unique_rows(local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a matrix of first-occurrence codes and the row -> distinct-row index.

    Rows of up to 16 codes (each < 16) are packed into one 64-bit key, longer ones compared as
    byte strings.

    Returns
    -------
    patterns : (U, n) int64, in ascending key order
    inverse : (Q,) int64, ``local == patterns[inverse]``

    Examples
    --------
    >>> patterns, inverse = unique_rows(np.array([[0, 0, 2], [0, 1, 2], [0, 0, 2]]))
    >>> patterns.tolist(), inverse.tolist()
    ([[0, 0, 2], [0, 1, 2]], [0, 1, 0])
    """
    n = local.shape[1]
    if 0 < n <= 16:
        shifts = np.arange(0, 4 * n, 4, dtype=np.uint64)
        keys = np.bitwise_or.reduce(local.astype(np.uint64) << shifts[None, :], axis=1)
    else:
        small = np.ascontiguousarray(local.astype(np.uint8 if n <= 256 else np.int32))
        keys = small.view(np.dtype((np.void, small.dtype.itemsize * n))).ravel()
    _, first_idx, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return local[first_idx], inverse.reshape(-1)
