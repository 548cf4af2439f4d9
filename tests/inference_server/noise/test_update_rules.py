"""The momentum update rule: a float32 velocity, rebuilt bit for bit from the update log."""

from __future__ import annotations

import pytest
import torch

from seedcast.inference_server.noise.apply import apply_update_terms
from seedcast.inference_server.noise.kinds import noise_source


def test_momentum_is_a_float32_velocity_rebuilt_from_the_log():
    master = {"a": torch.randn(300, generator=torch.Generator().manual_seed(0)), "b": torch.zeros(7)}
    start = {name: tensor.clone() for name, tensor in master.items()}
    steps = [[(1, 0.1), (2, -0.05)], [(3, 0.2)], [(4, 0.07), (1, 0.01)]]
    velocity: dict = {}
    for terms in steps:
        apply_update_terms(master, terms, threads=2, momentum=0.9, velocity=velocity)
    expected = {name: tensor.clone() for name, tensor in start.items()}
    expected_velocity = {name: torch.zeros_like(tensor) for name, tensor in start.items()}
    gaussian = noise_source("gaussian")
    for terms in steps:
        for name in expected:
            expected_velocity[name].mul_(0.9)
            for seed, coeff in terms:
                expected_velocity[name].add_(gaussian.noise(seed, name, expected[name].shape), alpha=coeff)
            expected[name].add_(expected_velocity[name])
    for name in master:
        assert torch.equal(master[name], expected[name]) and torch.equal(velocity[name], expected_velocity[name])
    with pytest.raises(ValueError, match="velocity"):
        apply_update_terms(master, steps[0], momentum=0.5)


def test_apply_rule_dispatches_by_name_and_refuses_a_bad_rule_before_touching_a_weight():
    from seedcast.inference_server.noise.apply import apply_rule
    from seedcast.inference_server.noise.update_rules import rule_problems

    gaussian = noise_source("gaussian")
    base = {"w": torch.randn(64, generator=torch.Generator().manual_seed(1))}
    by_rule, by_terms = {"w": base["w"].clone()}, {"w": base["w"].clone()}
    rule_velocity, terms_velocity = {}, {}
    for terms in ([(1, 0.1)], [(2, -0.2)]):
        apply_rule(by_rule, terms, "momentum", {"momentum": 0.5}, rule_velocity, gaussian)
        apply_update_terms(by_terms, terms, source=gaussian, momentum=0.5, velocity=terms_velocity)
    assert torch.equal(by_rule["w"], by_terms["w"]) and torch.equal(rule_velocity["w"], terms_velocity["w"])
    plain, unnamed = {"w": base["w"].clone()}, {"w": base["w"].clone()}
    apply_rule(plain, [(3, 0.1)], "plain", {}, {}, gaussian)
    apply_rule(unnamed, [(3, 0.1)], "", {}, {}, gaussian)  # proto3's default: the plain rule
    assert torch.equal(plain["w"], unnamed["w"]) and not torch.equal(plain["w"], base["w"])
    for rule, params, message in (
        ("adam", {}, "unknown update rule 'adam'"),
        ("momentum", {}, "needs the parameter 'momentum'"),
        ("momentum", {"momentum": 1.0}, r"momentum must be in \[0, 1\)"),
        ("plain", {"momentum": 0.5}, "takes no parameter 'momentum'"),
    ):
        untouched = {"w": base["w"].clone()}
        assert rule_problems(rule, params)
        with pytest.raises(ValueError, match=message):
            apply_rule(untouched, [(4, 0.1)], rule, params, {}, gaussian)
        assert torch.equal(untouched["w"], base["w"])
