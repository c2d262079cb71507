"""The ``rlmetrics`` command line: ``validate``, ``compare``, ``seeds``, ``plan``, ``demo``, ``report``,
``diagnose``, ``watch``.

Each command lives in its own module of :mod:`rlmetrics.cli`; this file only wires them into
one typer app. Heavy imports (torch, pyarrow, matplotlib) happen inside the commands, so
``rlmetrics --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from rlmetrics.cli.compare import EPILOG as COMPARE_EPILOG
from rlmetrics.cli.compare import compare
from rlmetrics.cli.demo import demo
from rlmetrics.cli.diagnose import EPILOG as DIAGNOSE_EPILOG
from rlmetrics.cli.diagnose import diagnose
from rlmetrics.cli.plan import EPILOG as PLAN_EPILOG
from rlmetrics.cli.plan import plan
from rlmetrics.cli.report import report
from rlmetrics.cli.seeds import EPILOG as SEEDS_EPILOG
from rlmetrics.cli.seeds import seeds
from rlmetrics.cli.validate import validate
from rlmetrics.cli.watch import EPILOG as WATCH_EPILOG
from rlmetrics.cli.watch import watch

__all__ = ["app", "main"]


def _flags_without_type(params: list[Any]) -> list[Any]:
    """A flag takes no value, so its help shows no type (typer 0.29 prints ``<bool>`` beside it)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_type(super().get_params(ctx))


app = typer.Typer(
    name="rlmetrics",
    cls=_Group,
    help=(
        "Metrics for RL fine-tuning of language models: validate and compare rollout dumps, run the demo, "
        "draw reports, diagnose runs, watch runs as they grow."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"rlmetrics {version('rlmetrics')}")
        except PackageNotFoundError:  # run from a source tree that is not installed
            from rlmetrics._version import __version__

            print(f"rlmetrics {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Metrics for RL fine-tuning of language models: validate and compare rollout dumps, run the demo,
    draw reports, diagnose runs, watch runs as they grow."""


app.command("validate", cls=_Command)(validate)
app.command("demo", cls=_Command)(demo)
app.command("report", cls=_Command)(report)
app.command("diagnose", cls=_Command, epilog=DIAGNOSE_EPILOG)(diagnose)
app.command("compare", cls=_Command, epilog=COMPARE_EPILOG)(compare)
app.command("watch", cls=_Command, epilog=WATCH_EPILOG)(watch)
app.command("seeds", cls=_Command, epilog=SEEDS_EPILOG)(seeds)
app.command("plan", cls=_Command, epilog=PLAN_EPILOG)(plan)


def main() -> None:
    """Entry point of the ``rlmetrics`` console script and of ``python -m rlmetrics``."""
    app(prog_name="rlmetrics")


if __name__ == "__main__":  # pragma: no cover
    main()
