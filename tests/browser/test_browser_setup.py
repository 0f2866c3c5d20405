"""Where the browser tests cannot run, they skip and say why."""

from tests.browser import conftest


def test_without_chromium_the_browser_tests_say_how_to_get_it(monkeypatch):
    monkeypatch.setattr(conftest, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)

    assert conftest.missing() == "no chromium here: apt-get install -y chromium (.ci/run does it where apt-get exists)"


def test_ci_installs_chromium_before_the_readme_s_test_command():
    script = (conftest.ROOT / ".ci" / "run").read_text()
    readme = (conftest.ROOT / "README.md").read_text()
    install = script.index("apt-get install")
    assert "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest" in readme
    assert install < script.index(".venv/bin/pytest")
