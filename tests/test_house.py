"""The shape of the house (docs/design.md §1), checked from the source: no import cycles, faces that
go through the domain, console views without ORM queries, modules small enough to read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memconsole"
FACES = ("memconsole.console", "memconsole.api", "memconsole.mcp")
MAX_MODULE_LINES = 450


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts and "__pycache__" not in path.parts
    }


MODULES = product_modules()


def imported_names(path: Path) -> set[str]:
    """Every module this file imports, at the top or inside a function, resolved to memconsole's modules."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base = ".".join(base_parts[: len(base_parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return {_owning_module(candidate) for candidate in found if candidate.startswith("memconsole")} - {""}


def _owning_module(dotted: str) -> str:
    """The longest prefix of `dotted` that is one of memconsole's modules ('' when none is)."""
    parts = dotted.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return ""


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        # A package's __init__ importing its own submodules is its face, not a cycle.
        graph[name] = {target for target in imported_names(path) if target != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target.startswith(node + ".") or node.startswith(target + "."):
                continue  # a package and its own submodules
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_it_has_no_import_cycles_lazy_imports_included() -> None:
    assert find_cycle(import_graph()) is None


def test_it_keeps_the_faces_away_from_the_outside_systems() -> None:
    offenders = {
        name: sorted(t for t in targets if t.startswith("memconsole.lib"))
        for name, targets in import_graph().items()
        if name.startswith(FACES)
    }
    assert {name: targets for name, targets in offenders.items() if targets} == {}


def test_it_keeps_orm_queries_out_of_the_console_views() -> None:
    views = [path for name, path in MODULES.items() if name.startswith("memconsole.console.views")]
    assert views, "the console views package is missing"
    assert [str(path.relative_to(ROOT)) for path in views if ".objects." in path.read_text(encoding="utf-8")] == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_it_keeps_each_product_module_readable(name: str) -> None:
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines"


def test_it_finds_a_cycle_when_there_is_one() -> None:
    # The checker itself: a graph with a cycle is reported, a chain is not.
    assert find_cycle({"memconsole.a": {"memconsole.b"}, "memconsole.b": {"memconsole.a"}}) is not None
    assert find_cycle({"memconsole.a": {"memconsole.b"}, "memconsole.b": set()}) is None


CITED_DOCUMENT = re.compile(r"(?<![\w/.-])((?:docs/)?[\w.-]+\.md)\b")


def test_every_document_the_code_cites_exists() -> None:
    missing = set()
    for path in [*MODULES.values(), *ROOT.joinpath("tests").rglob("*.py"), *ROOT.joinpath("bench").rglob("*.py")]:
        for cited in CITED_DOCUMENT.findall(path.read_text(encoding="utf-8")):
            if not (ROOT / cited).is_file() and not (ROOT / "docs" / cited).is_file():
                missing.add(f"{path.relative_to(ROOT)}: {cited}")
    assert sorted(missing) == []
