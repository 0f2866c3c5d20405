"""The docs tell the truth: every name is documented, the README's example prints what it says."""

import re
import subprocess
import sys
from pathlib import Path

from bread_sync import crumbs, errors
from bread_sync.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()
HTTP = (ROOT / "docs" / "http.md").read_text()


def test_every_crumb_type_is_documented():
    assert [t for t in crumbs.ALL_TYPES if f"`{t}`" not in REFERENCE] == []


def test_every_error_code_is_documented():
    assert [c for c in errors.ALL_CODES if f"`{c}`" not in REFERENCE] == []


def test_every_cli_command_is_documented():
    commands = build_parser()._subparsers._group_actions[0].choices
    assert [c for c in commands if f"bread-sync {c}" not in REFERENCE] == []


def test_every_environment_setting_is_documented():
    code = "\n".join(p.read_text() for p in (ROOT / "bread_sync").rglob("*.py"))
    names = set(re.findall(r"environ(?:\.get)?\(\s*\"(BREAD_[A-Z_]+|WEB_CONCURRENCY)\"", code))
    names |= set(re.findall(r"environ\[\"(BREAD_[A-Z_]+)\"\]", code))
    assert names and [n for n in sorted(names) if n not in REFERENCE] == []


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
