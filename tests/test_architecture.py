"""The layout keeps its promises: no import circles, and the core never reaches up.

The import graph is read with ``ast`` from every module of ``bread_sync/``, ``bench/`` and the
top-level modules, counting every import: those under ``TYPE_CHECKING`` and inside functions too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Above the core: nothing in the core may import these.
UPPER = ("bread_sync.server", "bread_sync.protocols", "bread_sync.client")
#: The entry layer: it may import anything, and nothing but itself imports it.
ENTRY = ("bread_sync.cli", "bread_sync.demo", "wsgi", "gunicorn.conf", "bench")
#: What a bridge may use of the server: route registration and the auth gate.
SERVER_FOR_BRIDGES = ("bread_sync.server", "bread_sync.server.actions", "bread_sync.server.guard")
#: What the client may use of the package: the sans-IO wire package, crumbs and errors.
CODECS = ("bread_sync.wire", "bread_sync.crumbs", "bread_sync.errors")
#: All that wire/ may import of the package: it is sans-IO.
WIRE_MAY_IMPORT = ("bread_sync.wire", "bread_sync.crumbs", "bread_sync.errors")
#: Modules that do I/O or wait: never imported by wire/ (nor is anything of the package but the above).
IO_MODULES = ("flask", "werkzeug", "socket", "ssl", "gevent", "greenlet", "threading", "http", "httpx", "httpx2",
              "redis", "psycopg", "sqlite3", "sqlite_utils", "select", "selectors", "asyncio")  # fmt: skip


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    paths = [*(ROOT / "bread_sync").rglob("*.py"), *(ROOT / "bench").glob("*.py"), *ROOT.glob("*.py")]
    return {module_name(p): p for p in paths}


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules ``name`` imports (a ``from package import module`` names the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [_in_bench(name, alias.name, known) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(package, node.level, node.module) if node.level else node.module or ""
            base = _in_bench(name, base, known)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(_known_prefix(target, known) for target in targets)
    found.discard(None)
    found.discard(name)
    return found


def _in_bench(importer: str, target: str, known: dict[str, Path]) -> str:
    # bench/ runs with itself on the path: its "import harness" is bench.harness.
    return f"bench.{target}" if importer.startswith("bench.") and f"bench.{target}" in known else target


def _absolute(package: str, level: int, module: str | None) -> str:
    parts = package.split(".")
    parts = parts[: len(parts) - level + 1]
    return ".".join(parts + ([module] if module else []))


def _known_prefix(target: str, known: dict[str, Path]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def within(name: str, layers: tuple[str, ...]) -> bool:
    return any(name == layer or name.startswith(f"{layer}.") for layer in layers)


def is_core(name: str) -> bool:
    return name.startswith("bread_sync") and not within(name, UPPER + ENTRY)


def test_there_is_no_import_circle(graph):
    circles = []
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def imports_where(graph, importer, wrong) -> list[tuple[str, str]]:
    """Every import of a module ``importer`` accepts of a module ``wrong`` accepts."""
    return sorted((m, t) for m, targets in graph.items() if importer(m) for t in targets if wrong(t))


def test_the_core_imports_nothing_above_it(graph):
    assert imports_where(graph, is_core, lambda t: not is_core(t)) == []


def test_only_the_entry_layer_imports_the_entry_layer(graph):
    assert imports_where(graph, lambda m: not within(m, ENTRY), lambda t: within(t, ENTRY)) == []


def test_bridges_use_only_route_registration_and_the_auth_gate_of_the_server(graph):
    def wrong(t: str) -> bool:
        return within(t, ("bread_sync.server",)) and t not in SERVER_FOR_BRIDGES or within(t, ("bread_sync.client",))

    assert imports_where(graph, lambda m: within(m, ("bread_sync.protocols",)), wrong) == []


def test_the_client_uses_only_the_wire_codecs(graph):
    def wrong(t: str) -> bool:
        return not within(t, ("bread_sync.client",)) and not within(t, CODECS)

    assert imports_where(graph, lambda m: within(m, ("bread_sync.client",)), wrong) == []


def folder_of(name: str, known: set[str]) -> str:
    """The package a module is in (a package is its own folder)."""
    return name if any(k.startswith(f"{name}.") for k in known) else name.rpartition(".")[0]


def test_there_is_no_folder_circle(graph):
    """No folder imports a folder that imports it back: the folders form layers, not a tangle."""
    known = set(graph)
    folders: dict[str, set[str]] = {}
    for name, targets in graph.items():
        mine = folder_of(name, known)
        for target in targets:
            theirs = folder_of(target, known)
            if not (within(mine, (theirs,)) or within(theirs, (mine,))):
                folders.setdefault(mine, set()).add(theirs)
    circles = sorted((a, b) for a, outs in folders.items() for b in outs if a < b and a in folders.get(b, ()))
    assert circles == []


def test_wire_is_free_of_io(graph):
    assert imports_where(graph, lambda m: within(m, ("bread_sync.wire",)),
                         lambda t: not within(t, WIRE_MAY_IMPORT)) == []  # fmt: skip
    for path in (ROOT / "bread_sync" / "wire").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
        assert {n for n in names if n and n.split(".")[0] in IO_MODULES} == set(), path.name


def test_the_graph_sees_every_kind_of_import(tmp_path):
    (tmp_path / "pkg").mkdir()
    module = tmp_path / "pkg" / "a.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import x\n"
        "def f():\n    from . import c\n    import pkg.d\n"
    )
    known = {f"pkg.{n}": tmp_path / "pkg" / f"{n}.py" for n in "abcd"}
    assert imports_of("pkg.a", module, known) == {"pkg.b", "pkg.c", "pkg.d"}
    bench = {"bench.a": module, "bench.harness": module}
    module.write_text("import harness\n")
    assert imports_of("bench.a", module, bench) == {"bench.harness"}


def test_every_package_folder_is_on_the_architecture_map():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    folders = sorted(p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "bread_sync").rglob("__init__.py"))
    assert [folder for folder in folders if f"`{folder}/`" not in text] == []


def test_every_benchmark_still_imports():
    """bench/ is never run by the suite; a module it imports that moved would only show in bench/run."""
    names = sorted(p.stem for p in (ROOT / "bench").glob("*.py"))
    script = f"import importlib\nfor name in {names!r}:\n    importlib.import_module(name)\n"
    # A process of its own: some benchmarks patch with gevent when imported.
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT / "bench", capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
