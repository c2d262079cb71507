"""Benchmark: reading validation dumps with bounded memory (``rlmetrics.readers.dumps``).

Run by hand (not a test)::

    python bench/bench_dumps.py                                   # 10M samples each way (~3 min)
    python bench/bench_dumps.py --rows 1000000 --steps 4 --rows-per-step 250000   # smaller
    python bench/bench_dumps.py --dir /data/bench                 # write once (kept), measure again

It writes, to a temporary folder (or ``--dir``):

* a folder of ``--steps`` step dumps (verl's ``<step>.jsonl``; ``--step-format parquet`` or
  ``both`` for Parquet too) of ``--rows-per-step`` rows each,
* one Parquet file of ``--rows`` rows (row groups of 1M rows, pyarrow's default),

with verl's columns: ``input`` (``--text-chars`` characters, one text per prompt), ``uid``,
``data_source`` (4 sources), ``acc`` (bool), ``score`` (float), ``pred`` (one of 5 answers) and
``step``; ``--n`` samples per prompt. Then, each in a fresh process (``ru_maxrss`` is a
process's peak), it measures the wall time and the peak RSS of

(a) ``iter_steps(folder, keys=KEYS)``, every step in turn (one step alive at a time),
(b) ``load_rollouts([file], keys=KEYS)`` on the one big file,
(c) ``load_rollouts([file])``, every column (the text too: what ``keys=`` saves),

with ``KEYS = uid, data_source, acc, score, pred``, and the peak RSS of a process that only
imports numpy, pyarrow and the module (the floor under every figure). Peak RSS is Linux's
``VmHWM`` of the measuring process (``ru_maxrss`` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"
KEYS = ["uid", "data_source", "acc", "score", "pred"]
SOURCES = ["gsm8k", "math", "aime", "olympiad"]
CHUNK = 1_000_000  # rows generated at a time


# ----------------------------------------------------------------------------- data
def _filler(n_chars: int) -> str:
    words = "the of a to is in that what find how many value number sum if then let be".split()
    text = " ".join(words[i % len(words)] for i in range(n_chars))
    return text[:n_chars]


def chunk_table(first: int, n_rows: int, n: int, text_chars: int, step: int, seed: int) -> Any:
    """Rows ``first .. first + n_rows`` of a dump as an Arrow table (prompt = row // n)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng([seed, first])
    rows = np.arange(first, first + n_rows)
    prompt = rows // n
    p0 = int(prompt[0])
    local = prompt - p0
    distinct = range(p0, int(prompt[-1]) + 1)
    filler = _filler(text_chars + 64)
    texts = pa.array([(f"Question {p}: " + filler[p % 64 :])[:text_chars] for p in distinct])
    uids = pa.array([f"{seed}-{p}" for p in distinct])
    take = pa.array(local)
    p_correct = rng.random(len(distinct))[local]
    acc = rng.random(n_rows) < p_correct
    pred_code = np.where(acc, 0, rng.integers(1, 5, n_rows))
    return pa.table(
        {
            "input": texts.take(take),
            "uid": uids.take(take),
            "data_source": pa.array(SOURCES).take(pa.array(prompt % len(SOURCES))),
            "acc": acc,
            "score": acc + rng.normal(0.0, 0.1, n_rows),
            "pred": pa.array(["42", "41", "7", "0", "-1"]).take(pa.array(pred_code)),
            "step": np.full(n_rows, step, dtype=np.int64),
        }
    )


def write_parquet(path: Path, n_rows: int, n: int, text_chars: int, step: int, seed: int) -> None:
    import pyarrow.parquet as pq

    writer = None
    try:
        for first in range(0, n_rows, CHUNK):
            table = chunk_table(first, min(CHUNK, n_rows - first), n, text_chars, step, seed)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def write_jsonl(path: Path, n_rows: int, n: int, text_chars: int, step: int, seed: int) -> None:
    with path.open("w") as fh:
        for first in range(0, n_rows, CHUNK):
            cols = chunk_table(first, min(CHUNK, n_rows - first), n, text_chars, step, seed).to_pydict()
            lines = [
                f'{{"input": "{i}", "output": "", "gts": "42", "score": {s!r}, "step": {step}, '
                f'"acc": {"true" if a else "false"}, "pred": "{p}", "uid": "{u}", "data_source": "{d}"}}\n'
                for i, u, d, a, s, p in zip(
                    cols["input"], cols["uid"], cols["data_source"], cols["acc"], cols["score"], cols["pred"]
                )
            ]
            fh.writelines(lines)


# ----------------------------------------------------------------------------- measurements (child)
def peak_mb() -> float:
    """Peak RSS of this process so far, MB.

    Linux's ``VmHWM`` (the peak of this process image's memory); ``ru_maxrss`` elsewhere, which
    on Linux would also count the parent's RSS at the fork (kept across ``exec``).
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale / 1024


def result_mb(columns: dict[str, Any]) -> float:
    total = 0
    for col in columns.values():
        if hasattr(col, "codes"):
            total += col.codes.nbytes + sum(len(v) + 49 for v in col.values)
        elif hasattr(col, "nbytes"):
            total += col.nbytes
        else:
            total += 8 * len(col)
    return total / 2**20


def measure(kind: str, path: str) -> dict[str, Any]:
    sys.path.insert(0, str(SRC))
    import numpy  # noqa: F401
    import pyarrow.json
    import pyarrow.parquet

    from rlmetrics.readers.dumps import iter_steps, load_rollouts

    del pyarrow
    out: dict[str, Any] = {"import_mb": peak_mb()}
    if kind == "floor":
        return out
    t0 = time.perf_counter()
    if kind == "iter":
        rows = steps = 0
        largest = 0.0
        for s in iter_steps(path, keys=KEYS):
            rows += s.n_rows
            steps += 1
            largest = max(largest, result_mb(s.columns))
            del s  # one step alive at a time
        out.update(rows=rows, steps=steps, result_mb=largest)
    else:
        columns, rows = load_rollouts([path], keys=KEYS if kind == "file-keys" else None)
        out.update(rows=rows, steps=1, result_mb=result_mb(columns), keys=sorted(columns))
    out.update(wall_s=time.perf_counter() - t0, peak_mb=peak_mb())
    return out


def run_child(kind: str, path: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE), "--measure", kind, str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} on {path} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- driver
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the one Parquet file")
    parser.add_argument("--steps", type=int, default=20, help="step dumps in the folder")
    parser.add_argument("--rows-per-step", type=int, default=500_000)
    parser.add_argument("--step-format", choices=["jsonl", "parquet", "both"], default="both")
    parser.add_argument("--n", type=int, default=16, help="samples per prompt")
    parser.add_argument("--text-chars", type=int, default=200, help="characters of the input text")
    parser.add_argument("--dir", type=Path, help="write the data here and keep it (reused if it is there)")
    parser.add_argument("--no-all-keys", action="store_true", help="skip (c), the read of every column")
    parser.add_argument("--measure", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return

    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_dumps."))
    root.mkdir(parents=True, exist_ok=True)
    formats = ["jsonl", "parquet"] if args.step_format == "both" else [args.step_format]
    try:
        t0 = time.perf_counter()
        folders = {}
        for fmt in formats:
            folder = root / f"steps-{fmt}-{args.steps}x{args.rows_per_step}"
            folders[fmt] = folder
            if not folder.exists():
                tmp = folder.with_name(folder.name + ".part")
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                for step in range(args.steps):
                    writer = write_jsonl if fmt == "jsonl" else write_parquet
                    writer(
                        tmp / f"{step * 10}.{fmt}",
                        args.rows_per_step,
                        args.n,
                        args.text_chars,
                        step * 10,
                        step,
                    )
                tmp.rename(folder)
        big = root / f"one-{args.rows}.parquet"
        if not big.exists():
            write_parquet(big.with_suffix(".part"), args.rows, args.n, args.text_chars, 0, 99)
            big.with_suffix(".part").rename(big)
        print(f"data in {root} ({time.perf_counter() - t0:.0f} s to write)", file=sys.stderr)

        def size_mb(p: Path) -> float:
            files = [p] if p.is_file() else [f for f in p.iterdir() if f.is_file()]
            return sum(f.stat().st_size for f in files) / 2**20

        floor = run_child("floor", root)["import_mb"]
        runs = [(f"(a) iter_steps, {fmt} folder", "iter", folder) for fmt, folder in folders.items()]
        runs.append(("(b) load_rollouts(keys=), one Parquet", "file-keys", big))
        if not args.no_all_keys:
            runs.append(("(c) load_rollouts(), every column", "file-all", big))
        print(f"\nkeys = {', '.join(KEYS)}; floor (python + numpy + pyarrow imported): {floor:.0f} MB RSS\n")
        header = "| case | on disk MB | samples | steps | wall s | peak RSS MB | columns MB |"
        print(header)
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, kind, path in runs:
            r = run_child(kind, path)
            print(
                f"| {label} | {size_mb(path):.0f} | {r['rows']:,} | {r['steps']} | {r['wall_s']:.1f} "
                f"| {r['peak_mb']:.0f} | {r['result_mb']:.0f} |",
                flush=True,
            )
        print("\ncolumns MB: the columns returned (one step for (a)): codes, numbers, distinct strings")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
