"""``rlmetrics demo``: run :func:`rlmetrics.demo.run.run_demo` with a progress bar and a summary."""

from __future__ import annotations

import inspect
import math
import shlex
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics import keys as K
from rlmetrics.cli._files import check_folder
from rlmetrics.demo.run import SUMMARY_KEYS, DemoConfig, DemoResult, run_demo, val_acc_key
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
    off_policy_lag: Annotated[
        int,
        typer.Option(
            help="Train on rollouts generated this many policy versions ago (a queue of past "
            "rollouts, as an asynchronous pipeline); logs staleness/... 0: on-policy."
        ),
    ] = DemoConfig.off_policy_lag,
    off_policy_growth: Annotated[
        float,
        typer.Option(
            help="Extra rollouts the generator writes a step beyond the trainer's one: the lag "
            "grows by about G/(1+G) versions a step (the generator outruns the trainer). 0: a fixed lag."
        ),
    ] = DemoConfig.off_policy_growth,
    max_staleness: Annotated[
        int | None,
        typer.Option(
            help="Drop queued rollouts staler than this many versions before training "
            "(staleness/dropped/...); at least --off-policy-lag. Default: nothing dropped."
        ),
    ] = DemoConfig.max_staleness,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Train a tiny policy with GRPO on the CPU (string reversal) and log every metric family.

    Writes OUT_DIR/rlmetrics-demo/EXPERIMENT/metrics.jsonl; draw it with `rlmetrics report`.
    A run already there is kept: this one is then EXPERIMENT-2 (-3, ...), as the summary says.

    Break it on purpose to see a failure in the metrics: e.g. --lr 0.05, --max-response-length 3,
    or --kl-coef 0 --lr 0.003 --n-letters 20 --warm-start-steps 0 (the policy drifts from the
    reference, the reward stays flat). --off-policy-lag 4 trains four versions behind: the
    rollout/training mismatch (rollout_corr/...) grows with the lag (staleness/...);
    --off-policy-growth 1 lets the generator outrun the trainer (the lag grows without bound:
    staleness_growth), --max-staleness 8 with it drops the surplus instead (staleness_drops).
    """
    given = dict(locals())  # the options as typed: the first statement, before any other name
    console = Console()
    cfg = _config(given)
    _check_ready(console, out_dir)
    _print_start(console, cfg)
    result = _train(
        console,
        cfg,
        out_dir=out_dir,
        backends=backends,
        experiment=experiment,
        quiet=quiet,
        command=command_line(given),
    )
    _print_summary(console, cfg, result)


#: The demo's options that are not :class:`DemoConfig` fields: where the run goes, how it shows.
_RUN_OPTIONS = frozenset({"out_dir", "backends", "experiment", "quiet"})


def command_line(given: Mapping[str, Any]) -> str:
    """The ``rlmetrics demo`` command line of the options ``given`` (those that differ from the
    defaults, in the command's order), as a run records it in its ``command``.

    Examples
    --------
    >>> command_line({"steps": 20, "lr": 0.05, "seed": 0, "out_dir": "my runs", "quiet": True})
    "rlmetrics demo --steps 20 --out-dir 'my runs' --lr 0.05 --quiet"
    """
    words = ["rlmetrics", "demo"]
    for name, parameter in inspect.signature(demo).parameters.items():
        if name not in given or given[name] == parameter.default:
            continue
        value, flag = given[name], "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag)  # --quiet, the only flag: its default is False
        else:
            words += [flag, shlex.quote(str(value))]
    return " ".join(words)


def _config(given: Mapping[str, Any]) -> DemoConfig:
    """The :class:`DemoConfig` of the command's options (each named as its field); a bad value is
    a usage error naming the option."""
    fields = {name: value for name, value in given.items() if name not in _RUN_OPTIONS}
    try:
        return DemoConfig(**fields)
    except ValueError as err:  # DemoConfig names the field first: "algo must be ..."
        field = str(err).split(" ", 1)[0]
        hint = f"--{field.replace('_', '-')}" if field in DemoConfig.__dataclass_fields__ else None
        raise typer.BadParameter(str(err), param_hint=hint) from None


def _fail(console: Console, message: str) -> NoReturn:
    """Print ``message`` (rich markup) as the command's error and exit with status 1."""
    console.print(message, soft_wrap=True)
    raise typer.Exit(code=1)


def _check_ready(console: Console, out_dir: Path) -> None:
    """torch is installed and the run folder can be written, or the command exits saying so."""
    try:
        import torch  # noqa: F401
    except ImportError:
        _fail(console, "[red]the demo needs torch:[/] " + escape(TORCH_INSTALL))
    if problem := check_folder(out_dir, "--out-dir"):  # before any training
        _fail(console, f"[red]error:[/] {escape(problem)}")


def _print_start(console: Console, cfg: DemoConfig) -> None:
    console.print(
        f"rlmetrics demo: {cfg.algo.upper()} on string reversal, {cfg.steps} step{'s' * (cfg.steps != 1)} of "
        f"{cfg.n_prompts} prompts x {cfg.group_size} samples, seed {cfg.seed}, "
        f"rollout in {cfg.rollout_precision}",
        soft_wrap=True,
    )


def _train(
    console: Console,
    cfg: DemoConfig,
    *,
    out_dir: Path,
    backends: str,
    experiment: str | None,
    quiet: bool,
    command: str,
) -> DemoResult:
    """:func:`run_demo` under a progress bar; its errors as the command's."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=quiet,
    )
    try:
        with progress, warnings.catch_warnings():
            # the summary says it, in a line of its own, instead of a Python warning
            warnings.filterwarnings(
                "ignore", message=r"run directory .* exists: this run is", category=RuntimeWarning
            )
            on_step = _progress_line(progress, progress.add_task("training", total=cfg.steps, info=""), cfg)
            return run_demo(
                cfg,
                out_dir=out_dir,
                backends=backends,
                experiment=experiment,
                on_step=on_step,
                command=command,
            )
    except ValueError as err:  # an unknown backend name
        raise typer.BadParameter(str(err), param_hint="--backends") from None
    except ImportError as err:  # a backend's package is not installed
        _fail(console, f"[red]error:[/] {escape(str(err))}")
    except OSError as err:  # the run folder could not be written (a full disk, permissions)
        _fail(
            console, f"[red]error:[/] cannot write the run under {escape(str(out_dir))}: {escape(str(err))}"
        )


def _progress_line(progress: Any, task_id: Any, cfg: DemoConfig) -> Callable[[int, dict[str, float]], None]:
    """The ``on_step`` of :func:`run_demo`: the bar at the step, the score and the last validation."""
    val_key = val_acc_key(cfg)
    state = {"val": math.nan}

    def on_step(step: int, m: dict[str, float]) -> None:
        if val_key in m:
            state["val"] = m[val_key]
        score = m.get(K.SCORE_MEAN, math.nan)
        progress.update(task_id, completed=step, info=f"score {score:.3f}  val acc {state['val']:.3f}")

    return on_step


def _print_summary(console: Console, cfg: DemoConfig, result: DemoResult) -> None:
    """The last step's key metrics as a table, then where the run is and the next command."""
    from rich.table import Table

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
