"""``rlmetrics validate``: validation statistics of rollout dumps (JSONL or Parquet), one or many steps.

Reads verl's validation dumps (one JSON object per line with ``input``, ``output``, ``gts``,
``score``, ``step`` and the extra reward keys such as ``acc`` and ``pred``) or Parquet files, or
folders of them, groups the samples into prompts by ``--uid-key`` (else by ``input``) and data
sources by ``--source-key`` (else one source), and prints :func:`rlmetrics.summarize_validation`:
mean, pass@k, pass^k, best@k, worst@k, maj@k and cover@tau with intervals across prompts
(Wilson on the effective number of prompts unless ``--ci`` says otherwise).

Dumps of several steps (verl's ``val_generations/<step>.jsonl``) give metric-vs-step curves: each
step is read and summarised in turn (only the columns used; memory holds one step), then a table
and ``--plot`` of the headline metrics against the step, and the last step in full.

Exit status: 0 on success; 1 on any error, with a message: bad input (naming the file, the
line and the key), a wrong option, a ``--k`` above the samples of every prompt (without
``--replace``), or an output that could not be written. Outputs (``--json``, ``--plot``) are
written to a temporary file, synced and renamed into place, so nothing is ever left half
written.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics import keys as K
from rlmetrics.cli._files import atomic_path, check_target, write_json
from rlmetrics.cli._rollouts import (
    ClusterKey,
    Confidence,
    KeyOptions,
    Ks,
    PredKey,
    SourceKey,
    UidKey,
    ValueKeys,
    inputs_of,
    read_keys,
)
from rlmetrics.readers.dumps import Dump, ValidateInputError, find_dumps, load_rollouts
from rlmetrics.validation.exact.summary import SummaryOptions

__all__ = ["ValidateInputError", "load_rollouts", "validate"]

#: Largest ``--k`` (the statistics count in int64).
MAX_K = 2**63 - 1


# ----------------------------------------------------------------------------- outputs
def _import_pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install 'rlmetrics[plot]'") from None
    return plt


def _errors(ms: list[dict[str, Any]]) -> list[list[float]]:
    """Asymmetric error bars (value - low, high - value) of summary entries; 0 where undefined."""
    low = [m["value"] - m["ci_low"] if math.isfinite(m["ci_low"]) else 0.0 for m in ms]
    high = [m["ci_high"] - m["value"] if math.isfinite(m["ci_high"]) else 0.0 for m in ms]
    return [low, high]


def _plot(summary: dict[str, Any], target: Path) -> None:
    plt = _import_pyplot()
    sources = list(summary)
    fig, axes = plt.subplots(1, len(sources), figsize=(5 * len(sources), 4), squeeze=False)
    for ax, src in zip(axes[0], sources):
        all_ks: set[int] = set()
        for var, body in summary[src].items():
            metrics = body["metrics"]
            for kind in ("pass", "maj") if body["binary"] else ("best", "maj"):
                pts = sorted(
                    (int(name.split("@")[1]), m) for name, m in metrics.items() if name.startswith(kind + "@")
                )
                if not pts:
                    continue
                ks = [k for k, _ in pts]
                all_ks.update(ks)
                ms = [m for _, m in pts]
                ax.errorbar(
                    ks,
                    [m["value"] for m in ms],
                    yerr=_errors(ms),
                    marker="o",
                    capsize=3,
                    label=f"{var} {kind}@k",
                )
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_ks), [str(k) for k in sorted(all_ks)])
        ax.minorticks_off()
        ax.set_xlabel("k")
        ax.set_title(src)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format=target.suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)


def _headline(body: dict[str, Any]) -> list[str]:
    """The metrics followed across steps: mean@N, then pass@k, pass^k, maj@k at the largest k."""
    metrics = body["metrics"]
    names = [next(name for name in metrics if name.startswith("mean@"))]
    ks = [int(name.split("@")[1]) for name in metrics if name.startswith(("best@", "pass@"))]
    if ks:
        k = max(ks)
        kinds = (f"pass@{k}", f"pass^{k}", f"maj@{k}") if body["binary"] else (f"best@{k}", f"maj@{k}")
        names += [name for name in kinds if name in metrics]
    return names


def _plot_steps(steps: list[tuple[int, dict[str, Any]]], target: Path) -> None:
    plt = _import_pyplot()
    pairs = list(dict.fromkeys((src, var) for _, summary in steps for src in summary for var in summary[src]))
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.5 * len(pairs), 4), squeeze=False)
    for ax, (src, var) in zip(axes[0], pairs):
        bodies = [(step, s[src][var]) for step, s in steps if var in s.get(src, {})]
        for name in _headline(bodies[-1][1]):
            pts = [(step, b["metrics"][name]) for step, b in bodies if name in b["metrics"]]
            xs = [step for step, _ in pts]
            ys = [m["value"] for _, m in pts]
            (line,) = ax.plot(xs, ys, marker=".", label=name)
            lows = [m["ci_low"] if math.isfinite(m["ci_low"]) else m["value"] for _, m in pts]
            highs = [m["ci_high"] if math.isfinite(m["ci_high"]) else m["value"] for _, m in pts]
            ax.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xlabel("step")
        ax.set_title(f"{src} / {var}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format=target.suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)


def _fmt(m: dict[str, Any] | None) -> str:
    """``value [low, high]`` (the interval need not be symmetric), or the value alone."""
    if m is None:
        return ""
    value = m["value"]
    if not math.isfinite(value):
        return "nan"
    if math.isfinite(m["ci_low"]) and math.isfinite(m["ci_high"]):
        return f"{value:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"
    return f"{value:.3f}"


def _interval_note(summary: dict[str, Any]) -> str:
    """'95% Wilson intervals across prompts' from the summary's own ``ci`` entries."""
    cis = [body["ci"] for var2body in summary.values() for body in var2body.values()]
    if not cis:
        return "intervals across prompts"
    ci = cis[0]
    unit = "clusters of prompts" if ci.get("n_clusters") else "prompts"
    names = {
        "wilson-edge": "edge-adjusted Wilson (t where values leave [0, 1])",
        "wilson": "Wilson (t where values leave [0, 1])",
        "t": "Student t",
        "bootstrap": "bootstrap",
    }
    return f"{ci['confidence']:.0%} {names.get(ci['method'], ci['method'])} intervals across {unit}"


def _print_tables(console: Any, summary: dict[str, Any], n_rows: int, n_files: int) -> None:
    from rich.table import Table

    console.print(
        f"[bold]{n_rows}[/bold] samples from {n_files} file(s); {_interval_note(summary)}", highlight=False
    )
    for src, var2body in summary.items():
        for var, body in var2body.items():
            metrics = body["metrics"]
            mean_name = next(name for name in metrics if name.startswith("mean@"))
            spp = body["samples_per_prompt"]
            counts = (
                ", ".join(f"{n}×{c}" for n, c in spp.items())
                if len(spp) > 1
                else f"{next(iter(spp))} samples each"
            )
            title = (
                f"{src} / {var}: {body['n_prompts']} prompts ({counts}), "
                f"{mean_name} = {_fmt(metrics[mean_name])}"
            )
            if body["binary"]:
                covers = [name for name in metrics if name.startswith("cover@") and name != "cover@1"]
                title += (
                    f"\nsolved by all samples {_fmt(metrics['all_solved'])}, "
                    f"by none {_fmt(metrics['none_solved'])}"
                )
                title += "".join(f"\n{name} {_fmt(metrics[name])}" for name in covers)
            ks = sorted({int(name.split("@")[1]) for name in metrics if name.startswith(("best@", "maj@"))})
            console.print()
            console.print(escape(title), highlight=False)
            table = Table()
            table.add_column("k", justify="right")
            kinds = ["pass@", "pass^"] if body["binary"] else ["best@", "worst@"]
            if any(name.startswith("maj@") for name in metrics):
                kinds.append("maj@")
            for kind in kinds:
                table.add_column(f"{kind}k", justify="right", no_wrap=True)
            table.add_column("prompts", justify="right")
            for k in ks:
                row = [str(k)] + [_fmt(metrics.get(f"{kind}{k}")) for kind in kinds]
                row.append(str(metrics.get(f"best@{k}", {}).get("n_prompts", "")))
                table.add_row(*row)
            console.print(table)


def _print_steps(console: Any, steps: list[tuple[int, dict[str, Any]]], n_rows: int) -> None:
    from rich.table import Table

    console.print(
        f"[bold]{n_rows}[/bold] samples in {len(steps)} steps; {_interval_note(steps[-1][1])}",
        highlight=False,
    )
    pairs = list(dict.fromkeys((src, var) for _, summary in steps for src in summary for var in summary[src]))
    for src, var in pairs:
        bodies = [(step, s[src][var]) for step, s in steps if var in s.get(src, {})]
        names = _headline(bodies[-1][1])
        table = Table(title=escape(f"{src} / {var} by step"), title_justify="left")
        table.add_column("step", justify="right")
        table.add_column("prompts", justify="right")
        for name in names:
            table.add_column(name, justify="right", no_wrap=True)
        for step, body in bodies:
            table.add_row(
                str(step), str(body["n_prompts"]), *[_fmt(body["metrics"].get(name)) for name in names]
            )
        console.print()
        console.print(table)


# ----------------------------------------------------------------------------- the command
def validate(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Rollout dumps (.jsonl, verl's validation dump, or .parquet), or folders of them "
            "(per-step dumps give curves against the step).",
            show_default=False,
        ),
    ],
    uid_key: UidKey = "uid",
    source_key: SourceKey = "data_source",
    value_keys: ValueKeys = None,
    pred_key: PredKey = "pred",
    cluster_key: ClusterKey = None,
    k: Ks = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Draw with replacement (the expectation of verl's bootstrap)."),
    ] = False,
    ci: Annotated[
        str,
        typer.Option(
            "--ci",
            help="Interval: wilson-edge (Wilson adjusted near 0 and 1; stays in [0, 1]; t for other "
            "values), wilson (unadjusted), t, or bootstrap (over prompts).",
        ),
    ] = "wilson-edge",
    confidence: Confidence = 0.95,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the summary (per step for several steps) as JSON.")
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Draw pass@k and maj@k against k, or the headline metrics against the step (PNG)."
        ),
    ] = None,
    verl_keys: Annotated[
        bool,
        typer.Option("--verl", help="Also compute verl's bootstrap metrics (val-core/val-aux keys)."),
    ] = False,
) -> None:
    """Summarise validation rollouts: mean, pass@k, pass^k, best@k, worst@k, maj@k, cover@tau, intervals."""
    _check_options(json_out, plot, k, ci, confidence)
    out_console = Console()
    if not out_console.is_terminal:  # logs and pipes: tables as wide as they need, not 80 columns
        out_console = Console(width=120)
    err_console = Console(stderr=True)
    opts = KeyOptions(uid_key, source_key, value_keys, pred_key, cluster_key)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            options = SummaryOptions(ks=k, pred_key=pred_key, replace=replace, ci=ci, confidence=confidence)
            dumps = [d for path in paths for d in find_dumps(path)]
            steps = sorted({d.step for d in dumps if d.step is not None})
            if len(steps) > 1 and verl_keys:
                _fail("--verl summarises one evaluation; give the dump of one step")
            if len(steps) > 1:
                per_step = _summarize_steps(dumps, steps, opts, options, err_console)
            else:
                columns, n_rows = _load(dumps, opts, err_console)
                summary, verl_flat = _summarize(columns, n_rows, opts, options, verl_keys)
                per_step = [(-1, [d.path for d in dumps], n_rows, summary)]
        except (ValidateInputError, ValueError, TypeError, ImportError) as err:
            _fail(str(err))
        except OSError as err:  # a file that cannot be read (permissions, a device error)
            _fail(f"cannot read the input: {err}")
        except (RecursionError, MemoryError) as err:
            _fail(f"the input is too large or too deeply nested to summarise ({type(err).__name__})")
    if k is not None and not replace:
        _check_ks(k, [summary for _, _, _, summary in per_step])
    for w in caught:
        err_console.print(
            f"[yellow]warning:[/yellow] {escape(str(w.message))}", highlight=False, soft_wrap=True
        )
    if len(steps) > 1:
        payload, draw = _render_steps(out_console, dumps, per_step)
    else:
        payload, draw = _render_one(out_console, dumps, summary, n_rows, verl_flat)
    _write_outputs(json_out, plot, payload, draw, err_console)


def _fail(message: str) -> NoReturn:
    """Print ``message`` as an error and exit with status 1."""
    Console(stderr=True).print(
        f"[bold red]error:[/bold red] {escape(str(message))}", highlight=False, soft_wrap=True
    )
    raise typer.Exit(code=1)


def _check_options(
    json_out: Path | None, plot: Path | None, k: list[int] | None, ci: str, confidence: float
) -> None:
    """Fail on a wrong option before reading anything."""
    from rlmetrics.validation.exact.intervals import CI_METHODS

    for target, opt in ((json_out, "--json"), (plot, "--plot")):
        problem = None if target is None else check_target(target, opt)
        if problem is not None:
            _fail(problem)
    if k is not None and any(not 1 <= v <= MAX_K for v in k):
        _fail(f"--k values must be integers in [1, 2**63 - 1]; got {', '.join(map(str, k))}")
    if ci not in CI_METHODS:
        _fail(f"--ci must be one of {', '.join(CI_METHODS)}; got {ci!r}")
    if plot is not None and importlib.util.find_spec("matplotlib") is None:  # before any work
        _fail("--plot needs matplotlib: pip install 'rlmetrics[plot]'")
    if not 0.0 < confidence < 1.0:
        _fail(f"--confidence must be in (0, 1); got {confidence}")


_Steps = list[tuple[int, list[Path], int, dict[str, Any]]]


def _render_steps(console: Any, dumps: list[Dump], per_step: _Steps) -> tuple[dict[str, Any], Any]:
    """Print the by-step tables and the last step in full; the --json payload and the --plot drawer."""
    total = sum(n for _, _, n, _ in per_step)
    curves = [(step, summary) for step, _, _, summary in per_step]
    _print_steps(console, curves, total)
    last_step, last_files, last_rows, last = per_step[-1]
    console.print()
    console.print(f"[bold]step {last_step}[/bold] in full:", highlight=False)
    _print_tables(console, last, last_rows, len(last_files))
    payload: dict[str, Any] = {
        "files": [str(d.path) for d in dumps],
        "n_samples": total,
        "steps": [
            {"step": step, "files": [str(f) for f in files], "n_samples": n, "summary": summary}
            for step, files, n, summary in per_step
        ],
    }
    return payload, lambda target: _plot_steps(curves, target)


def _render_one(
    console: Any, dumps: list[Dump], summary: dict[str, Any], n_rows: int, verl_flat: dict[str, float] | None
) -> tuple[dict[str, Any], Any]:
    """Print one evaluation's tables (and verl's keys); the --json payload and the --plot drawer."""
    _print_tables(console, summary, n_rows, len(dumps))
    payload = {"files": [str(d.path) for d in dumps], "n_samples": n_rows, "summary": summary}
    if verl_flat is not None:
        _print_verl(console, verl_flat)
        payload["verl"] = verl_flat
    return payload, lambda target: _plot(summary, target)


def _write_outputs(
    json_out: Path | None, plot: Path | None, payload: dict[str, Any], draw: Any, err: Any
) -> None:
    if json_out is not None:
        try:
            write_json(json_out, payload)
        except OSError as e:
            _fail(f"--json: could not write {json_out}: {e.strerror or e}")
        err.print(f"wrote {json_out}")
    if plot is not None:
        try:
            draw(plot)
        except ImportError as e:
            _fail(str(e))
        except OSError as e:
            _fail(f"--plot: could not write {plot}: {e.strerror or e}")
        except ValueError as e:  # e.g. matplotlib's unknown file format
            _fail(f"--plot: {e}")
        err.print(f"wrote {plot}")


def _check_ks(ks: list[int], summaries: list[dict[str, Any]]) -> None:
    """Fail for a ``k`` above the samples of every prompt: no @k metric has a value for it."""
    most = max(
        (int(n) for summary in summaries for body in _bodies(summary) for n in body["samples_per_prompt"]),
        default=0,
    )
    above = [v for v in dict.fromkeys(ks) if v > most]
    if above:
        _fail(
            f"--k {', '.join(map(str, above))}: above the samples of every prompt (at most {most}); "
            "@k without replacement needs k <= the samples of a prompt (or give --replace)"
        )


def _bodies(summary: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for var2body in summary.values():
        yield from var2body.values()


def _print_verl(console: Any, verl_flat: dict[str, float]) -> None:
    from rich.table import Table

    table = Table(title="verl validation metrics (bootstrap, seed 42)", title_justify="left")
    table.add_column("key")
    table.add_column("value", justify="right")
    for key, value in verl_flat.items():
        if key.startswith(f"{K.VAL_CORE_PREFIX}/"):
            table.add_row(key, f"{value:.4f}")
    console.print(table)


def _summarize(
    columns: dict[str, Any], n_rows: int, opts: KeyOptions, options: SummaryOptions, verl_keys: bool = False
) -> tuple[dict[str, Any], dict[str, float] | None]:
    """The summary of one evaluation's columns (and verl's bootstrap metrics, with ``verl_keys``)."""
    from rlmetrics.validation.exact.summary import summarize_validation
    from rlmetrics.validation.verl.bootstrap import flatten_validation_metrics, process_validation_metrics

    data = inputs_of(columns, n_rows, opts)
    summary = summarize_validation(
        data.sources, data.uids, data.infos, clusters=data.clusters, options=options
    )
    verl_flat = None
    if verl_keys:
        verl_infos = dict(data.infos)
        pred = columns.get(opts.pred_key)
        if pred is not None:
            verl_infos[opts.pred_key] = (
                pred.tolist() if hasattr(pred, "values") and hasattr(pred, "codes") else pred
            )
        verl_flat = flatten_validation_metrics(
            process_validation_metrics(data.sources, data.uids, verl_infos)
        )
    return summary, verl_flat


def _load(dumps: list[Dump], opts: KeyOptions, console: Any) -> tuple[dict[str, Any], int]:
    """The columns of ``dumps`` read together (those the summary uses), with a progress bar."""
    files = [d.path for d in dumps]
    wanted = read_keys(files, opts)
    total = sum(p.stat().st_size for p in files)
    with _progress(console, total, "reading") as advance:
        return load_rollouts(files, keys=wanted, progress=advance)


def _summarize_steps(
    dumps: list[Dump], steps: list[int], opts: KeyOptions, options: SummaryOptions, console: Any
) -> _Steps:
    """Each step's summary in turn (one step's columns in memory at a time)."""
    by_step: dict[int, list[Path]] = {}
    for d in dumps:
        if d.step is not None:
            by_step.setdefault(d.step, []).append(d.path)
    unnumbered = [d.path for d in dumps if d.step is None]
    if unnumbered:
        raise ValidateInputError(
            f"{len(unnumbered)} dump(s) without a step in their name (e.g. {unnumbered[0]}) among per-step "
            "dumps named <step>.jsonl; give them on their own"
        )
    wanted = read_keys([d.path for d in dumps], opts)
    total = sum(p.stat().st_size for files in by_step.values() for p in files)
    out = []
    with _progress(console, total, f"{len(steps)} steps") as advance:
        for step in steps:
            files = by_step[step]
            columns, n_rows = load_rollouts(files, keys=wanted, progress=advance)
            summary, _ = _summarize(columns, n_rows, opts, options)
            del columns
            out.append((step, files, n_rows, summary))
    return out


@contextmanager
def _progress(console: Any, total: int, what: str) -> Iterator[Any]:
    """A byte progress bar on a terminal for inputs over 32 MB; else a no-op callback."""
    if not console.is_terminal or total < (32 << 20):
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn(f"reading {what}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("read", total=total)
        yield lambda nbytes: bar.advance(task, nbytes)
