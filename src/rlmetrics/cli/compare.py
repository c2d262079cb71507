"""``rlmetrics compare``: is checkpoint B better than A, by how much, with what certainty?

Each argument is a rollout dump (JSONL/Parquet), a folder of them (verl's per-step
``val_generations/<step>.jsonl``: the last step, or ``--step``), or a ``rlmetrics validate
--json`` summary. Every run after the first is compared with the first on the prompts they
share: per data source and variable, the difference of each metric (mean@N, pass@k, pass^k,
maj@k, cover@tau ...) with the paired sign-flip test's p-value (mid-p; ``--test t``: Student's
t), Newcombe's interval on each run's wilson-edge interval (``--interval``; Student's t where a
metric's values are not rates in [0, 1]; the interval method is named under each table and in
``--json``) and the minimum detectable difference at 80% power
(:func:`rlmetrics.validation.comparison.tables.compare_tables`), and the pass@k curves for every k
with a simultaneous band and where they cross. A summary has no per-prompt data: its comparison
is unpaired (Welch, with its t interval) and has no curve.

Everything one call tests (every distinct metric of every table, for every B) is one family: its
p-values are adjusted together (``--adjust``, Holm by default;
:func:`rlmetrics.validation.comparison.family.adjust_comparisons`), shown beside the unadjusted
ones, with the method and the family's size stated; its adjusted intervals are each metric's
interval method at the family's level. ``--margin DELTA`` adds, per metric, the two one-sided
tests against -DELTA and +DELTA by inclusion in the same method's interval and a verdict in words
(:mod:`rlmetrics.validation.comparison.equivalence`), from the unadjusted interval and from the
family's adjusted one.

Exit status: 0 on success, 2 on unreadable input, a wrong option (a ``--k`` above the samples
of every prompt among them) or an output that could not be written (nothing is left half
written).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.cli._files import atomic_path, check_target, write_json
from rlmetrics.cli._rollouts import (
    ClusterKey,
    Confidence,
    KeyOptions,
    Ks,
    PredKey,
    Run,
    SourceKey,
    Step,
    UidKey,
    ValueKeys,
    load_run,
)
from rlmetrics.validation.comparison.curves import describe_curves

__all__ = ["compare"]

_EXIT_BAD_INPUT = 2
#: Largest ``--k`` (the statistics count in int64).
MAX_K = 2**63 - 1

EPILOG = """\
Examples:

  rlmetrics compare base/val.jsonl rl/val.jsonl

  rlmetrics compare ckpt/val_generations --step 100 ckpt/val_generations --json cmp.json --plot passk.png

  rlmetrics compare old/val.jsonl new/val.jsonl --margin 0.01 --adjust bh

Exit status: 0 compared, 2 unreadable input, a wrong option or an output not written.
"""


def _shown_metric(name: str, binary: bool) -> bool:
    """Metrics in the table, without repeats (all stay in --json): for 0/1 variables best@k and
    worst@k are pass@k and pass^k; every @1 but pass@1 is the mean; cover@1 is all_solved."""
    if name in ("pass^1", "maj@1", "best@1", "worst@1") or (binary and name == "cover@1"):
        return False
    return not (binary and name.startswith(("best@", "worst@")))


def _fmt(x: float, digits: int = 4) -> str:
    if math.isinf(x):  # a sign-flip interval on too few prompts to reject any shift
        return "-inf" if x < 0 else "inf"
    return "nan" if not math.isfinite(x) else f"{x:.{digits}f}"


def _fmt_p(p: float) -> str:
    if not math.isfinite(p):
        return "nan"
    return "<1e-4" if p < 1e-4 else f"{p:.4f}"


#: What each ``--adjust`` controls, for the family line.
_ADJUST_WORDS = {
    "holm": "Holm's step-down: the chance of even one false difference in the family at most",
    "bh": "Benjamini-Hochberg: the expected share of false differences among those declared at most",
}


def _describe(run: Run) -> str:
    where = f", step {run.step} of {run.n_steps}" if run.step is not None and run.n_steps > 1 else ""
    if run.summary is not None:
        return f"{run.path}{where} (a validate summary: unpaired comparison)"
    assert run.inputs is not None
    return f"{run.path}{where}: {run.inputs.n_rows} samples"


def _print_table(console: Console, a: Run, b: Run, cmp: Any, binary: bool, confidence: float) -> None:
    from rich.table import Table

    level = f"{confidence:.0%}"
    method = cmp.family.method if cmp.family is not None else "none"
    # without a margin, the verdict of each p-value side by side (with one, the margin table's)
    verdicts = [] if cmp.margins else ["verdict", *([f"{method} verdict"] if method != "none" else [])]
    table = Table(title=escape(_table_head(a, b, cmp)), title_justify="left", highlight=False)
    for col, justify in (
        ("metric", "left"),
        (a.name, "right"),
        (b.name, "right"),
        ("B - A", "right"),
        (f"{level} interval", "right"),
        ("p", "right"),
        *([(f"p {method}", "right")] if method != "none" else []),
        ("MDE", "right"),
        ("corr", "right"),
        *((v, "right") for v in verdicts),
    ):
        table.add_column(escape(col), justify=justify)  # type: ignore[arg-type]
    shown = [name for name in cmp.metrics if _shown_metric(name, binary)]
    for name in shown:
        d, adj = cmp.metrics[name], cmp.adjusted.get(name)
        p_family = adj.p_value if adj is not None else d.p_value
        style = None
        if math.isfinite(p_family) and p_family <= 1.0 - confidence and d.diff != 0:
            style = "green" if d.diff > 0 else "red"
        table.add_row(
            name,
            _fmt(d.mean_a),
            _fmt(d.mean_b),
            f"{d.diff:+.4f}" if math.isfinite(d.diff) else "nan",
            f"[{_fmt(d.ci_low)}, {_fmt(d.ci_high)}]",
            _fmt_p(d.p_value),
            *([_fmt_p(p_family)] if method != "none" else []),
            _fmt(d.mde),
            _fmt(d.correlation, 2),
            *[significance_verdict(d.diff, p, confidence) for p in (d.p_value, p_family)][: len(verdicts)],
            style=style,
        )
    console.print()
    console.print(table)
    if cmp.margins:
        _print_margins(console, cmp, shown, level)
    if cmp.curve is not None:
        console.print(
            f"pass@k for k = 1..{int(cmp.curve.ks[-1])}: {escape(describe_curves(cmp.curve))}",
            highlight=False,
            soft_wrap=True,
        )
    first = next(iter(cmp.metrics.values()), None)
    if first is not None:
        how = "; ".join(dict.fromkeys(cmp.metrics[name].ci_method for name in shown or cmp.metrics))
        console.print(
            f"[dim]{escape(first.method)}; interval: {escape(how)}; "
            "MDE: smallest difference detected with 80% power[/dim]"
        )


def _table_head(a: Run, b: Run, cmp: Any) -> str:
    """The title of a comparison's table: its source and variable, and the prompts it matched."""
    if cmp.n_matched is None:
        return f"{cmp.source} / {cmp.variable}: unpaired (Welch), from summaries"
    return (
        f"{cmp.source} / {cmp.variable}: {cmp.n_matched} prompts in both "
        f"({cmp.n_only_a} only in {a.name}, {cmp.n_only_b} only in {b.name})"
    )


def significance_verdict(diff: float, p_value: float, confidence: float) -> str:
    """A p-value's verdict: ``"B > A"`` / ``"B < A"`` (a difference at level ``1 - confidence``),
    ``"n.s."`` (none shown), ``"nan"`` for a NaN p-value. Direction-neutral: lower is better for
    some metrics (``none_solved``).

    >>> significance_verdict(0.02, 0.01, 0.95), significance_verdict(-0.02, 0.2, 0.95)
    ('B > A', 'n.s.')
    """
    if not math.isfinite(p_value) or not math.isfinite(diff):
        return "nan"
    if p_value <= 1.0 - confidence and diff != 0:
        return "B > A" if diff > 0 else "B < A"
    return "n.s."


def _print_margins(console: Console, cmp: Any, shown: list[str], level: str) -> None:
    """The two one-sided tests of each shown metric against the margin, and the verdicts."""
    from rich.table import Table

    family = cmp.family
    margin = next(iter(cmp.margins.values())).margin
    adjusted = family is not None and family.method != "none"
    table = Table(
        title=escape(f"{cmp.source} / {cmp.variable}: B - A against the margin ±{margin:g}"),
        title_justify="left",
        highlight=False,
    )
    cols = ["metric", "B - A", "p non-inf.", "p TOST", f"verdict ({level})"]
    if adjusted:
        cols += [f"{family.level:.2%} interval", f"verdict ({family.method})"]
    for col in cols:
        table.add_column(escape(col), justify="left" if col == "metric" else "right")
    for name in shown:
        t, d, adj = cmp.margins.get(name), cmp.metrics[name], cmp.adjusted.get(name)
        if t is None:
            continue
        row = [
            name,
            f"{d.diff:+.4f}" if math.isfinite(d.diff) else "nan",
            _fmt_p(t.p_noninferior),
            _fmt_p(t.p_equivalent),
            t.verdict,
        ]
        if adjusted and adj is not None:
            row += [f"[{_fmt(adj.ci_low)}, {_fmt(adj.ci_high)}]", str(adj.verdict)]
        style = {"better": "green", "worse": "red", "inconclusive": "yellow"}.get(
            str(adj.verdict if adjusted and adj is not None else t.verdict)
        )
        table.add_row(*(escape(x) for x in row), style=style)
    console.print(table)


def _print_family(console: Console, results: list[tuple[Run, list[Any]]]) -> None:
    """One line: the family the p-values were adjusted over, its size, the method; the margin's tests."""
    cmps = [c for _, cs in results for c in cs]
    if not cmps or cmps[0].family is None:
        return
    family = cmps[0].family
    alpha = 1.0 - family.confidence
    tables = f"{len(cmps)} table{'s' if len(cmps) > 1 else ''}"
    if family.method == "none":
        line = (
            f"p-values not adjusted (--adjust none) for the family of {family.size} distinct "
            f"comparisons made (every metric of the {tables} above)"
        )
    else:
        line = (
            f"p {family.method}: p-values adjusted over a family of {family.size} distinct comparisons "
            f"(every metric of the {tables} above) by {_ADJUST_WORDS[family.method]} {alpha:.0%}; "
            f"p: each comparison alone; coloured: p {family.method} <= {alpha:g}"
        )
    if not any(c.margins for c in cmps):
        line += f"; verdict: B > A or B < A where p <= {alpha:g}, else n.s. (no difference shown)" + (
            f", from p and from p {family.method} side by side" if family.method != "none" else ""
        )
    console.print(f"\n[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)
    margins = next((c.margins for c in cmps if c.margins), None)
    if margins:
        margin = next(iter(margins.values())).margin
        line = (
            f"margin ±{margin:g}: p non-inf. tests H0 B - A <= -{margin:g}, p TOST H0 |B - A| >= "
            f"{margin:g} (two one-sided tests, each at {alpha / 2:g}, unadjusted, by inclusion in each "
            f"metric's interval: p < {alpha / 2:g} exactly where its bound passes the margin); a verdict "
            f"reads the {family.confidence:.0%} interval"
        )
        if family.method != "none":
            line += (
                f", the {family.method} verdict the family's {family.interval} interval at {family.level:.2%}"
                " (the same interval method at that level)"
            )
        console.print(f"[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)


def _plot(runs: list[Run], results: list[tuple[Run, list[Any]]], target: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install 'rlmetrics[plot]'") from None
    panels = [(b, c) for b, cmps in results for c in cmps if c.curve is not None]
    if not panels:
        raise ValueError(
            "--plot: no pass@k curve to draw (needs 0/1 values and 2+ samples per prompt in both runs)"
        )
    keys = list(dict.fromkeys((c.source, c.variable) for _, c in panels))
    fig, axes = plt.subplots(len(keys), 2, figsize=(11, 3.8 * len(keys)), squeeze=False)
    a = runs[0]
    for row, key in zip(axes, keys):
        left, right = row
        drawn_a = False
        for b, c in panels:
            if (c.source, c.variable) != key:
                continue
            cv = c.curve
            ks = cv.ks
            runs_drawn = [(c.curve_b, b.name, cv.mean_b)]
            if not drawn_a:
                runs_drawn.insert(0, (c.curve_a, a.name, cv.mean_a))
                drawn_a = True
            for band, label, mean in runs_drawn:
                (own,) = left.plot(ks, mean, marker=".", label=label)
                if band is not None:
                    left.fill_between(
                        ks, band.ci_low, band.ci_high, color=own.get_color(), alpha=0.2, linewidth=0
                    )
            (line,) = right.plot(ks, cv.diff, marker=".", label=f"{b.name} - {a.name}")
            right.fill_between(ks, cv.band_low, cv.band_high, color=line.get_color(), alpha=0.2, linewidth=0)
            if cv.crossover_interval is not None:
                lo, hi = cv.crossover_interval
                right.axvspan(lo, hi, color=line.get_color(), alpha=0.08)
            if cv.crossover is not None:
                right.axvline(cv.crossover, color=line.get_color(), linestyle="--", linewidth=1)
        right.axhline(0.0, color="black", linewidth=0.8)
        left.set_title(f"{key[0]} / {key[1]}: pass@k, pointwise intervals")
        right.set_title(
            f"difference with {panels[0][1].curve.confidence:.0%} simultaneous band; crossover shaded"
        )
        for ax in row:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
            ax.set_xlabel("k")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        left.set_ylabel("pass@k")
        right.set_ylabel("B - A")
    fig.tight_layout()
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format=target.suffix.lstrip(".") or "png", dpi=110)
    plt.close(fig)


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Two or more evaluations: dumps (.jsonl/.parquet), folders of dumps, validate --json files.",
            show_default=False,
        ),
    ],
    uid_key: UidKey = "uid",
    source_key: SourceKey = "data_source",
    value_keys: ValueKeys = None,
    pred_key: PredKey = "pred",
    cluster_key: ClusterKey = None,
    k: Ks = None,
    step: Step = None,
    confidence: Confidence = 0.95,
    n_boot: Annotated[int, typer.Option("--n-boot", help="Bootstrap replicates of the pass@k band.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the bootstrap.")] = 0,
    curves: Annotated[
        bool, typer.Option("--curves/--no-curves", help="Compare pass@k curves for every k.")
    ] = True,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the comparison as JSON here.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Draw pass@k against k and B - A with its band (PNG).")
    ] = None,
    adjust: Annotated[
        str,
        typer.Option(
            "--adjust",
            help="Adjust the p-values of every metric compared, as one family: holm (the default: the "
            "chance of even one false difference stays under the level, under any dependence between "
            "metrics; the safe choice for a claim), bh (Benjamini-Hochberg: the expected share of false "
            "differences; more power, for screening many benchmarks), none.",
            metavar="holm|bh|none",
        ),
    ] = "holm",
    test: Annotated[
        str | None,
        typer.Option(
            "--test",
            help="The paired test behind each p-value: sign-flip (the default: the paired randomization "
            "test, mid-p, exact up to 16 differing prompts; more power where most prompts are always or "
            "never solved), t (Student's t over the prompts) or signed-rank (Wilcoxon's, mid-p: whether B "
            "tends to beat A on a prompt, not the mean). The interval is --interval's either way. A "
            "validate --json summary is compared by Welch's t.",
            metavar="sign-flip|t|signed-rank",
        ),
    ] = None,
    interval: Annotated[
        str | None,
        typer.Option(
            "--interval",
            help="The interval of each difference (and of the adjusted intervals and --margin tests): "
            "newcombe (the default: Newcombe's method 10 on each run's wilson-edge interval; it kept 95% "
            "coverage in every simulated cell, 30-1,000 prompts, mean rates 0.01-0.99, where the t fell "
            "to 0.33 near the edges, at a wider interval there; Student's t where a metric's values are "
            "not rates in [0, 1]), t (Student's t over the prompts: a point when every prompt's "
            "difference is the same) or inverted (the sign-flip test's inversion). Near the edges the "
            "test's p-value and the interval can disagree at the margin. The method is named under each "
            "table and in --json (ci_method).",
            metavar="newcombe|t|inverted",
        ),
    ] = None,
    margin: Annotated[
        float | None,
        typer.Option(
            "--margin",
            help="A difference that does not matter (0.01: one point): per metric the two one-sided "
            "tests against -DELTA and +DELTA and a verdict (better, equivalent within / no worse than "
            "DELTA, worse, inconclusive).",
            metavar="DELTA",
        ),
    ] = None,
) -> None:
    """Compare evaluations on the same prompts: paired differences, intervals, p-values, pass@k curves."""
    _check_options(runs, confidence, n_boot, k, json_out, plot, adjust, margin, test, interval)
    loaded = _load_runs(runs, KeyOptions(uid_key, source_key, value_keys, pred_key, cluster_key), step)
    out = Console()
    if not out.is_terminal:  # logs and pipes: a table as wide as it needs, not 80 columns
        out = Console(width=160)
    for i, r in enumerate(loaded):
        out.print(
            f"{chr(65 + i)} = {escape(r.name)}: {escape(_describe(r))}", highlight=False, soft_wrap=True
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            tables = _prompt_tables(loaded, k, pred_key, seed)
            results = [
                (
                    other,
                    _compare_pair(
                        loaded[0],
                        other,
                        tables,
                        k,
                        pred_key,
                        confidence,
                        curves,
                        n_boot,
                        seed,
                        (test, interval),
                    ),
                )
                for other in loaded[1:]
            ]
            results = _adjusted(results, adjust, margin)
        except (ValueError, TypeError) as e:
            _fail(str(e))
    if k is not None:
        _check_k(k, tables)
    err = Console(stderr=True)
    for w in caught:
        err.print(f"[yellow]warning:[/yellow] {escape(str(w.message))}", highlight=False, soft_wrap=True)
    _print_results(out, err, loaded[0], results, tables, confidence)
    if json_out is not None:
        try:
            write_json(json_out, _payload(loaded, results, confidence, margin, interval))
        except OSError as e:
            _fail(f"--json: could not write {json_out}: {e.strerror or e}")
        err.print(f"wrote {json_out}")
    if plot is not None:
        try:
            _plot(loaded, results, plot)
        except (ImportError, ValueError) as e:
            _fail(str(e))
        except OSError as e:
            _fail(f"--plot: could not write {plot}: {e.strerror or e}")
        err.print(f"wrote {plot}")


def _fail(message: str) -> NoReturn:
    """Print ``message`` as an error and exit with status 2."""
    Console(stderr=True).print(
        f"[bold red]error:[/bold red] {escape(str(message))}", highlight=False, soft_wrap=True
    )
    raise typer.Exit(code=_EXIT_BAD_INPUT)


def _check_options(
    runs: list[Path],
    confidence: float,
    n_boot: int,
    k: list[int] | None,
    json_out: Path | None,
    plot: Path | None,
    adjust: str,
    margin: float | None,
    test: str | None = None,
    interval: str | None = None,
) -> None:
    """Fail on a wrong option before reading anything."""
    from rlmetrics.validation.comparison.equivalence import check_margin
    from rlmetrics.validation.comparison.family import ADJUST_CHOICES
    from rlmetrics.validation.comparison.paired import INTERVALS, TESTS

    if len(runs) < 2:
        _fail(f"compare needs at least two runs (A, then B ...); got {len(runs)}")
    if not 0.0 < confidence < 1.0:
        _fail(f"--confidence must be in (0, 1); got {confidence}")
    if n_boot < 100:
        _fail(f"--n-boot must be at least 100; got {n_boot}")
    if adjust not in ADJUST_CHOICES:
        _fail(f"--adjust must be one of {', '.join(ADJUST_CHOICES)}; got {adjust!r}")
    if test is not None and test not in TESTS:
        _fail(f"--test must be one of {', '.join(TESTS)}; got {test!r}")
    if interval is not None and interval not in INTERVALS:
        _fail(f"--interval must be one of {', '.join(INTERVALS)}; got {interval!r}")
    if margin is not None:
        try:
            check_margin(margin, "--margin")
        except ValueError as e:
            _fail(str(e))
    if k is not None and any(not 1 <= v <= MAX_K for v in k):
        _fail(f"--k values must be integers in [1, 2**63 - 1]; got {', '.join(map(str, k))}")
    for target, opt in ((json_out, "--json"), (plot, "--plot")):
        problem = None if target is None else check_target(target, opt)
        if problem is not None:
            _fail(problem)
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            _fail("--plot needs matplotlib: pip install 'rlmetrics[plot]'")


def _load_runs(paths: list[Path], opts: KeyOptions, step: int | None) -> list[Run]:
    """Each run read (a dump, a folder of dumps or a summary), same names told apart."""
    from rlmetrics.readers.dumps import DumpError

    loaded: list[Run] = []
    names: dict[str, int] = {}
    for path in paths:
        try:
            run = load_run(path, opts, step=step)
        except (DumpError, ValueError, TypeError, ImportError) as e:
            _fail(str(e))
        except OSError as e:  # a file that cannot be read (permissions, a device error)
            _fail(f"cannot read {path}: {e}")
        except (RecursionError, MemoryError) as e:
            _fail(f"{path}: too large or too deeply nested to read ({type(e).__name__})")
        if run.name in names:  # the same folder twice (e.g. two steps): tell them apart
            names[run.name] += 1
            run.name = f"{run.name}#{names[run.name]}" if run.step is None else f"{run.name}@{run.step}"
        else:
            names[run.name] = 1
        loaded.append(run)
    return loaded


def _prompt_tables(loaded: list[Run], k: list[int] | None, pred_key: str, seed: int) -> dict[int, Any]:
    """The per-prompt tables of each run with rollouts (summaries have none), by ``id(run)``."""
    from rlmetrics.validation.exact.summary import prompt_estimates

    tables = {}
    for run in loaded:
        if run.inputs is not None:
            data = run.inputs
            tables[id(run)] = prompt_estimates(
                data.sources,
                data.uids,
                data.infos,
                ks=k,
                pred_key=pred_key,
                clusters=data.clusters,
                seed=seed,
            )
    return tables


def _compare_pair(
    base: Run,
    other: Run,
    tables: dict[int, Any],
    k: list[int] | None,
    pred_key: str,
    confidence: float,
    curves: bool,
    n_boot: int,
    seed: int,
    methods: tuple[str | None, str | None] = (None, None),
) -> list[Any]:
    """B (``other``) against A (``base``): paired on their prompts, or unpaired from summaries;
    ``methods`` the ``--test`` and ``--interval`` given (None: the default)."""
    from rlmetrics.validation.comparison.paired import DEFAULT_INTERVAL, DEFAULT_TEST
    from rlmetrics.validation.comparison.tables import compare_summaries, compare_tables

    test, interval = methods
    if base.inputs is not None and other.inputs is not None:
        return compare_tables(
            tables[id(base)],
            tables[id(other)],
            confidence=confidence,
            curves=curves,
            n_boot=n_boot,
            seed=seed,
            adjust="none",  # adjusted once, over every B (_adjusted)
            test=DEFAULT_TEST if test is None else test,
            interval=DEFAULT_INTERVAL if interval is None else interval,
        )
    for option, given in (("--test", test), ("--interval", interval)):
        if given not in (None, "t"):
            raise ValueError(
                f"{option} {given} needs the prompts of both runs (rollout dumps); {base.name} vs "
                f"{other.name} is compared unpaired from validate --json summaries (Welch's t)"
            )
    return compare_summaries(
        _summary(base, k, pred_key), _summary(other, k, pred_key), confidence=confidence, adjust="none"
    )


def _adjusted(
    results: list[tuple[Run, list[Any]]], adjust: str, margin: float | None
) -> list[tuple[Run, list[Any]]]:
    """Every comparison of the call adjusted as one family (and tested against the margin)."""
    from rlmetrics.validation.comparison.family import adjust_comparisons

    flat = adjust_comparisons([c for _, cmps in results for c in cmps], method=adjust, margin=margin)
    out, start = [], 0
    for other, cmps in results:
        out.append((other, flat[start : start + len(cmps)]))
        start += len(cmps)
    return out


def _check_k(k: list[int], tables: dict[int, Any]) -> None:
    """Fail for a ``--k`` above the samples of every prompt of every run."""
    most = max(
        (
            int(t.counts.max())
            for run_tables in tables.values()
            for by_var in run_tables.values()
            for t in by_var.values()
            if t.counts.size
        ),
        default=None,
    )
    above = [v for v in dict.fromkeys(k) if most is not None and v > most]
    if above:
        _fail(
            f"--k {', '.join(map(str, above))}: above the samples of every prompt (at most {most}); "
            "@k needs k <= the samples of a prompt"
        )


def _print_results(
    out: Console,
    err: Console,
    base: Run,
    results: list[tuple[Run, list[Any]]],
    tables: dict[int, Any],
    confidence: float,
) -> None:
    for other, cmps in results:
        if not cmps:
            err.print(
                f"[yellow]warning:[/yellow] {escape(base.name)} and {escape(other.name)} share no "
                "data source and variable",
                highlight=False,
            )
        for cmp in cmps:
            _print_table(out, base, other, cmp, _is_binary(tables.get(id(base)), cmp), confidence)
    _print_family(out, results)


def _payload(
    loaded: list[Run],
    results: list[tuple[Run, list[Any]]],
    confidence: float,
    margin: float | None,
    interval: str | None = None,
) -> dict[str, Any]:
    """The ``--json`` document: the runs read, the family, every comparison as plain data.

    ``interval`` is the ``--interval`` asked for (the default's name when none was); each table's
    ``metrics`` hold the unadjusted differences, each naming its interval method (``ci_method``),
    ``adjusted`` the family's p-values and intervals (and verdicts), ``margins`` the two one-sided
    tests.
    """
    from rlmetrics.validation.comparison.paired import DEFAULT_INTERVAL

    family = next((c.family for _, cmps in results for c in cmps if c.family is not None), None)
    return {
        "runs": [
            {
                "name": r.name,
                "path": str(r.path),
                "step": r.step,
                "n_steps": r.n_steps,
                "files": [str(f) for f in r.files],
                "kind": "summary" if r.summary is not None else "rollouts",
                "n_samples": None if r.inputs is None else r.inputs.n_rows,
            }
            for r in loaded
        ],
        "confidence": confidence,
        "interval": DEFAULT_INTERVAL if interval is None else interval,
        "family": None if family is None else vars(family),
        "margin": margin,
        "comparisons": [
            {"a": loaded[0].name, "b": other.name, "tables": [c.as_dict() for c in cmps]}
            for other, cmps in results
        ],
    }


def _summary(run: Run, k: list[int] | None, pred_key: str) -> dict[str, Any]:
    from rlmetrics.validation.exact.summary import summarize_validation

    if run.summary is not None:
        return run.summary
    assert run.inputs is not None
    i = run.inputs
    return summarize_validation(i.sources, i.uids, i.infos, ks=k, pred_key=pred_key, clusters=i.clusters)


def _is_binary(tables: Any, cmp: Any) -> bool:
    if tables is not None:
        t = tables.get(cmp.source, {}).get(cmp.variable)
        if t is not None:
            return bool(t.binary)
    return any(name.startswith("pass@") for name in cmp.metrics)
