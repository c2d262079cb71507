"""Benchmark: ``rlmetrics report`` at the scale of a real run (hundreds of keys, thousands of steps).

Run by hand (not a test)::

    python bench/bench_report.py                         # 400 keys x 10,000 steps, ~2 min on 2 cores
    python bench/bench_report.py --keys 200 --steps 2000 --runs 2
    python bench/bench_report.py --keys 200 --steps 1000 --samples 1000   # the report with samples

Writes a synthetic Tracker run (``metrics.jsonl`` with timestamps and a ``config.json``): the
key names of a verl GRPO run (score, entropy, KL, lengths, timings, ...) padded with more
metrics per group up to ``--keys``, random walks with spikes, 10% constant and 5% all-zero
series, validation keys (with ``/ci_low`` and ``/ci_high``) every 50 steps. Then measures:

1. ``write_report`` in this process, split into reading the runs, the health diagnosis, and
   the layout plus page; the ``rlmetrics report`` command's wall time and peak RSS in a fresh
   process (imports included, as a user feels it);
2. the HTML's size (plotly.js, about 4.8 MB, included);
3. in headless Chromium (``/usr/bin/chromium`` through playwright): the time from navigation to
   the first screen drawn (``window.rlmReport.loadMs``), and the time to redraw the visible
   panels after moving the smoothing slider and after typing a filter.

With ``--samples N`` each run also gets a ``samples.jsonl`` of N steps (spread over the run) x
``--rows`` rows (8: a GRPO group's max, min, median and random rows) of about 2 kB each (a prompt
of ~500 bytes from a pool of 256, a response of ~1.5 kB), as ``Tracker.log_samples`` writes it; the
page embeds them under its budget (``--max-sample-bytes``, default 8 MB of text). Measured too:
reading them, embedding them, the bytes embedded, and in Chromium the sample browser opened at
a step from a point (its JSON parsed on that first use) and a search over every step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "src"))

from rlmetrics import keys as K  # noqa: E402

BASE_KEYS = (
    K.SCORE_MEAN, K.SCORE_MAX, K.SCORE_MIN, K.REWARDS_MEAN, K.ADV_MEAN, K.ADV_MAX, K.ADV_MIN,
    K.RESPONSE_LENGTH_MEAN, K.RESPONSE_LENGTH_MAX, K.RESPONSE_LENGTH_MIN, K.RESPONSE_LENGTH_CLIP_RATIO,
    K.PROMPT_LENGTH_MEAN, K.ACTOR_ENTROPY, K.ACTOR_PG_LOSS, K.ACTOR_KL_LOSS, K.ACTOR_GRAD_NORM,
    K.PG_CLIPFRAC, K.PPO_KL, K.ROLLOUT_CORR_K3_KL, K.ROLLOUT_CORR_IS_MEAN, K.GRPO_FRAC_REWARD_ZERO_STD,
    K.timing_s("gen"), K.timing_s("step"), K.timing_s("update_actor"), K.PERF_THROUGHPUT, K.PERF_MFU,
)  # fmt: skip
GROUPS = ("actor", "critic", "rollout_corr", "timing_s", "perf", "grpo", "custom")
VAL_EVERY = 50


def synth_run(folder: Path, *, keys: int, steps: int, seed: int) -> Path:
    """Write a synthetic Tracker run of ``keys`` metrics x ``steps`` steps; return its metrics.jsonl."""
    rng = np.random.default_rng(seed)
    names = list(BASE_KEYS)
    val = [f"val-exact/src{j}/acc/mean@8{suffix}" for j in range(2) for suffix in ("", "/ci_low", "/ci_high")]
    i = 0
    while len(names) + len(val) < keys:
        names.append(f"{GROUPS[i % len(GROUPS)]}/metric_{i:03d}")
        i += 1
    n = len(names)
    walk = np.cumsum(rng.normal(0, 0.05, (steps, n)), axis=0) + rng.normal(0, 0.1, (steps, n))
    spikes = rng.random((steps, n)) < 1e-3
    walk[spikes] += rng.normal(0, 5, spikes.sum())
    kind = rng.random(n)
    walk[:, kind < 0.10] = np.round(rng.random(), 3)  # constant
    walk[:, (kind >= 0.10) & (kind < 0.15)] = 0.0  # all zero
    walk[rng.random((steps, n)) < 1e-4] = np.nan
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"command": "python train.py", "seed": seed, "lr": 1e-6}))
    path = folder / "metrics.jsonl"
    t0 = 1.8e9 + seed * 1e5
    with open(path, "w") as fh:
        for s in range(steps):
            row: dict[str, float] = {"step": s + 1, "timestamp": t0 + 30.0 * s + rng.random()}
            row.update(zip(names, walk[s].tolist()))
            if (s + 1) % VAL_EVERY == 0:
                for j in range(2):
                    acc = float(np.clip((s / steps) * 0.7 + rng.normal(0, 0.02), 0, 1))
                    base = f"val-exact/src{j}/acc/mean@8"
                    row |= {base: acc, base + "/ci_low": acc - 0.05, base + "/ci_high": acc + 0.05}
            fh.write(json.dumps(row) + "\n")
    return path


WORDS = tuple(
    "the of and to in is that it for as with was on be by this are or an from at which not have has "
    "but we can all one so if will there their its more also when what than into only other some "
    "step answer therefore thus total sum equals compute value result check again wait let".split()
)


def _text(rng: np.random.Generator, nbytes: int) -> str:
    words = rng.choice(WORDS, size=max(1, nbytes // 5))
    return " ".join(words.tolist())[:nbytes]


def synth_samples(folder: Path, *, steps: int, total_steps: int, rows: int, seed: int) -> int:
    """Write ``samples.jsonl`` (``steps`` steps spread over 1..total_steps, ``rows`` rows each, about
    2 kB a row) as Tracker.log_samples writes it; return its size in bytes."""
    rng = np.random.default_rng(seed)
    pool = [f"Problem {i}: " + _text(rng, 500) for i in range(256)]
    at = np.unique(np.linspace(1, total_steps, steps).round().astype(int))
    chosen = ["max", "min", "median"] + ["random"] * max(0, rows - 3)
    path = folder / "samples.jsonl"
    with open(path, "w") as fh:
        for step in at.tolist():
            for i in range(rows):
                row = {
                    "step": step,
                    "prompt": pool[int(rng.integers(len(pool)))],
                    "response": _text(rng, int(rng.integers(1000, 2000))) + " \\boxed{" + str(i) + "}",
                    "reward": float(rng.random() < 0.5),
                    "length": int(rng.integers(200, 600)),
                    "stop_reason": "length" if rng.random() < 0.1 else "stop",
                    "category": ("gsm8k", "math", "aime")[i % 3],
                    "chosen": chosen[min(i, len(chosen) - 1)],
                }
                fh.write(json.dumps(row) + "\n")
    return path.stat().st_size


def bench_build(paths: list[Path], out: Path, max_sample_bytes: int | None = None) -> dict[str, float]:
    from rlmetrics.health.rules import diagnose
    from rlmetrics.readers import read_samples
    from rlmetrics.report import MAX_SAMPLE_BYTES, load_run, plan, write_report
    from rlmetrics.report.page import build_page
    from rlmetrics.report.samples import embed_samples

    budget = MAX_SAMPLE_BYTES if max_sample_bytes is None else max_sample_bytes
    t0 = time.perf_counter()
    runs = [load_run(p) for p in paths]
    t1 = time.perf_counter()
    diagnoses = [diagnose(r.series) for r in runs]
    t2 = time.perf_counter()
    samples = embed_samples(runs, diagnoses, max_bytes=budget)
    t3 = time.perf_counter()
    build_page(runs, plan(runs), diagnoses, title="bench", max_points=800, smoothing=0.6, samples=samples)
    t4 = time.perf_counter()
    for p in paths:
        read_samples(p.parent)
    t5 = time.perf_counter()
    res = write_report(paths, out, max_sample_bytes=budget)
    page = res.html_path.read_text(encoding="utf-8")
    start = page.find('id="rlm-samples">')
    embedded = page.find("</script>", start) - start if start >= 0 else 0
    return {
        "read": t1 - t0,
        "read_samples": t5 - t4,
        "diagnose": t2 - t1,
        "embed": t3 - t2,
        "page": t4 - t3,
        "write_report": res.seconds,
        "size_mb": res.html_path.stat().st_size / 1e6,
        "samples_mb": len(page[start : start + embedded].encode("utf-8")) / 1e6 if embedded else 0.0,
        "samples_note": (res.samples.data or {}).get("note") if res.samples else None,
        "sample_steps": sum(map(len, res.samples.steps)) if res.samples else 0,
        "panels": len(res.plan.panels),
        "folded": len(res.plan.folded),
    }


def bench_cli(paths: list[Path], out: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "rlmetrics", "report", *map(str, paths), "-o", str(out)]
    t0 = time.perf_counter()
    subprocess.run(
        cmd, check=True, capture_output=True, env=os.environ | {"PYTHONPATH": str(HERE.parents[1] / "src")}
    )
    wall = time.perf_counter() - t0
    return {"cli_s": wall, "cli_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def bench_browser(html_path: Path, repeat: int, samples: bool = False) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    exe = os.environ.get("RLMETRICS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("no chromium: apt-get install -y chromium")
    loads, walls, smooth, filt, opened, searched = [], [], [], [], [], []
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        args = [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-sync",
            "--disable-background-networking",
            "--disable-component-update",
        ]
        browser = p.chromium.launch_persistent_context(
            profile, executable_path=exe, args=args, viewport={"width": 1280, "height": 900}
        )
        for _ in range(repeat):
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            t0 = time.perf_counter()
            page.goto(html_path.as_uri())
            page.wait_for_function("window.rlmReport && window.rlmReport.ready", timeout=120_000)
            walls.append(time.perf_counter() - t0)
            loads.append(page.evaluate("window.rlmReport.loadMs") / 1000)
            t0 = time.perf_counter()
            page.evaluate(
                "(() => { const s = document.getElementById('rlm-smooth'); s.value = '0.9';"
                " s.dispatchEvent(new Event('input')); })()"
            )
            page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            smooth.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            page.fill("#rlm-filter", "kl")
            page.wait_for_function("document.getElementById('rlm-count').textContent.includes(' of ')")
            filt.append(time.perf_counter() - t0)
            if samples:  # the browser at a step (its JSON parsed on this first use), then a search
                t0 = time.perf_counter()
                page.evaluate("window.rlmSamples.at(0, 500)")
                page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                opened.append(time.perf_counter() - t0)
                page.check("#rlm-s-all")
                t0 = time.perf_counter()
                page.fill("#rlm-s-q", "boxed{7}")
                page.wait_for_function("document.getElementById('samples').dataset.pending === undefined")
                searched.append(time.perf_counter() - t0)
            if errors:
                raise SystemExit(f"page errors: {errors}")
            page.close()
        browser.close()
    out = {"load_s": min(loads), "goto_s": min(walls), "smooth_s": min(smooth), "filter_s": min(filt)}
    if samples:
        out |= {"open_samples_s": min(opened), "search_s": min(searched)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=400)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=1, help="runs overlaid in one report")
    ap.add_argument("--repeat", type=int, default=3, help="browser loads (the best is reported)")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--samples", type=int, default=0, help="steps with a sample table (samples.jsonl)")
    ap.add_argument("--rows", type=int, default=8, help="rows of each sample table")
    ap.add_argument("--max-sample-bytes", type=int, default=None, help="the page's budget of sample text")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        t0 = time.perf_counter()
        paths = [
            synth_run(root / f"run{i}", keys=args.keys, steps=args.steps, seed=i) for i in range(args.runs)
        ]
        mb = sum(p.stat().st_size for p in paths) / 1e6
        smb = (
            sum(
                synth_samples(p.parent, steps=args.samples, total_steps=args.steps, rows=args.rows, seed=i)
                for i, p in enumerate(paths)
            )
            / 1e6
            if args.samples
            else 0.0
        )
        print(
            f"{args.runs} run(s) of {args.keys} keys x {args.steps} steps: {mb:.0f} MB of JSONL"
            + (
                f", samples.jsonl of {args.samples} steps x {args.rows} rows: {smb:.1f} MB"
                if args.samples
                else ""
            )
            + f" ({time.perf_counter() - t0:.1f} s to write)",
            flush=True,
        )
        b = bench_build(paths, root / "out", args.max_sample_bytes)
        print(
            f"write_report: {b['write_report']:.1f} s (read {b['read']:.1f} s, of which samples "
            f"{b['read_samples']:.2f} s; diagnose {b['diagnose']:.1f} s, "
            f"samples embedded {b['embed']:.2f} s, "
            f"layout and page {b['page']:.1f} s); {b['panels']} panels, {b['folded']} folded; "
            f"report.html {b['size_mb']:.1f} MB",
            flush=True,
        )
        if args.samples:
            print(
                f"samples: {b['sample_steps']} steps embedded, {b['samples_mb']:.2f} MB of JSON in the page; "
                f"{b['samples_note'] or 'nothing cut'}",
                flush=True,
            )
        c = bench_cli(paths, root / "out-cli")
        print(f"rlmetrics report: {c['cli_s']:.1f} s, peak RSS {c['cli_rss_mb']:.0f} MB", flush=True)
        if not args.no_browser:
            w = bench_browser(root / "out" / "report.html", args.repeat, samples=bool(args.samples))
            print(
                f"chromium: first screen drawn {w['load_s']:.2f} s after navigation (goto to ready "
                f"{w['goto_s']:.2f} s); smoothing redraw {w['smooth_s']:.2f} s; filter {w['filter_s']:.2f} s"
            )
            if args.samples:
                print(
                    f"chromium: sample browser opened at a step {w['open_samples_s']:.2f} s (first use: "
                    f"its JSON parsed); a search over every step {w['search_s']:.2f} s "
                    "(120 ms debounce included)"
                )


if __name__ == "__main__":
    main()
