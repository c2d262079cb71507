"""Argument checks and the undefined-metric warning, shared by every metric family.

Each check names the argument, what was expected and what came, so that bad input fails at the
call that passed it, never deep inside.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from typing import Any

import numpy as np

from rlmetrics.errors import UndefinedMetricWarning

__all__ = ["check_int", "check_real_dtype", "check_seed", "row_mean", "warn_undefined"]


def check_int(value: Any, name: str, *, minimum: int | None = None) -> int:
    """``value`` as a Python int, or an error naming ``name``.

    Parameters
    ----------
    value : Any
        A Python or numpy integer (``bool`` is refused: ``True`` is not a count).
    name : str
        The argument's name, used in the message.
    minimum : int, optional, keyword-only
        Smallest value accepted.

    Raises
    ------
    TypeError
        ``value`` is not an integer.
    ValueError
        ``value`` is below ``minimum``.

    Examples
    --------
    >>> check_int(3, "k", minimum=1)
    3
    >>> check_int(0, "k", minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: k must be an integer >= 1; got 0
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        expected = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise TypeError(f"{name} must be {expected}; got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_seed(seed: Any, name: str = "seed") -> int:
    """``seed`` for ``numpy.random.default_rng``: an integer >= 0, or an error naming ``name``.

    Examples
    --------
    >>> check_seed(7)
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer >= 0; got -1
    """
    return check_int(seed, name, minimum=0)


# The package's directory: warnings can point at the first frame outside it.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_undefined(message: str, *, stacklevel: int | None = 3) -> float:
    """Warn that a statistic is undefined on this input, and return NaN.

    The warning is an :class:`~rlmetrics.errors.UndefinedMetricWarning` (a ``RuntimeWarning``).

    The convention of scikit-learn's undefined-metric warnings: the value is NaN, never a
    silent 0, and the warning says why. ``stacklevel=None`` attributes the warning to the
    first caller outside rlmetrics (a finaliser runs at different depths).
    """
    if stacklevel is None:
        stacklevel = 2
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            frame = frame.f_back
            stacklevel += 1
    warnings.warn(message, UndefinedMetricWarning, stacklevel=stacklevel)
    return math.nan


def row_mean(xp: Any, total: Any, count: Any) -> Any:
    """``total / count`` elementwise, 0 where ``count`` is 0 (verl's ``masked_mean`` of an empty row).

    Parameters
    ----------
    xp : array namespace
        numpy or torch, as :func:`~rlmetrics._core.array.array_namespace` gives.
    total, count : arrays of shape ``(B,)``
        Per-row sums and counts.

    Examples
    --------
    >>> import numpy as np
    >>> from rlmetrics._core.array import array_namespace
    >>> row_mean(array_namespace(np.empty(0)), np.array([3.0, 5.0]), np.array([2.0, 0.0]))
    array([1.5, 0. ])
    """
    safe = xp.where(count > 0, count, xp.ones_like(count))
    return xp.where(count > 0, total / safe, xp.zeros_like(total))


def check_real_dtype(x: Any, name: str) -> Any:
    """``x`` if its dtype is real (bool, integer or floating); else a ``TypeError`` naming ``name``.

    Casting a complex array to float drops its imaginary part (numpy warns, torch does not), so
    a complex input would give silently wrong statistics; object and string arrays are refused
    the same way. numpy arrays and torch tensors.

    Examples
    --------
    >>> import numpy as np
    >>> check_real_dtype(np.zeros(2, dtype=np.int8), "mask").dtype
    dtype('int8')
    >>> check_real_dtype(np.zeros(2, dtype=np.complex64), "batch['advantages']")
    Traceback (most recent call last):
    ...
    TypeError: batch['advantages'] must hold real numbers (bool, integer or floating); got dtype complex64
    """
    dtype = getattr(x, "dtype", None)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dtype, torch.dtype):
        ok = not dtype.is_complex
    else:
        try:
            ok = np.dtype(dtype).kind in "biuf" if dtype is not None else False
        except TypeError:
            ok = False
    if not ok:
        got = f"dtype {dtype}" if dtype is not None else type(x).__name__
        raise TypeError(f"{name} must hold real numbers (bool, integer or floating); got {got}")
    return x
