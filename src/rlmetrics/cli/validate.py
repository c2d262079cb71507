"""``rlmetrics validate``: validation statistics of rollout dumps (JSONL or Parquet).

Reads verl's validation dumps (one JSON object per line with ``input``, ``output``, ``gts``,
``score``, ``step`` and the extra reward keys such as ``acc`` and ``pred``) or Parquet files,
groups the samples into prompts by ``--uid-key`` (else by ``input``) and data sources by
``--source-key`` (else one source), and prints :func:`rlmetrics.summarize_validation`: mean,
pass@k, best@k, worst@k and maj@k with 95% intervals across prompts.

Bad input stops the command with exit code 1 and a message naming the file, the line and the
key; outputs (``--json``, ``--plot``) are written to a temporary file and renamed into place, so
nothing is ever left half written.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from rlmetrics import keys as K
from rlmetrics.cli._files import atomic_path, write_json
from rlmetrics.validation.dumps import ValidateInputError, _Coded, _kind_of, load_rollouts

__all__ = ["ValidateInputError", "load_rollouts", "validate"]

_TEXT_KEYS = frozenset({"input", "output", "gts", "step"})


# ----------------------------------------------------------------------------- outputs
def _plot(summary: dict[str, Any], target: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install 'rlmetrics[plot]'") from None
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
                vals = [m["value"] for _, m in pts]
                err = [0.0 if not math.isfinite(m["se"]) else m["value"] - m["ci_low"] for _, m in pts]
                ax.errorbar(ks, vals, yerr=err, marker="o", capsize=3, label=f"{var} {kind}@k")
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


def _fmt(m: dict[str, Any] | None) -> str:
    if m is None:
        return ""
    value = m["value"]
    if not math.isfinite(value):
        return "nan"
    if math.isfinite(m["se"]):
        return f"{value:.4f}±{m['value'] - m['ci_low']:.4f}"
    return f"{value:.4f}"


def _print_tables(console: Any, summary: dict[str, Any], n_rows: int, n_files: int) -> None:
    from rich.table import Table

    console.print(f"[bold]{n_rows}[/bold] samples from {n_files} file(s); intervals are 95% across prompts")
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
                title += (
                    f"\nsolved by all samples {_fmt(metrics['all_solved'])}, "
                    f"by none {_fmt(metrics['none_solved'])}"
                )
            ks = sorted({int(name.split("@")[1]) for name in metrics if name.startswith(("best@", "maj@"))})
            console.print()
            console.print(title, highlight=False)
            table = Table()
            table.add_column("k", justify="right")
            kinds = ["pass" if body["binary"] else "best", "worst"]
            if any(name.startswith("maj@") for name in metrics):
                kinds.append("maj")
            for kind in kinds:
                table.add_column(f"{kind}@k", justify="right")
            table.add_column("prompts", justify="right")
            for k in ks:
                row = [str(k)] + [_fmt(metrics.get(f"{kind}@{k}")) for kind in kinds]
                row.append(str(metrics.get(f"best@{k}", {}).get("n_prompts", "")))
                table.add_row(*row)
            console.print(table)


# ----------------------------------------------------------------------------- the command
def _choose_values(columns: dict[str, Any], value_keys: list[str] | None, exclude: set[str]) -> list[str]:
    present = ", ".join(sorted(columns))
    if value_keys:
        for key in value_keys:
            if key not in columns:
                raise ValidateInputError(f"value key {key!r} is not in the files; keys present: {present}")
            if _kind_of(columns[key]) not in ("number", "null"):
                raise ValidateInputError(
                    f"value key {key!r} must hold numbers or bools; it holds {_kind_of(columns[key])} values"
                )
        return list(value_keys)
    chosen = [
        key
        for key, col in columns.items()
        if key not in exclude and key not in _TEXT_KEYS and _kind_of(col) == "number"
    ]
    if not chosen:
        raise ValidateInputError(f"no numeric value key found (e.g. 'score', 'acc'); keys present: {present}")
    return chosen


def validate(
    files: Annotated[
        list[Path], typer.Argument(help="Rollout dumps: .jsonl (verl's validation dump) or .parquet.")
    ],
    uid_key: Annotated[
        str,
        typer.Option(
            "--uid-key",
            help="Key of the prompt id; if absent from the files, prompts are grouped by 'input'.",
        ),
    ] = "uid",
    source_key: Annotated[
        str, typer.Option("--source-key", help="Key of the data source; if absent, one source named 'all'.")
    ] = "data_source",
    value_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--value-key", "-v", help="A value to summarise (repeatable); default: every numeric key."
        ),
    ] = None,
    pred_key: Annotated[
        str, typer.Option("--pred-key", help="Key of the predicted answer voted on for maj@k.")
    ] = "pred",
    k: Annotated[
        list[int] | None, typer.Option("--k", "-k", help="A k for the @k metrics (repeatable).")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Draw with replacement (the expectation of verl's bootstrap).")
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the summary as JSON to this file.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Draw pass@k and maj@k against k (PNG).")
    ] = None,
    verl_keys: Annotated[
        bool, typer.Option("--verl", help="Also compute verl's bootstrap metrics (val-core/val-aux keys).")
    ] = False,
) -> None:
    """Summarise validation rollouts: mean, pass@k, best@k, worst@k, maj@k with 95% intervals."""
    from rich.console import Console

    from rlmetrics.validation.bootstrap import flatten_validation_metrics, process_validation_metrics
    from rlmetrics.validation.summary import summarize_validation

    out_console = Console()
    err_console = Console(stderr=True)

    def fail(message: str) -> None:
        text = f"[bold red]error:[/bold red] {escape(str(message))}"
        err_console.print(text, highlight=False, soft_wrap=True)
        raise typer.Exit(code=1)

    for target, opt in ((json_out, "--json"), (plot, "--plot")):
        if target is not None and not target.parent.exists():
            fail(f"{opt}: the directory {target.parent} does not exist")
    if k is not None and any(v < 1 for v in k):
        fail(f"--k values must be >= 1; got {k}")
    try:
        total = sum(p.stat().st_size for p in files if p.exists())
        columns, n_rows = _load_with_progress(files, total, err_console)
        present = ", ".join(sorted(columns))
        if uid_key in columns:
            uid_col = columns[uid_key]
        elif uid_key == "uid" and "input" in columns:
            uid_col = columns["input"]
        else:
            fail(f"the prompt id key {uid_key!r} is not in the files (nor 'input'); keys present: {present}")
        if source_key in columns:
            src_col = columns[source_key]
        elif source_key == "data_source":
            src_col = ["all"] * n_rows
        else:
            fail(f"the data source key {source_key!r} is not in the files; keys present: {present}")
        exclude = {uid_key, source_key, pred_key}
        chosen = _choose_values(columns, value_keys, exclude)
        infos: dict[str, Any] = {key: _as_values(columns[key]) for key in chosen}
        pred_col = columns.get(pred_key)
        if pred_col is not None:
            infos[pred_key] = pred_col.codes if isinstance(pred_col, _Coded) else pred_col
        uids = uid_col.codes if isinstance(uid_col, _Coded) else uid_col
        sources = src_col.tolist() if isinstance(src_col, _Coded) else src_col
        with (
            err_console.status("computing statistics", spinner="dots") if err_console.is_terminal else _null()
        ):
            summary = summarize_validation(sources, uids, infos, ks=k, pred_key=pred_key, replace=replace)
            verl_flat = None
            if verl_keys:
                verl_infos = dict(infos)
                if pred_col is not None:
                    verl_infos[pred_key] = _as_values(pred_col)
                verl_flat = flatten_validation_metrics(process_validation_metrics(sources, uids, verl_infos))
    except (ValidateInputError, ValueError, TypeError) as err:
        fail(str(err))
    except ImportError as err:
        fail(str(err))

    _print_tables(out_console, summary, n_rows, len(files))
    if verl_flat is not None:
        from rich.table import Table

        table = Table(title="verl validation metrics (bootstrap, seed 42)", title_justify="left")
        table.add_column("key")
        table.add_column("value", justify="right")
        for key, value in verl_flat.items():
            if key.startswith(f"{K.VAL_CORE_PREFIX}/"):
                table.add_row(key, f"{value:.4f}")
        out_console.print(table)
    if json_out is not None:
        payload = {"files": [str(p) for p in files], "n_samples": n_rows, "summary": summary}
        if verl_flat is not None:
            payload["verl"] = verl_flat
        write_json(json_out, payload)
        err_console.print(f"wrote {json_out}")
    if plot is not None:
        try:
            _plot(summary, plot)
        except ImportError as err:
            fail(str(err))
        err_console.print(f"wrote {plot}")


@contextmanager
def _null() -> Iterator[None]:
    yield None


def _as_values(col: Any) -> Any:
    return col.tolist() if isinstance(col, _Coded) else col


def _load_with_progress(files: list[Path], total: int, console: Any) -> tuple[dict[str, Any], int]:
    if not console.is_terminal or total < (32 << 20):
        return load_rollouts(files)
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("reading"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("read", total=total)
        return load_rollouts(files, progress=lambda nbytes: bar.advance(task, nbytes))
