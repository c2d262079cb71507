"""``rlmetrics seeds``: one configuration trained with several seeds, or two configurations compared.

Each argument is one seed's evaluation: a rollout dump, or a folder of them (its last step, or
``--step``), read as ``rlmetrics compare`` reads them. Per data source, variable and metric: the
mean over seeds with a Student-t interval over the seed means, the spread between seeds, the
between-seed, between-prompt and residual variance components
(:func:`rlmetrics.validation.comparison.seeds.combine_seeds`) and the standard error one seed's
evaluation would report over prompts. With ``--vs`` (repeatable), a second configuration's seeds,
and the difference B - A by Welch's t on the seed means
(:func:`~rlmetrics.validation.comparison.seeds.compare_seed_groups`).

Exit status: 0 on success, 2 on unreadable input, fewer than two seeds a side, seeds on different
prompts (without ``--common-prompts``) or an output that could not be written.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.cli._files import check_target, write_json
from rlmetrics.cli._rollouts import (
    Confidence,
    KeyOptions,
    Ks,
    PredKey,
    Run,
    SourceKey,
    Step,
    UidKey,
    ValueKeys,
)
from rlmetrics.cli.compare import _fail, _fmt, _fmt_p, _load_runs, _prompt_tables, _shown_metric

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["seeds"]

EPILOG = """\
Examples:

  rlmetrics seeds runs/seed0/val_generations runs/seed1/val_generations runs/seed2/val_generations

  rlmetrics seeds a/s0 a/s1 a/s2 --vs b/s0 --vs b/s1 --vs b/s2 --json seeds.json

Exit status: 0 done, 2 unreadable input, a wrong option or an output not written.
"""


def seeds(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="One evaluation per seed: dumps (.jsonl/.parquet) or folders of dumps.", show_default=False
        ),
    ],
    vs: Annotated[
        list[Path] | None,
        typer.Option(
            "--vs", help="A seed of a second configuration B (repeatable): B - A, seeds as the unit."
        ),
    ] = None,
    uid_key: UidKey = "uid",
    source_key: SourceKey = "data_source",
    value_keys: ValueKeys = None,
    pred_key: PredKey = "pred",
    k: Ks = None,
    step: Step = None,
    confidence: Confidence = 0.95,
    common_prompts: Annotated[
        bool,
        typer.Option("--common-prompts", help="Use the prompts every seed has (else seeds must share all)."),
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")] = None,
) -> None:
    """Combine evaluations of several training seeds: variance components, an interval over seeds."""
    group_b = list(vs or [])
    if len(runs) < 2:
        _fail(f"seeds needs at least two seeds (one evaluation each); got {len(runs)}")
    if group_b and len(group_b) < 2:
        _fail(f"--vs needs at least two seeds of configuration B; got {len(group_b)}")
    if not 0.0 < confidence < 1.0:
        _fail(f"--confidence must be in (0, 1); got {confidence}")
    problem = None if json_out is None else check_target(json_out, "--json")
    if problem is not None:
        _fail(problem)
    opts = KeyOptions(uid_key, source_key, value_keys, pred_key, None)
    loaded = _load_runs(list(runs) + group_b, opts, step)
    for run in loaded:
        if run.inputs is None:
            _fail(f"{run.path}: a validate summary has no per-prompt data; seeds needs rollout dumps")
    side_a, side_b = loaded[: len(runs)], loaded[len(runs) :]
    out = Console()
    if not out.is_terminal:
        out = Console(width=120)
    for label, side in (("A", side_a), ("B", side_b)):
        if side:
            names = ", ".join(escape(r.name) for r in side)
            out.print(f"{label}: {len(side)} seeds ({names})", highlight=False, soft_wrap=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            tables = _prompt_tables(loaded, k, pred_key, 0)
            results = _combine(side_a, side_b, tables, confidence, common_prompts)
        except (ValueError, TypeError) as e:
            _fail(str(e))
    err = Console(stderr=True)
    for message in dict.fromkeys(str(w.message) for w in caught):
        err.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)
    if not results:
        _fail("the seeds share no data source and variable")
    for entry in results:
        _print_entry(out, entry, confidence)
    if json_out is not None:
        payload = {
            "a": [_run_dict(r) for r in side_a],
            "b": [_run_dict(r) for r in side_b],
            "confidence": confidence,
            "tables": [
                {
                    "source": e["source"],
                    "variable": e["variable"],
                    "metrics": {name: s.as_dict() for name, s in e["metrics"].items()},
                    "comparison": {name: c.as_dict() for name, c in e["comparison"].items()},
                }
                for e in results
            ],
        }
        try:
            write_json(json_out, payload)
        except OSError as e:
            _fail(f"--json: could not write {json_out}: {e.strerror or e}")
        err.print(f"wrote {json_out}")


def _run_dict(run: Run) -> dict[str, Any]:
    assert run.inputs is not None
    return {"name": run.name, "path": str(run.path), "step": run.step, "n_samples": run.inputs.n_rows}


def _combine(
    side_a: list[Run], side_b: list[Run], tables: dict[int, Any], confidence: float, common: bool
) -> list[dict[str, Any]]:
    """Per (source, variable) every seed has: each metric combined (and compared with B)."""
    from rlmetrics.validation.comparison.seeds import combine_seeds, compare_seed_groups

    everyone = side_a + side_b
    first = tables[id(side_a[0])]
    results = []
    for src, per_var in first.items():
        for var, table in per_var.items():
            found = [tables[id(r)].get(src, {}).get(var) for r in everyone]
            if any(t is None for t in found):
                continue
            names = [n for n in table.names if all(n in t.names for t in found)]
            a = {r.name: t for r, t in zip(side_a, found)}
            b = {r.name: t for r, t in zip(side_b, found[len(side_a) :])}
            entry: dict[str, Any] = {
                "source": src,
                "variable": var,
                "binary": table.binary,
                "metrics": {},
                "comparison": {},
            }
            for name in names:
                entry["metrics"][name] = combine_seeds(
                    a, metric=name, confidence=confidence, common_prompts=common
                )
                if b:
                    entry["comparison"][name] = compare_seed_groups(
                        a, b, metric=name, confidence=confidence, common_prompts=common
                    )
            results.append(entry)
    return results


def _print_entry(out: Console, entry: dict[str, Any], confidence: float) -> None:
    """Print one (source, variable): the seeds' table of A, then B - A where there is a B."""
    level = f"{confidence:.0%}"
    shown = [n for n in entry["metrics"] if _shown_metric(n, entry["binary"])]
    out.print()
    out.print(_seed_table(entry, shown, level))
    out.print(
        "[dim]interval: Student t over the seed means; variance components: two-way crossed random "
        "effects, method of moments; SE prompts: one seed's standard error over prompts[/dim]"
    )
    if entry["comparison"]:
        out.print()
        out.print(_comparison_table(entry, shown, level))
        out.print("[dim]Welch t over seed means; MDE: smallest difference detected with 80% power[/dim]")


def _seed_table(entry: dict[str, Any], shown: list[str], level: str) -> Table:
    """A's metrics combined over its seeds: mean, interval, spreads and variance components."""
    from rich.table import Table

    any_s = next(iter(entry["metrics"].values()))
    head = f"{entry['source']} / {entry['variable']}: {any_s.n_seeds} seeds, {any_s.n_prompts} prompts (A)"
    table = Table(title=escape(head), title_justify="left", highlight=False)
    for col in (
        "metric",
        "mean",
        f"{level} interval (seeds)",
        "sd seeds",
        "SE prompts",
        "var seed",
        "var prompt",
        "var resid",
        "seed share",
    ):
        table.add_column(escape(col), justify="left" if col == "metric" else "right")
    for name in shown:
        s = entry["metrics"][name]
        table.add_row(
            name,
            _fmt(s.mean),
            f"[{_fmt(s.ci_low)}, {_fmt(s.ci_high)}]",
            _fmt(s.se * math.sqrt(s.n_seeds)),
            _fmt(s.se_prompts),
            f"{s.var_seed:.2e}",
            f"{s.var_prompt:.2e}",
            f"{s.var_residual:.2e}",
            _fmt(s.seed_share, 2),
        )
    return table


def _comparison_table(entry: dict[str, Any], shown: list[str], level: str) -> Table:
    """B - A per metric with seeds as the unit; a row green or red where its interval excludes 0."""
    from rich.table import Table

    table = Table(
        title=escape(f"{entry['source']} / {entry['variable']}: B - A, seeds as the unit"),
        title_justify="left",
        highlight=False,
    )
    for col in ("metric", "A", "B", "B - A", f"{level} interval", "p", "MDE", "seeds A/B"):
        table.add_column(escape(col), justify="left" if col == "metric" else "right")
    for name in shown:
        c = entry["comparison"][name]
        style = None
        if math.isfinite(c.ci_low) and (c.ci_low > 0 or c.ci_high < 0):
            style = "green" if c.diff > 0 else "red"
        table.add_row(
            name,
            _fmt(c.a.mean),
            _fmt(c.b.mean),
            f"{c.diff:+.4f}",
            f"[{_fmt(c.ci_low)}, {_fmt(c.ci_high)}]",
            _fmt_p(c.p_value),
            _fmt(c.mde),
            f"{c.a.n_seeds}/{c.b.n_seeds}",
            style=style,
        )
    return table
