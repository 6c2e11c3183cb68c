"""Open a page in a real headless browser (Debian's chromium, driven by
playwright) the way a person would, and report what it did.

`visit` loads a URL, waits for the page to settle, and returns the console
errors, every request the page made, how many elements each CSS selector
matched, and a screenshot. `static_server` serves a folder on 127.0.0.1 for
pages that have no server of their own. Tests that need these skip, naming
the package, where chromium is not installed (`.ci/setup-debian` installs it).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# As the machine notes advise: without the background-networking switches
# chromium reaches for Google's hosts on its own, which this network refuses.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
LOAD_TIMEOUT_MS = 30_000


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("needs Debian's chromium (apt-get install chromium; .ci/setup-debian installs it)")


@dataclass
class Visit:
    url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    title: str = ""
    screenshot: Path | None = None

    def foreign_requests(self, host: str = "127.0.0.1") -> list[str]:
        """Requests to anything but `host` (data: and about: URLs are local)."""
        local = (f"http://{host}:", f"http://{host}/", "data:", "about:", "blob:")
        return [u for u in self.requests if not u.startswith(local)]


def visit(url: str, screenshot: Path, selectors: Sequence[str] = (), width: int = 1400) -> Visit:
    """Load `url` in headless chromium, count `selectors` in the DOM after load,
    and save a full-page screenshot to `screenshot`."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    result = Visit(url)
    with tempfile.TemporaryDirectory(prefix="dj-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=exe,
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport={"width": width, "height": 900},
            timeout=LOAD_TIMEOUT_MS,
        )
        try:
            page = context.new_page()
            page.on("console", lambda m: result.console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: result.page_errors.append(str(e)))
            page.on("request", lambda r: result.requests.append(r.url))
            page.on("requestfailed", lambda r: result.failed_requests.append(r.url))
            page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT_MS)
            page.wait_for_load_state("networkidle", timeout=LOAD_TIMEOUT_MS)
            result.title = page.title()
            for sel in selectors:
                result.counts[sel] = page.locator(sel).count()
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True, timeout=LOAD_TIMEOUT_MS)
            result.screenshot = screenshot
        finally:
            context.close()
    return result


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def static_server(root: Path) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
