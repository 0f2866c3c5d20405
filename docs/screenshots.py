"""Take the playground's screenshots for the docs: ``.venv/bin/python docs/screenshots.py``.

Starts ``bread-sync start`` on a free loopback port (where the playground is on by default),
with an instance folder of its own, and drives Debian's chromium (``apt-get install -y
chromium``) through Playwright for Python. Writes ``docs/playground-*.png``. Not part of the
test run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx
from playwright.sync_api import sync_playwright

DOCS = Path(__file__).resolve().parent
BREAD_SYNC = Path(sys.executable).parent / "bread-sync"
CHROMIUM = "/usr/bin/chromium"
READY_SECONDS = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(instance: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BREAD_")} | {"BREAD_INSTANCE": instance}
    proc = subprocess.Popen([str(BREAD_SYNC), "start", "--port", str(port), "--workers", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"bread-sync start did not serve within {READY_SECONDS} s")


def run(page, agent: str, fill: dict[str, str], until: str) -> None:
    page.select_option("#target", f"agent:{agent}")
    page.wait_for_function("() => document.getElementById('description').textContent !== ''")
    for selector, value in fill.items():
        page.fill(selector, value)
    page.click("#run")
    page.wait_for_selector(until)


def main() -> None:
    with tempfile.TemporaryDirectory() as instance:
        proc, url = serve(instance)
        try:
            with sync_playwright() as playwright:
                args = ["--no-sandbox"] if os.geteuid() == 0 else []
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
                page = browser.new_page(viewport={"width": 1200, "height": 720})
                page.goto(url)  # the address bread-sync start prints
                page.wait_for_selector("#target option", state="attached")
                run(page, "writer", {"#fields input[name=topic]": "sourdough"}, "#pause .approve")
                page.screenshot(path=DOCS / "playground-approval.png")
                run(page, "manager", {}, '#status[data-status="completed"]')
                page.screenshot(path=DOCS / "playground-nested.png")
                browser.close()
        finally:
            proc.terminate()
            proc.wait(30)
    print("wrote", ", ".join(str(p.relative_to(DOCS.parent)) for p in sorted(DOCS.glob("playground-*.png"))))


if __name__ == "__main__":
    main()
