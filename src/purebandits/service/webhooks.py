"""The owner's webhook: one signed JSON POST when every learner of an experiment has stopped.

Anyone may own an experiment (on a server without an admin token), and the server makes the request,
so a webhook must not become a way into the server's own network:

* the host name is resolved once (:data:`getaddrinfo`) and every address is checked
  (:func:`is_public`): loopback, private, link-local, multicast, reserved, unspecified and shared
  addresses are refused, IPv4 and IPv6 alike, including IPv4 addresses inside IPv6 ones (mapped,
  compatible, 6to4, Teredo, NAT64). Numeric forms (``127.1``, ``2130706433``, ``0x7f.1``) resolve
  to the address they mean, so checking the resolved address covers them;
* the connection goes to the address that was checked (no second resolution: a name cannot
  resolve to a public address for the check and to an internal one for the call), with the URL's
  host in the ``Host`` header and, for https, in SNI and in the certificate check;
* redirects are not followed; one try takes at most ``timeout`` seconds in all (connect, TLS,
  request, answer), enforced by a watchdog, so a receiver dribbling bytes cannot hold a call;
* every failure is recorded in coarse words (:data:`REFUSED`, :data:`COULD_NOT_CONNECT`, ...)
  rather than the socket's error text, so the recorded result is no port scanner.

``allow_internal`` (the operator's ``webhook_allow_internal`` setting) lifts the address check.

Each call is signed (Stripe / Slack style): ``X-Purebandits-Timestamp: <unix seconds>`` and
``X-Purebandits-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>``, with the secret the
owner was shown when setting the URL; ``X-Purebandits-Event-Id`` is the same for every try of one call.

Standard library only (:mod:`http.client`): one small request does not justify a client dependency.
"""

from __future__ import annotations

import hashlib
import hmac
import http
import http.client
import ipaddress
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from purebandits import __version__

__all__ = ["post_json", "TRIES", "is_public", "public_addresses", "sign", "NotPublic", "REFUSED",
           "COULD_NOT_CONNECT", "TIMED_OUT", "TLS_FAILED", "NOT_HTTP", "FAILED"]

log = logging.getLogger("purebandits.service")

#: tries of one call; a connection error or a 5xx is retried after 1 s, then 4 s
TRIES = 3

#: what a call records when it fails (never the socket's own words: they would tell an owner which ports
#: of which hosts are open)
REFUSED = "refused: not a public address"
COULD_NOT_CONNECT = "could not connect"
TIMED_OUT = "timed out"
TLS_FAILED = "TLS failed (certificate or handshake)"
NOT_HTTP = "not an HTTP answer"
FAILED = "failed"

#: the name resolution every call uses (the one place a host name becomes addresses; tests replace it)
getaddrinfo: Callable[..., list[Any]] = socket.getaddrinfo
#: how a call opens its TCP connection to the checked address (tests replace it to see where it goes)
create_connection: Callable[..., socket.socket] = socket.create_connection

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_V4_COMPATIBLE = ipaddress.ip_network("::/96")


class NotPublic(ValueError):
    """The URL's host is, or resolves only to, addresses that are not public."""


def _embedded_v4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries (mapped, compatible, 6to4, Teredo, NAT64)."""
    out = []
    if ip.ipv4_mapped is not None:
        out.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        out.append(ip.sixtofour)
    if ip.teredo is not None:
        out.extend(ip.teredo)
    if ip in _V4_COMPATIBLE or any(ip in net for net in _NAT64):
        out.append(ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF))
    return out


def is_public(ip: IPAddress | str) -> bool:
    """Whether a webhook may go to ``ip``: a global address, not loopback, private, link-local, multicast,
    reserved, unspecified or shared (100.64/10), and no such IPv4 address inside an IPv6 one."""
    if isinstance(ip, str):
        ip = ipaddress.ip_address(ip.split("%", 1)[0])  # an IPv6 zone ("fe80::1%eth0") names an interface
    if not ip.is_global or ip.is_multicast or ip.is_private or ip.is_loopback or ip.is_link_local \
            or ip.is_reserved or ip.is_unspecified:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:
            return False
        return all(is_public(v4) for v4 in _embedded_v4(ip))
    return True


def _split(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an absolute http(s) URL."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in ("http", "https") or not host:
        raise ValueError("not an absolute http(s) URL")
    port = parts.port or (443 if scheme == "https" else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return scheme, host, port, path


def public_addresses(url: str, allow_internal: bool = False) -> list[str]:
    """The addresses a call to ``url`` may connect to: its host resolved once, the public ones in the
    resolver's order (every one with ``allow_internal``).

    Raises :class:`NotPublic` if it resolves only to other addresses, :class:`socket.gaierror` if the name
    does not resolve, :class:`ValueError` for a URL that is not absolute http(s).
    """
    _scheme, host, port, _path = _split(url)
    try:
        addrs, literal = [str(ipaddress.ip_address(host))], True  # a literal address is itself
    except ValueError:
        addrs = list(dict.fromkeys(str(info[4][0]) for info in getaddrinfo(host, port, type=socket.SOCK_STREAM)))
        literal = False
    ok = addrs if allow_internal else [a for a in addrs if is_public(a)]
    if not ok:
        raise NotPublic(f"{host} is not a public address" if literal else
                        f"{host} resolves only to addresses that are not public")
    return ok


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Purebandits-Signature`` value: ``v1=`` and the hex HMAC-SHA256 of ``"<timestamp>.<body>"``
    keyed by the webhook's secret."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


class _Aborted(Exception):
    """The try ran out of its time (the watchdog shut the connection)."""


class _TLSError(Exception):
    """No TLS session (the certificate does not match the host name, is not trusted, or the handshake failed)."""


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to ``ip`` (already checked) that names ``host`` in its request; ``abort()`` ends it
    from another thread."""

    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.ip, self.aborted, self.connected = ip, False, False

    def _tcp(self) -> socket.socket:
        sock = create_connection((self.ip, self.port), self.timeout)
        self.sock = sock
        if self.aborted:
            raise _Aborted
        return sock

    def connect(self) -> None:
        self._tcp()
        self.connected = True

    def abort(self) -> None:
        self.aborted = True
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv/send at once (close() would not)
            except OSError:
                pass


class _PinnedHTTPS(_PinnedHTTP):
    """The same over TLS: SNI and the certificate check use the URL's host name, not the address."""

    context = ssl.create_default_context()

    def connect(self) -> None:
        sock = self._tcp()
        try:
            self.sock = self.context.wrap_socket(sock, server_hostname=self.host)
        except (ssl.SSLError, ssl.CertificateError) as exc:
            raise _TLSError from exc
        self.connected = True


def _phrase(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""


def _try(url: str, body: bytes, headers: dict[str, str], timeout: float, allow_internal: bool
         ) -> tuple[int | None, str | None, bool]:
    """One try: (status, error in words, whether to retry)."""
    try:
        scheme, host, port, path = _split(url)
        ips = public_addresses(url, allow_internal)
    except NotPublic:
        return None, REFUSED, False
    except (OSError, UnicodeError):  # the name does not resolve (now)
        return None, COULD_NOT_CONNECT, True
    except ValueError:
        return None, FAILED + ": not an http(s) URL", False
    deadline = time.monotonic() + timeout
    cls = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    connect_error = COULD_NOT_CONNECT
    for ip in ips:  # like socket.create_connection: the next address if one cannot be reached
        left = deadline - time.monotonic()
        if left <= 0:
            return None, TIMED_OUT, True
        conn = cls(host, port, ip, left)
        watchdog = threading.Timer(left, conn.abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request("POST", path, body=body, headers=headers)
            status = int(conn.getresponse().status)  # the answer's body is not read: the connection closes
            if conn.aborted:  # cut off by the watchdog mid-answer: what was read is not the answer
                raise _Aborted
        except Exception as exc:  # noqa: BLE001 (anything at all: recorded in words, never raised)
            timed_out = conn.aborted or isinstance(exc, TimeoutError | _Aborted)
            if not conn.connected:  # no connection (or no TLS session) to this address
                if timed_out:
                    connect_error = TIMED_OUT
                elif isinstance(exc, _TLSError):
                    return None, TLS_FAILED, False
                elif not isinstance(exc, OSError):
                    log.warning("webhook call failed before connecting: %r", exc)
                continue
            if timed_out:
                return None, TIMED_OUT, False
            if isinstance(exc, http.client.HTTPException | OSError):
                return None, NOT_HTTP, False
            log.warning("webhook call failed: %r", exc)
            return None, FAILED, False
        finally:
            watchdog.cancel()
            conn.close()
        if 200 <= status < 300:
            return status, None, False
        error = f"HTTP {status} {_phrase(status)}".strip()
        if 300 <= status < 400:
            error += " (redirects are not followed)"
        return status, error, status >= 500
    return None, connect_error, True


def post_json(url: str, payload: dict[str, Any], timeout: float, *, secret: str | None = None,
              allow_internal: bool = False, event_id: str | None = None) -> tuple[int | None, str | None]:
    """POST ``payload`` as JSON to ``url``; returns (HTTP status, None) on a 2xx, else (status or None, error in
    coarse words). Never raises.

    Up to :data:`TRIES` tries, the later ones after 1 s and 4 s, only after a connection error or a 5xx.
    Each try takes at most ``timeout`` seconds. With ``secret`` each try is signed (:func:`sign`).
    """
    body = json.dumps(payload).encode()
    status: int | None = None
    error: str | None = None
    for attempt in range(TRIES):
        if attempt:
            time.sleep(4.0 ** (attempt - 1))
        ts = int(time.time())
        headers = {"Content-Type": "application/json", "User-Agent": f"purebandits/{__version__} webhook",
                   "X-Purebandits-Timestamp": str(ts), "Connection": "close"}
        if secret is not None:
            headers["X-Purebandits-Signature"] = sign(secret, ts, body)
        if event_id is not None:
            headers["X-Purebandits-Event-Id"] = event_id
        try:
            status, error, again = _try(url, body, headers, timeout, allow_internal)
        except Exception as exc:  # noqa: BLE001 (never raised to the sweep)
            log.warning("webhook call failed: %r", exc)
            return None, FAILED
        if not again:
            break
    return status, error
