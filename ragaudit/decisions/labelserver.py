"""The page of `ragaudit label`, served on this machine only (127.0.0.1) for as long as a person labels.

Every request but the page itself carries the session's token (a random string in the page's
address), so no other page the browser has open can read the runs or write a label. One request
is handled at a time: labels are appended to the labels file in the order they are given.

    GET  /?token=T           the page (self-contained: its script and style are inline)
    GET  /api/tasks          every task, blind (no verdict), and the session's figures
    POST /api/label          {"task": i, "correct": b, "supported": b, "citation": b, "note": s}
                             → appends the label, then answers ragaudit's verdict on that run
    POST /api/done           ends the session
"""

from __future__ import annotations

import json
import secrets
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from ragaudit.core.errors import RagauditError
from ragaudit.decisions.labelling import Session

MAX_BODY = 1 << 20  # bytes of a request body: a label with a long note is far less


class LabelServer(HTTPServer):
    """The server of one labelling session; `serve_forever` returns once the person is done."""

    def __init__(self, session: Session, port: int = 0):
        self.session = session
        self.token = secrets.token_urlsafe(24)
        self.done = threading.Event()
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/?token={self.token}"

    def finish(self) -> None:
        self.done.set()
        threading.Thread(target=self.shutdown, daemon=True).start()


def page() -> str:
    return resources.files("ragaudit.outputs.render.templates").joinpath("label.html").read_text(encoding="utf-8")


class _Handler(BaseHTTPRequestHandler):
    server: LabelServer
    server_version = "ragaudit-label"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # the command prints what matters; no access log on stderr
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; "
                         "style-src 'unsafe-inline'; connect-src 'self'")  # fmt: skip
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: object) -> None:
        self._send(status, json.dumps(value).encode("utf-8"))

    def _allowed(self) -> bool:
        query = parse_qs(urlparse(self.path).query)
        given = self.headers.get("X-Ragaudit-Token") or (query.get("token") or [""])[0]
        if not secrets.compare_digest(given, self.server.token):
            self._json(HTTPStatus.FORBIDDEN, {"error": "expected this session's token"})
            return False
        return True

    def do_GET(self) -> None:
        route = urlparse(self.path).path
        if not self._allowed():
            return
        if route == "/":
            self._send(HTTPStatus.OK, page().encode("utf-8"), "text/html; charset=utf-8")
        elif route == "/api/tasks":
            session = self.server.session
            self._json(
                HTTPStatus.OK,
                {
                    "tasks": session.tasks,
                    "labeller": session.labeller,
                    "labels": str(session.labels_path),
                    "stale": len(session.stale),
                },
            )
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no {route}"})

    def do_POST(self) -> None:
        route = urlparse(self.path).path
        if not self._allowed():
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"expected at most {MAX_BODY} bytes"})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, UnicodeDecodeError):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "expected a JSON object"})
            return
        if route == "/api/done":
            self._json(HTTPStatus.OK, {"recorded": self.server.session.recorded})
            self.server.finish()
        elif route == "/api/label" and isinstance(body, dict) and type(body.get("task")) is int:
            try:
                found = self.server.session.record(body["task"], body, body.get("note") or "")
            except RagauditError as exc:
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
                return
            self._json(HTTPStatus.OK, found)
        else:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "expected POST /api/label {task, correct, supported, citation, note}"})  # fmt: skip


def serve(
    session: Session, *, port: int = 0, browser: bool = False, opened: Callable[[str], object] | None = None
) -> Session:
    """Serve the session's page until the person is done (the page's Done, or ctrl-C); `opened` is
    called with the page's address once it can be opened, and a browser opens it when `browser`."""
    server = LabelServer(session, port)
    try:
        if opened is not None:
            opened(server.url)
        if browser:
            import webbrowser

            webbrowser.open(server.url)
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return session
