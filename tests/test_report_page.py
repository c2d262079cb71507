"""Tests of rlmetrics.report.page: the page's data, its size, last and best values."""

from __future__ import annotations

import base64
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from report_runs import by_source, category_runs, make_run, page_payload
from rlmetrics import keys as K
from rlmetrics.report import (
    plan,
)
from rlmetrics.report.page import best_point, build_page, finite_last


def test_the_page_carries_each_curves_category_and_the_category_filter():
    from rlmetrics.health.findings import Diagnosis, Finding

    runs = category_runs()
    p = plan(runs)
    label = K.category_prefix("data_source", "math/algebra")
    finding = Finding(
        "entropy_collapse", "error", 5, (by_source(K.SCORE_MEAN, "math/algebra"),), category=label
    )
    page = build_page(
        runs, p, [Diagnosis((finding,)), Diagnosis(())], title="t", max_points=1000, smoothing=0.6
    )
    data = page_payload(page)
    assert [(c["g"], c["n"]) for c in data["cats"]] == p.categories
    assert len({c["color"] for c in data["cats"]}) == 3
    for panel, spec in zip(p.panels, data["panels"]):
        if panel.cats:
            assert [t[2] for t in spec["tr"]] == list(panel.cats)
            assert [t[0] for t in spec["tr"]] == [i for i, _ in panel.traces]
        else:
            assert all(len(t) == 2 for t in spec["tr"])
    boxes = re.findall(
        r'<input type="checkbox" data-cat="(\d+)" checked><span class="sw"[^>]*></span>([^<]*)<', page
    )
    assert boxes == [("0", "aime"), ("1", "gsm8k"), ("2", "math/algebra")]
    assert 'id="rlm-cats-count">3 of 3<' in page
    # the finding of one category says which one, and links to the panel of its metric's categories
    assert f"entropy_collapse</a> in <b>{label}</b> from step 5" in page
    assert f'href="#{p.panel_of[by_source(K.SCORE_MEAN, "math/algebra")]}"' in page
    # a run without categories: no filter
    plain = [make_run("c", {K.SCORE_MEAN: (np.arange(3.0), np.arange(3.0))})]
    assert (
        "rlm-cats"
        not in build_page(
            plain, plan(plain), [Diagnosis(())], title="t", max_points=1000, smoothing=0.6
        ).split("<main>")[0]
    )


@pytest.mark.parametrize(("n_runs", "n_steps"), [(1, 10_000), (2, 3_000)], ids=["1-run", "2-runs"])
def test_a_page_of_400_long_metrics_stays_under_15_mb(n_runs, n_steps):
    rng = np.random.default_rng(0)
    steps = np.arange(1.0, n_steps + 1)
    runs = []
    for r in range(n_runs):
        walk = np.cumsum(rng.normal(size=(n_steps, 400)), axis=0)
        run = make_run(f"r{r}", {f"g{i % 7}/m{i}": (steps, walk[:, i]) for i in range(400)})
        run.times = (steps, 1e9 + 10 * steps)
        runs.append(run)
    page = build_page(runs, plan(runs), [_diagnosis()] * n_runs, title="big", max_points=800, smoothing=0.6)
    assert 5e6 < len(page.encode()) < 15e6
    assert page.count('class="panel"') == 400
    drawn = [len(base64.b64decode(e["v"])) // 8 for e in page_payload(page)["series"]]
    assert len(drawn) == 400 * n_runs and max(drawn) <= 800 // n_runs  # the page's point budget shared


def _diagnosis():
    from rlmetrics.health.findings import Diagnosis

    return Diagnosis(())


_values = st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(values=_values, direction=st.sampled_from(["max", "min", None]))
def test_last_and_best_match_a_loop(values, direction):
    steps = np.arange(len(values), dtype=float) * 10
    v = np.asarray(values, dtype=float)
    finite = [(s, x) for s, x in zip(steps, values) if not math.isnan(x)]
    last_step, last_value = finite_last(steps, v)
    best_step, best_value = best_point(steps, v, direction)
    if not finite:
        assert math.isnan(last_step) and math.isnan(best_step)
        return
    assert (last_step, last_value) == finite[-1]
    if direction is None:
        assert math.isnan(best_value)
        return
    pick = max if direction == "max" else min
    want = pick(x for _, x in finite)
    assert best_value == want
    assert best_step == next(s for s, x in finite if x == want)  # the first step reaching it
