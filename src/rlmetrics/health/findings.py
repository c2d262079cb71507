"""What a diagnosis returns: findings, checks that could not run, and the run history they read.

A *history* is a mapping of metric key -> ``(steps, values)``: two 1-d numpy arrays of the same
length, steps increasing, values float64 (NaN where the run logged a non-finite value). Every
reader of :mod:`rlmetrics.readers` returns one; :func:`as_history` builds one from the rows
:func:`rlmetrics.read_jsonl` returns or from a plain mapping. ``History``, :func:`as_history`
and :func:`last_per_step` are defined in :mod:`rlmetrics.readers` and re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

# the history type lives with the readers, below health/ (re-exported here, where it was first)
from rlmetrics.readers._history import History, as_history, last_per_step

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
    category : str or None
        Where it was found when it is one category's: the prefix of that category's keys
        (``"by_data_source/gsm8k"``, :func:`rlmetrics.keys.category_prefix`); None for the run.
    categories : tuple of str
        For a finding of the run: the categories that show it too (folded into it, see
        :mod:`rlmetrics.health.categories`); empty otherwise.
    """

    kind: str
    severity: str
    step: int
    metric: tuple[str, ...]
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: str = ""
    category: str | None = None
    categories: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}; got {self.severity!r}")
        if self.category is not None and self.categories:
            raise ValueError(
                f"a finding of category {self.category!r} names no other categories; got "
                f"categories={self.categories!r}"
            )

    @property
    def where(self) -> str:
        """Where it holds, in words: ``"run"``, its category, or the run and the categories folded in.

        >>> Finding("kl_drift", "warning", 3, (), category="by_data_source/gsm8k").where
        'by_data_source/gsm8k'
        >>> Finding("kl_drift", "warning", 3, (), categories=("by_data_source/a", "by_data_source/b")).where
        'run (also by_data_source/a, by_data_source/b)'
        """
        if self.category is not None:
            return self.category
        return f"run (also {', '.join(self.categories)})" if self.categories else "run"

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
        """JSON-ready form: ``kind, severity, step, metric, evidence, advice, category, categories``."""
        out = asdict(self)
        out["metric"] = list(self.metric)
        out["categories"] = list(self.categories)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """The finding of :meth:`to_dict` (read back from JSON); ``category`` and ``categories`` optional.

        >>> f = Finding("nonfinite", "error", 7, ("actor/pg_loss",), {"first_key": "actor/pg_loss"})
        >>> Finding.from_dict(f.to_dict()) == f
        True
        """
        missing = [k for k in ("kind", "severity", "step", "metric") if k not in data]
        if missing:
            raise ValueError(f"a finding's dict needs {', '.join(missing)}; got keys {sorted(data)}")
        return cls(
            str(data["kind"]),
            str(data["severity"]),
            int(data["step"]),
            tuple(data["metric"]),
            dict(data.get("evidence") or {}),
            str(data.get("advice", "")),
            data.get("category"),
            tuple(data.get("categories") or ()),
        )


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
    """A check that could not run on this history, and why.

    ``not_logged`` is True when the run logs none of the metrics the check needs (the usual
    reason: a PPO run has no GRPO group metrics, a TRL run no critic), False for any other
    reason (a run too short, a level that cannot be set).
    """

    kind: str
    why: str
    not_logged: bool = False

    def to_dict(self) -> dict[str, str | bool]:
        return {"kind": self.kind, "why": self.why, "not_logged": self.not_logged}


@dataclass(frozen=True)
class Diagnosis:
    """The findings of one run (ordered by step), the checks that could not run, and the
    categories diagnosed (their labels, ``by_<group>/<category>``; see
    :mod:`rlmetrics.health.categories`)."""

    findings: tuple[Finding, ...]
    skipped: tuple[Skipped, ...] = ()
    categories: tuple[str, ...] = ()

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
            "categories": list(self.categories),
        }
