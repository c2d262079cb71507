"""``rlmetrics plan``: how many prompts, and samples a prompt, to detect a difference of ``--mde``.

The argument is a pilot evaluation: a rollout dump, or a folder of them (its last step, or
``--step``), read as ``rlmetrics compare`` reads them. Per data source and 0/1 variable, its
spread (the between-prompt variance of the prompts' rates and the within-prompt variance of a
sample, :func:`rlmetrics.validation.comparison.plan.pilot_spread`) gives, for each number of
samples a prompt, the prompts at which a two-sided test detects a difference of ``--mde`` with
the power asked (:func:`~rlmetrics.validation.comparison.plan.plan_evaluation`, normal
approximation). Variables that are not 0/1 are skipped (the Python API takes their within-prompt
variances).

Exit status: 0 on success, 2 on unreadable input, a wrong option or an output that could not be
written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.cli._files import check_target, write_json
from rlmetrics.cli._rollouts import KeyOptions, SourceKey, UidKey, ValueKeys
from rlmetrics.cli.compare import _fail, _fmt, _load_runs, _prompt_tables

__all__ = ["plan"]

EPILOG = """\
Examples:

  rlmetrics plan pilot/val.jsonl --mde 0.02

  rlmetrics plan val_generations --mde 0.01 --correlation 0.8 --samples 4 --samples 16 --max-prompts 500

Exit status: 0 planned, 2 unreadable input, a wrong option or an output not written.
"""


def plan(
    pilot: Annotated[
        Path, typer.Argument(help="A pilot evaluation: a dump (.jsonl/.parquet) or a folder of dumps.")
    ],
    mde: Annotated[float, typer.Option("--mde", help="The difference to detect (0.02: two points).")],
    power: Annotated[float, typer.Option("--power", help="Probability of detecting it.")] = 0.8,
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided level of the test.")] = 0.05,
    paired: Annotated[
        bool,
        typer.Option("--paired/--unpaired", help="Both runs on the same prompts, compared prompt by prompt."),
    ] = True,
    correlation: Annotated[
        float,
        typer.Option("--correlation", help="Paired: assumed correlation of the two runs' per-prompt rates."),
    ] = 0.5,
    samples: Annotated[
        list[int] | None,
        typer.Option(
            "--samples",
            help="A number of samples a prompt to plan for (repeatable).",
            show_default="1, 2, 4 ... 64",
        ),
    ] = None,
    max_prompts: Annotated[
        int | None, typer.Option("--max-prompts", help="Prompts available: options needing more are marked.")
    ] = None,
    uid_key: UidKey = "uid",
    source_key: SourceKey = "data_source",
    value_keys: ValueKeys = None,
    step: Annotated[
        int | None,
        typer.Option("--step", help="For a folder of per-step dumps: the step to read (default: the last)."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the plans as JSON here.")] = None,
) -> None:
    """Plan an evaluation from a pilot: prompts and samples a prompt to detect a difference."""
    from rlmetrics.validation.comparison.plan import DEFAULT_PLAN_SAMPLES, plan_evaluation

    problem = None if json_out is None else check_target(json_out, "--json")
    if problem is not None:
        _fail(problem)
    kwargs: dict[str, Any] = {
        "mde": mde,
        "power": power,
        "alpha": alpha,
        "paired": paired,
        "correlation": correlation,
        "n_samples": samples or DEFAULT_PLAN_SAMPLES,
        "max_prompts": max_prompts,
    }
    try:  # every option checked before reading the pilot
        from rlmetrics.validation.comparison.plan import PilotSpread

        plan_evaluation(PilotSpread(0.5, 0.1, 0.2, 2, 2.0), **kwargs)
    except (ValueError, TypeError) as e:
        _fail(f"{e}".replace("n_samples", "--samples").replace("max_prompts", "--max-prompts"))
    (run,) = _load_runs([pilot], KeyOptions(uid_key, source_key, value_keys, "pred", None), step)
    if run.inputs is None:
        _fail(f"{pilot}: a validate summary has no per-prompt data; plan needs a rollout dump")
    try:
        tables = _prompt_tables([run], [1], "pred", 0)[id(run)]
        plans = [
            (src, var, plan_evaluation(t, **kwargs) if t.binary else None)
            for src, per_var in tables.items()
            for var, t in per_var.items()
        ]
    except (ValueError, TypeError) as e:
        _fail(str(e))
    out = Console()
    if not out.is_terminal:
        out = Console(width=120)
    err = Console(stderr=True)
    out.print(f"pilot: {escape(str(pilot))}: {run.inputs.n_rows} samples", highlight=False, soft_wrap=True)
    for src, var, p in plans:
        if p is None:
            err.print(
                f"[yellow]note:[/yellow] {escape(src)} / {escape(var)}: not 0/1 values, skipped",
                highlight=False,
            )
        else:
            _print_plan(out, src, var, p)
    if all(p is None for _, _, p in plans):
        _fail("no 0/1 variable to plan for (pass --value-key with a 0/1 key)")
    if json_out is not None:
        payload = {
            "pilot": str(pilot),
            "step": run.step,
            "plans": [{"source": s, "variable": v, **p.as_dict()} for s, v, p in plans if p is not None],
        }
        try:
            write_json(json_out, payload)
        except OSError as e:
            _fail(f"--json: could not write {json_out}: {e.strerror or e}")
        err.print(f"wrote {json_out}")


def _print_plan(out: Console, src: str, var: str, p: Any) -> None:
    from rich.table import Table

    s = p.spread
    head = (
        f"{src} / {var}: detect {p.mde:g} with power {p.power:g} at {p.alpha:g} "
        f"(pilot: {s.n_prompts} prompts, {s.n_samples:.3g} samples a prompt, mean {s.mean:.4f})"
    )
    table = Table(title=escape(head), title_justify="left", highlight=False)
    cols = ["samples a prompt", "prompts", "samples a run", "SE of B - A", "power"]
    if p.max_prompts is not None:
        cols.append(f"within {p.max_prompts}")
    for col in cols:
        table.add_column(escape(col), justify="right")
    for row in p.rows:
        cells = [
            str(row.n_samples),
            f"{row.n_prompts:,}",
            f"{row.total_samples:,}",
            _fmt(row.se),
            _fmt(row.power, 3),
        ]
        if p.max_prompts is not None:
            cells.append("yes" if row.feasible else "no")
        table.add_row(*cells, style=None if row.feasible else "dim")
    out.print()
    out.print(table)
    out.print(
        f"between-prompt variance {s.var_between:.4g}, within-prompt {s.var_within:.4g}; "
        f"with unlimited samples a prompt: {p.min_prompts:,} prompts",
        highlight=False,
    )
    out.print(f"[dim]{escape(p.method)}[/dim]")
