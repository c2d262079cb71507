"""One view over the batch containers that RL trainers pass around.

A ``batch`` argument anywhere in rlmetrics may be

* verl's ``DataProto`` or any object with a ``.batch`` mapping of arrays and optional
  ``.non_tensor_batch`` (numpy arrays, e.g. ``__num_turns__``) and ``.meta_info``
  (e.g. ``global_token_num``);
* a ``tensordict.TensorDict``;
* a plain ``dict`` (or any mapping) of numpy arrays or torch tensors. In a plain dict, numpy
  object/string arrays and the keys verl keeps in ``non_tensor_batch`` are found too, and a
  ``"meta_info"`` entry holding a dict is used as the meta info.

:func:`as_batch` turns any of these into a :class:`BatchView` whose lookups fail with a
``ValueError`` that names the argument, the key and the keys present.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlmetrics._core.array import check_dense, is_array, stays_torch

__all__ = ["BatchView", "as_batch"]


def _keys_of(mapping: Any) -> list[str]:
    try:
        return sorted(str(k) for k in mapping.keys())
    except Exception:  # pragma: no cover - exotic mappings
        return []


@dataclass(frozen=True)
class BatchView:
    """Read-only view of a batch: tensors, non-tensor arrays and meta info.

    Parameters
    ----------
    tensors : Mapping[str, array]
        Per-sample arrays (numpy or torch), first dimension the batch.
    non_tensors : Mapping[str, numpy.ndarray]
        Per-sample numpy arrays that are not tensors (verl's ``non_tensor_batch``).
    meta_info : Mapping[str, Any]
        Batch-level information (verl's ``meta_info``).
    arg : str
        The argument name used in error messages.
    torch_device : str or None
        Where a dict mixes numpy arrays with torch tensors on an accelerator: that device. Its
        numpy arrays are read as torch tensors there, so the metrics run in one library.
    """

    tensors: Mapping[str, Any]
    non_tensors: Mapping[str, Any] = field(default_factory=dict)
    meta_info: Mapping[str, Any] = field(default_factory=dict)
    arg: str = "batch"
    torch_device: str | None = None

    def has(self, key: str) -> bool:
        """Whether ``key`` is among the tensors."""
        return key in self.tensors

    def tensor(self, key: str, *, why: str | None = None) -> Any:
        """Return tensor ``key`` or raise a ``ValueError`` listing the keys present.

        A tensor that holds no dense data (nested, sparse, on the meta device) is refused with
        a ``TypeError`` naming it (:func:`~rlmetrics._core.array.check_dense`).
        """
        if key not in self.tensors:
            present = ", ".join(_keys_of(self.tensors)) or "none"
            reason = f" ({why})" if why else ""
            raise ValueError(f"{self.arg} is missing the tensor {key!r}{reason}; tensors present: {present}")
        name = f"{self.arg}[{key!r}]"
        value = check_dense(self.tensors[key], name)
        if self.torch_device is None or not isinstance(value, np.ndarray):
            return value
        import torch  # loaded: the batch holds torch tensors

        try:
            return torch.as_tensor(value, device=self.torch_device)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(
                f"{name} is a numpy array of dtype {value.dtype} beside torch tensors on "
                f"{self.torch_device}, and torch cannot hold it ({exc}): pass it as a torch tensor"
            ) from None

    def get(self, key: str, default: Any = None) -> Any:
        """Return tensor ``key`` if present (checked as by :meth:`tensor`), else ``default``."""
        return self.tensor(key) if key in self.tensors else default

    def non_tensor(self, key: str, default: Any = None) -> Any:
        """Return non-tensor array ``key`` if present, else ``default``."""
        return self.non_tensors[key] if key in self.non_tensors else default


# Keys that verl keeps in ``non_tensor_batch``; in a plain dict they are looked up there too.
_NON_TENSOR_HINTS = frozenset({"__num_turns__", "tool_call_counts", "uid", "data_source"})


def _torch_device(tensors: dict[str, Any]) -> str | None:
    """The one device of a dict's tensors that stay torch (an accelerator), when it also holds
    numpy arrays: those are then moved there as they are read. CPU tensors are read as numpy
    views anyway, so a CPU mix needs nothing; tensors on several devices are left for the
    families' one-device check to name."""
    if not any(isinstance(v, np.ndarray) for v in tensors.values()):
        return None
    devices = {str(v.device) for v in tensors.values() if stays_torch(v) and not v.is_nested}
    return devices.pop() if len(devices) == 1 and devices != {"meta"} else None


def as_batch(batch: Any, *, arg: str = "batch") -> BatchView:
    """Wrap ``batch`` (DataProto, TensorDict, object with ``.batch`` or dict) in a :class:`BatchView`.

    Examples
    --------
    >>> import numpy as np
    >>> view = as_batch({"advantages": np.zeros((2, 3)), "meta_info": {"global_token_num": [5, 6]}})
    >>> view.has("advantages"), view.meta_info["global_token_num"]
    (True, [5, 6])
    >>> view.tensor("returns")
    Traceback (most recent call last):
        ...
    ValueError: batch is missing the tensor 'returns'; tensors present: advantages
    """
    if isinstance(batch, BatchView):
        return batch
    # verl DataProto and look-alikes: an object with a .batch mapping.
    inner = getattr(batch, "batch", None)
    if inner is None and not isinstance(batch, Mapping) and hasattr(batch, "non_tensor_batch"):
        # a DataProto that holds no tensors (``DataProto(batch=None, ...)``)
        inner = {}
    if inner is not None and not isinstance(batch, Mapping) and hasattr(inner, "keys"):
        return BatchView(
            tensors=inner,
            non_tensors=getattr(batch, "non_tensor_batch", None) or {},
            meta_info=getattr(batch, "meta_info", None) or {},
            arg=arg,
        )
    if hasattr(batch, "keys") and hasattr(batch, "__getitem__"):
        # TensorDict (a torch container with .keys()) or a plain mapping.
        if type(batch).__name__ == "TensorDict":
            return BatchView(tensors=batch, non_tensors={}, meta_info={}, arg=arg)
        tensors: dict[str, Any] = {}
        non_tensors: dict[str, Any] = {}
        meta: Mapping[str, Any] = {}
        for key in batch.keys():
            value = batch[key]
            if key == "meta_info" and isinstance(value, Mapping):
                meta = value
                continue
            if key == "non_tensor_batch" and isinstance(value, Mapping):
                non_tensors.update(value)
                continue
            if key in _NON_TENSOR_HINTS:
                non_tensors[key] = value
            if is_array(value) and getattr(value.dtype, "kind", "") not in ("O", "U", "S", "M", "m"):
                tensors[key] = value
            elif key not in _NON_TENSOR_HINTS:
                non_tensors[key] = value
        return BatchView(tensors, non_tensors, meta, arg, torch_device=_torch_device(tensors))
    raise TypeError(
        f"{arg} must be a verl DataProto, a TensorDict, an object with a .batch mapping or a dict of "
        f"arrays; got {type(batch).__name__}"
    )
