"""The ``rlmetrics`` command line, built with typer and rich.

:mod:`rlmetrics.cli.app` wires the commands: :mod:`~rlmetrics.cli.validate`,
:mod:`~rlmetrics.cli.demo` and :mod:`~rlmetrics.cli.report`.
"""
