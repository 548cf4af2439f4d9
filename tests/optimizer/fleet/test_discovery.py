"""Kubernetes discovery (`fleet.servers=[dns:///NAME:PORT]`): a name stands for every address it resolves to, and
scaling the servers changes the fleet at the next iteration. A resolver test double plays the headless Service;
one real resolution checks the default resolver."""

from __future__ import annotations

import asyncio
import socket

import pytest
from prometheus_client import CollectorRegistry

from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.server import start_server
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.fleet import discovery
from seedcast.optimizer.fleet.discovery import expand, resolve
from seedcast.optimizer.fleet.replicas import Fleet
from seedcast.optimizer.metrics import OptimizerMetrics


def _answers(*hosts: str) -> list:
    """getaddrinfo's answer for these hosts (the shape a resolver returns)."""
    return [
        (socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, 0)) for host in hosts
    ]


def test_a_name_stands_for_every_address_it_resolves_to():
    lookup = lambda name, port, **_: _answers("10.0.0.2", "10.0.0.1", "10.0.0.2", "fd00::1")  # noqa: E731
    assert resolve("dns:///seedcast-server:50051", lookup) == ["10.0.0.1:50051", "10.0.0.2:50051", "[fd00::1]:50051"]
    assert expand(["127.0.0.1:1", "dns:///s:7"], lambda *a, **k: _answers("10.0.0.9")) == ["127.0.0.1:1", "10.0.0.9:7"]


def test_a_name_that_does_not_resolve_gives_no_servers_for_now(caplog):
    def failing(*args, **kwargs):
        raise socket.gaierror("Name or service not known")

    assert resolve("dns:///nowhere:50051", failing) == []
    assert "does not resolve now" in caplog.text


def test_the_default_resolver_resolves_a_real_name():
    assert "127.0.0.1:50051" in resolve("dns:///localhost:50051")


def test_discovered_entries_are_checked_like_addresses():
    assert load_config(overrides=["fleet.servers=[dns:///localhost:50051]", "fleet.local=0"]).fleet.servers
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["fleet.servers=[dns:///seedcast-server:50051,dns:///noport]", "fleet.local=0"])
    message = str(raised.value)
    assert "dns:///seedcast-server:50051 is not on loopback; set fleet.tls_ca" in message and "'noport'" in message


def test_scaling_the_service_adds_and_forgets_servers(monkeypatch):
    """Servers on 127.0.0.1:P and 127.0.0.2:P play two pods of one Service on port P."""
    service = {"hosts": ["127.0.0.1"]}
    monkeypatch.setattr(discovery, "LOOKUP", lambda name, port, **_: _answers(*service["hosts"]))

    async def scenario():
        first = await start_server(SimulatedLatencyTestBackend(), "127.0.0.1", 0)
        port = first.port
        second = await start_server(SimulatedLatencyTestBackend(), "127.0.0.2", port)
        servers = [f"fleet.servers=[dns:///seedcast-server:{port}]", "fleet.local=0", "fleet.insecure=true"]
        config = load_config(overrides=servers)
        metrics = OptimizerMetrics("test", "simulated", CollectorRegistry())
        fleet = Fleet(config.fleet, metrics, choose_noise=lambda given: "gaussian")
        try:
            await fleet.start([])
            seen = [sorted(c.address for c in fleet.active)]
            service["hosts"] = ["127.0.0.1", "127.0.0.2"]  # scaled up
            await fleet.readmit()
            seen.append(sorted(c.address for c in fleet.active))
            service["hosts"] = ["127.0.0.2"]  # scaled down: the first pod is gone
            await first.stop(0)
            fleet.active = [c for c in fleet.active if c.address != f"127.0.0.1:{port}"]  # its stream broke
            await fleet.readmit()
            seen.append(sorted(fleet.known))
            return seen, port
        finally:
            await fleet.close()
            await second.stop(0)

    seen, port = asyncio.run(scenario())
    assert seen == [[f"127.0.0.1:{port}"], [f"127.0.0.1:{port}", f"127.0.0.2:{port}"], [f"127.0.0.2:{port}"]]


def test_a_name_is_waited_for_until_a_server_is_ready_behind_it(monkeypatch):
    calls = []

    def ready_on_the_third_look(name, port, **_):
        calls.append(name)
        return _answers("10.0.0.3") if len(calls) >= 3 else []

    monkeypatch.setattr(discovery, "LOOKUP", ready_on_the_third_look)
    found = asyncio.run(discovery.wait_for_addresses("dns:///s:1", timeout_seconds=10, poll_seconds=0.01))
    assert found == ["10.0.0.3:1"] and len(calls) == 3


def test_a_name_that_never_resolves_stops_the_run_before_its_folder_exists(tmp_path, monkeypatch, capsys):
    from seedcast.cli import main

    monkeypatch.setattr(discovery, "LOOKUP", lambda *args, **kwargs: [])
    servers = ["fleet.servers=[dns:///seedcast-server:50051]", "fleet.insecure=true", "fleet.local=0"]
    run_dir = tmp_path / "run"
    argv = ["train", "--run-dir", str(run_dir), "--no-progress", *servers, "fleet.connect_timeout_seconds=0.5"]
    assert main(argv) == 2 and not run_dir.exists()
    assert "dns:///seedcast-server:50051 resolved to no address within 0.5 s" in capsys.readouterr().err
