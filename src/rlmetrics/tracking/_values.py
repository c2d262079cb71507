"""Metric values converted once for every backend, and configs flattened for the trackers."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
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


def _convert(metrics: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Every value as a float, and the ``(key, reason)`` of the keys dropped.

    Keys: ``str`` subclasses (``numpy.str_``) become ``str``; a key that is not valid UTF-8 is
    dropped. Values: torch tensors reach the host in one transfer; an int too large for a
    float64 is dropped. Wrong types are a ``TypeError`` naming the key.
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key to number; got {type(metrics).__name__}")
    out: dict[str, float] = {}
    dropped: list[tuple[str, str]] = []
    tensor_keys: list[str] = []
    tensors: list[Any] = []
    for key, value in metrics.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise TypeError(f"metric keys must be strings; got {type(key).__name__} {key!r}")
            key = str.__str__(key)  # numpy.str_ and other subclasses: the plain string
            if key in out:
                dropped.append((key, "the key is given twice (as str and as a str subclass)"))
                continue
        if not key.isascii():  # the common case skips the call
            problem = _key_problem(key)
            if problem is not None:
                dropped.append((key, problem))
                continue
        if key in K.TRACKING_FIELDS:
            raise ValueError(f"metrics[{key!r}]: {key!r} is reserved by the tracker; rename the metric")
        kind = type(value)
        if kind is float or kind is np.float64 or kind is np.float32:  # the common case
            out[key] = float(value)
            continue
        if is_torch_array(value):
            if value.numel() != 1:
                raise TypeError(
                    f"metrics[{key!r}] must be a number or a one-element tensor; got shape "
                    f"{tuple(value.shape)}"
                )
            if value.is_complex() or not (
                value.is_floating_point()
                or value.dtype.is_signed
                or str(value.dtype) in ("torch.bool", "torch.uint8")
            ):
                raise TypeError(
                    f"metrics[{key!r}] must be a real number; got a tensor of dtype {value.dtype}"
                )
            tensor_keys.append(key)
            tensors.append(value.detach().reshape(()))
            out[key] = math.nan  # placeholder, keeps the key order
            continue
        if isinstance(value, np.ndarray):
            if value.size != 1:
                raise TypeError(
                    f"metrics[{key!r}] must be a number or a one-element array; got shape {value.shape}"
                )
            value = value.reshape(()).item()
        if isinstance(value, bool | np.bool_):
            out[key] = float(value)
        elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, complex):
            try:
                out[key] = float(value)
            except OverflowError:  # a Python int beyond float64's range
                dropped.append(
                    (key, f"its value, an integer of {int(value).bit_length()} bits, is beyond a float64")
                )
        else:
            raise TypeError(
                f"metrics[{key!r}] must be a number (int, float, numpy scalar, one-element array or tensor); "
                f"got {type(value).__name__} {value!r:.60}"
            )
    if tensors:
        import torch

        host = torch.stack([t.to(torch.float64) for t in tensors]).cpu().tolist()
        for key, val in zip(tensor_keys, host):
            out[key] = float(val)
    return out, dropped


def _apply_nonfinite(metrics: dict[str, float], policy: str) -> dict[str, float]:
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    if not bad or policy == "keep":
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
