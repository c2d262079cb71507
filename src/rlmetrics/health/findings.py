"""What a diagnosis returns: findings, checks that could not run, and the run history they read.

A *history* is a mapping of metric key -> ``(steps, values)``: two 1-d numpy arrays of the same
length, steps increasing, values float64 (NaN where the run logged a non-finite value). Every
reader of :mod:`rlmetrics.health.sources` returns one; :func:`as_history` builds one from the
rows :func:`rlmetrics.read_jsonl` returns or from a plain mapping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ERROR",
    "SEVERITIES",
    "WARNING",
    "Diagnosis",
    "Finding",
    "History",
    "Series",
    "Skipped",
    "as_history",
    "last_per_step",
]

WARNING = "warning"
ERROR = "error"
SEVERITIES = (WARNING, ERROR)

#: metric key -> (steps, values), both 1-d numpy arrays of one length, steps increasing
History = Mapping[str, tuple[np.ndarray, np.ndarray]]


class Series(NamedTuple):
    """One metric of a history, named: the signal a rule reads.

    Attributes
    ----------
    key : str
        The metric key it was read from (e.g. ``critic/score/mean``).
    steps, values : ndarray, shape (n,)
        Its steps (increasing) and its values (float64, NaN where not finite).
    """

    key: str
    steps: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class Finding:
    """One failure mode found in a run.

    Attributes
    ----------
    kind : str
        The failure mode (``"entropy_collapse"``, ``"kl_drift"`` ...), one of
        :data:`rlmetrics.health.rules.KINDS`.
    severity : str
        ``"warning"`` or ``"error"``.
    step : int
        The first step of the window where it holds (its onset).
    metric : tuple of str
        The key(s) of the history it was read from, as the run names them.
    evidence : dict
        Values and windows behind it (JSON-serialisable numbers and strings).
    advice : str
        One sentence: what usually causes it and what to try.
    """

    kind: str
    severity: str
    step: int
    metric: tuple[str, ...]
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}; got {self.severity!r}")

    def evidence_text(self) -> str:
        """The evidence on one line, numbers to 4 significant digits.

        Examples
        --------
        >>> f = Finding("grad_spike", "warning", 3, ("actor/grad_norm",), {"ratio": 12.3456, "at": [1, 3]})
        >>> f.evidence_text()
        'ratio=12.35, at=[1, 3]'
        """
        return ", ".join(f"{k}={_evidence_value(v)}" for k, v in self.evidence.items())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``kind, severity, step, metric, evidence, advice``."""
        out = asdict(self)
        out["metric"] = list(self.metric)
        return out


def _evidence_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_evidence_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_evidence_value(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@dataclass(frozen=True)
class Skipped:
    """A check that could not run on this history, and why (e.g. the metrics it needs are absent)."""

    kind: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "why": self.why}


@dataclass(frozen=True)
class Diagnosis:
    """The findings of one run (ordered by step) and the checks that could not run."""

    findings: tuple[Finding, ...]
    skipped: tuple[Skipped, ...] = ()

    def __iter__(self) -> Iterator[Finding]:
        """The findings, in step order (a diagnosis reads as the list of its findings)."""
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    @property
    def has_error(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [s.to_dict() for s in self.skipped],
        }


def as_history(data: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A history from ``read_jsonl`` rows (dicts with a ``step``) or a mapping key -> (steps, values).

    Rows: every numeric field other than ``step`` and ``timestamp`` becomes a series; a row
    without an integer ``step`` is numbered after the previous one. Steps logged twice keep the
    last value. Non-numeric values are ignored.

    Examples
    --------
    >>> h = as_history([{"step": 0, "a": 1.0}, {"step": 1, "a": 2.0, "b": 5}])
    >>> h["a"][1].tolist(), h["b"][0].tolist()
    ([1.0, 2.0], [1])
    """
    if isinstance(data, Mapping):
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for key, pair in data.items():
            try:
                steps, values = pair
            except (TypeError, ValueError):
                raise TypeError(
                    f"history[{key!r}] must be a (steps, values) pair; got {type(pair).__name__}"
                ) from None
            s = np.asarray(steps, dtype=np.int64).reshape(-1)
            v = np.asarray(values, dtype=np.float64).reshape(-1)
            if s.shape != v.shape:
                raise ValueError(f"history[{key!r}]: {s.size} steps but {v.size} values")
            out[str(key)] = last_per_step(s, v)
        return out
    if not isinstance(data, Iterable):
        raise TypeError(
            f"history must be a list of rows or a mapping key -> (steps, values); got {type(data).__name__}"
        )
    series: dict[str, tuple[list[int], list[float]]] = {}
    step = -1
    for row in data:
        if not isinstance(row, Mapping):
            raise TypeError(f"history rows must be dicts; got {type(row).__name__}")
        raw = row.get("step")
        step = (
            int(raw)
            if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)
            else step + 1
        )
        for key, value in row.items():
            if key in ("step", "timestamp") or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            steps_of, values_of = series.setdefault(str(key), ([], []))
            steps_of.append(step)
            values_of.append(float(value))
    return {
        k: last_per_step(np.asarray(s, np.int64), np.asarray(v, np.float64)) for k, (s, v) in series.items()
    }


def last_per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by step; of a step logged twice keep the last value logged.

    Examples
    --------
    >>> [a.tolist() for a in last_per_step(np.array([2, 1, 2]), np.array([0.5, 0.1, 0.7]))]
    [[1, 2], [0.1, 0.7]]
    """
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    if steps.size > 1:
        keep = np.append(steps[1:] != steps[:-1], True)
        steps, values = steps[keep], values[keep]
    return steps, values
