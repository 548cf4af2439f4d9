"""Evaluator specs → evaluator objects.

A spec is one of:
- a built-in name: `gsm8k`, `math`, `synthetic`, `countdown` (lenient) / `countdown-strict`, `format` /
  `format-boxed`, `format-number`, `format-final-number`, `format-countdown` (format-only controls,
  evaluators/format_reward.py);
- `reward-model:PATH` (a local sequence-classification model) or `remote:URL` (an HTTP endpoint);
- `trl:[W*]module:function[+...]`: reward functions in TRL's convention, any scale, summed with weights
  (evaluators/trl_rewards.py);
- `module:callable`, where the callable takes (completion, reference) and returns a float in
  [0, 1] or None, or is a zero-argument factory/class whose instance has `score_batch`;
- the name of an entry point in the `seedcast.evaluators` group, loaded the same way;
- a name given to `register_evaluator` in this process (a reward written in a notebook, say): only servers
  in the same process (`seedcast.LocalServer`) and `seedcast.grpo` can use it, not child processes.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points

from seedcast.evaluators.base import Evaluator, FunctionEvaluator
from seedcast.evaluators.countdown import countdown_reward, countdown_strict_reward
from seedcast.evaluators.format_reward import (
    boxed_format_reward,
    countdown_format_reward,
    final_number_format_reward,
    number_format_reward,
)
from seedcast.evaluators.gsm8k import gsm8k_reward
from seedcast.evaluators.synthetic import synthetic_reward
from seedcast.evaluators.trl_rewards import PREFIX as TRL_PREFIX
from seedcast.evaluators.trl_rewards import RewardSpecError, TRLRewardEvaluator
from seedcast.proto.errors import SeedcastError

ENTRY_POINT_GROUP = "seedcast.evaluators"


def _math() -> Evaluator:
    from seedcast.evaluators.math_answer import MathEvaluator

    return MathEvaluator()


BUILTIN_EVALUATORS: dict[str, Callable[[], Evaluator]] = {
    "gsm8k": lambda: FunctionEvaluator(gsm8k_reward, "gsm8k"),
    "synthetic": lambda: FunctionEvaluator(synthetic_reward, "synthetic"),
    "countdown": lambda: FunctionEvaluator(countdown_reward, "countdown"),
    "countdown-strict": lambda: FunctionEvaluator(countdown_strict_reward, "countdown-strict"),
    "math": _math,
    "format": lambda: FunctionEvaluator(boxed_format_reward, "format"),
    "format-boxed": lambda: FunctionEvaluator(boxed_format_reward, "format-boxed"),
    "format-number": lambda: FunctionEvaluator(number_format_reward, "format-number"),
    "format-final-number": lambda: FunctionEvaluator(final_number_format_reward, "format-final-number"),
    "format-countdown": lambda: FunctionEvaluator(countdown_format_reward, "format-countdown"),
}


class EvaluatorSpecError(SeedcastError, ValueError):
    """The evaluator spec names nothing that can be loaded."""


def _from_object(target: object, spec: str) -> Evaluator:
    if not inspect.isclass(target) and isinstance(target, Evaluator):
        return target  # an evaluator instance (a class has score_batch too, but unbound)
    if inspect.isclass(target) or (callable(target) and _arity(target) == 0):
        made = target()
        if isinstance(made, Evaluator):
            return made
        raise EvaluatorSpecError(f"{spec} made a {type(made).__name__}, which has no score_batch(samples) method")
    if callable(target):
        return FunctionEvaluator(target, spec)
    raise EvaluatorSpecError(f"{spec} is a {type(target).__name__}, not a callable or an evaluator")


def _arity(function: Callable) -> int:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return -1
    return sum(
        p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p in parameters
    )


def installed_plugins() -> dict:
    """Evaluators registered by installed distributions in the `seedcast.evaluators` entry-point group."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


_REGISTERED_IN_PROCESS: dict[str, Evaluator] = {}


def register_evaluator(name: str, evaluator: object) -> None:
    """Make `name` an evaluator spec in this process: `evaluator` is a function (completion, reference) ->
    float | None, an object with `score_batch`, or a class making one. Registering a name again replaces it.

    Servers started as child processes (`fleet.local`, `seedcast serve`) cannot see it: serve from this
    process with `seedcast.LocalServer`, or give the function a `module:callable` spec they can import."""
    reserved = name in BUILTIN_EVALUATORS or name.startswith(("reward-model:", "remote:", TRL_PREFIX))
    if not name or ":" in name or reserved:
        raise EvaluatorSpecError(f"cannot register {name!r}: use a plain name that is not built in and has no ':'")
    _REGISTERED_IN_PROCESS[name] = _from_object(evaluator, name)


def registered_in_process(spec: str) -> bool:
    """Whether `spec` names an evaluator registered in this process (so child processes cannot load it)."""
    return spec in _REGISTERED_IN_PROCESS


def check_evaluator_spec(spec: str) -> None:
    """Raise the EvaluatorSpecError `load_evaluator` would, without loading a reward model or calling a server:
    for an optimizer to check the spec its local servers will load."""
    if spec.startswith("reward-model:"):
        from pathlib import Path

        location = spec.removeprefix("reward-model:")
        if location.startswith((".", "/", "~")) and not Path(location).expanduser().exists():
            raise EvaluatorSpecError(f"evaluator {spec!r}: no reward model at {location}")
        return
    if spec.startswith("remote:"):
        if not spec.removeprefix("remote:").startswith(("http://", "https://")):
            raise EvaluatorSpecError(f"evaluator {spec!r}: a remote evaluator is remote:http(s)://HOST/PATH")
        return
    load_evaluator(spec)  # built-ins, registered names, plugins and module:callable are cheap to build


def load_evaluator(spec: str) -> Evaluator:
    """Build the evaluator a spec names (see the module docstring); errors say what is accepted."""
    if spec in BUILTIN_EVALUATORS:
        return BUILTIN_EVALUATORS[spec]()
    if spec in _REGISTERED_IN_PROCESS:
        return _REGISTERED_IN_PROCESS[spec]
    if spec.startswith("reward-model:"):
        from seedcast.evaluators.reward_model import LocalRewardModel

        return LocalRewardModel(spec.removeprefix("reward-model:"))
    if spec.startswith("remote:"):
        from seedcast.evaluators.reward_model import RemoteRewardEndpoint

        return RemoteRewardEndpoint(spec.removeprefix("remote:"))
    if spec.startswith(TRL_PREFIX):
        try:
            return TRLRewardEvaluator.from_spec(spec)
        except RewardSpecError as error:
            raise EvaluatorSpecError(str(error)) from None
    plugins = installed_plugins()
    if spec in plugins:
        return _from_object(plugins[spec].load(), spec)
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise EvaluatorSpecError(f"cannot import module {module_name!r} for evaluator {spec!r}: {error}") from error
        if not hasattr(module, attribute):
            raise EvaluatorSpecError(f"module {module_name!r} has no attribute {attribute!r}")
        return _from_object(getattr(module, attribute), spec)
    known = ", ".join([*BUILTIN_EVALUATORS, *plugins])
    raise EvaluatorSpecError(
        f"unknown evaluator {spec!r}; use one of {known}, reward-model:PATH, remote:URL, trl:module:function or "
        "module:callable (a name given to seedcast.register_evaluator exists only in the process that registered it)"
    )
