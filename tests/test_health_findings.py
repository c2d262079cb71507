"""rlmetrics.health.findings: the types a diagnosis returns (Finding, Skipped, Diagnosis), their checks,
their words and their JSON form, against values written out by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rlmetrics.health.findings import ERROR, SEVERITIES, WARNING, Diagnosis, Finding, Skipped

GRAD = Finding(
    "grad_spike",
    "warning",
    12,
    ("actor/grad_norm",),
    {"ratio": 12.3456, "window": {"lo": 0.000123456, "hi": 3}, "at": (1, 2.5), "key": "a/b"},
    "clip gradients",
)
NAN = Finding("nonfinite", "error", 7, ("actor/pg_loss", "critic/vf_loss"), category="by_data_source/gsm8k")


def test_from_dict_errors_name_the_missing_fields():
    with pytest.raises(ValueError, match=r"needs step, metric"):
        Finding.from_dict({"kind": "nonfinite", "severity": "error"})
    with pytest.raises(ValueError, match=r"names no other categories"):
        Finding("nonfinite", "error", 1, (), category="by_a/b", categories=("by_a/c",))


def test_severities_are_warning_and_error_and_nothing_else():
    assert SEVERITIES == (WARNING, ERROR) == ("warning", "error")
    with pytest.raises(ValueError, match=r"severity must be one of \('warning', 'error'\); got 'fatal'"):
        Finding("kl_drift", "fatal", 3, ())


@pytest.mark.parametrize(
    ("finding", "where"),
    [
        (Finding("kl_drift", "warning", 3, ()), "run"),
        (NAN, "by_data_source/gsm8k"),
        (Finding("kl_drift", "warning", 3, (), categories=("by_x/a", "by_x/b")), "run (also by_x/a, by_x/b)"),
    ],
    ids=["run", "category", "run-and-folded"],
)
def test_where(finding, where):
    assert finding.where == where


def test_evidence_text_writes_nested_values_and_floats_to_four_digits():
    assert GRAD.evidence_text() == "ratio=12.35, window={lo: 0.0001235, hi: 3}, at=[1, 2.5], key=a/b"
    assert NAN.evidence_text() == ""


def test_to_dict_is_the_json_form_and_from_dict_reads_it_back():
    want = {
        "kind": "nonfinite",
        "severity": "error",
        "step": 7,
        "metric": ["actor/pg_loss", "critic/vf_loss"],
        "evidence": {},
        "advice": "",
        "category": "by_data_source/gsm8k",
        "categories": [],
    }
    assert NAN.to_dict() == want
    back = json.loads(json.dumps(GRAD.to_dict()))
    assert back["evidence"]["at"] == [1, 2.5]  # the tuple comes back a list
    again = Finding.from_dict(back)
    assert again.metric == ("actor/grad_norm",) and again.evidence_text() == GRAD.evidence_text()
    assert Finding.from_dict(json.loads(json.dumps(NAN.to_dict()))) == NAN


def test_from_dict_fills_the_optional_fields_and_converts_types():
    got = Finding.from_dict({"kind": "kl_drift", "severity": "warning", "step": "40", "metric": ["k"]})
    assert got == Finding("kl_drift", "warning", 40, ("k",), {}, "", None, ())
    assert isinstance(got.step, int) and isinstance(got.metric, tuple)


def test_a_finding_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        NAN.step = 8  # type: ignore[misc]


def test_diagnosis_reads_as_its_findings():
    skipped = Skipped("critic_failure", "no critic/vf_explained_var")
    d = Diagnosis((NAN, GRAD), (skipped,), ("by_data_source/gsm8k",))
    assert list(d) == [NAN, GRAD] and len(d) == 2 and d.has_error
    assert not Diagnosis((GRAD,)).has_error and len(Diagnosis(())) == 0
    assert skipped.to_dict() == {
        "kind": "critic_failure",
        "why": "no critic/vf_explained_var",
        "not_logged": False,
    }
    assert Skipped("kl_drift", "needs kl_ref", not_logged=True).to_dict()["not_logged"] is True
    out = d.to_dict()
    assert out == {
        "findings": [NAN.to_dict(), GRAD.to_dict()],
        "skipped": [{"kind": "critic_failure", "why": "no critic/vf_explained_var", "not_logged": False}],
        "categories": ["by_data_source/gsm8k"],
    }
