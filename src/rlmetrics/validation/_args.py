"""Argument checks shared by the evaluation statistics (intervals, comparisons, curves).

Each returns the checked value in the form the statistics use, or raises a ``TypeError`` /
``ValueError`` that names the argument, what was expected and what came.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["check_cluster_codes", "check_counts", "check_ks", "check_level", "check_scalar", "check_vector"]


def check_level(value: Any, name: str) -> float:
    """A probability strictly between 0 and 1, or an error naming ``name``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number in (0, 1); got {type(value).__name__} {value!r}")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1); got {value!r}")
    return value


def check_scalar(value: Any, name: str, *, minimum: float | None = None) -> float:
    """A finite real number (>= ``minimum``), or an error naming ``name``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a number; got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}; got {value!r}")
    return value


def check_vector(values: Any, name: str) -> np.ndarray:
    """A 1-D float64 array of finite numbers (bools as 0/1), or an error naming ``name``."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers; got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per prompt); got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; found {float(arr[~np.isfinite(arr)][0])!r}")
    return arr


def check_counts(values: Any, name: str) -> np.ndarray:
    """A 1-D int64 array of whole numbers, or an error naming ``name``."""
    arr = np.asarray(values)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold integers; got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one count per prompt); got shape {arr.shape}")
    if arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
        bad = float(arr[~(np.isfinite(arr) & (arr == np.round(arr)))][0])
        raise ValueError(f"{name} must hold whole numbers; got {bad!r}")
    return arr.astype(np.int64)


def check_ks(ks: Any, name: str = "ks") -> np.ndarray:
    """A 1-D, non-empty, strictly increasing int64 array of k >= 1."""
    arr = np.asarray(ks)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold integers; got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of k; got shape {arr.shape}")
    if arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
        raise ValueError(f"{name} must hold whole numbers; got {arr[:5].tolist()}")
    out = arr.astype(np.int64)
    if np.any(out < 1):
        raise ValueError(f"{name} must be >= 1; got {int(out[out < 1][0])}")
    if np.any(np.diff(out) <= 0):
        raise ValueError(f"{name} must be strictly increasing; got {out[:8].tolist()}")
    return out


def check_cluster_codes(clusters: Any, p: int) -> tuple[np.ndarray, int]:
    """Cluster labels (any hashables) as codes 0..G-1 in order of first appearance, and G."""
    if isinstance(clusters, np.ndarray) and clusters.ndim == 1 and clusters.dtype.kind in "biufUS":
        if clusters.dtype.kind == "f" and np.any(np.isnan(clusters)):
            raise ValueError("clusters must not hold NaN labels")
        labels: Sequence[Any] = clusters.tolist()
    elif isinstance(clusters, np.ndarray) and clusters.ndim != 1 and clusters.dtype.kind != "O":
        raise ValueError(f"clusters must be 1-D (one label per prompt); got shape {clusters.shape}")
    elif isinstance(clusters, str | bytes) or not isinstance(clusters, Iterable):
        raise TypeError(
            f"clusters must be a sequence of labels, one per prompt; got {type(clusters).__name__}"
        )
    else:
        labels = list(clusters)
    if len(labels) != p:
        raise ValueError(f"clusters must have one label per prompt ({p}); got {len(labels)}")
    codes = np.empty(p, dtype=np.int64)
    seen: dict[Any, int] = {}
    for i, label in enumerate(labels):
        try:
            codes[i] = seen.setdefault(label, len(seen))
        except TypeError:
            raise TypeError(
                f"clusters must hold hashable labels; got {type(label).__name__} at position {i}"
            ) from None
        if isinstance(label, float) and math.isnan(label):
            raise ValueError("clusters must not hold NaN labels")
    return codes, len(seen)
