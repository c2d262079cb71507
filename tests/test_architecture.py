"""The package's shape: no function of rlmetrics over 60 lines, but the one fused kernel; a test
file named after every module, but the few listed as tested through others."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import rlmetrics

PACKAGE = Path(rlmetrics.__file__).resolve().parent

#: Lines a function's body may take, its docstring left out.
MAX_BODY_LINES = 60

#: Functions allowed over the limit, by ``module path:qualified name``, each with why.
EXEMPT = {
    # One fused loop on purpose: every statistic of a row in one pass over memory (its docstring
    # and ARCHITECTURE.md say why it is not split).
    "_core/kernels_jit.py:token_rows": "the fused numba token kernel",
}


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line."""
    body = node.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    assert node.end_lineno is not None
    return node.end_lineno - body[0].lineno + 1


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(qualified name, node)`` of every function and method of ``tree``, nested ones too."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def _lengths(source: str) -> dict[str, int]:
    return {name: _body_lines(node) for name, node in _functions(ast.parse(source))}


def _package_lengths() -> dict[str, int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for name, n in _lengths(path.read_text(encoding="utf-8")).items():
            out[f"{module}:{name}"] = n
    return out


def test_the_count_leaves_out_the_docstring_and_finds_methods_and_nested_functions():
    source = (
        'def f():\n    """Doc\n\n    more doc.\n    """\n    x = 1\n    return x\n'
        "class C:\n    def m(self):\n        def inner():\n            pass\n\n        return inner\n"
        'def g():\n    """Only a docstring."""\n'
    )
    assert _lengths(source) == {"f": 2, "C.m": 4, "C.m.inner": 1, "g": 0}


def test_no_function_is_over_the_limit_but_the_exempt():
    lengths = _package_lengths()
    long = {name: n for name, n in lengths.items() if n > MAX_BODY_LINES and name not in EXEMPT}
    assert not long, f"functions over {MAX_BODY_LINES} lines (split them, or exempt one and say why): {long}"


@pytest.mark.parametrize("name", sorted(EXEMPT))
def test_each_exemption_names_a_function_that_needs_it(name):
    # a stale entry (the function gone, renamed or shortened) would exempt whatever takes its name
    assert _package_lengths().get(name, 0) > MAX_BODY_LINES


# --- one test file per module ------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent

#: Modules with a function or class of their own but no test file named after them, each with
#: the files that test it. Keep it short: a new module gets a file of its own. What is left is
#: tested only through what it serves: the numba kernels against their numpy twins, the command
#: line's app and rollout helpers through its commands, the demo's training loop through the demo.
TESTED_ELSEWHERE = {
    # (none in health/, readers/, validation/, tracking/ and report/: report/_assets.py, the page's
    # scripts as strings, defines no function and is run in a browser by test_report_browser.py)
    # the numba twin of _core/kernels.py, compared with it
    "_core/kernels_jit.py": "test_kernels.py",
    # the command line's app and helpers, through its commands
    "cli/app.py": "test_cli.py and one test_cli_<command>.py per command",
    "cli/_rollouts.py": "test_cli_validate.py, test_cli_compare.py",
    # the demo's training loop, through the demo
    "demo/run.py": "test_demo.py, test_demo_offpolicy.py, test_cli_demo.py",
}


def _module_paths() -> list[str]:
    """Every module of the package that defines a function or class (re-export and shim modules,
    which define none, are tested through the modules they name), as a path under the package."""
    paths = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for node in tree.body):
            paths.append(path.relative_to(PACKAGE).as_posix())
    return paths


def _test_names(module: str) -> set[str]:
    """The test files a module may have: ``test_<name>.py`` for every tail of its dotted path, each
    part without its leading underscores (``tracking/_values.py``: ``test_values.py`` or
    ``test_tracking_values.py``; a package's ``__init__.py`` stands for the package, the top
    one's for ``test_init.py``)."""
    parts = module.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = [part.lstrip("_") for part in parts[:-1]] or ["init"]  # the top package: test_init.py
    else:
        parts = [part.lstrip("_") for part in parts]
    return {"test_" + "_".join(parts[i:]) + ".py" for i in range(len(parts))}


def test_the_names_a_module_may_have_its_tests_under():
    assert _test_names("tracking/_values.py") == {"test_values.py", "test_tracking_values.py"}
    assert _test_names("report/__init__.py") == {"test_report.py"}
    assert _test_names("__init__.py") == {"test_init.py"}
    assert _test_names("validation/comparison/paired.py") == {
        "test_paired.py",
        "test_comparison_paired.py",
        "test_validation_comparison_paired.py",
    }


@pytest.mark.parametrize("module", [m for m in _module_paths() if m not in TESTED_ELSEWHERE])
def test_every_module_has_a_test_file_named_after_it(module):
    names = sorted(_test_names(module))
    assert any((TESTS / name).is_file() for name in names), (
        f"{module} has no test file: add one of {names} (or, if another file tests it, an entry "
        "in TESTED_ELSEWHERE saying which)"
    )


@pytest.mark.parametrize("module", sorted(TESTED_ELSEWHERE))
def test_each_module_tested_elsewhere_exists_and_still_has_no_file_of_its_own(module):
    assert module in _module_paths(), f"{module} is gone or defines nothing: drop it from TESTED_ELSEWHERE"
    assert not any((TESTS / name).is_file() for name in _test_names(module)), (
        f"{module} has a test file now: drop it from TESTED_ELSEWHERE"
    )
