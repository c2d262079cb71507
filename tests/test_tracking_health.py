"""Tests of rlmetrics.tracking._health: a monitor's findings as records and messages."""

from __future__ import annotations

import types

from rlmetrics.tracking._health import _finding_records

# --- health records ----------------------------------------------------------------------------


def test_finding_records_value_each_severity():
    finding = types.SimpleNamespace
    records, messages = _finding_records(
        [
            finding(kind="entropy_collapse", severity="warning", step=3, advice="raise it"),
            finding(kind="nonfinite", severity="odd", step=4, advice="look"),
        ]
    )
    assert records == {"health/entropy_collapse": 1.0, "health/nonfinite": 2.0}
    assert messages[0] == "rlmetrics health: entropy_collapse (warning) from step 3: raise it"
    assert _finding_records(None) == ({}, [])
