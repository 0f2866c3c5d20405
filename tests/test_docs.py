"""The docs tell the truth: every name is documented, the README's example prints what it says."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from bread_sync import crumbs, errors
from bread_sync.cli import commands as cli_commands

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()
HTTP = (ROOT / "docs" / "http.md").read_text()
#: The code that reads settings: the package and the two entry points beside it.
SOURCES = [*sorted((ROOT / "bread_sync").rglob("*.py")), ROOT / "wsgi.py", ROOT / "gunicorn.conf.py"]


def test_every_crumb_type_is_documented():
    assert [t for t in crumbs.ALL_TYPES if f"`{t}`" not in REFERENCE] == []


def test_every_error_code_is_documented():
    assert [c for c in errors.ALL_CODES if f"`{c}`" not in REFERENCE] == []


def test_every_cli_command_is_documented():
    commands = cli_commands.commands
    assert [c for c in commands if f"bread-sync {c}" not in REFERENCE] == []


def environment_variables_read() -> set[str]:
    """Each variable SOURCES read with ``os.environ[...]``, ``os.environ.get(...)`` or ``os.getenv(...)``."""
    names: set[str] = set()
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for key in _keys_read(tree):
            found = _names_of(key, _enclosing_function(key, parents), tree)
            assert found, f"{path.relative_to(ROOT)}:{key.lineno}: which environment variable is read here?"
            names |= found
    return names


def _keys_read(tree: ast.AST) -> list[ast.expr]:
    def is_os(node: ast.expr, attr: str) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == attr and ast.unparse(node.value) == "os"

    keys = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_os(node.value, "environ"):
            keys.append(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if is_os(node.func, "getenv") or (node.func.attr == "get" and is_os(node.func.value, "environ")):
                keys.append(node.args[0])
    return keys


def _enclosing_function(node: ast.AST, parents: dict) -> ast.FunctionDef | None:
    while node in parents and not isinstance(node, ast.FunctionDef):
        node = parents[node]
    return node if isinstance(node, ast.FunctionDef) else None


def _names_of(key: ast.expr, function: ast.FunctionDef | None, tree: ast.Module) -> set[str]:
    """What a read's key stands for: a literal; a module constant (auth's SECRET_ENV_VAR); a
    parameter's default in the module, a literal or a module constant (auth_plugin's env_var);
    or, for a parameter of the function that reads, the literals the module's calls of that
    function pass (config's _number)."""
    if not isinstance(key, ast.Name):
        return _string(key)
    found = _constant(key.id, tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            found |= {name for param, default in _defaults(node) if param == key.id for name in _literal(default, tree)}
    params = [arg.arg for arg in function.args.args] if function else []
    if key.id in params:
        index = params.index(key.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == function.name and len(node.args) > index:
                found |= _string(node.args[index])
    return found


def _constant(name: str, tree: ast.Module) -> set[str]:
    """The string a module constant ``name`` is set to, if any."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(target) for target in node.targets] == [name]:
            found |= _string(node.value)
    return found


def _literal(node: ast.expr | None, tree: ast.Module) -> set[str]:
    """A literal string, or the module constant that holds one."""
    return _constant(node.id, tree) if isinstance(node, ast.Name) else _string(node)


def _defaults(function: ast.FunctionDef) -> list[tuple[str, ast.expr | None]]:
    args = function.args
    positional = args.args[len(args.args) - len(args.defaults) :]
    pairs = [*zip(positional, args.defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    return [(param.arg, default) for param, default in pairs]


def _string(node: ast.expr | None) -> set[str]:
    return {node.value} if isinstance(node, ast.Constant) and isinstance(node.value, str) else set()


def readme_settings() -> set[str]:
    """The names in the first column of the README's settings table."""
    table = README[README.index("| setting | default | what it does |") :].split("\n\n")[0]
    return {name for row in table.splitlines()[2:] for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row.split("|")[1])}


def test_the_readme_lists_every_environment_variable_the_code_reads():
    read = environment_variables_read()
    assert {"BREAD_INSTANCE", "BREAD_SECRET", "BREAD_API_KEYS", "BREAD_LEASE_SECONDS"} <= read  # each kind of key
    assert sorted(read - readme_settings()) == []
    assert sorted(readme_settings() - read) == []  # and nothing the code no longer reads


def test_every_environment_setting_is_in_the_reference():
    assert [n for n in sorted(environment_variables_read()) if f"`{n}`" not in REFERENCE] == []


def test_every_flask_setting_is_in_the_reference():
    code = "\n".join(path.read_text() for path in SOURCES)
    keys = set(re.findall(r"\"(BREAD_SYNC_[A-Z_]+)\"", code))
    assert keys and [k for k in sorted(keys) if f"`{k}`" not in REFERENCE] == []


def test_every_route_is_documented(make_bread):
    from bread_sync.server import create_server

    app = create_server(make_bread(transport="http-sse"))
    rules = {re.sub(r"<\w+>", "<>", r.rule) for r in app.url_map.iter_rules() if r.endpoint != "static"}
    documented = {re.sub(r"<\w+>", "<>", m) for m in re.findall(r"`(?:GET|POST|DELETE) ([^`?]+)", HTTP)}
    assert rules - documented == set()


def test_ci_runs_the_readme_test_command():
    command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert command in README


def test_the_readme_python_example_prints_what_it_says(tmp_path):
    example = re.search(r"## In Python\n\n```python\n(.*?)```", README, re.S).group(1)
    promised = re.findall(r"# (paused .*|completed .*)$", example, re.M)
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[: len(promised)] == promised


def test_the_client_guide_example_prints_what_it_says(tmp_path):
    guide = (ROOT / "docs" / "client.md").read_text()
    example = re.search(r"## A worked example\n\n```python\n(.*?)```", guide, re.S).group(1)
    promised = re.findall(r"# (hello from .*|paused .*|completed .*|\[.*)$", example, re.M)
    env = {**os.environ, "BREAD_INSTANCE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == promised
