"""Servers found by DNS: `dns:///NAME:PORT` in fleet.servers stands for every address NAME resolves to.

A Kubernetes headless Service resolves to the IPs of its ready pods, so scaling the servers' StatefulSet adds
and removes addresses. The fleet resolves such entries at start and again before every iteration: a new address
joins after a Sync, like a server added to fleet.servers_file, and one that no longer resolves is forgotten once
it has left the active set (a pod replaced under a new IP is a new server to the fleet). With TLS, set
fleet.tls_server_name to a name the servers' certificate holds, since the fleet then dials IPs.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Iterable

from seedcast.proto.transport import split_address

log = logging.getLogger("seedcast.fleet")
DNS_PREFIX = "dns:///"

Lookup = Callable[..., list]  # socket.getaddrinfo's shape
LOOKUP: Lookup = socket.getaddrinfo  # what resolves names; tests put a resolver test double here


def is_discovered(entry: str) -> bool:
    """Whether a fleet.servers entry names a DNS name to resolve rather than one server."""
    return entry.startswith(DNS_PREFIX)


def name_and_port(entry: str) -> tuple[str, int]:
    """The NAME and PORT of `dns:///NAME:PORT`; ValueError when it is not of that form."""
    return split_address(entry.removeprefix(DNS_PREFIX))


def resolve(entry: str, lookup: Lookup | None = None) -> list[str]:
    """The `host:port` addresses `dns:///NAME:PORT` resolves to now, sorted (IPv6 in brackets); none when the
    name does not resolve (a Service with no ready pod yet), with a warning."""
    name, port = name_and_port(entry)
    try:
        found = (lookup or LOOKUP)(name, port, type=socket.SOCK_STREAM)
    except OSError as error:
        log.warning("%s does not resolve now (%s); no servers from it this time", entry, error)
        return []
    hosts = {info[4][0] for info in found}
    return sorted(f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host in hosts)


async def wait_for_addresses(entry: str, timeout_seconds: float, poll_seconds: float = 1.0) -> list[str]:
    """What `entry` resolves to, waiting up to `timeout_seconds` for it to resolve to anything (a headless Service
    lists its pods only once they are ready); [] when it never did."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        found = await asyncio.to_thread(resolve, entry)
        if found or time.monotonic() >= deadline:
            return found
        await asyncio.sleep(min(poll_seconds, max(0.0, deadline - time.monotonic())))


def expand(entries: Iterable[str], lookup: Lookup | None = None) -> list[str]:
    """fleet.servers with every `dns:///` entry replaced by the addresses it resolves to now, without repeats."""
    addresses: list[str] = []
    for entry in entries:
        addresses.extend(resolve(entry, lookup) if is_discovered(entry) else [entry])
    return list(dict.fromkeys(addresses))
