"""Evaluator specs: built-ins, module:callable, entry points, reward models (local and remote)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib.metadata import EntryPoint

import pytest

from seedcast.evaluators import registry
from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.registry import EvaluatorSpecError, load_evaluator

SAMPLES = [ScoredSample("What is 2+2?", "It is 4", "4"), ScoredSample("What is 3+3?", "seven", "6")]


class LengthEvaluator:
    """A class-style custom evaluator (has score_batch)."""

    def score_batch(self, samples):
        return [min(1.0, len(s.completion) / 10) for s in samples]


def not_an_evaluator():
    return 42


def test_builtins_score():
    assert load_evaluator("synthetic").score_batch(SAMPLES) == [1.0, 0.0]
    assert load_evaluator("gsm8k").score_batch(SAMPLES) == [1.0, 0.0]
    assert load_evaluator("format-number").score_batch([ScoredSample("", "12", "")]) == [1.0]


def test_module_callable_function_and_class():
    function = load_evaluator("tests.tiny_model:digit_fraction_reward")
    assert function.score_batch(SAMPLES) == [pytest.approx(1 / 7), 0.0]
    instance = load_evaluator("tests.evaluators.test_registry:LengthEvaluator")
    assert instance.score_batch(SAMPLES) == [0.7, 0.5]


def test_custom_rewards_are_checked():
    with pytest.raises(EvaluatorSpecError, match="has no score_batch"):
        load_evaluator("tests.evaluators.test_registry:not_an_evaluator")  # a zero-argument factory returning 42
    out_of_range = registry.FunctionEvaluator(lambda completion, reference: 2.0, "too-big")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        out_of_range.score_batch(SAMPLES)
    wrong_type = registry.FunctionEvaluator(lambda completion, reference: "yes", "stringy")
    with pytest.raises(TypeError, match="expected a float"):
        wrong_type.score_batch(SAMPLES)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no-such-evaluator", "unknown evaluator"),
        ("no_such_module_xyz:thing", "cannot import module"),
        ("tests.tiny_model:missing_attr", "has no attribute"),
    ],
)
def test_bad_specs_say_what_is_accepted(spec, fragment):
    with pytest.raises(EvaluatorSpecError, match=fragment):
        load_evaluator(spec)


def test_entry_point_plugins(monkeypatch):
    plugin = EntryPoint(name="digits", value="tests.tiny_model:digit_fraction_reward", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [plugin] if group == registry.ENTRY_POINT_GROUP else [])
    assert load_evaluator("digits").score_batch(SAMPLES)[0] == pytest.approx(1 / 7)


class _RewardHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/elsewhere":  # a redirect, as to an internal service the caller wants to read
            self.send_response(307)
            self.send_header("Location", "/score")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/bad":
            answer = {"oops": True, "secret": "TOP-SECRET-CONTENT"}
        else:
            answer = {"rewards": [1.0 if s["completion"].endswith(s["reference"]) else 0.0 for s in body["samples"]]}
        payload = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture()
def reward_endpoint():
    server = HTTPServer(("127.0.0.1", 0), _RewardHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_remote_endpoint(reward_endpoint):
    assert load_evaluator(f"remote:{reward_endpoint}/score").score_batch(SAMPLES) == [1.0, 0.0]
    with pytest.raises(ValueError, match="must answer") as raised:
        load_evaluator(f"remote:{reward_endpoint}/bad").score_batch(SAMPLES)
    assert "TOP-SECRET" not in str(raised.value)  # errors travel back to the caller: an answer is never quoted
    with pytest.raises(ValueError, match="answered HTTP 307, not 200"):  # a redirect is never followed
        load_evaluator(f"remote:{reward_endpoint}/elsewhere").score_batch(SAMPLES)


def test_local_reward_model(tmp_path, tiny_model_dir):
    from tests.tiny_model import build_tiny_reward_model

    build_tiny_reward_model(tmp_path / "rm", tiny_model_dir)
    evaluator = load_evaluator(f"reward-model:{tmp_path / 'rm'}")
    rewards = evaluator.score_batch(SAMPLES * 3)
    assert len(rewards) == 6 and all(0.0 < r < 1.0 for r in rewards)
    assert rewards[0] == pytest.approx(rewards[2]) and rewards[0] != pytest.approx(rewards[1])
