"""Prompt-sharded members (`fleet.prompt_shards`): a member's prompts cut into fixed slices, each a unit of work.
The result must not depend on which server ran which slice: the same update log on 1, 2 or 3 servers."""

from __future__ import annotations

import math

import grpc
import pytest
import torch

from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.strategy import Member
from seedcast.optimizer.fleet.shards import MemberReport, Unit, merge_shards, units_of
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.proto import seedcast_pb2 as pb
from tests.optimizer.fleet.test_fault_tolerance import _fleet, _train, servers  # noqa: F401  (servers is a fixture)
from tests.optimizer.fleet.test_fault_tolerance import _overrides as _fault_overrides
from tests.spies import record_calls

MEMBER = Member(index=3, seed=11, sign=1, sampling_seed=99, sigma=0.1)


def _part(rewards: list[float], summary: bool = False, **extra) -> MemberReport:
    scored = [r for r in rewards if not math.isnan(r)]
    if summary:
        rewards = [sum(scored) / len(scored) if scored else math.nan]
    return MemberReport(
        member=MEMBER, server="s", rewards=rewards, prompts_scored=len(scored), summary=summary, **extra
    )


def test_shards_merge_in_order_into_the_members_report():
    parts = [_part([1.0, 0.0], timings={"generate": 1.0}, truncated=2), _part([0.5], timings={"generate": 2.0})]
    merged = merge_shards(parts)
    assert merged.rewards == [1.0, 0.0, 0.5] and merged.fitness == pytest.approx(0.5)
    assert merged.timings == {"generate": 3.0} and merged.prompts_scored == 3 and merged.truncated == 2


def test_summary_shards_are_weighed_by_their_scored_prompts():
    merged = merge_shards([_part([1.0, 1.0, 1.0], summary=True), _part([0.0, math.nan], summary=True)])
    assert merged.summary and merged.fitness == pytest.approx(0.75)  # 3 of 4 scored prompts right, not (1+0)/2


def test_a_failed_shard_fails_the_member_and_one_shard_is_the_member():
    failed = MemberReport(member=MEMBER, server="t", error="boom")
    merged = merge_shards([_part([1.0]), failed])
    assert merged.error == "boom" and math.isnan(merged.fitness)
    only = _part([0.25])
    assert merge_shards([only]) is only


def test_each_shard_samples_with_its_own_seed_and_one_shard_keeps_the_members():
    units = units_of([MEMBER], 3)
    assert [(u.shard, u.shards) for u in units] == [(0, 3), (1, 3), (2, 3)]
    assert len({u.sampling_seed for u in units}) == 3 and MEMBER.sampling_seed not in {u.sampling_seed for u in units}
    assert Unit(MEMBER).sampling_seed == MEMBER.sampling_seed


def test_more_shards_than_prompts_is_a_config_error():
    with pytest.raises(ConfigError, match=r"fleet.prompt_shards \(8\) must be at most batch_size \(4\)"):
        load_config(overrides=["fleet.prompt_shards=8", "batch_size=4"])


def test_the_same_member_again_skips_its_perturbation_bit_for_bit(tiny_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend

    backend = HFBackend(tiny_model_dir, device="cpu", dtype="bfloat16", threads=1, noise="table", pair_cache=False)

    def weights() -> dict[str, torch.Tensor]:
        backend.sync_weights()
        return {name: param.detach().clone() for name, param in backend.params.items()}

    writes = record_calls(backend, "_write_perturbation")
    backend.perturb(5, 0.05, 1)
    first = weights()
    backend.restore()
    backend.perturb(5, 0.05, 1)  # its next shard: nothing to write
    assert len(writes) == 1 and all(torch.equal(first[n], w) for n, w in weights().items())
    backend.restore()
    backend.apply_update([(7, 0.01)])  # the master moved: the perturbation must be written again
    backend.perturb(5, 0.05, 1)
    assert len(writes) == 2 and not all(torch.equal(first[n], w) for n, w in weights().items())
    backend.restore()


def test_a_server_evaluates_only_its_shard_and_refuses_one_that_does_not_fit(tiny_model_dir):
    import seedcast
    from seedcast.proto import seedcast_pb2_grpc as pb_grpc

    problems = [pb.Problem(prompt=f"What is {n} + 1?", reference=str(n + 1)) for n in range(3)]
    batch = pb.PromptBatch(iteration=0, problems=problems, evaluator="synthetic")

    def task(shard: int, shards: int) -> pb.MemberTask:
        made = pb.MemberTask(iteration=0, seed=1, sign=1, sigma=0.01, shard=shard, shards=shards)
        made.sampling.max_new_tokens, made.sampling.top_p, made.sampling.samples_per_prompt = 2, 1.0, 1
        made.per_prompt_q8 = made.summary_only = True
        return made

    with seedcast.LocalServer(seedcast.ServeConfig(model=tiny_model_dir, port=0, threads=1)) as server:
        before = server.backend.fingerprint()
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.InferenceServerStub(channel)
            for shard, shards in ((2, 2), (0, 4)):
                requests = iter([pb.EvaluateRequest(batch=batch), pb.EvaluateRequest(task=task(shard, shards))])
                with pytest.raises(grpc.RpcError) as error:
                    list(stub.Evaluate(requests, timeout=60))
                assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "does not fit a batch of 3 prompts" in error.value.details()
            requests = iter([pb.EvaluateRequest(batch=batch), pb.EvaluateRequest(task=task(1, 2))])
            (answer,) = list(stub.Evaluate(requests, timeout=60))
        assert server.backend.fingerprint() == before  # refused or evaluated, the weights are intact
    # Shard 1 of 2 of 3 prompts is prompts [1, 3): two prompts, one byte each, within the wire budget.
    assert len(answer.result.prompt_rewards_q8) == 2 and len(answer.SerializeToString()) <= 512


def _run(tmp_path, model_dir: str, name: str, local: int, *extra: str):
    overrides = [
        f"model.name={model_dir}",
        "model.dtype=bfloat16",
        "iterations=2",
        "batch_size=5",
        "eval_every=0",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size=50",
        "sampling.max_new_tokens=6",
        "es.population=4",
        "es.sigma=0.05",
        "es.learning_rate=0.01",
        "fleet.threads_per_server=1",
        "fleet.prompt_shards=3",
        f"fleet.local={local}",
        *extra,
    ]
    run, result = _train(tmp_path / name, overrides)
    return run.updates(), result


@pytest.mark.parametrize(
    "sampling",
    [
        ("sampling.temperature=0.0", "es.sigma=0.5"),  # large enough to change greedy answers
        ("sampling.temperature=1.0", "sampling.samples_per_prompt=2", "es.fitness=per_prompt"),
    ],
    ids=["greedy", "sampled-per-prompt"],
)
def test_sharded_runs_are_bit_identical_on_one_two_and_three_servers(tmp_path, tiny_model_dir, sampling):
    runs = {local: _run(tmp_path, tiny_model_dir, f"run-{local}", local, *sampling) for local in (1, 2, 3)}
    updates = {local: updates for local, (updates, _) in runs.items()}
    assert updates[1] == updates[2] == updates[3] and all(record.terms for record in updates[1])
    assert len({result.fingerprint for _, result in runs.values()}) == 1
    for local, (_, result) in runs.items():
        rows = [r for r in result.metrics if r.iteration >= 0]
        assert all(r.servers_active == local and r.members_ok == 4 for r in rows)


def test_a_killed_server_hands_its_shards_to_the_others_with_identical_results(tmp_path, tiny_model_dir, servers):  # noqa: F811
    reference = _train(
        tmp_path / "reference",
        _fault_overrides(tiny_model_dir, **{"fleet.local": 1, "fleet.prompt_shards": 2}),
    )[1]
    fleet = servers(3)
    killed = []

    def kill_another_server(report):
        if killed:
            return
        victim = next(s for s in fleet if s.address not in report.server)
        victim.kill()
        killed.append(victim)

    run, result = _train(
        tmp_path / "run",
        _fault_overrides(tiny_model_dir, **_fleet(fleet), **{"fleet.prompt_shards": 2}),
        on_report=kill_another_server,
    )
    rows = [r for r in result.metrics if r.iteration >= 0]
    assert killed and all(r.members_ok == 8 for r in rows) and sum(r.members_reassigned for r in rows) >= 1
    assert result.fingerprint == reference.fingerprint
    assert RunDirectory(run.path).updates() == RunDirectory(tmp_path / "reference").updates()
