"""The HTTP side of `delta-jepsen serve`: GET and HEAD on 127.0.0.1 only.

"/" is the index of runs; every other path names a file or folder under the
results root, and is refused (404) unless it resolves, symlinks and all,
inside that root. Nothing is cached by the browser (`no-store`): a run
being written changes under it.
"""

from __future__ import annotations

import mimetypes
import os
import shutil
import socketserver
import sys
import traceback
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from harness.serve.catalog import Catalog
from harness.serve.pages import FILES_PATH, Filters, index_page, listing_page

__all__ = ["HOST", "ResultsServer", "Site", "content_type", "make_server", "resolve_request"]

# Loopback only, and no option to change it: a results root holds table
# copies, logs and spec files, which are not for the network.
HOST = "127.0.0.1"

_TEXT = "text/plain; charset=utf-8"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json; charset=utf-8",
    ".crc": "application/json; charset=utf-8",  # Delta's version checksum files are JSON
    ".png": "image/png",
    ".css": "text/css; charset=utf-8",
    ".parquet": "application/octet-stream",
    ".jsonl": _TEXT,
    ".txt": _TEXT,
    ".md": _TEXT,
    ".log": _TEXT,
    ".out": _TEXT,
    ".err": _TEXT,
    ".csv": _TEXT,
    ".dot": _TEXT,
    ".gv": _TEXT,
}


def content_type(path: Path) -> str:
    known = _TYPES.get(path.suffix.lower())
    if known:
        return known
    guessed, _ = mimetypes.guess_type(path.name)
    if guessed and guessed.startswith("text/"):
        return f"{guessed}; charset=utf-8"
    return guessed or "application/octet-stream"


def resolve_request(root: Path, url_path: str) -> Path | None:
    """The file or folder `url_path` (still percent-encoded) names under
    `root` (resolved), or None if it lies outside: `..` in any spelling, a
    symlink leading out. The check is on the resolved path, so no spelling
    of the request matters."""
    decoded = unquote(url_path, errors="strict") if "%" in url_path else url_path
    if "\x00" in decoded:
        return None
    try:
        target = (root / decoded.lstrip("/")).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if target != root and root not in target.parents:
        return None
    return target


@dataclass
class Site:
    root: Path  # resolved
    label: str  # the root as the user named it, for page titles
    catalog: Catalog


class _Handler(BaseHTTPRequestHandler):
    server_version = "delta-jepsen-serve"
    # A client that stops reading holds a thread for no longer than this.
    timeout = 60
    server: ResultsServer

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the terminal shows the URL line and errors only

    def do_GET(self) -> None:
        self._respond(send_body=True)

    def do_HEAD(self) -> None:
        self._respond(send_body=False)

    def _refuse_method(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _headers(self, status: int, ctype: str, length: int, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _html(self, text: str, send_body: bool, status: int = HTTPStatus.OK) -> None:
        data = text.encode("utf-8")
        self._headers(status, "text/html; charset=utf-8", len(data))
        if send_body:
            self.wfile.write(data)

    def _not_found(self, send_body: bool) -> None:
        self._html("<!DOCTYPE html><title>404</title><p>Not found.</p>\n", send_body, HTTPStatus.NOT_FOUND)

    def _respond(self, send_body: bool) -> None:
        site = self.server.site
        parts = urlsplit(self.path)
        try:
            if parts.path == "/":
                filters = Filters.from_query(parse_qs(parts.query))
                self._html(index_page(site.catalog.scan(), filters, site.label), send_body)
                return
            if parts.path == FILES_PATH:
                self._html(listing_page(site.root, site.root, site.label), send_body)
                return
            try:
                target = resolve_request(site.root, parts.path)
            except UnicodeDecodeError:
                target = None
            if target is None or not target.exists():
                self._not_found(send_body)
                return
            if target.is_dir():
                if not parts.path.endswith("/"):
                    # Relative links inside the folder's pages need the slash.
                    location = quote(unquote(parts.path)) + "/" + (f"?{parts.query}" if parts.query else "")
                    self._headers(HTTPStatus.MOVED_PERMANENTLY, _TEXT, 0, {"Location": location})
                    return
                self._html(listing_page(site.root, target, site.label), send_body)
                return
            self._file(target, send_body)
        except (ConnectionError, TimeoutError):
            raise
        except OSError:
            self._not_found(send_body)  # vanished or unreadable between the check and the read

    def _file(self, target: Path, send_body: bool) -> None:
        with open(target, "rb") as f:
            st = os.fstat(f.fileno())
            self._headers(
                HTTPStatus.OK,
                content_type(target),
                st.st_size,
                {"Last-Modified": formatdate(st.st_mtime, usegmt=True)},
            )
            if send_body:
                shutil.copyfileobj(f, self.wfile, 256 * 1024)


class ResultsServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung client never holds up Ctrl-C

    def __init__(self, site: Site, port: int) -> None:
        self.site = site
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's name (getfqdn), which
        # can stall for seconds on a machine without a resolver.
        socketserver.TCPServer.server_bind(self)
        self.server_name = HOST
        self.server_port = self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return  # the browser went away mid-response
        # A bug in a page: one line, and the request's connection is dropped.
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc and exc.__traceback__ else None
        at = f" at {where.filename}:{where.lineno}" if where else ""
        print(f"delta-jepsen serve: error answering a request: {exc!r}{at}", file=sys.stderr, flush=True)


def make_server(root: Path, port: int, label: str) -> ResultsServer:
    """A server bound to 127.0.0.1:`port` (0: a free one); OSError if taken."""
    resolved = root.resolve()
    return ResultsServer(Site(resolved, label, Catalog(resolved)), port)
