"""Benchmark: coverage of the intervals over prompts and size and power of the paired test (issue 26).

Run by hand (not a test)::

    python bench/bench_coverage.py              # 2,000 evaluations a cell, ~2 min on 2 cores
    python bench/bench_coverage.py --quick      # 300 a cell
    python bench/bench_coverage.py --bootstrap  # also ci="bootstrap" (slow: 2,000 resamples each)
    python bench/bench_coverage.py --sign-flip  # also the paired sign-flip test beside the t
    python bench/bench_coverage.py --paired-only --sign-flip --quick  # the paired table alone

Evaluations simulated as they look in practice (``tests/coverage_sim.py``): each prompt's solve
rate drawn from ``Beta(m, 1 - m)`` (U-shaped: most prompts always or never solved), 8 samples a
prompt, 30-1,000 prompts, mean rates ``m`` from 0.01 to 0.99; the target is the population's
value of mean@8, pass@4, pass@8, pass^4 and maj@4 (one wrong answer, ties split evenly).

1. Coverage of the 95% interval of each method, per cell, and a summary per method (lowest,
   highest, cells outside 0.93-0.97; a cell's binomial standard error is 0.005).
2. The paired test of ``paired_difference`` (what ``rlmetrics compare`` reports): rejections at
   5% under the null (two runs of the same model: the same rates, fresh samples) and its power
   against a shift of the mean rate by ``delta = sqrt(min(m, 1 - m) / (2 P))`` (every prompt's
   rate moved to the same quantile of ``Beta(m', 1 - m')``). With ``--sign-flip`` also
   ``test="sign-flip"`` (mid-p) in the same cells, and the size of the standard sign-flip p.
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

from coverage_sim import MEANS, METRICS, PROMPTS, SAMPLES, draw_counts, draw_rates, estimates, target  # noqa: E402
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


def _shifted(rates: np.ndarray, mean: float, new_mean: float) -> np.ndarray:
    from scipy.stats import beta

    return beta.ppf(beta.cdf(rates, mean, 1.0 - mean), new_mean, 1.0 - new_mean)


def _rejections(a: np.ndarray, b: np.ndarray, test: str = "t") -> float:
    if test == "standard":  # the sign-flip test with the standard p-value, P(|S*| >= |S|)
        p = np.array(
            [
                sign_flip_p(b[:, r] - a[:, r], ROUNDING * max(1.0, np.abs(a[:, r]).max()), mid_p=False)[0]
                for r in range(a.shape[1])
            ]
        )
    else:
        p = np.array([paired_difference(a[:, r], b[:, r], test=test).p_value for r in range(a.shape[1])])
    return float(np.mean(np.nan_to_num(p, nan=1.0) < 0.05))


def print_paired(reps: int, sign_flip: bool = False) -> None:
    tests = ["t", "sign-flip"] if sign_flip else ["t"]
    names = {"t": "t", "sign-flip": "flip"}
    print("\n### paired test (paired_difference): rejections at 5% under the null, and power\n")
    cols = [
        f"{kind} {m} {names[t]}" for kind in ("size", "power") for m in ("mean@8", "pass@4") for t in tests
    ]
    if sign_flip:
        cols += ["size mean@8 flip std-p", "size pass@4 flip std-p"]
    print("| prompts | mean | delta | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for n_prompts in PROMPTS:
        for mean in (0.02, 0.05, 0.2, 0.5, 0.8, 0.95, 0.98):
            rng = np.random.default_rng(n_prompts + round(100 * mean))
            rates = draw_rates(rng, mean, n_prompts, reps)
            delta = float(np.sqrt(min(mean, 1.0 - mean) / (2.0 * n_prompts)))
            new_mean = mean + delta if mean <= 0.5 else mean - delta
            ca, cb = draw_counts(rng, rates), draw_counts(rng, rates)
            c1 = draw_counts(rng, _shifted(rates, mean, new_mean))
            size, power, std = [], [], []
            for name, k in (("mean@8", 0), ("pass@4", 4)):
                a = estimates(ca, name, k)
                for test in tests:
                    size.append(_rejections(a, estimates(cb, name, k), test))
                    power.append(_rejections(a, estimates(c1, name, k), test))
                if sign_flip:
                    std.append(_rejections(a, estimates(cb, name, k), "standard"))
            cells = " | ".join(f"{v:.3f}" for v in size + power + std)
            print(f"| {n_prompts} | {mean} | {new_mean - mean:+.4f} | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 evaluations a cell instead of 2,000")
    parser.add_argument("--bootstrap", action="store_true", help="also ci='bootstrap' (slow)")
    parser.add_argument("--sign-flip", action="store_true", help="also the paired sign-flip test")
    parser.add_argument("--paired-only", action="store_true", help="only the paired test's table")
    args = parser.parse_args()
    reps = 300 if args.quick else 2000
    methods = ["wilson-edge", "wilson", "t"] + (["bootstrap"] if args.bootstrap else [])
    start = time.perf_counter()
    print(f"{reps} simulated evaluations a cell, {SAMPLES} samples a prompt, U-shaped difficulty")
    if not args.paired_only:
        print_coverage(coverage_table(methods, reps, n_boot=2000))
    print_paired(reps, sign_flip=args.sign_flip)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
