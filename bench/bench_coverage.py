"""Benchmark: coverage of the intervals over prompts; size, power and coverage of the paired tests.

Run by hand (not a test)::

    python bench/bench_coverage.py                    # 2,000 evaluations a cell (~1 h on 2 cores)
    python bench/bench_coverage.py --quick            # 300 a cell
    python bench/bench_coverage.py --coverage-only    # the one-sample table alone (~5 min)
    python bench/bench_coverage.py --paired-only --paired-reps 200
    python bench/bench_coverage.py --paired-only --candidates --prompts 30 100 --means 0.5 0.95

Evaluations simulated as they look in practice (``tests/coverage_sim.py``): each prompt's solve
rate drawn from ``Beta(m, 1 - m)`` (U-shaped: most prompts always or never solved), 8 samples a
prompt, 30-1,000 prompts, mean rates ``m`` from 0.01 to 0.99; the target is the population's
value of mean@8, pass@4, pass@8, pass^4 and maj@4 (one wrong answer, ties split evenly).

1. Coverage of the 95% interval of each method (wilson-edge, wilson, t, bootstrap with 2,000
   resamples), per cell, and a summary per method (lowest, highest, cells outside 0.93-0.97; a
   cell's binomial standard error is 0.005 at 2,000 evaluations).
2. The paired tests of ``paired_difference`` (what ``rlmetrics compare`` reports) on mean@8 and
   pass@4: rejections at 5% under the null (two runs of the same model: the same rates, fresh
   samples) and against a shift of the mean rate by ``sqrt(min(m, 1 - m) / (2 P))`` toward the
   middle (every prompt's rate moved to the same quantile of ``Beta(m', 1 - m')``): the t, the
   sign-flip test (mid-p, the default) and the same with the standard p; ``--candidates`` adds the
   sign test and Wilcoxon's signed-rank test (mid-p, by sign flips of the signs or signed ranks).
3. Coverage of the paired 95% intervals (the t's, and the sign-flip test's inversion): of 0 under
   the null and of the population's difference under the shift.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE.parents[1] / "tests"))

from coverage_sim import (  # noqa: E402
    MEANS,
    METRICS,
    PAIRED_METRICS,
    PROMPTS,
    SAMPLES,
    draw_counts,
    draw_rates,
    estimates,
    paired_counts,
    target,
)
from rlmetrics.validation.comparison.paired import ROUNDING, paired_difference, sign_flip_p  # noqa: E402
from rlmetrics.validation.exact.intervals import column_intervals  # noqa: E402


def coverage_table(methods: list[str], reps: int, n_boot: int) -> dict[str, dict[tuple, float]]:
    """{method: {(prompts, mean, metric): coverage}} over the grid."""
    out: dict[str, dict[tuple, float]] = {m: {} for m in methods}
    for n_prompts in PROMPTS:
        for mean in MEANS:
            rng = np.random.default_rng(1000 * n_prompts + round(100 * mean))
            counts = draw_counts(rng, draw_rates(rng, mean, n_prompts, reps))
            for name, k in METRICS:
                est, want = estimates(counts, name, k), target(name, k, mean)
                for method in methods:
                    iv = column_intervals(
                        est, method=method, max_n_eff=np.full(reps, float(SAMPLES * n_prompts)), n_boot=n_boot
                    )
                    out[method][(n_prompts, mean, name)] = float(
                        np.mean((iv.ci_low <= want) & (want <= iv.ci_high))
                    )
    return out


def print_coverage(table: dict[str, dict[tuple, float]]) -> None:
    names = [name for name, _ in METRICS]
    for method, cells in table.items():
        print(f"\n### ci={method!r}: coverage of the 95% interval\n")
        print("| prompts | mean | " + " | ".join(names) + " |")
        print("|---|---|" + "---|" * len(names))
        for n_prompts in PROMPTS:
            for mean in MEANS:
                row = " | ".join(f"{cells[(n_prompts, mean, n)]:.3f}" for n in names)
                print(f"| {n_prompts} | {mean} | {row} |")
    print("\n| method | lowest | highest | cells < 0.93 | cells > 0.97 | mean abs(cov - 0.95) |")
    print("|---|---|---|---|---|---|")
    for method, cells in table.items():
        v = np.array(list(cells.values()))
        print(
            f"| {method} | {v.min():.3f} | {v.max():.3f} | {(v < 0.93).sum()} of {v.size} | "
            f"{(v > 0.97).sum()} | {np.abs(v - 0.95).mean():.4f} |"
        )


def _std_p(a: np.ndarray, b: np.ndarray) -> float:
    """The sign-flip test with the standard p-value, ``P(|S*| >= |S|)``."""
    return sign_flip_p(b - a, ROUNDING * max(1.0, np.abs(a).max()), mid_p=False)[0]


def _rank_p(a: np.ndarray, b: np.ndarray, kind: str) -> float:
    """Sign test or Wilcoxon signed-rank test, mid-p, by sign flips of the signs or signed ranks."""
    from scipy.stats import rankdata

    d = b - a
    d = d[np.abs(d) > ROUNDING * max(1.0, np.abs(a).max())]
    if d.size == 0:
        return 1.0
    scores = np.sign(d) if kind == "sign" else np.sign(d) * rankdata(np.abs(d))
    return sign_flip_p(scores, 0.0)[0]


def _paired_cell(
    a: np.ndarray, b: np.ndarray, truth: float, tests: list[str]
) -> dict[str, tuple[float, float]]:
    """{test: (rejections at 5%, coverage of ``truth`` by the 95% interval)} over the columns; the
    sign-flip row's interval is the test's inversion (``interval="inverted"``)."""
    out = {}
    for test in tests:
        if test in ("t", "sign-flip"):
            ci = "inverted" if test == "sign-flip" else "t"  # the test's own interval beside the t's
            res = [paired_difference(a[:, r], b[:, r], test=test, interval=ci) for r in range(a.shape[1])]
            p = np.array([x.p_value for x in res])
            cov = float(np.mean([x.ci_low <= truth <= x.ci_high for x in res]))
        else:
            fn = _std_p if test == "std-p" else lambda x, y, k=test: _rank_p(x, y, k)
            p, cov = np.array([fn(a[:, r], b[:, r]) for r in range(a.shape[1])]), float("nan")
        out[test] = (float(np.mean(np.nan_to_num(p, nan=1.0) < 0.05)), cov)
    return out


def paired_table(reps: int, tests: list[str], means=MEANS, prompts=PROMPTS) -> dict[tuple, dict]:
    """{(prompts, mean, metric): {"delta", "null": {test: (size, cov)}, "alt": {test: (power, cov)}}}."""
    out = {}
    for n_prompts in prompts:
        for mean in means:
            rng = np.random.default_rng(n_prompts + round(100 * mean))
            ca, cb, c1, new_mean = paired_counts(rng, mean, n_prompts, reps)
            for name, k in PAIRED_METRICS:
                a = estimates(ca, name, k)
                truth = target(name, k, new_mean) - target(name, k, mean)
                out[(n_prompts, mean, name)] = {
                    "delta": new_mean - mean,
                    "null": _paired_cell(a, estimates(cb, name, k), 0.0, tests),
                    "alt": _paired_cell(a, estimates(c1, name, k), truth, tests),
                }
    return out


def print_paired(table: dict[tuple, dict], tests: list[str]) -> None:
    short = {"t": "t", "sign-flip": "flip", "std-p": "flip std-p", "sign": "sign", "wilcoxon": "wilcoxon"}
    names = [name for name, _ in PAIRED_METRICS]
    ci_tests = [t for t in tests if t in ("t", "sign-flip")]
    cols = [f"{kind} {m} {short[t]}" for kind in ("size", "power") for m in names for t in tests]
    print("\n### paired tests: rejections at 5% under the null (size) and against a shift (power)\n")
    print("| prompts | mean | delta | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for (n_prompts, mean), rows in _by_cell(table).items():
        size = [rows[m]["null"][t][0] for m in names for t in tests]
        power = [rows[m]["alt"][t][0] for m in names for t in tests]
        cells = " | ".join(f"{v:.3f}" for v in size + power)
        print(f"| {n_prompts} | {mean} | {rows[names[0]]['delta']:+.4f} | {cells} |")
    cols = [f"{kind} {m} {short[t]}" for kind in ("null", "alt") for m in names for t in ci_tests]
    print("\n### paired 95% intervals: coverage of 0 (null) and of the true difference (shift)\n")
    print("| prompts | mean | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for (n_prompts, mean), rows in _by_cell(table).items():
        cov = [rows[m][h][t][1] for h in ("null", "alt") for m in names for t in ci_tests]
        print(f"| {n_prompts} | {mean} | " + " | ".join(f"{v:.3f}" for v in cov) + " |")
    print("\n| test | largest size | cells size > 0.06 | lowest coverage | cells coverage < 0.93 |")
    print("|---|---|---|---|---|")
    for t in tests:
        size = np.array([c["null"][t][0] for c in table.values()])
        cov = np.array([c[h][t][1] for c in table.values() for h in ("null", "alt")])
        low = f"{np.nanmin(cov):.3f} | {int(np.sum(cov < 0.93))} of {cov.size}" if t in ci_tests else "- | -"
        print(f"| {short[t]} | {size.max():.3f} | {int(np.sum(size > 0.06))} of {size.size} | {low} |")


def print_interval_table(reps: int) -> None:
    """Coverage and width of the paired 95% intervals: Student t and Newcombe on wilson-edge."""
    names = [name for name, _ in PAIRED_METRICS]
    kinds = ("t", "newcombe")
    cols = [f"{h} {m} {k}" for h in ("null", "alt") for m in names for k in kinds]
    cols += [f"width alt {m} {k}" for m in names for k in kinds]
    print("\n### paired 95% intervals: t and Newcombe (wilson-edge), coverage and mean width\n")
    print("| prompts | mean | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    worst = {k: [] for k in kinds}
    for n_prompts in PROMPTS:
        for mean in MEANS:
            rng = np.random.default_rng(n_prompts + round(100 * mean))
            ca, cb, c1, new_mean = paired_counts(rng, mean, n_prompts, reps)
            cov: dict[tuple, float] = {}
            for name, k in PAIRED_METRICS:
                a, truth = estimates(ca, name, k), target(name, k, new_mean) - target(name, k, mean)
                for h, b, want in (
                    ("null", estimates(cb, name, k), 0.0),
                    ("alt", estimates(c1, name, k), truth),
                ):
                    for kind in kinds:
                        res = [
                            paired_difference(a[:, r], b[:, r], test="t", interval=kind) for r in range(reps)
                        ]
                        cov[(h, name, kind)] = float(np.mean([x.ci_low <= want <= x.ci_high for x in res]))
                        cov[("width", name, kind)] = float(np.mean([x.ci_high - x.ci_low for x in res]))
                        worst[kind].append(cov[(h, name, kind)])
            cells = [cov[(h, m, k)] for h in ("null", "alt") for m in names for k in kinds]
            cells += [cov[("width", m, k)] for m in names for k in kinds]
            print(f"| {n_prompts} | {mean} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    print("\n| interval | lowest coverage | cells < 0.93 | cells > 0.97 |\n|---|---|---|---|")
    for kind, v in worst.items():
        x = np.array(v)
        print(f"| {kind} | {x.min():.3f} | {int(np.sum(x < 0.93))} of {x.size} | {int(np.sum(x > 0.97))} |")


def _by_cell(table: dict[tuple, dict]) -> dict[tuple, dict]:
    cells: dict[tuple, dict] = {}
    for (n_prompts, mean, name), row in table.items():
        cells.setdefault((n_prompts, mean), {})[name] = row
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 evaluations a cell instead of 2,000")
    parser.add_argument("--reps", type=int, help="evaluations a cell of the coverage table")
    parser.add_argument("--paired-reps", type=int, help="evaluations a cell of the paired tables")
    parser.add_argument("--no-bootstrap", action="store_true", help="leave ci='bootstrap' out")
    parser.add_argument("--candidates", action="store_true", help="also sign, signed-rank (mid-p)")
    parser.add_argument("--paired-only", action="store_true", help="only the paired tables")
    parser.add_argument("--coverage-only", action="store_true", help="only the coverage table")
    parser.add_argument("--means", type=float, nargs="+", help="mean rates of the paired tables")
    parser.add_argument("--intervals-only", action="store_true", help="only the t/Newcombe interval table")
    parser.add_argument("--prompts", type=int, nargs="+", help="prompts of the paired tables")
    args = parser.parse_args()
    reps = args.reps or (300 if args.quick else 2000)
    paired_reps = args.paired_reps or reps
    methods = ["wilson-edge", "wilson", "t"] + ([] if args.no_bootstrap else ["bootstrap"])
    tests = ["t", "sign-flip", "std-p"] + (["sign", "wilcoxon"] if args.candidates else [])
    start = time.perf_counter()
    print(f"{SAMPLES} samples a prompt, U-shaped difficulty")
    if args.intervals_only:
        print(f"\ninterval table: {paired_reps} simulated evaluations a cell")
        print_interval_table(paired_reps)
        print(f"\n{time.perf_counter() - start:.0f} s")
        return
    if not args.paired_only:
        print(f"\ncoverage table: {reps} simulated evaluations a cell")
        print_coverage(coverage_table(methods, reps, n_boot=2000))
        print(f"\n{time.perf_counter() - start:.0f} s")
    if not args.coverage_only:
        print(f"\npaired tables: {paired_reps} simulated evaluations a cell")
        table = paired_table(paired_reps, tests, args.means or MEANS, args.prompts or PROMPTS)
        print_paired(table, tests)
        print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
