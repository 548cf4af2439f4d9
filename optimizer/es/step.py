"""One ES step: the value `tell` returns, the update log stores, the client sends and the servers apply.

    ESStep(step=3, sigma=0.005, terms=[(seed, coeff), ...])                                   # plain
    ESStep(step=3, sigma=0.005, terms=[...], rule="momentum", params={"momentum": 0.9})
    ESStep(step=3, sigma=0.005, terms=[...], rank=4)            # members of low rank 4 (noise/lowrank.py)

A step names its update rule and that rule's parameters. What a rule does to the weights is the servers'
(`inference_server/noise/update_rules.py`); the log line and the wire message carry any rule as they are.
So a new update rule is a strategy here that emits it plus the rule on the servers, and nothing in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seedcast.inference_server.noise.update_rules import PLAIN_RULE
from seedcast.proto import seedcast_pb2 as pb


@dataclass(frozen=True)
class ESStep:
    """Step `step` of a run: the update rule applied to Σ coeff·ε(seed) over `terms`, in order.

    `sigma` is the σ the step's members were evaluated with: the log records it, the servers do not need it.
    `rank` is the members' perturbation rank, which ε is made of: 0 is full rank, r ≥ 1 low rank."""

    step: int
    sigma: float
    terms: list[tuple[int, float]]
    rule: str = PLAIN_RULE
    params: dict[str, float] = field(default_factory=dict)
    rank: int = 0

    def to_json(self) -> dict[str, Any]:
        """The update log's body of this step (the log adds a checksum). A plain step keeps the three keys logs
        have always had, so their bytes and checksums never change; full-rank steps carry no rank."""
        body: dict[str, Any] = {"step": self.step, "sigma": self.sigma, "terms": [[s, c] for s, c in self.terms]}
        if self.rule != PLAIN_RULE or self.params:
            body["rule"] = self.rule
            body["params"] = dict(self.params)
        if self.rank:
            body["rank"] = self.rank
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ESStep:
        """Read a log body. Logs written before rules had names carry a bare `momentum` key: the momentum rule."""
        rule, params = data.get("rule", PLAIN_RULE), data.get("params", {})
        if "rule" not in data and "momentum" in data:
            rule, params = "momentum", {"momentum": data["momentum"]}
        return cls(
            step=int(data["step"]),
            sigma=float(data["sigma"]),
            terms=[(int(seed), float(coeff)) for seed, coeff in data["terms"]],
            rule=str(rule),
            params={str(name): float(value) for name, value in params.items()},
            rank=int(data.get("rank", 0)),
        )

    def to_request(self) -> pb.UpdateRequest:
        """The wire form: the same fields, less σ."""
        terms = [pb.SeedCoefficient(seed=seed, coeff=coeff) for seed, coeff in self.terms]
        return pb.UpdateRequest(step=self.step, terms=terms, rule=self.rule, params=self.params, rank=self.rank)
