"""No module-level import cycle in `trainers` or `envs` (read with `ast`; nothing is imported).

An edge is an import that runs when the module is imported: not one in a function or under
``if TYPE_CHECKING:``. Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first,
so those are edges too, except the importer's own packages (already running by then).
"""
import ast
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trainers", "envs")


def _imports(stmts: Iterable[ast.AST]) -> Iterator[ast.AST]:
    for stmt in stmts:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt
        elif isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
            yield from _imports(stmt.orelse)
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports(c for c in ast.iter_child_nodes(stmt) if isinstance(c, (ast.stmt, ast.excepthandler)))


def _graph() -> Dict[str, Set[str]]:
    paths = {p.relative_to(ROOT).with_suffix("").parts: p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    modules = {".".join(parts[:-1] if parts[-1] == "__init__" else parts): p for parts, p in paths.items()}
    graph = {}
    for name, path in modules.items():
        package = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
        edges: Set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path)).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:  # from pkg import name: the module pkg.name if there is one, else pkg
                up = package[: len(package) - node.level + 1] if node.level else []
                base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                parts = target.split(".")
                above = {".".join(parts[:k]) for k in range(1, len(parts))}
                edges |= {m for m in above if not name.startswith(m + ".")} | {target}
        graph[name] = edges & set(modules) - {name}
    return graph


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    found: List[List[str]] = []
    done: Set[str] = set()
    stack: List[str] = []

    def visit(m: str) -> None:
        stack.append(m)
        for n in sorted(graph[m]):
            if n in stack:
                found.append(stack[stack.index(n):] + [n])
            elif n not in done:
                visit(n)
        done.add(stack.pop())

    for m in sorted(graph):
        if m not in done:
            visit(m)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_level_import_cycle(package: str) -> None:
    cycles = [c for c in _cycles(_graph()) if any(m.split(".")[0] == package for m in c)]
    assert not cycles, "module-level import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)
