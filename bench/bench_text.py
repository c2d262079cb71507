"""Benchmark of the text statistics (``compute_text_metrics``), run by hand; prints a table, asserts nothing.

1. Decoded text: 1,024 responses of about 2,000 characters (pseudo-prose over a 5,000-word
   vocabulary, every 8th response ending in a loop, thinking spans, stop reasons, a
   ``\\boxed{...}`` format check).
2. Token ids: a ``(1024, 4096)`` int64 batch (Zipf-distributed ids over a 151,936-token
   vocabulary, random response lengths, every 8th row looping), by default (no compression
   ratio: opt-in for token ids) and with ``compression=True``, beside ``compute_data_metrics``
   on the same batch (the issue's yardstick: within 3x of it), all in one interleaved run.
3. In a fresh process each (a subprocess): the first call of each (imports, numba's kernel
   load, first allocations), then their medians, against ``compute_data_metrics`` with its numba
   kernels (``rlmetrics[fast]``: numba's on-disk cache cold, i.e. compiling, then warm) and
   without them (``RLMETRICS_NO_NUMBA=1``, the plain install); the first calls of both are
   what the first step of a loop computing both feels; medians over ``--fresh-runs`` processes.
4. The ratio itself, in a process of its own for each setting (numba on, off): the token-id
   call (default options) and ``compute_data_metrics`` in turn, one ratio a pair, the median of
   the ratios and the load average (the machine may be shared: the ratio, not the milliseconds).

Usage::

    python bench/bench_text.py                 # median of 7
    python bench/bench_text.py --repeats 21 --rows 2048
    python bench/bench_text.py --fresh-only --fresh-runs 5  # only part 3
    python bench/bench_text.py --ratios-only --pairs 31     # only part 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def _interleaved_medians(fns: list, repeats: int) -> list[float]:
    """Median seconds of each function, the repeats taken in turn (after one warm-up each)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def make_texts(rows: int, chars: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Pseudo-prose responses of about ``chars`` characters, and their stop reasons."""
    rng = np.random.default_rng(seed)
    vocab = ["".join(chr(97 + c) for c in rng.integers(0, 26, size=rng.integers(2, 9))) for _ in range(5000)]
    texts, stops = [], []
    for i in range(rows):
        words: list[str] = []
        size = 0
        while size < chars:
            w = vocab[int(rng.zipf(1.3)) % len(vocab)]
            words.append(w)
            size += len(w) + 1
        if i % 8 == 0:  # a looping tail
            block = words[-6:]
            words = words[: len(words) // 2] + block * (len(words) // 12)
        body = " ".join(words)
        cut = len(body) // 3
        if i % 8 == 0:  # stuck in the thinking span until the length limit
            texts.append(f"<think>{body}")
        else:
            texts.append(f"<think>{body[:cut]}</think>{body[cut:]} \\boxed{{{i}}}")
        stops.append("length" if i % 8 == 0 else "stop")
    return texts, stops


def make_ids(rows: int, width: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = np.minimum(rng.zipf(1.2, size=(rows, width)), 151935).astype(np.int64)
    lengths = rng.integers(width // 8, width + 1, size=rows)
    for i in range(0, rows, 8):
        start = lengths[i] // 2
        ids[i, start : lengths[i]] = np.resize(ids[i, start : start + 23], lengths[i] - start)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return ids, mask


def _batch(ids: np.ndarray, mask: np.ndarray) -> dict:
    """``compute_data_metrics``' batch over the same ids (prompts of 64 tokens)."""
    rows = ids.shape[0]
    zeros = np.zeros(ids.shape, dtype=np.float32)
    return {
        "token_level_scores": zeros,
        "token_level_rewards": zeros,
        "advantages": zeros,
        "returns": zeros,
        "response_mask": mask,
        "attention_mask": np.concatenate([np.ones((rows, 64), dtype=np.int64), mask], axis=1),
        "prompts": np.zeros((rows, 64), dtype=np.int64),
        "responses": ids,
    }


SPAN = ((151646,), (151647,))
NO_NUMBA = {"RLMETRICS_NO_NUMBA": "1"}


def _fresh_process(rows: int, width: int, repeats: int) -> None:
    """In this fresh process: import, the first text (ids) and data-metrics calls, then their medians.

    Prints one line of seconds: import, first text call, first data call, text median, data median.
    """
    ids, mask = make_ids(rows, width)
    batch = _batch(ids, mask)
    t0 = time.perf_counter()
    from rlmetrics import compute_data_metrics, compute_text_metrics

    def text() -> None:
        compute_text_metrics(token_ids=ids, response_mask=mask, think_span=SPAN)

    def data() -> None:
        compute_data_metrics(batch, use_critic=False)

    t1 = time.perf_counter()
    text()
    t2 = time.perf_counter()
    data()
    t3 = time.perf_counter()
    medians = _interleaved_medians([text, data], repeats)
    print(t1 - t0, t2 - t1, t3 - t2, *medians)


def _pair_ratios(rows: int, width: int, pairs: int) -> None:
    """In this process: ``pairs`` text (ids) / data-metrics pairs in turn, after a warm-up each.

    Prints one line: median ratio, lowest, highest, text median ms, data median ms, load before,
    load after (1-minute load averages).
    """
    from rlmetrics import compute_data_metrics, compute_text_metrics

    ids, mask = make_ids(rows, width)
    batch = _batch(ids, mask)

    def text() -> None:
        compute_text_metrics(token_ids=ids, response_mask=mask, think_span=SPAN)

    def data() -> None:
        compute_data_metrics(batch, use_critic=False)

    text(), data()
    load0 = os.getloadavg()[0]
    t_text, t_data = [], []
    for k in range(pairs):
        for fn, t in ((text, t_text), (data, t_data)) if k % 2 == 0 else ((data, t_data), (text, t_text)):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    ratios = [a / b for a, b in zip(t_text, t_data)]
    med = statistics.median
    load1 = os.getloadavg()[0]
    print(med(ratios), min(ratios), max(ratios), med(t_text) * 1e3, med(t_data) * 1e3, load0, load1)


def _ratios_table(args: argparse.Namespace) -> None:
    size = f"{args.rows} x {args.width}"
    print(f"\n## ids / compute_data_metrics, {size}: {args.pairs} pairs in turn, a process each")
    print(f"{'compute_data_metrics with':<38}{'median':>8}{'lowest':>8}{'highest':>8}", end="")
    print(f"{'text ms':>9}{'data ms':>9}{'load':>12}")
    cmd = [sys.executable, __file__, "--pair-ratios", "--rows", str(args.rows), "--width", str(args.width)]
    cmd += ["--pairs", str(args.pairs)]
    for label, extra in (("numba kernels ([fast])", {}), ("plain numpy (RLMETRICS_NO_NUMBA)", NO_NUMBA)):
        out = subprocess.check_output(cmd, text=True, env=os.environ | extra)
        med, lo, hi, tm, dm, l0, l1 = (float(v) for v in out.split())
        print(f"{label:<38}{med:>7.2f}x{lo:>7.2f}x{hi:>7.2f}x{tm:>9.1f}{dm:>9.1f}{l0:>6.1f}-{l1:.1f}")


def _fresh_table(args: argparse.Namespace) -> None:
    """Part 3: medians over ``--fresh-runs`` fresh processes a setting (cold: a new cache each)."""
    size = f"{args.rows} x {args.width}"
    print(f"\n## a fresh process each, {size}: first calls (ms), medians of {args.fresh_runs} processes")
    print(f"{'compute_data_metrics with':<38}{'import':>8}{'text 1st':>10}{'data 1st':>10}", end="")
    print(f"{'both 1st':>10}{'text':>8}{'data':>8}{'ratio':>8}")
    cmd = [sys.executable, __file__, "--fresh", "--rows", str(args.rows), "--width", str(args.width)]
    cmd += ["--repeats", str(args.repeats)]
    with tempfile.TemporaryDirectory() as warm:
        settings = (
            ("numba kernels, cache cold (compiles)", None),
            ("numba kernels, cache warm", {"NUMBA_CACHE_DIR": warm}),
            ("plain numpy (RLMETRICS_NO_NUMBA)", NO_NUMBA),
        )
        for label, extra in settings:
            runs = []
            for _ in range(args.fresh_runs):
                with tempfile.TemporaryDirectory() as cold:
                    env = os.environ | (extra or {"NUMBA_CACHE_DIR": cold})
                    out = subprocess.check_output(cmd, text=True, env=env)
                if extra is None:  # fill the warm cache too (not timed)
                    subprocess.check_output(cmd, text=True, env=os.environ | {"NUMBA_CACHE_DIR": warm})
                runs.append([float(v) * 1e3 for v in out.split()])
            imp, t1, d1, tm, dm = (statistics.median(col) for col in zip(*runs))
            both = statistics.median(r[1] + r[2] for r in runs)
            print(f"{label:<38}{imp:>8.0f}{t1:>10.1f}{d1:>10.1f}{both:>10.1f}", end="")
            print(f"{tm:>8.1f}{dm:>8.1f}{tm / dm:>7.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--pairs", type=int, default=21, help="text/data pairs of part 4")
    parser.add_argument("--ratios-only", action="store_true", help="only part 4")
    parser.add_argument("--fresh-only", action="store_true", help="only part 3")
    parser.add_argument("--fresh-runs", type=int, default=3, help="processes a setting in part 3")
    parser.add_argument("--fresh", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pair-ratios", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fresh:
        _fresh_process(args.rows, args.width, args.repeats)
        return
    if args.pair_ratios:
        _pair_ratios(args.rows, args.width, args.pairs)
        return
    if args.ratios_only:
        _ratios_table(args)
        return
    if args.fresh_only:
        _fresh_table(args)
        return

    from rlmetrics import compute_data_metrics, compute_text_metrics

    texts, stops = make_texts(args.rows, args.chars)
    ids, mask = make_ids(args.rows, args.width)
    batch = _batch(ids, mask)
    size = f"{args.rows} x {args.width}"
    data_name = f"compute_data_metrics, {size}"
    cases = {
        f"text, {args.rows} x ~{args.chars} chars": lambda: compute_text_metrics(
            texts, stop_reasons=stops, format_pattern=r"\\boxed\{.+\}"
        ),
        "text, compression=False": lambda: compute_text_metrics(
            texts, stop_reasons=stops, format_pattern=r"\\boxed\{.+\}", compression=False
        ),
        f"ids, {size} (default)": lambda: compute_text_metrics(
            token_ids=ids, response_mask=mask, think_span=SPAN, compression=False
        ),
        f"ids, {size}, compression=True": lambda: compute_text_metrics(
            token_ids=ids, response_mask=mask, think_span=SPAN, compression=True
        ),
        data_name: lambda: compute_data_metrics(batch, use_critic=False),
    }
    times = dict(zip(cases, _interleaved_medians(list(cases.values()), args.repeats)))
    data = times[data_name]
    print(f"\n## compute_text_metrics, median of {args.repeats} (interleaved)")
    print(f"{'case':<40}{'ms':>10}{'x data metrics':>16}")
    for name, t in times.items():
        print(f"{name:<40}{t * 1e3:>10.1f}{t / data:>15.1f}x")
    _fresh_table(args)
    _ratios_table(args)
    m = compute_text_metrics(token_ids=ids, response_mask=mask, think_span=SPAN)
    print("\nid metrics:", {k: round(v, 4) for k, v in m.items()})


if __name__ == "__main__":
    main()
