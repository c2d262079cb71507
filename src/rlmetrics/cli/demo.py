"""``rlmetrics demo``: run :func:`rlmetrics.demo.run.run_demo` with a progress bar and a summary."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics import keys as K
from rlmetrics.cli._files import check_folder
from rlmetrics.demo.run import SUMMARY_KEYS, DemoConfig, run_demo, val_acc_key
from rlmetrics.demo.task import TORCH_INSTALL

__all__ = ["demo"]


def demo(
    steps: Annotated[int, typer.Option(help="Training steps.")] = DemoConfig.steps,
    seed: Annotated[
        int, typer.Option(min=0, help="Seed of the parameters, prompts and samples.")
    ] = DemoConfig.seed,
    algo: Annotated[str, typer.Option(help="grpo, or ppo (with a critic).")] = DemoConfig.algo,
    out_dir: Annotated[Path, typer.Option("--out-dir", "-o", help="Root folder of the logs.")] = Path(
        "rlmetrics_runs"
    ),
    backends: Annotated[
        str,
        typer.Option(help="Comma-separated tracking backends: jsonl, console, tensorboard, wandb, mlflow."),
    ] = "jsonl",
    experiment: Annotated[str | None, typer.Option(help="Run name (default: ALGO_seedSEED).")] = None,
    group_size: Annotated[int, typer.Option(help="Responses per prompt.")] = DemoConfig.group_size,
    n_prompts: Annotated[int, typer.Option(help="Prompts per step.")] = DemoConfig.n_prompts,
    val_every: Annotated[int, typer.Option(help="Validate every this many steps.")] = DemoConfig.val_every,
    lr: Annotated[float, typer.Option(help="Learning rate (far too high, e.g. 0.05: entropy collapse).")] = (
        DemoConfig.lr
    ),
    critic_lr: Annotated[
        float | None, typer.Option(help="Learning rate of the PPO critic (default: --lr).")
    ] = DemoConfig.critic_lr,
    kl_coef: Annotated[
        float, typer.Option(help="Weight of the KL loss to the initial policy; 0: measured, not penalised.")
    ] = DemoConfig.kl_coef,
    entropy_coef: Annotated[
        float, typer.Option(help="Weight of the entropy bonus in the actor loss; 0 is off.")
    ] = DemoConfig.entropy_coef,
    max_response_length: Annotated[
        int | None,
        typer.Option(
            help="Response-length limit in tokens (default: longest answer + EOS + 1); "
            "a small one truncates answers."
        ),
    ] = DemoConfig.max_response_length,
    rollout_temperature: Annotated[
        float,
        typer.Option(
            help="Sampling temperature of the rollout; the trainer scores at 1, so another "
            "value is a rollout/training mismatch."
        ),
    ] = DemoConfig.rollout_temperature,
    reward: Annotated[
        str, typer.Option(help="score (fraction of positions right) or acc (1 for an exact answer, else 0).")
    ] = DemoConfig.reward,
    max_len: Annotated[
        int, typer.Option(help="Longest string to reverse (a harder task).")
    ] = DemoConfig.max_len,
    min_len: Annotated[int, typer.Option(help="Shortest string to reverse.")] = DemoConfig.min_len,
    n_letters: Annotated[
        int, typer.Option(help="Alphabet size of the strings (a larger one: a harder task).")
    ] = DemoConfig.n_letters,
    warm_start_steps: Annotated[
        int,
        typer.Option(
            help="Supervised steps that teach the fresh policy the answer's format (its length, then "
            "EOS) before RL; 0: RL from random weights (most early answers run to the limit)."
        ),
    ] = DemoConfig.warm_start_steps,
    rollout_dtype: Annotated[
        str,
        typer.Option(
            help="Precision of generation: auto (bfloat16 where the CPU has it natively, else "
            "bfloat16-weights: float32 arithmetic on bfloat16-rounded weights), bfloat16, float32."
        ),
    ] = DemoConfig.rollout_dtype,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Train a tiny policy with GRPO on the CPU (string reversal) and log every metric family.

    Writes OUT_DIR/rlmetrics-demo/EXPERIMENT/metrics.jsonl; draw it with `rlmetrics report`.
    A run already there is kept: this one is then EXPERIMENT-2 (-3, ...), as the summary says.

    Break it on purpose to see a failure in the metrics: e.g. --lr 0.05, --max-response-length 3,
    or --kl-coef 0 --lr 0.003 --n-letters 20 --warm-start-steps 0 (the policy drifts from the
    reference, the reward stays flat).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    console = Console()
    try:
        cfg = DemoConfig(
            steps=steps,
            seed=seed,
            algo=algo,
            group_size=group_size,
            n_prompts=n_prompts,
            val_every=val_every,
            lr=lr,
            critic_lr=critic_lr,
            kl_coef=kl_coef,
            entropy_coef=entropy_coef,
            max_response_length=max_response_length,
            rollout_temperature=rollout_temperature,
            reward=reward,
            min_len=min_len,
            max_len=max_len,
            n_letters=n_letters,
            rollout_dtype=rollout_dtype,
            warm_start_steps=warm_start_steps,
        )
    except ValueError as err:  # DemoConfig names the field first: "algo must be ..."
        field = str(err).split(" ", 1)[0]
        hint = f"--{field.replace('_', '-')}" if field in DemoConfig.__dataclass_fields__ else None
        raise typer.BadParameter(str(err), param_hint=hint) from None
    try:
        import torch  # noqa: F401
    except ImportError:
        console.print("[red]the demo needs torch:[/] " + escape(TORCH_INSTALL))
        raise typer.Exit(code=1) from None
    if problem := check_folder(out_dir, "--out-dir"):  # before any training
        console.print(f"[red]error:[/] {escape(problem)}", soft_wrap=True)
        raise typer.Exit(code=1)

    val_key = val_acc_key(cfg)
    state = {"val": math.nan}
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=quiet,
    )

    def on_step(step: int, m: dict[str, float]) -> None:
        if val_key in m:
            state["val"] = m[val_key]
        score = m.get(K.SCORE_MEAN, math.nan)
        progress.update(task_id, completed=step, info=f"score {score:.3f}  val acc {state['val']:.3f}")

    console.print(
        f"rlmetrics demo: {cfg.algo.upper()} on string reversal, {cfg.steps} step{'s' * (cfg.steps != 1)} of "
        f"{cfg.n_prompts} prompts x {cfg.group_size} samples, seed {cfg.seed}, "
        f"rollout in {cfg.rollout_precision}",
        soft_wrap=True,
    )
    try:
        with progress, warnings.catch_warnings():
            # the summary says it, in a line of its own, instead of a Python warning
            warnings.filterwarnings(
                "ignore", message=r"run directory .* exists: this run is", category=RuntimeWarning
            )
            task_id = progress.add_task("training", total=cfg.steps, info="")
            result = run_demo(cfg, out_dir=out_dir, backends=backends, experiment=experiment, on_step=on_step)
    except ValueError as err:  # an unknown backend name
        raise typer.BadParameter(str(err), param_hint="--backends") from None
    except ImportError as err:  # a backend's package is not installed
        console.print(f"[red]error:[/] {escape(str(err))}")
        raise typer.Exit(code=1) from None
    except OSError as err:  # the run folder could not be written (a full disk, permissions)
        where = escape(str(out_dir))
        console.print(
            f"[red]error:[/] cannot write the run under {where}: {escape(str(err))}", soft_wrap=True
        )
        raise typer.Exit(code=1) from None

    table = Table(title=f"rlmetrics demo: {result.seconds:.1f} s", show_lines=False)
    table.add_column("metric")
    table.add_column("last step", justify="right")
    table.add_row(
        f"validation accuracy (mean@{cfg.val_samples})",
        f"{result.val_acc[0]:.3f} -> {result.val_acc[-1]:.3f}",
    )
    for key in SUMMARY_KEYS:
        if key in result.last_metrics:
            table.add_row(key, f"{result.last_metrics[key]:.4g}")
    console.print(table)
    # soft_wrap: paths and the next command stay on one line, ready to copy
    if result.renamed_from is not None:
        kept = escape(str(result.run_dir.parent / result.renamed_from))
        console.print(
            f"[yellow]new run:[/] {escape(result.experiment)} ({kept} exists and is kept as it was)",
            soft_wrap=True,
        )
    console.print(f"metrics: {escape(str(result.jsonl_path))}", soft_wrap=True)
    console.print(f"config:  {escape(str(result.run_dir / 'config.json'))}", soft_wrap=True)
    report_dir = escape(str(result.run_dir / "report"))
    console.print(
        f"next:    rlmetrics report {escape(str(result.jsonl_path))} -o {report_dir}", soft_wrap=True
    )
