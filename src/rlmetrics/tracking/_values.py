"""Metric values converted once for every backend, and configs flattened for the trackers."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from operator import countOf
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import is_torch_array

_NONFINITE = ("keep", "drop", "error")


def _key_problem(key: str) -> str | None:
    """Why no backend can store ``key`` (None: it can be stored)."""
    if key.isascii():
        return None
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"the key is not valid UTF-8 (a lone surrogate {key[err.start]!r} at position {err.start})"
    return None


#: Value types that one ``float()`` converts exactly as the checked path does (the common case).
_PLAIN_VALUES = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32, np.bool_})


class _Converter:
    """Every step's values as floats, through a fast path for the common step.

    The common step: plain ``str`` keys already checked (the keys, in order, of the last step
    that passed the key checks), or passing them now as a whole (ASCII, none reserved), and
    values of :data:`_PLAIN_VALUES` types. Anything else goes through :func:`_convert_each`, key
    by key, with its exact errors and drops. A step with the keys of a checked step is not
    checked again: a ``str`` subclass key equal to a checked key then reaches the backends as it is.

    ``borrow=True`` (the tracker's call when no backend keeps or changes its record, see
    :class:`~rlmetrics.tracking.Backend`) returns the caller's own ``dict`` when it is a plain
    ``dict`` of plain floats, uncopied; else the result is always a new dict.
    """

    def __init__(self) -> None:
        self._keys: list[str] | None = None

    def __call__(
        self, metrics: Mapping[str, Any], borrow: bool = False
    ) -> tuple[dict[str, float], list[tuple[str, str]]]:
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a mapping of key to number; got {type(metrics).__name__}")
        keys = list(metrics)  # a list: built and compared faster than a tuple
        if keys == self._keys or self._check_keys(keys):
            values = metrics.values()
            if countOf(map(type, values), float) == len(keys):  # cheaper than a set of the types
                if borrow and type(metrics) is dict:
                    return metrics, []
                return dict(metrics), []
            if set(map(type, values)) <= _PLAIN_VALUES:
                try:
                    return dict(zip(keys, map(float, values))), []
                except OverflowError:  # a Python int beyond float64's range: the checked path says which
                    pass
        return _convert_each(metrics)

    def _check_keys(self, keys: list[str]) -> bool:
        """True (and remembered) when every key is a plain ASCII ``str`` that is not reserved."""
        if not _STR.issuperset(map(type, keys)):
            return False
        joined = "".join(keys)
        if not joined.isascii() and any(_key_problem(key) for key in keys):
            return False
        if any(field in keys for field in K.TRACKING_FIELDS):
            return False
        self._keys = keys
        return True


_STR = frozenset({str})


def _convert(metrics: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Every value as a float, and the ``(key, reason)`` of the keys dropped (no fast path)."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key to number; got {type(metrics).__name__}")
    return _convert_each(metrics)


def _convert_each(metrics: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Every value as a float, key by key, and the ``(key, reason)`` of the keys dropped.

    Keys: ``str`` subclasses (``numpy.str_``) become ``str``; a key that is not valid UTF-8 is
    dropped. Values: torch tensors reach the host in one transfer; an int too large for a
    float64 is dropped. Wrong types are a ``TypeError`` naming the key.
    """
    out: dict[str, float] = {}
    dropped: list[tuple[str, str]] = []
    tensors: dict[str, Any] = {}
    for key, value in metrics.items():
        key, problem = _plain_key(key, out)
        if problem is not None:
            dropped.append((key, problem))
            continue
        kind = type(value)
        if kind is float or kind is np.float64 or kind is np.float32:  # the common case
            out[key] = float(value)
        elif is_torch_array(value):
            tensors[key] = _scalar_tensor(key, value)
            out[key] = math.nan  # placeholder, keeps the key order
        else:
            number = _number(key, value)
            if isinstance(number, str):
                dropped.append((key, number))
            else:
                out[key] = number
    if tensors:
        import torch

        host = torch.stack([t.to(torch.float64) for t in tensors.values()]).cpu().tolist()
        out.update(zip(tensors, map(float, host)))
    return out, dropped


def _plain_key(key: Any, seen: Mapping[str, Any]) -> tuple[str, str | None]:
    """``key`` as a plain ``str`` and why it is dropped (None: kept); a reserved key is an error."""
    if type(key) is not str:
        if not isinstance(key, str):
            raise TypeError(f"metric keys must be strings; got {type(key).__name__} {key!r}")
        key = str.__str__(key)  # numpy.str_ and other subclasses: the plain string
        if key in seen:
            return key, "the key is given twice (as str and as a str subclass)"
    if not key.isascii():  # the common case skips the call
        problem = _key_problem(key)
        if problem is not None:
            return key, problem
    if key in K.TRACKING_FIELDS:
        raise ValueError(f"metrics[{key!r}]: {key!r} is reserved by the tracker; rename the metric")
    return key, None


def _scalar_tensor(key: str, value: Any) -> Any:
    """A one-element real tensor as a 0-d tensor (still on its device), or a ``TypeError``."""
    if value.numel() != 1:
        raise TypeError(
            f"metrics[{key!r}] must be a number or a one-element tensor; got shape {tuple(value.shape)}"
        )
    if value.is_complex() or not (
        value.is_floating_point()
        or value.dtype.is_signed
        or str(value.dtype) in ("torch.bool", "torch.uint8")
    ):
        raise TypeError(f"metrics[{key!r}] must be a real number; got a tensor of dtype {value.dtype}")
    return value.detach().reshape(())


def _number(key: str, value: Any) -> float | str:
    """A number or one-element array as a float, or why it is dropped; other types: ``TypeError``."""
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise TypeError(
                f"metrics[{key!r}] must be a number or a one-element array; got shape {value.shape}"
            )
        value = value.reshape(()).item()
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, complex):
        try:
            return float(value)
        except OverflowError:  # a Python int beyond float64's range
            return f"its value, an integer of {int(value).bit_length()} bits, is beyond a float64"
    raise TypeError(
        f"metrics[{key!r}] must be a number (int, float, numpy scalar, one-element array or tensor); "
        f"got {type(value).__name__} {value!r:.60}"
    )


def _apply_nonfinite(metrics: dict[str, float], policy: str) -> dict[str, float]:
    # a finite sum proves every value finite (NaN and inf propagate; only an overflow needs the loop)
    if policy == "keep" or math.isfinite(sum(metrics.values())):
        return metrics
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    if not bad:
        return metrics
    if policy == "error":
        raise ValueError(
            f"metrics[{bad[0]!r}] is {metrics[bad[0]]}; non-finite values are not allowed "
            f"(nonfinite='error'); all non-finite keys: {bad}"
        )
    return {k: v for k, v in metrics.items() if k not in bad}


def _config_to_dict(config: Any) -> dict[str, Any]:
    """A plain dict from a dict, dataclass, OmegaConf config or argparse namespace."""
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "__dict__"):
        return dict(vars(config))
    raise TypeError(
        f"config must be a dict, dataclass, OmegaConf config or namespace; got {type(config).__name__}"
    )


def _flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; two entries with one flat name are a ``ValueError``."""
    out: dict[str, Any] = {}
    origin: dict[str, tuple[Any, ...]] = {}

    def where(path: tuple[Any, ...]) -> str:
        return "config" + "".join(f"[{part!r}]" for part in path)

    def walk(mapping: Mapping[Any, Any], path: tuple[Any, ...]) -> None:
        for key, value in mapping.items():
            here = (*path, key)
            if isinstance(value, Mapping) and value:
                walk(value, here)
                continue
            name = ".".join(map(str, here))
            if name in out:
                raise ValueError(
                    f"config: {where(origin[name])} and {where(here)} both flatten to {name!r} "
                    "(MLflow's params are the flattened config); rename one"
                )
            out[name], origin[name] = value, here

    walk(config, ())
    return out


def _config_json(config: Mapping[str, Any]) -> str:
    try:
        return json.dumps(config, indent=2, sort_keys=True, default=str)
    except TypeError:  # keys of mixed types (int and str) cannot be sorted
        return json.dumps(config, indent=2, default=str)
