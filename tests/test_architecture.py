"""The package's shape: no function of rlmetrics over 60 lines, but the one fused kernel."""

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
