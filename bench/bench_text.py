"""Benchmark of the text statistics (``compute_text_metrics``), run by hand; prints a table, asserts nothing.

1. Decoded text: 1,024 responses of about 2,000 characters (pseudo-prose over a 5,000-word
   vocabulary, every 8th response ending in a loop, thinking spans, stop reasons, a
   ``\\boxed{...}`` format check).
2. Token ids: a ``(1024, 4096)`` int64 batch (Zipf-distributed ids over a 151,936-token
   vocabulary, random response lengths, every 8th row looping), with and without the
   compression ratio, beside ``compute_data_metrics`` on the same batch (the issue's yardstick:
   within 3x of it).

Usage::

    python bench/bench_text.py                 # median of 7
    python bench/bench_text.py --repeats 21 --rows 2048
"""

from __future__ import annotations

import argparse
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from rlmetrics import compute_data_metrics, compute_text_metrics

    texts, stops = make_texts(args.rows, args.chars)
    ids, mask = make_ids(args.rows, args.width)
    zeros = np.zeros(ids.shape, dtype=np.float32)
    batch = {
        "token_level_scores": zeros,
        "token_level_rewards": zeros,
        "advantages": zeros,
        "returns": zeros,
        "response_mask": mask,
        "attention_mask": np.concatenate([np.ones((args.rows, 64), dtype=np.int64), mask], axis=1),
        "prompts": np.zeros((args.rows, 64), dtype=np.int64),
        "responses": ids,
    }
    span = ((151646,), (151647,))
    cases = {
        f"text, {args.rows} x ~{args.chars} chars": lambda: compute_text_metrics(
            texts, stop_reasons=stops, format_pattern=r"\\boxed\{.+\}"
        ),
        "text, no compression": lambda: compute_text_metrics(
            texts, stop_reasons=stops, format_pattern=r"\\boxed\{.+\}", compression=False
        ),
        f"ids, {args.rows} x {args.width}": lambda: compute_text_metrics(
            token_ids=ids, response_mask=mask, think_span=span
        ),
        "ids, no compression": lambda: compute_text_metrics(
            token_ids=ids, response_mask=mask, think_span=span, compression=False
        ),
        "compute_data_metrics (same ids)": lambda: compute_data_metrics(batch, use_critic=False),
    }
    times = dict(zip(cases, _interleaved_medians(list(cases.values()), args.repeats)))
    data = times["compute_data_metrics (same ids)"]
    print(f"\n## compute_text_metrics, median of {args.repeats}")
    print(f"{'case':<36}{'ms':>10}{'x data metrics':>16}")
    for name, t in times.items():
        print(f"{name:<36}{t * 1e3:>10.1f}{t / data:>15.1f}x")
    m = compute_text_metrics(texts, stop_reasons=stops, format_pattern=r"\\boxed\{.+\}")
    print("\ntext metrics:", {k: round(v, 4) for k, v in m.items()})


if __name__ == "__main__":
    main()
