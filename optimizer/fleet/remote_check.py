"""Before a run's folder exists: ask each server this process does not start whether it can serve the run (its
model, its evaluator), so a mistake on a remote fleet ends, like preflight's local checks, in one message that
names every server's problem and exit status 2, before anything is made. A server that joins later is checked
when it joins (its model) and by its members (its evaluator)."""

from __future__ import annotations

import asyncio

from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.config_section import ConfigError
from seedcast.optimizer.fleet.client import ClientSecurity, ServerClient, ServerUnreachableError
from seedcast.optimizer.fleet.discovery import is_discovered, wait_for_addresses
from seedcast.optimizer.fleet.server_list import listed_servers, model_mismatch, run_targets, targets_mismatch


async def remote_server_problems(config: TrainConfig) -> list[str]:
    """One line per remote server that cannot serve this run: unreachable, another model, or no evaluator."""
    fleet = config.fleet
    security = ClientSecurity.of_fleet(fleet)
    evaluator = config.task.evaluator_spec()
    problems, named = [], []
    for entry in fleet.servers:
        if not is_discovered(entry):
            named.append(entry)
            continue
        found = await wait_for_addresses(entry, fleet.connect_timeout_seconds)
        if not found:
            problems.append(
                f"{entry} resolved to no address within {fleet.connect_timeout_seconds:g} s "
                "(fleet.connect_timeout_seconds): is any server ready behind that name?"
            )
        named.extend(found)
    addresses = dict.fromkeys([*named, *listed_servers(fleet)])
    clients = [ServerClient(address, security) for address in addresses]
    try:
        answers = await asyncio.gather(
            *(client.wait_ready(fleet.connect_timeout_seconds, evaluator) for client in clients),
            return_exceptions=True,
        )
    finally:
        await asyncio.gather(*(client.close() for client in clients))
    for client, answer in zip(clients, answers, strict=True):
        if isinstance(answer, ServerUnreachableError):
            problems.append(str(answer))
            continue
        if isinstance(answer, BaseException):
            raise answer
        for mismatch in (
            model_mismatch(client.address, answer.model, config.model.name),
            targets_mismatch(client.address, answer.lowrank_targets, run_targets(config)),
        ):
            if mismatch is not None:
                problems.append(mismatch)
        if answer.evaluator_problem:
            problems.append(
                f"server {client.address} cannot use this run's evaluator: {answer.evaluator_problem[:400]}"
            )
    return problems


def check_remote_servers(config: TrainConfig) -> None:
    """Raise a ConfigError naming every remote server that cannot serve this run (none listed: nothing to ask)."""
    if not config.fleet.servers and not config.fleet.servers_file:
        return
    problems = asyncio.run(remote_server_problems(config))
    if problems:
        raise ConfigError("the fleet cannot serve this run:\n  " + "\n  ".join(problems))
