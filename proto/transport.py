"""How optimizer and servers reach each other: channel options, message size, the bearer-token
header, reading secrets, addresses, and the one rule for plaintext.

Both sides import this module and nothing of each other's internals, so a change to the transport
happens in one place.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from seedcast.proto.errors import SeedcastError

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Members can take minutes; keepalive pings keep idle streams through NATs without flooding.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]
AUTH_HEADER = "authorization"
MIN_TOKEN_CHARS = 16


class SecurityConfigError(SeedcastError, ValueError):
    """TLS or token settings that cannot work; the message says what to set."""


def read_secret(path: str | None, what: str) -> bytes | None:
    """The bytes of a key, certificate or token file; a clear error when it cannot be read."""
    if path is None:
        return None
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as error:
        raise SecurityConfigError(f"cannot read the {what} file {path}: {error.strerror}") from None
    if not data.strip():
        raise SecurityConfigError(f"the {what} file {path} is empty")
    return data


def read_token(path: str | None) -> str | None:
    """The bearer token in a file (surrounding whitespace removed); at least MIN_TOKEN_CHARS characters."""
    data = read_secret(path, "token")
    if data is None:
        return None
    token = data.decode().strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise SecurityConfigError(
            f"the token in {path} is shorter than {MIN_TOKEN_CHARS} characters; "
            "generate one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return token


def bearer(token: str) -> str:
    """The value of the authorization header for `token`."""
    return f"Bearer {token}"


def is_loopback(host: str) -> bool:
    """True for localhost and addresses in 127.0.0.0/8 or ::1."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plaintext_allowed(host: str, insecure: bool) -> bool:
    """The one rule for unencrypted gRPC, on both sides: only on a loopback address, unless the user
    explicitly accepts it for a network they trust (`insecure`)."""
    return insecure or is_loopback(host)


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (IPv6 hosts in brackets) as (host, port); ValueError when it is not of that form."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    return host, int(port)
