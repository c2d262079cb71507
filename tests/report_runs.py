"""Runs written for the tests of rlmetrics.report: metrics.jsonl files and the page's embedded data."""

from __future__ import annotations

import json
import re

import numpy as np

from rlmetrics import keys as K
from rlmetrics.report import (
    RunCurves,
)

VAL_CORE = K.val_metric(K.VAL_CORE_PREFIX, "src", "acc", "mean@4")
VAL_EXACT = K.val_metric(K.VAL_EXACT_PREFIX, "src", "acc", "mean@4")
PASS2 = K.val_metric(K.VAL_EXACT_PREFIX, "src", "acc", "pass@2")


def write_run(path, rows, *, truncate=None, config=None):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if truncate:
        text += truncate
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if config is not None:
        (path.parent / "config.json").write_text(json.dumps(config))
    return path


def make_rows(seed, steps=12):
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, steps + 1):
        row = {
            "step": s,
            "timestamp": 1000.0 + 3.0 * s,
            K.SCORE_MEAN: float(s / steps + rng.normal(0, 0.01)),
            K.ACTOR_PG_LOSS: float(rng.normal()),
            K.ACTOR_ENTROPY: float(2 - s / steps + rng.normal(0, 0.01)),
            K.ACTOR_LR: 1e-6,
            K.RESPONSE_LENGTH_MEAN: float(10 + rng.normal()),
            K.timing_s("gen"): float(0.1 + rng.random()),
            K.PERF_THROUGHPUT: float(1000 * rng.random()),
            K.VARIANCE_PROXY_TOTAL_POWER: float(rng.random()),
        }
        if s % 4 == 0:
            acc = s / steps
            row |= {
                VAL_CORE: acc,
                VAL_EXACT: acc,
                VAL_EXACT + K.CI_LOW_SUFFIX: acc - 0.1,
                VAL_EXACT + K.CI_HIGH_SUFFIX: acc + 0.1,
                PASS2: acc,
                PASS2 + K.CI_LOW_SUFFIX: acc - 0.05,
                PASS2 + K.CI_HIGH_SUFFIX: acc + 0.05,
            }
        rows.append(row)
    return rows


def page_payload(page: str) -> dict:
    blob = re.search(r'<script type="application/json" id="rlm-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(blob)  # "<\/" is JSON's escaped "/"


def make_run(name, series):
    return RunCurves(
        name, None, {k: (np.asarray(s, float), np.asarray(v, float)) for k, (s, v) in series.items()}
    )


def by_source(key, source):
    return K.category_key(key, "data_source", source)


def category_runs():
    """Run a: the score of three sources (aime always solved: a constant), the length of two, a
    constant lr per source; run b: the score of gsm8k only."""
    s = np.arange(1.0, 9.0)
    a = make_run(
        "a",
        {
            K.SCORE_MEAN: (s, s / 10),
            by_source(K.SCORE_MEAN, "gsm8k"): (s, s / 8),
            by_source(K.SCORE_MEAN, "math/algebra"): (s, s / 12),
            by_source(K.SCORE_MEAN, "aime"): (s, np.ones(8)),
            by_source(K.RESPONSE_LENGTH_MEAN, "gsm8k"): (s, 100 + s),
            by_source(K.RESPONSE_LENGTH_MEAN, "aime"): (s, 300 - s),
            by_source(K.ACTOR_LR, "gsm8k"): (s, np.full(8, 1e-6)),
            by_source(K.ACTOR_LR, "aime"): (s, np.full(8, 1e-6)),
        },
    )
    b = make_run("b", {K.SCORE_MEAN: (s, s / 9), by_source(K.SCORE_MEAN, "gsm8k"): (s, s / 7)})
    return [a, b]


# --- the findings -----------------------------------------------------------------------------------


def make_finding(kind, severity, step, *metric):
    from rlmetrics.health.findings import Finding

    return Finding(kind, severity, step, metric, {"ratio": 12.5}, f"advice on {kind}")


def script_diagnose(monkeypatch):
    """diagnose() with findings chosen by the run's name (the ``scripted_diagnose`` fixture of
    tests/conftest.py)."""
    from rlmetrics import report
    from rlmetrics.health.findings import Diagnosis, Skipped

    script = {
        "a": Diagnosis(
            (
                make_finding("grad_spike", "warning", 3, K.ACTOR_PG_LOSS),
                make_finding("kl_drift", "error", 7, "not/a_panel", K.SCORE_MEAN, K.ACTOR_PG_LOSS),
                make_finding("nonfinite", "error", 9, "not/a_panel"),
                make_finding("reward_hacking", "warning", 8, VAL_CORE),
            ),
            (Skipped("critic_failure", "no critic/vf_explained_var"),),
        ),
        "b": Diagnosis((make_finding("entropy_collapse", "warning", 4, K.ACTOR_PG_LOSS),)),
    }
    monkeypatch.setattr(report, "_diagnose", lambda run: script.get(run.name, Diagnosis(())))
