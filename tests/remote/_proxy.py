"""A reverse proxy in front of an S3 server that injects latency and faults (see FaultProxy)."""

from __future__ import annotations

import collections
import http
import http.client
import io
import random
import socket
import socketserver
import struct
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

# Headers that describe one hop, not the message: never forwarded as they are.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "expect",
})
# The S3 error code and message each injected status answers with.
_S3_ERRORS = {
    403: ("AccessDenied", "Access Denied"),
    404: ("NoSuchKey", "The specified key does not exist."),
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class ProxiedRequest:
    """One request as the proxy received it (``key`` is the object key, "" for a bucket or the service)."""

    method: str
    key: str
    range: str | None


@dataclass(frozen=True)
class _Plan:
    """What the proxy does with one request, decided when it arrives."""

    matched: bool
    deny: int | None = None
    error: int | None = None
    reset_after: int | None = None
    short: int | None = None  # bytes of the body sent, with a Content-Length that says so


class FaultProxy:
    """An HTTP/1.1 reverse proxy on 127.0.0.1 in front of ``upstream_endpoint`` ("http://host:port").

    Every request is forwarded as it came (method, path, query, headers, body) and the answer sent
    back; each client connection gets a thread and its own upstream connection, so concurrent
    requests are delayed concurrently. A context manager; ``endpoint`` is its URL.

    Knobs, changeable while it runs, for *matching* requests: object requests (path-style, a
    non-empty key) whose method is in ``methods`` (default {"GET"}) and whose key contains
    ``key_filter`` (default "": all):

    - ``latency``: seconds added before forwarding;
    - ``error_rate``: the fraction answered with ``error_status`` (503 ``SlowDown``, or 500
      ``InternalError``) instead, drawn from ``random.Random(seed)``;
    - ``reset_next(n, after_bytes)``: the next n matching GETs are cut by a TCP reset;
    - ``short_next(n, keep_bytes, at)``: the next n matching GETs (with ``at``, those whose Range
      begins at byte ``at``) answer a well-formed but short body: its first ``keep_bytes`` bytes,
      with a Content-Length of that (a truncating middlebox);
    - ``bandwidth``: bytes per second of response bodies (None: no limit).

    ``deny(key_substring, status)`` answers every method, matching or not. Counters: ``requests``,
    ``faults``, ``log``, ``in_flight``, ``max_in_flight``; ``reset_counters()`` zeroes them.
    """

    def __init__(self, upstream_endpoint: str, seed: int = 0) -> None:
        parts = urlsplit(upstream_endpoint)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.methods: frozenset[str] = frozenset({"GET"})
        self.key_filter = ""
        self._latency = 0.0
        self.error_rate = 0.0
        self.error_status = 503
        self.bandwidth: float | None = None
        self._random = random.Random(seed)
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._resets: tuple[int, int] = (0, 0)
        self._shorts: tuple[int, int, int | None] = (0, 0, None)
        self._denied: dict[str, tuple[int, frozenset[str] | None]] = {}
        self._connections: set[socket.socket] = set()
        self._in_flight = 0
        self.reset_counters()
        self._server = _Server(self)
        self.endpoint = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.accept_until_closed, name="fault-proxy", daemon=True)
        self._thread.start()

    # -- knobs -------------------------------------------------------------------------------
    @property
    def latency(self) -> float:
        """Seconds between a matching request's arrival and its forwarding. A change applies to the
        requests already waiting too: set it high to hold requests, then lower it to let them go."""
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        with self._lock:
            self._latency = float(seconds)
            self._lock.notify_all()

    def reset_next(self, n: int, after_bytes: int = 0) -> None:
        """The next ``n`` matching GETs send their headers (the full Content-Length) and ``after_bytes``
        of the body, then reset the connection (a body shorter than that is sent whole first)."""
        with self._lock:
            self._resets = (n, after_bytes)

    def short_next(self, n: int, keep_bytes: int = 0, at: int | None = None) -> None:
        """The next ``n`` matching GETs (only those whose Range begins at byte ``at``, when given:
        a cut placed at a chosen offset of the object) answer their status and headers with the
        body cut to its first ``keep_bytes`` bytes and Content-Length set to match, so the answer
        looks whole."""
        with self._lock:
            self._shorts = (n, keep_bytes, at)

    def deny(self, key_substring: str, status: int = 404, methods: frozenset[str] | None = None) -> None:
        """Answer every request (any method, or only ``methods``) for a key containing
        ``key_substring`` with ``status`` (404 ``NoSuchKey`` or 403 ``AccessDenied``) until :meth:`allow`."""
        if status not in (403, 404):
            raise ValueError(f"deny() answers 403 or 404; got {status}.")
        with self._lock:
            self._denied[key_substring] = (status, methods)

    def allow(self, key_substring: str | None = None) -> None:
        """Undo :meth:`deny` for ``key_substring`` (every denial when None)."""
        with self._lock:
            if key_substring is None:
                self._denied.clear()
            else:
                self._denied.pop(key_substring, None)

    def reset_counters(self) -> None:
        """Forget the requests and faults so far (``max_in_flight`` restarts from ``in_flight``)."""
        with self._lock:
            self._requests: collections.Counter[tuple[str, str]] = collections.Counter()
            self._faults: collections.Counter[tuple[str, str]] = collections.Counter()
            self._log: list[ProxiedRequest] = []
            self._max_in_flight = self._in_flight

    # -- counters ----------------------------------------------------------------------------
    @property
    def requests(self) -> collections.Counter[tuple[str, str]]:
        """(method, key) -> how many such requests arrived (a copy)."""
        with self._lock:
            return collections.Counter(self._requests)

    @property
    def faults(self) -> collections.Counter[tuple[str, str]]:
        """(kind, key) -> how many faults were injected; kind is "error", "reset", "short" or "deny"."""
        with self._lock:
            return collections.Counter(self._faults)

    @property
    def log(self) -> list[ProxiedRequest]:
        """Every request in the order of arrival, with its Range header."""
        with self._lock:
            return list(self._log)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most matching requests that were being handled at the same moment."""
        with self._lock:
            return self._max_in_flight

    def wait_for_in_flight(self, n: int, timeout: float = 10.0) -> bool:
        """Block until ``n`` matching requests are in flight at once (or ``timeout`` passes)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._in_flight >= n, timeout)

    # -- lifetime ----------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop serving, cut open connections and join every thread."""
        if self._stopping.is_set():
            return
        with self._lock:
            self._stopping.set()
            self._lock.notify_all()
        self._server.socket.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the server's thread
        self._thread.join()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()  # joins the connections' threads

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- used by the handler -----------------------------------------------------------------
    def _arrive(self, method: str, key: str, range_: str | None) -> _Plan:
        with self._lock:
            self._requests[(method, key)] += 1
            self._log.append(ProxiedRequest(method, key, range_))
            denied = next(
                (s for sub, (s, only) in self._denied.items() if sub in key and (only is None or method in only)), None
            ) if key else None
            matched = bool(key) and method in self.methods and self.key_filter in key
            if matched:
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
                self._lock.notify_all()
            if denied is not None:
                self._faults[("deny", key)] += 1
                return _Plan(matched, deny=denied)
            if matched and self.error_rate > 0 and self._random.random() < self.error_rate:
                self._faults[("error", key)] += 1
                return _Plan(matched, error=self.error_status)
            left, after = self._resets
            if matched and method == "GET" and left > 0:
                self._resets = (left - 1, after)
                self._faults[("reset", key)] += 1
                return _Plan(matched, reset_after=after)
            left, keep, at = self._shorts
            if matched and method == "GET" and left > 0 and (at is None or _range_start(range_) == at):
                self._shorts = (left - 1, keep, at)
                self._faults[("short", key)] += 1
                return _Plan(matched, short=keep)
            return _Plan(matched)

    def _depart(self, plan: _Plan) -> None:
        if plan.matched:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def _delay(self, arrived: float) -> None:
        """Wait until ``latency`` after ``arrived`` (as ``latency`` is now), or until the proxy stops."""
        with self._lock:
            while not self._stopping.is_set():
                left = arrived + self._latency - time.monotonic()
                if left <= 0:
                    return
                self._lock.wait(min(left, 60.0))

    def _paced(self, chunk: bytes) -> Iterator[bytes]:
        """``chunk`` in pieces of 1/20 s each at ``bandwidth``, each after its time has passed."""
        bandwidth = self.bandwidth
        if not bandwidth or not chunk:
            yield chunk
            return
        step = max(1, int(bandwidth / 20))
        for start in range(0, len(chunk), step):
            piece = chunk[start:start + step]
            self._stopping.wait(len(piece) / bandwidth)
            yield piece

    def _track(self, connection: socket.socket, opened: bool) -> None:
        with self._lock:
            (self._connections.add if opened else self._connections.discard)(connection)


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """One thread per client connection; ``server_close`` joins them."""

    daemon_threads = True
    block_on_close = True
    request_queue_size = 128

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)

    def accept_until_closed(self) -> None:
        """Hand each connection to a new thread until the listening socket is shut down (no polling,
        unlike ``serve_forever``)."""
        while True:
            try:
                request, address = self.socket.accept()
            except OSError:
                return
            self.process_request(request, address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up, or a connection cut by stop(), is no error worth a traceback."""
        if not (issubclass(sys.exc_info()[0] or Exception, ConnectionError) or self.proxy._stopping.is_set()):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Forwards each request of one keep-alive client connection over one upstream connection."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # A body goes out in several writes: without this, Nagle's algorithm would hold a small
        # last one back until the client's delayed ACK, ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.proxy = self.server.proxy
        self.proxy._track(self.connection, opened=True)
        self.upstream: http.client.HTTPConnection | None = None

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.upstream is not None:
                self.upstream.close()
            self.proxy._track(self.connection, opened=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the counters say what happened."""

    def do_GET(self) -> None:
        arrived = time.monotonic()
        body = self._read_body()
        key = _object_key(self.path)
        plan = self.proxy._arrive(self.command, key, self.headers.get("Range"))
        try:
            if plan.matched:
                self.proxy._delay(arrived)
            status = plan.deny or plan.error
            if status is not None:
                self._send_s3_error(status, key)
            elif plan.short is not None:
                self._relay_short(body, plan.short)
            else:
                self._relay(body, plan.reset_after)
        finally:
            self.proxy._depart(plan)

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def _read_body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return b"".join(_chunks(self.rfile))
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _send_s3_error(self, status: int, key: str) -> None:
        code, message = _S3_ERRORS[status]
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
                f"</Message><Key>{escape(key)}</Key><RequestId>fault-proxy</RequestId></Error>").encode()
        headers = [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
        self.wfile.write(_head(status, headers) + (body if self.command != "HEAD" else b""))

    def _relay(self, body: bytes | None, reset_after: int | None) -> None:
        response = self._exchange(body)
        headers = [(name, value) for name, value in response.getheaders() if name.lower() not in _HOP_BY_HOP]
        pending = b""
        if response.getheader("Content-Length") is None and response.status not in (204, 304):
            pending = response.read()  # chunked upstream: send it with a length
            headers.append(("Content-Length", str(len(pending))))
        head, budget = _head(response.status, headers), reset_after
        for chunk in _body(response, pending):
            if budget is not None:
                chunk, budget = chunk[:budget], budget - len(chunk[:budget])
            for piece in self.proxy._paced(chunk):
                self.wfile.write(head + piece)
                head = b""
            if budget == 0:
                break
        if head:  # no body
            self.wfile.write(head)
        if reset_after is not None:
            self._reset()

    def _relay_short(self, body: bytes | None, keep: int) -> None:
        """The upstream answer with its body cut to ``keep`` bytes and a Content-Length to match."""
        response = self._exchange(body)
        data = response.read()[:keep]
        headers = [(n, v) for n, v in response.getheaders() if n.lower() not in _HOP_BY_HOP | {"content-length"}]
        self.wfile.write(_head(response.status, [*headers, ("Content-Length", str(len(data)))]) + data)

    def _exchange(self, body: bytes | None) -> http.client.HTTPResponse:
        """Send the request upstream, on a fresh connection if the kept one was closed."""
        for attempt in range(2):
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection(*self.proxy.upstream, timeout=60)
            try:
                self.upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.upstream.putheader(name, value)
                if body is not None or self.command in ("PUT", "POST"):
                    self.upstream.putheader("Content-Length", str(len(body or b"")))
                self.upstream.endheaders(body)
                return self.upstream.getresponse()
            except (ConnectionError, http.client.BadStatusLine):
                self.upstream.close()
                self.upstream = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _reset(self) -> None:
        """Abort the client connection with a TCP reset (SO_LINGER 0, then close)."""
        if self.upstream is not None:  # its response was not read to the end
            self.upstream.close()
            self.upstream = None
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.wfile.close()
        self.connection.close()
        self.wfile = io.BytesIO()  # the base class flushes it after this request: let that be a no-op


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    """A response's status line and headers (sent in one write with the first bytes of the body)."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _range_start(range_: str | None) -> int | None:
    """The first byte a Range header asks for ("bytes=512-1023" -> 512; None without one)."""
    if not range_ or not range_.startswith("bytes="):
        return None
    start = range_[len("bytes="):].split("-", 1)[0]
    return int(start) if start.isdigit() else None


def _object_key(path: str) -> str:
    """The object key of a path-style request ("/bucket/key?query" -> "key")."""
    parts = unquote(urlsplit(path).path).lstrip("/").split("/", 1)
    return parts[1] if len(parts) == 2 else ""


def _chunks(stream: Any) -> Iterator[bytes]:
    """The data of a chunked request body (trailers skipped)."""
    while True:
        size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline().strip():
                pass
            return
        yield stream.read(size)
        stream.readline()


def _body(response: http.client.HTTPResponse, pending: bytes) -> Iterator[bytes]:
    if pending:
        yield pending
    while chunk := response.read(_CHUNK):
        yield chunk
