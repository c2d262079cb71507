"""The report in a real browser: headless Chromium (the system package) driven by playwright.

What a person does with the page, checked against the numbers written: it loads with no error
and no network request, fits 1280 px, hovering a point shows its value, the filter hides
panels, smoothing redraws the line as TensorBoard's debiased EMA (the Python
``debiased_ema``), the log toggle, wall time on x, a run switched off in the legend, a finding's
link, integer step ticks under zoom, a thinned long series; the sample browser (a step's rows
as text, markup in a response kept inert, filters by reward, category and stop reason, search
over one step or every step, the same prompt at two steps side by side, opened from a finding's
links and from a click on a curve point, at the nearest step with samples); a metric's categories
on one chart and the category filter.

These tests need Chromium and playwright (``apt-get install -y chromium``; ``pip install
playwright``, no browser download: the system Chromium is used). Without them they fail with
that message; ``RLMETRICS_NO_BROWSER=1`` skips them. ``RLMETRICS_CHROMIUM`` names another
binary; ``RLMETRICS_SCREENSHOTS=DIR`` keeps the screenshots taken.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from rlmetrics import keys as K
from rlmetrics.health.smoothing import debiased_ema
from rlmetrics.report import write_report
from rlmetrics.report.downsample import thin

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH = 1280
LONG = 3000  # steps of run b: thinned to 400 buckets


def _chromium() -> str | None:
    named = os.environ.get("RLMETRICS_CHROMIUM")
    if named:
        return named
    for exe in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(exe)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    if os.environ.get("RLMETRICS_NO_BROWSER") == "1":
        pytest.skip("RLMETRICS_NO_BROWSER=1")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser tests need playwright: pip install -e '.[dev]' (it drives the system Chromium; "
            "RLMETRICS_NO_BROWSER=1 skips these tests)"
        )
    exe = _chromium()
    if exe is None or not Path(exe).is_file():
        pytest.fail(
            "the browser tests need Chromium: apt-get install -y chromium (or "
            "RLMETRICS_CHROMIUM=/path/to/chrome; RLMETRICS_NO_BROWSER=1 skips these tests)"
        )
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=FLAGS)
        yield b
        b.close()


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Run a (verl names, 120 steps, a NaN planted, validation with intervals) and run b (TRL
    names, 3000 steps), overlaid."""
    root = tmp_path_factory.mktemp("browser")
    rng = np.random.default_rng(7)
    rows_a = []
    for s in range(1, 121):
        row = {
            "step": s,
            "timestamp": 1.8e9 + 2.0 * s,
            K.SCORE_MEAN: float(0.3 + s / 200 + rng.normal(0, 0.03)),
            K.ACTOR_ENTROPY: float(2.0 * math.exp(-s / 60) + 0.05 + rng.normal(0, 0.01)),
            K.ACTOR_GRAD_NORM: float(1 + rng.gamma(2.0, 0.3)),
            K.ACTOR_PG_LOSS: float(rng.normal(0, 0.05)),
            K.ACTOR_LR: 1e-6,
            K.RESPONSE_LENGTH_MEAN: float(200 + s + rng.normal(0, 5)),
            "custom/positive": float(10 ** rng.uniform(-3, 3)),
        }
        if s == 60:
            row[K.ACTOR_PG_LOSS] = math.nan
        if s % 20 == 0:
            acc = min(1.0, s / 150)
            exact = K.val_metric(K.VAL_EXACT_PREFIX, "math", "acc", "mean@4")
            row |= {
                K.val_metric(K.VAL_CORE_PREFIX, "math", "acc", "mean@4"): acc,
                exact: acc,
                exact + K.CI_LOW_SUFFIX: acc - 0.1,
                exact + K.CI_HIGH_SUFFIX: acc + 0.1,
            }
        rows_a.append(row)
    rows_b = [
        {
            "step": s,
            "timestamp": 1.9e9 + 0.5 * s,
            K.TRL_REWARD: float(np.sin(s / 300) + rng.normal(0, 0.2)),
            K.TRL_ENTROPY: float(1.5 + rng.normal(0, 0.05)),
        }
        for s in range(1, LONG + 1)
    ]
    a = _write(root / "a" / "metrics.jsonl", rows_a)
    b = _write(root / "b" / "metrics.jsonl", rows_b)
    res = write_report([a, b], root / "out", title="browser test")
    assert any(f.kind == "nonfinite" for f in res.diagnoses[0].findings)
    return res


@pytest.fixture(scope="module")
def loaded(browser, report):
    """One page for the module (loading plotly.js takes a second); each test resets its controls."""
    pg = browser.new_page(viewport={"width": WIDTH, "height": 900})
    events: dict[str, list] = {"errors": [], "requests": []}
    pg.on("console", lambda m: events["errors"].append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: events["errors"].append(str(e)))
    pg.on("request", lambda r: events["requests"].append(r.url))
    pg.goto(report.html_path.as_uri())
    pg.wait_for_function("window.rlmReport && window.rlmReport.ready", timeout=20_000)
    pg.events = events
    yield pg
    pg.close()


@pytest.fixture
def page(loaded, report):
    yield loaded
    assert loaded.events["errors"] == []  # nothing a test did raised in the page
    loaded.evaluate(
        """smoothing => {
        const set = (id, prop, v, ev) => { const el = document.getElementById(id);
            if (el[prop] !== v) { el[prop] = v; el.dispatchEvent(new Event(ev)); } };
        set('rlm-filter', 'value', '', 'input'); set('rlm-smooth', 'value', String(smoothing), 'input');
        set('rlm-log', 'checked', false, 'change'); set('rlm-x', 'value', 'step', 'change');
        document.querySelectorAll('input[data-run]').forEach(cb => {
            if (!cb.checked) { cb.checked = true; cb.dispatchEvent(new Event('change')); } });
        history.replaceState(null, '', location.pathname); window.scrollTo(0, 0); }""",
        0.6,
    )
    loaded.mouse.move(0, 0)
    loaded.wait_for_function(
        "document.getElementById('rlm-count').textContent"
        " === document.querySelectorAll('.panel[data-p]').length + ' panels'"
    )


def _plot(panel_id: str) -> str:
    """A JS expression: the plotly div of a panel."""
    return f"document.getElementById('{panel_id}').querySelector('.plot')"


def _panel(report, key: str) -> str:
    return report.plan.panel_of[key]


def _show(pg, panel_id: str) -> None:
    """Scroll a panel into view (opening its group) and wait until it is drawn with the current
    controls (a panel drawn before a control changed is drawn again when it comes into view)."""
    pg.evaluate(
        """id => { const el = document.getElementById(id);
        for (let d = el.closest('details'); d; d = d.parentElement.closest('details')) d.open = true;
        el.scrollIntoView({block: 'center'}); }""",
        panel_id,
    )
    pg.wait_for_function(
        """id => { const el = document.getElementById(id);
        return el.querySelector('.plot').data !== undefined && el.dataset.stale === undefined; }""",
        arg=panel_id,
    )
    _settle(pg)


def _traces(pg, panel_id: str) -> list[dict]:
    return pg.evaluate(
        """id => document.getElementById(id).querySelector('.plot').data.map(t => ({
            name: t.name, meta: t.meta || null, x: Array.from(t.x), y: Array.from(t.y),
            opacity: t.opacity, fill: t.fill || null}))""",
        panel_id,
    )


def _settle(pg) -> None:
    pg.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _set_smoothing(pg, value: float) -> None:
    pg.evaluate(
        """v => { const s = document.getElementById('rlm-smooth'); s.value = String(v);
        s.dispatchEvent(new Event('input')); }""",
        value,
    )
    _settle(pg)


def test_loads_offline_without_errors_and_fits_1280px(page, report, tmp_path):
    assert page.events["errors"] == []
    assert all(url.startswith(("file:", "data:", "blob:", "about:")) for url in page.events["requests"])
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    assert page.evaluate("typeof Plotly") == "object"
    # the runs, their config and the findings come before the first panel
    order = page.evaluate(
        "['runs', 'findings', 'key'].map(id => document.getElementById(id).getBoundingClientRect().top)"
    )
    assert order == sorted(order)
    assert page.locator(".bar .chip").count() == 2  # one legend, in the toolbar
    shots = Path(os.environ.get("RLMETRICS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "report-top.png"))
    _show(page, _panel(report, K.RESPONSE_LENGTH_MEAN))
    page.screenshot(path=str(shots / "report-panels.png"))
    assert (shots / "report-top.png").stat().st_size > 10_000
    assert page.events["errors"] == []


def test_hovering_a_point_shows_its_value(page, report):
    pid = _panel(report, K.RESPONSE_LENGTH_MEAN)  # run a only: steps 1..120 across the panel
    _show(page, pid)
    steps, values = report.runs[0].series[K.RESPONSE_LENGTH_MEAN]
    k = 70
    box = page.evaluate(
        """([id, x, y]) => { const gd = document.getElementById(id).querySelector('.plot');
        const L = gd._fullLayout, r = gd.getBoundingClientRect();
        return [r.left + L._size.l + L.xaxis.l2p(x), r.top + L._size.t + L.yaxis.l2p(y)]; }""",
        [pid, float(steps[k]), float(values[k])],
    )
    page.mouse.move(box[0], box[1])
    page.wait_for_selector(f"#{pid} .hoverlayer text", timeout=5000)
    text = page.evaluate(f"document.querySelector('#{pid} .hoverlayer').textContent")
    assert f"{values[k]:.6g}" in text
    assert f"step {int(steps[k])}:" in text


def test_a_thinned_series_hovers_its_raw_extremes(page, report):
    pid = _panel(report, K.TRL_REWARD)
    _show(page, pid)
    steps, values = report.runs[1].series[K.TRL_REWARD]
    raw = next(t for t in _traces(page, pid) if t["meta"] == "raw" and t["name"] == "b")
    assert len(raw["x"]) <= 800 < LONG
    drawn = dict(zip(raw["x"], raw["y"]))
    assert all(drawn[s] == v for s, v in zip(steps.tolist(), values.tolist()) if s in drawn)  # raw points
    i = int(np.argmax(values))
    assert drawn[float(steps[i])] == values[i]  # the spike survives
    box = page.evaluate(
        """([id, x, y]) => { const gd = document.getElementById(id).querySelector('.plot');
        const L = gd._fullLayout, r = gd.getBoundingClientRect();
        return [r.left + L._size.l + L.xaxis.l2p(x), r.top + L._size.t + L.yaxis.l2p(y)]; }""",
        [pid, float(steps[i]), float(values[i])],
    )
    page.mouse.move(box[0], box[1])
    page.wait_for_selector(f"#{pid} .hoverlayer text", timeout=5000)
    assert f"{values[i]:.6g}" in page.evaluate(f"document.querySelector('#{pid} .hoverlayer').textContent")


def test_the_filter_hides_panels_and_rows(page, report):
    total = len(report.plan.panels)
    page.fill("#rlm-filter", "entropy")
    page.wait_for_function("document.getElementById('rlm-count').textContent.includes(' of ')")
    shown = page.evaluate(
        "Array.from(document.querySelectorAll('.panel[data-p]:not([hidden])')).map(e => e.id)"
    )
    want = [p.id for p in report.plan.panels if "entropy" in " ".join([p.title, *p.keys]).lower()]
    assert sorted(shown) == sorted(want) and 0 < len(shown) < total
    assert page.locator("#rlm-count").inner_text() == f"{len(want)} of {total} panels"
    rows = page.evaluate(
        "Array.from(document.querySelectorAll('tr[data-key]:not([hidden])')).map(e => e.dataset.key)"
    )
    assert rows and all("entropy" in r for r in rows)
    assert page.locator("#group-critic").is_hidden()  # a group with nothing left
    page.fill("#rlm-filter", "")
    page.wait_for_function(f"document.getElementById('rlm-count').textContent === '{total} panels'")
    assert page.locator(".panel[data-p]:not([hidden])").count() == total


def _reference_bucket_ema(values: np.ndarray, buckets: int, w: float) -> np.ndarray:
    """The script's EMA over bucket means, written again in Python (float32 means, as sent)."""
    t = thin(values, buckets=buckets)
    last, n, out = 0.0, 0, []
    for m, c in zip(t.means.astype(np.float32).astype(float), t.counts):
        last = last * w**c + (1 - w**c) * m
        n += c
        out.append(last / (1 - w**n))
    return np.asarray(out)


def test_smoothing_redraws_the_line_as_tensorboard_does(page, report):
    pid = _panel(report, K.SCORE_MEAN)
    _show(page, pid)
    path = f"#{pid} .scatterlayer .trace path.js-line"
    _set_smoothing(page, 0)
    tr = _traces(page, pid)
    assert [t["meta"] for t in tr if t["name"].startswith("a")] == ["raw"] and tr[0]["opacity"] == 1
    before = page.locator(path).first.get_attribute("d")
    _set_smoothing(page, 0.9)
    steps, values = report.runs[0].series[K.SCORE_MEAN]
    tr = {t["meta"]: t for t in _traces(page, pid) if t["name"].startswith("a")}
    assert set(tr) == {"raw", "smoothed"} and tr["raw"]["opacity"] < 0.5  # the raw curve kept, faint
    np.testing.assert_allclose(tr["smoothed"]["y"], debiased_ema(values, 0.9), rtol=1e-12)
    assert tr["raw"]["y"] == values.tolist()
    assert page.locator(path).nth(1).get_attribute("d") != before
    # a thinned series is smoothed over its bucket means
    pid = _panel(report, K.TRL_REWARD)
    _show(page, pid)
    tr = {t["meta"]: t for t in _traces(page, pid) if t["name"].startswith("b")}
    steps, values = report.runs[1].series[K.TRL_REWARD]
    want = _reference_bucket_ema(values, 400, 0.9)
    np.testing.assert_allclose(tr["smoothed"]["y"], want, rtol=1e-9)
    ends = thin(values, buckets=400).ends
    assert tr["smoothed"]["x"] == steps[ends].tolist()
    exact = debiased_ema(values, 0.9)[ends]
    assert np.max(np.abs(want - exact)) < 0.1 * np.std(values)  # close to the EMA of every point
    # an estimate with its interval is drawn as logged
    pid = _panel(report, K.val_metric(K.VAL_EXACT_PREFIX, "math", "acc", "mean@4"))
    _show(page, pid)
    metas = [t["meta"] for t in _traces(page, pid)]
    assert "smoothed" not in metas


def test_validation_panel_draws_the_interval_band(page, report):
    key = K.val_metric(K.VAL_EXACT_PREFIX, "math", "acc", "mean@4")
    pid = _panel(report, key)
    assert report.plan.panel_of[K.val_metric(K.VAL_CORE_PREFIX, "math", "acc", "mean@4")] == pid
    _show(page, pid)
    tr = _traces(page, pid)
    band = next(t for t in tr if t["fill"] == "toself")
    run = report.runs[0]
    lo, hi = run.series[key + K.CI_LOW_SUFFIX][1], run.series[key + K.CI_HIGH_SUFFIX][1]
    assert band["y"] == lo.tolist() + hi[::-1].tolist()


def test_log_toggle(page, report):
    pid = _panel(report, "custom/positive")
    _show(page, pid)
    page.check("#rlm-log")
    _settle(page)
    assert (
        page.evaluate(f"document.getElementById('{pid}').querySelector('.plot')._fullLayout.yaxis.type")
        == "log"
    )
    page.uncheck("#rlm-log")
    _settle(page)
    assert (
        page.evaluate(f"document.getElementById('{pid}').querySelector('.plot')._fullLayout.yaxis.type")
        == "linear"
    )


def test_wall_time_on_x(page, report):
    pid = _panel(report, K.ACTOR_GRAD_NORM)
    _show(page, pid)
    page.select_option("#rlm-x", "time")
    _settle(page)
    tr = next(t for t in _traces(page, pid) if t["meta"] == "raw")
    run = report.runs[0]
    stamps = run.times[1]
    div = 60  # the longest run (b) lasts 25 min: minutes
    np.testing.assert_allclose(tr["x"], (stamps - stamps[0]) / div, rtol=1e-12)
    title = page.evaluate(
        f"document.getElementById('{pid}').querySelector('.plot')._fullLayout.xaxis.title.text"
    )
    assert title == "wall time (min)"


def test_a_run_switched_off_in_the_legend_leaves_every_panel(page, report):
    pid = _panel(report, K.ACTOR_ENTROPY)  # a's actor/entropy and b's entropy share the key panel
    _show(page, pid)
    assert {t["name"].split(" ")[0] for t in _traces(page, pid)} == {"a", "b"}
    page.uncheck("input[data-run='1']")
    _settle(page)
    assert {t["name"].split(" ")[0] for t in _traces(page, pid)} == {"a"}
    page.check("input[data-run='1']")
    _settle(page)
    assert {t["name"].split(" ")[0] for t in _traces(page, pid)} == {"a", "b"}


def test_a_finding_links_to_its_panel_with_the_onset_marked(page, report):
    finding = next(f for f in report.diagnoses[0].findings if f.kind == "nonfinite")
    pid = _panel(report, next(k for k in finding.metric if k in report.plan.panel_of))
    page.fill("#rlm-filter", "entropy")  # hides the panel: following the link clears the filter
    page.wait_for_function("document.getElementById('rlm-count').textContent.includes(' of ')")
    page.click(f"#findings a[href='#{pid}']")
    page.wait_for_function(f"location.hash === '#{pid}'")
    page.wait_for_function(f"document.getElementById('{pid}').querySelector('.plot').data !== undefined")
    assert page.locator(f"#{pid}").is_visible()
    shapes = page.evaluate(f"{_plot(pid)}._fullLayout.shapes.map(s => [s.x0, s.line.dash])")
    assert [finding.step, "dash"] in shapes


def test_step_ticks_stay_integers_under_zoom(page, report):
    pid = _panel(report, K.ACTOR_GRAD_NORM)
    _show(page, pid)
    page.evaluate(f"Plotly.relayout({_plot(pid)}, {{'xaxis.range': [10.2, 12.7]}})")
    _settle(page)
    ticks = page.evaluate(
        f"document.getElementById('{pid}').querySelector('.plot')._fullLayout.xaxis._vals.map(v => v.x)"
    )
    assert ticks and all(float(t).is_integer() for t in ticks)


# --- the sample browser -------------------------------------------------------------------------

PROMPTS = ("What is 2+2?", "Name a prime.", "Solve x+1=3.", "Spell cat.")
ROWS = "#rlm-s-table tr[data-row]"
PAIRS = "#rlm-s-table tr[data-prompt]"
PLANTED = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


def _sample_rows() -> list[dict]:
    """Steps 2, 4, ..., 40: each prompt twice (a group), rewards, stop reasons and categories known;
    step 12's first response holds markup that must stay text."""
    rng = np.random.default_rng(3)
    rows = []
    for step in range(2, 41, 2):
        for i in range(8):
            response = (
                f"answer {step}.{i} "
                + ("loop " * (step // 10))
                + ("Banana" if step % 8 == 0 and i < 2 else "")
            )
            if step == 12 and i == 0:
                response += PLANTED
            if step == 20 and i in (5, 6):  # the repetition finding's examples: caught in a loop
                response += " and then" * 5
            rows.append(
                {
                    "step": step,
                    "prompt": PROMPTS[i // 2],
                    "response": response,
                    "reward": float(np.round(rng.random(), 3)),
                    "length": int(rng.integers(5, 500)),
                    "stop_reason": ("stop", "length")[i % 2],
                    "category": ("gsm8k", "math", None)[i % 3],
                    "chosen": "random",
                }
            )
    return rows


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory):
    """One run of 41 steps with samples at even steps, and scripted findings: one with
    ``sample_steps`` (before 10, onset 21, worst 25) and one at step 31 (no samples: 30 is nearest)."""
    from rlmetrics import report as report_module
    from rlmetrics.health.findings import Diagnosis, Finding

    root = tmp_path_factory.mktemp("samples-browser")
    rng = np.random.default_rng(5)
    metrics = [
        {"step": s, K.SCORE_MEAN: float(s / 40 + rng.normal(0, 0.02)), K.ACTOR_ENTROPY: float(2 - s / 40)}
        for s in range(1, 42)
    ]
    path = _write(root / "run" / "metrics.jsonl", metrics)
    _write(root / "run" / "samples.jsonl", _sample_rows())
    findings = (
        Finding(
            "repetition_rise",
            "warning",
            21,
            (K.SCORE_MEAN,),
            {"sample_steps": {"before": 10, "onset": 21, "worst": 25}},
        ),
        Finding("entropy_collapse", "warning", 31, (K.ACTOR_ENTROPY,), {}),
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report_module, "_diagnose", lambda run: Diagnosis(findings))
        return write_report([path], root / "out", title="samples test")


@pytest.fixture(scope="module")
def sloaded(browser, sample_report):
    pg = browser.new_page(viewport={"width": WIDTH, "height": 900})
    events: dict[str, list] = {"errors": [], "requests": []}
    pg.on("console", lambda m: events["errors"].append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: events["errors"].append(str(e)))
    pg.on("request", lambda r: events["requests"].append(r.url))
    pg.goto(sample_report.html_path.as_uri())
    pg.wait_for_function("window.rlmReport && window.rlmReport.ready && window.rlmSamples", timeout=20_000)
    pg.events = events
    yield pg
    pg.close()


@pytest.fixture
def spage(sloaded):
    """The sample page with the browser's filters cleared after each test."""
    yield sloaded
    assert sloaded.events["errors"] == []
    assert all(url.startswith(("file:", "data:", "blob:", "about:")) for url in sloaded.events["requests"])
    sloaded.evaluate(
        """() => { const set = (id, prop, v, ev) => { const el = document.getElementById(id);
            if (el[prop] !== v) { el[prop] = v; el.dispatchEvent(new Event(ev)); } };
        for (const id of ['rlm-s-wmin', 'rlm-s-wmax', 'rlm-s-q']) set(id, 'value', '', 'input');
        set('rlm-s-cat', 'value', '', 'change'); set('rlm-s-stop', 'value', '', 'change');
        set('rlm-s-all', 'checked', false, 'change'); set('rlm-s-vs', 'value', '-1', 'change');
        window.scrollTo(0, 0); }"""
    )


def _shown_rows(pg) -> list[str]:
    """The responses of the rows the browser shows, once its debounced input is drawn."""
    pg.wait_for_function("document.getElementById('samples').dataset.pending === undefined")
    return pg.evaluate(f"Array.from(document.querySelectorAll('{ROWS}')).map(tr => tr.lastChild.textContent)")


def _at(rows: list[dict], step: int) -> list[dict]:
    return [r for r in rows if r["step"] == step]


def test_the_sample_browser_shows_a_steps_rows_as_text(spage):
    rows = _sample_rows()
    assert spage.evaluate("window.rlmSamples.at(0, 12)") == 12
    assert _shown_rows(spage) == [r["response"] for r in _at(rows, 12)]
    cells = spage.evaluate(
        "Array.from(document.querySelector('#rlm-s-table tr[data-row]').children).map(td => td.textContent)"
    )
    first = _at(rows, 12)[0]
    assert cells == [
        "random",
        f"{first['reward']:.4g}",
        str(first["length"]),
        "stop",
        "gsm8k",
        first["prompt"],
        first["response"],
    ]
    # the planted markup is text: no element made, no script run
    assert spage.evaluate("window.pwned") is None
    assert spage.evaluate("document.querySelectorAll('#samples script, #samples img').length") == 0
    assert PLANTED in spage.locator("#rlm-s-table").inner_text()
    assert spage.locator("#rlm-s-info").inner_text() == "step 12: 8 rows"
    spage.click("#rlm-s-next")
    assert spage.evaluate("window.rlmSamples.state().step") == 14
    assert _shown_rows(spage) == [r["response"] for r in _at(rows, 14)]


def test_the_sample_browser_filters_by_reward_category_and_stop_reason(spage):
    rows = _at(_sample_rows(), 20)
    spage.evaluate("window.rlmSamples.at(0, 20)")
    spage.fill("#rlm-s-wmin", "0.3")
    spage.fill("#rlm-s-wmax", "0.9")
    want = [r["response"] for r in rows if 0.3 <= r["reward"] <= 0.9]
    assert _shown_rows(spage) == want and 0 < len(want) < len(rows)
    spage.fill("#rlm-s-wmin", "")
    spage.fill("#rlm-s-wmax", "")
    labels = spage.evaluate("Array.from(document.getElementById('rlm-s-cat').options).map(o => o.text)")
    assert labels == ["any", "gsm8k", "math", "(none)"]
    spage.select_option("#rlm-s-cat", label="math")
    assert _shown_rows(spage) == [r["response"] for r in rows if r["category"] == "math"]
    spage.select_option("#rlm-s-stop", label="length")
    want = [r["response"] for r in rows if r["category"] == "math" and r["stop_reason"] == "length"]
    assert _shown_rows(spage) == want
    assert spage.locator("#rlm-s-info").inner_text() == f"step 20: {len(want)} of 8 rows"
    spage.select_option("#rlm-s-cat", label="(none)")
    want = [r["response"] for r in rows if r["category"] is None and r["stop_reason"] == "length"]
    assert _shown_rows(spage) == want


def test_the_sample_browser_searches_one_step_or_every_step(spage):
    rows = _sample_rows()
    spage.evaluate("window.rlmSamples.at(0, 16)")
    spage.fill("#rlm-s-q", "banana")  # case-insensitive, in the responses of steps 8, 16, ...
    assert _shown_rows(spage) == [r["response"] for r in _at(rows, 16) if "Banana" in r["response"]]
    spage.check("#rlm-s-all")
    want = [r for r in rows if "banana" in r["response"].lower()]
    assert _shown_rows(spage) == [r["response"] for r in want]
    steps = sorted({r["step"] for r in want})
    assert spage.locator("#rlm-s-info").inner_text() == f"{len(want)} rows match at {len(steps)} of 20 steps"
    assert spage.evaluate(
        f"Array.from(document.querySelectorAll('{ROWS}')).map(tr => +tr.firstChild.textContent)"
    ) == [r["step"] for r in want]
    spage.fill("#rlm-s-q", "spell CAT")  # a prompt's text
    want = [r["response"] for r in rows if r["prompt"] == "Spell cat."]
    assert _shown_rows(spage) == want[:200] and len(want) == 40


def test_the_same_prompt_at_two_steps_side_by_side(spage):
    rows = _sample_rows()
    spage.evaluate("window.rlmSamples.at(0, 10)")
    options = spage.evaluate("Array.from(document.getElementById('rlm-s-vs').options).map(o => o.text)")
    assert options[0] == "(none)" and options[1:] == [
        f"step {s} (4 prompts)" for s in range(2, 41, 2) if s != 10
    ]
    spage.select_option("#rlm-s-vs", label="step 30 (4 prompts)")
    spage.wait_for_timeout(100)
    pairs = spage.evaluate(
        """Array.from(document.querySelectorAll('#rlm-s-table tr[data-prompt]')).map(tr => [
            tr.children[0].textContent,
            Array.from(tr.children[1].querySelectorAll('.txt')).map(d => d.textContent),
            Array.from(tr.children[2].querySelectorAll('.txt')).map(d => d.textContent)])"""
    )
    want = [
        [
            p,
            [r["response"] for r in _at(rows, 10) if r["prompt"] == p],
            [r["response"] for r in _at(rows, 30) if r["prompt"] == p],
        ]
        for p in PROMPTS
    ]
    assert pairs == want
    assert spage.locator("#rlm-s-info").inner_text().startswith("4 prompts at both steps 10 and 30")
    # a filter keeps the pairs with a row that passes, on either side
    spage.select_option("#rlm-s-cat", label="gsm8k")
    spage.fill("#rlm-s-wmin", "0.5")
    _shown_rows(spage)
    kept = spage.evaluate(
        f"Array.from(document.querySelectorAll('{PAIRS}')).map(tr => tr.children[0].textContent)"
    )
    ok = lambda r: r["category"] == "gsm8k" and r["reward"] >= 0.5  # noqa: E731
    assert kept == [
        p for p in PROMPTS if any(ok(r) for r in _at(rows, 10) + _at(rows, 30) if r["prompt"] == p)
    ]


def test_a_findings_links_open_the_browser_at_its_steps(spage, sample_report):
    links = spage.evaluate(
        """Array.from(document.querySelectorAll('#findings a.slink')).map(a =>
            [a.textContent, +a.dataset.srun, +a.dataset.sstep,
             a.dataset.svs === undefined ? null : +a.dataset.svs])"""
    )
    assert links == [
        ["before (step 10)", 0, 10, None],
        ["onset (step 20)", 0, 20, None],  # 21 has no samples: the nearest, the earlier on a tie
        ["worst (step 24)", 0, 24, None],
        ["before | onset, side by side", 0, 10, 20],
        ["onset (step 30)", 0, 30, None],
    ]
    spage.click("#findings a.slink >> nth=4")
    spage.wait_for_function("window.rlmSamples.state().step === 30")
    assert spage.evaluate("location.hash") == "#samples"
    box = spage.evaluate(
        "(r => [r.top, r.bottom])(document.getElementById('samples').getBoundingClientRect())"
    )
    assert box[0] < 900 and box[1] > 0 and spage.evaluate("window.scrollY") > 0  # scrolled to the browser
    assert spage.locator("#rlm-s-info").inner_text() == "step 30: 8 rows"  # the link names the step itself
    spage.click("#findings a.slink >> nth=3")
    spage.wait_for_function("window.rlmSamples.state().vs === 20")
    assert spage.evaluate("window.rlmSamples.state()") == {"run": 0, "step": 10, "vs": 20}
    assert spage.locator("#rlm-s-table tr[data-prompt]").count() == 4


def test_a_findings_link_marks_its_example_rows_first(spage):
    """The repetition finding's onset link (step 20) shows that step's looping rows (5 and 6) marked,
    with their reason, first (the lower reward first) and on screen; its worst step has none."""
    rows = _at(_sample_rows(), 20)
    looping = [i for i, r in enumerate(rows) if r["response"].endswith(" and then" * 4)]
    assert looping == [5, 6]
    looping.sort(key=lambda i: rows[i]["reward"])
    spage.click("#findings a.slink[data-sfind='0:0'] >> text=onset (step 20)")
    spage.wait_for_function(
        "document.getElementById('samples').dataset.finding === '0:0'"
        " && window.rlmSamples.state().step === 20"
    )
    order = looping + [i for i in range(len(rows)) if i not in looping]
    assert _shown_rows(spage) == [rows[i]["response"] for i in order]
    marked = spage.evaluate(
        f"""Array.from(document.querySelectorAll('{ROWS}')).map(tr => [tr.classList.contains('sex'),
            (w => w && w.textContent)(tr.firstChild.querySelector('.why'))])"""
    )
    assert marked == [[True, "caught in a loop"]] * 2 + [[False, None]] * (len(rows) - 2)
    box = spage.evaluate(
        "(r => [r.top, r.bottom])(document.querySelector('#rlm-s-table tr.sex').getBoundingClientRect())"
    )
    assert 0 <= box[0] and box[1] <= 900  # the first marked row is on screen
    info = "step 20: 8 rows; 2 examples of the finding marked, first"
    assert spage.locator("#rlm-s-info").inner_text() == info
    spage.click("#findings a.slink[data-sfind='0:0'] >> text=worst (step 24)")
    spage.wait_for_function("window.rlmSamples.state().step === 24")
    assert _shown_rows(spage) == [r["response"] for r in _at(_sample_rows(), 24)]
    assert spage.locator("#rlm-s-table tr.sex").count() == 0


def test_a_click_on_a_curve_point_opens_the_nearest_step_with_samples(spage, sample_report):
    pid = sample_report.plan.panel_of[K.SCORE_MEAN]
    _set_smoothing(spage, 0)
    _show(spage, pid)
    steps, values = sample_report.runs[0].series[K.SCORE_MEAN]
    # steps 31 (30 and 32 as near: the earlier), 1 (before the first), 12 (has samples)
    for k, want in ((30, 30), (0, 2), (11, 12)):
        _show(spage, pid)
        box = spage.evaluate(
            """([id, x, y]) => { const gd = document.getElementById(id).querySelector('.plot');
            const L = gd._fullLayout, r = gd.getBoundingClientRect();
            return [r.left + L._size.l + L.xaxis.l2p(x), r.top + L._size.t + L.yaxis.l2p(y)]; }""",
            [pid, float(steps[k]), float(values[k])],
        )
        spage.mouse.move(box[0], box[1])
        # plotly's click reports the hovered points: wait until the point under the mouse is step k's
        spage.wait_for_function(
            """([id, x]) => (document.getElementById(id).querySelector('.plot')._hoverdata || [])
            .some(p => p.x === x)""",
            arg=[pid, float(steps[k])],
            timeout=15_000,
        )
        spage.mouse.click(box[0], box[1])
        spage.wait_for_function(f"window.rlmSamples.state().step === {want}")
        info = spage.locator("#rlm-s-info").inner_text()
        near = "" if want == steps[k] else f" (the nearest step with samples to step {int(steps[k])})"
        assert info == f"step {want}: 8 rows{near}"
    _set_smoothing(spage, 0.6)


# --- the category filter (a run logged with group_by=) -------------------------------------------

SOURCES = ("aime", "gsm8k", "math/algebra")


@pytest.fixture(scope="module")
def cat_report(tmp_path_factory):
    """A run logged with group_by='data_source': the score and the response length of three sources."""
    root = tmp_path_factory.mktemp("categories")
    rows = []
    for s in range(1, 31):
        row = {"step": s, K.SCORE_MEAN: 0.5 + s / 100}
        for j, source in enumerate(SOURCES):
            row[K.category_key(K.SCORE_MEAN, "data_source", source)] = 0.2 * j + s / (100 + j)
            row[K.category_key(K.RESPONSE_LENGTH_MEAN, "data_source", source)] = 100.0 * (j + 1) + s
        rows.append(row)
    return write_report([_write(root / "a" / "metrics.jsonl", rows)], root / "out", title="categories")


@pytest.fixture
def cat_page(browser, cat_report):
    pg = browser.new_page(viewport={"width": WIDTH, "height": 900})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(cat_report.html_path.as_uri())
    pg.wait_for_function("window.rlmReport && window.rlmReport.ready", timeout=20_000)
    yield pg
    assert errors == []
    pg.close()


def _curves(pg, panel_id: str) -> list[tuple[str, str]]:
    """``(name, colour)`` of each raw curve drawn on a panel."""
    return [
        (t["name"], t["color"])
        for t in pg.evaluate(
            f"{_plot(panel_id)}.data.filter(t => t.meta === 'raw')"
            ".map(t => ({name: t.name, color: t.line.color}))"
        )
    ]


def test_a_metrics_categories_are_one_chart_and_the_filter_hides_them_on_every_chart(cat_page, cat_report):
    plan = cat_report.plan
    score = plan.panel_of[K.category_key(K.SCORE_MEAN, "data_source", "gsm8k")]
    length = plan.panel_of[K.category_key(K.RESPONSE_LENGTH_MEAN, "data_source", "gsm8k")]
    assert (
        score != length
        and len({plan.panel_of[K.category_key(K.SCORE_MEAN, "data_source", c)] for c in SOURCES}) == 1
    )
    colors = cat_page.evaluate(
        "JSON.parse(document.getElementById('rlm-data').textContent).cats.map(c => c.color)"
    )
    for pid in (score, length):
        _show(cat_page, pid)
        assert _curves(cat_page, pid) == [(f"a · {c}", colors[i]) for i, c in enumerate(SOURCES)]
    # the values drawn are the category's own
    _, values = cat_report.runs[0].series[K.category_key(K.SCORE_MEAN, "data_source", "math/algebra")]
    drawn = cat_page.evaluate(f"{_plot(score)}.data.find(t => t.name === 'a · math/algebra').y")
    np.testing.assert_allclose(drawn, values)
    # gsm8k off: gone from both charts (the one off screen too, once scrolled to), the count says so
    cat_page.click("#rlm-cats > summary")
    cat_page.uncheck("input[data-cat='1']")
    _settle(cat_page)
    assert cat_page.text_content("#rlm-cats-count") == "2 of 3"
    for pid in (score, length):
        _show(cat_page, pid)
        _settle(cat_page)
        assert [n for n, _ in _curves(cat_page, pid)] == ["a · aime", "a · math/algebra"]
    # none, then all, of the group
    cat_page.click(".cat-group button[data-cat-set='0']")
    _settle(cat_page)
    assert _curves(cat_page, length) == [] and cat_page.text_content("#rlm-cats-count") == "0 of 3"
    cat_page.click(".cat-group button[data-cat-set='1']")
    _settle(cat_page)
    assert len(_curves(cat_page, length)) == 3 and cat_page.text_content("#rlm-cats-count") == "3 of 3"
    # the plain score's key panel is not a category chart: the filter leaves it alone
    key = plan.panel_of[K.SCORE_MEAN]
    _show(cat_page, key)
    assert [n for n, _ in _curves(cat_page, key)] == ["a"]
    assert cat_page.evaluate("document.documentElement.scrollWidth") <= WIDTH
