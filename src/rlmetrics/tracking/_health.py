"""A health monitor's findings as tracker records and warning messages."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlmetrics import keys as K


def _finding_records(findings: Iterable[Any] | None) -> tuple[dict[str, float], list[str]]:
    """One ``health/<kind>`` record (its severity value) and one message per finding.

    A severity other than those of :data:`rlmetrics.keys.HEALTH_SEVERITY_VALUE` counts as an error.
    """
    records: dict[str, float] = {}
    messages: list[str] = []
    for finding in findings or ():
        kind, severity = str(finding.kind), str(finding.severity)
        records[K.health(kind)] = K.HEALTH_SEVERITY_VALUE.get(severity, K.HEALTH_SEVERITY_VALUE["error"])
        messages.append(f"rlmetrics health: {kind} ({severity}) from step {finding.step}: {finding.advice}")
    return records, messages
