"""Helpers of the security tests: a wiretap transport, a recording site, and a certificate
authority with site certificates made at test time with the ``openssl`` command
(``cryptography`` is not installed).
"""

from __future__ import annotations

import ssl
import subprocess
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from exchange.dev.httpsim import LoopbackServer

SITE_TOKEN = "test-token"  # what exchange.dev.testing.fast_settings sends


@dataclass(frozen=True)
class Sent:
    """One request as it left the worker."""

    path: str
    headers: dict[str, str]  # names in lower case, as httpx keeps them
    content: bytes


class Wiretap(httpx.AsyncHTTPTransport):
    """The real HTTP transport, keeping a copy of every request that goes through it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Sent] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        self.sent.append(Sent(request.url.path, dict(request.headers), content))
        return await super().handle_async_request(request)


class RecordingSite(LoopbackServer):
    """A real HTTP server that keeps every request as it arrived (path, headers with names in
    lower case, body) and accepts every update with a receipt: what the service's default wire
    (aiohttp) puts on the wire, seen from the other end."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Sent] = []
        recorded = self.sent

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                content = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                recorded.append(Sent(self.path, headers, content))
                body = b'{"receipt": "R-1"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.handler = Handler

    def __enter__(self) -> RecordingSite:
        self.start()
        return self


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate (PEM): what EXCHANGE_SITE_CA_BUNDLE names
    site_cert: Path  # for 127.0.0.1 and localhost, signed by the CA
    site_key: Path
    other_cert: Path  # for another host name only, signed by the same CA
    other_key: Path


def _openssl(directory: Path, *args: str) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=directory, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"openssl {' '.join(args)} failed:\n{done.stderr}"


def _site_certificate(directory: Path, name: str, subject_alt_names: str) -> None:
    (directory / f"{name}.ext").write_text(
        f"subjectAltName={subject_alt_names}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n",
        encoding="ascii",
    )
    _openssl(
        directory,
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        directory,
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-sha256", "-extfile", f"{name}.ext",
        "-out", f"{name}.pem",
    )  # fmt: skip


def make_pki(directory: Path) -> Pki:
    """A CA and two site certificates it signed, made with the openssl command."""
    _openssl(
        directory,
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-sha256",
        "-subj", "/CN=exchange test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _site_certificate(directory, "site", "IP:127.0.0.1,DNS:localhost")
    _site_certificate(directory, "other", "DNS:shop.example.com")
    return Pki(
        directory / "ca.pem",
        directory / "site.pem",
        directory / "site.key",
        directory / "other.pem",
        directory / "other.key",
    )


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context
