"""Conversational prompts (TRL's format) and the chat template's controls: a list of messages in a data file is a
conversation, not the text of a Python list; the server applies the model's own template to it once; a batch may
turn the template off or pass it keyword arguments; a template that refuses a batch is INVALID_ARGUMENT; and
reward functions in TRL's convention receive conversations as TRL gives them."""

from __future__ import annotations

import json

import grpc
import pytest

from seedcast.evaluators.base import ScoringInputs
from seedcast.evaluators.datasets import DatasetSpec, load_problems
from seedcast.evaluators.registry import load_evaluator
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.model_source import FormattedPrompt
from seedcast.inference_server.problem_inputs import problem_inputs
from seedcast.inference_server.validation import Limits, RequestError, sampling_from_proto
from seedcast.optimizer.eval_set import wire_problem
from seedcast.proto import seedcast_pb2 as pb

CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]
KWARG_TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if shout %}LOUD {% endif %}{% if add_generation_prompt %}[assistant] {% endif %}"
)


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=2)


def test_a_conversation_in_a_data_file_is_messages_not_the_text_of_a_list(tmp_path):
    data = tmp_path / "chat.jsonl"
    data.write_text(json.dumps({"prompt": CONVERSATION, "answer": "5"}) + "\n")
    (problem,) = load_problems(DatasetSpec(kind="jsonl", path=str(data), prompt_field="prompt"))
    assert problem.prompt == "What is 2 + 3?" and "{'role'" not in problem.prompt
    assert problem.messages == (("system", "Be brief."), ("user", "What is 2 + 3?"))
    wired = wire_problem(problem, "Answer with a number.")
    assert [(m.role, m.content) for m in wired.messages] == [
        ("system", "Be brief."),
        ("user", "What is 2 + 3?\n\nAnswer with a number."),
    ]


def test_the_server_applies_the_models_template_to_a_conversation_once(backend):
    batch = pb.PromptBatch(
        problems=[pb.Problem(prompt="What is 2 + 3?", messages=[pb.ChatMessage(**m) for m in CONVERSATION])]
    )
    (prompt,) = problem_inputs(batch, backend.tokenizer).prompts
    expected = backend.tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    assert isinstance(prompt, FormattedPrompt) and prompt == expected and prompt.count("<|im_start|>system") == 1
    assert backend.chat_texts([prompt]) == [expected]  # not wrapped a second time
    as_text = pb.PromptBatch(problems=[pb.Problem(prompt="What is 2 + 3?")], system_prompt="Be brief.")
    greedy = pb.SamplingParams(max_new_tokens=6, samples_per_prompt=1, top_p=1)
    sampling = sampling_from_proto(greedy, Limits())
    same_text = problem_inputs(as_text, backend.tokenizer).prompts
    assert [g[0].text for g in backend.generate([prompt], sampling)] == [
        g[0].text for g in backend.generate(same_text, sampling)
    ]


def test_plain_prompts_skip_the_template(backend):
    plain = pb.PromptBatch(problems=[pb.Problem(prompt="2 + 3 =")], plain_prompts=True, system_prompt="ignored")
    assert problem_inputs(plain, backend.tokenizer).prompts == ["2 + 3 ="]
    conversation = pb.Problem(prompt="q", messages=[pb.ChatMessage(**m) for m in CONVERSATION])
    joined = problem_inputs(pb.PromptBatch(problems=[conversation], plain_prompts=True), backend.tokenizer)
    assert joined.prompts == ["Be brief.\n\nWhat is 2 + 3?"]


def test_template_kwargs_are_passed_to_the_template(backend, monkeypatch):
    monkeypatch.setattr(backend.tokenizer, "chat_template", KWARG_TEMPLATE)
    batch = pb.PromptBatch(problems=[pb.Problem(prompt="hi")], chat_template_kwargs='{"shout": true}')
    assert problem_inputs(batch, backend.tokenizer).prompts == ["[user] hi\nLOUD [assistant] "]
    quiet = pb.PromptBatch(problems=[pb.Problem(prompt="hi")])
    assert problem_inputs(quiet, backend.tokenizer).prompts == ["hi"]  # the backend applies the template itself
    assert backend.chat_texts(["hi"]) == ["[user] hi\n[assistant] "]


@pytest.mark.parametrize("kwargs", ["[1]", "not json"])
def test_template_kwargs_that_are_no_json_object_are_refused(backend, kwargs):
    batch = pb.PromptBatch(problems=[pb.Problem(prompt="hi")], chat_template_kwargs=kwargs)
    with pytest.raises(RequestError) as raised:
        problem_inputs(batch, backend.tokenizer)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and "chat_template_kwargs" in raised.value.message


def test_a_template_that_refuses_a_conversation_refuses_the_batch(backend, monkeypatch):
    monkeypatch.setattr(
        backend.tokenizer,
        "chat_template",
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}",
    )
    batch = pb.PromptBatch(problems=[pb.Problem(prompt="q", messages=[pb.ChatMessage(role="system", content="s")])])
    with pytest.raises(RequestError) as raised:
        problem_inputs(batch, backend.tokenizer)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and "user first" in raised.value.message


def test_trl_rewards_receive_conversations_as_trl_gives_them():
    seen = {}

    def capture(prompts, completions, **_):
        seen.update(prompts=prompts, completions=completions)
        return [1.0] * len(completions)

    import tests.trl_style_rewards as module

    module.capture = capture
    try:
        evaluator = load_evaluator("trl:tests.trl_style_rewards:capture")
        scoring = ScoringInputs(["What is 2 + 3?"], ["5"], None, [tuple(CONVERSATION)])
        assert evaluator.score_batch(scoring.samples(0, ["5"])) == [1.0]
    finally:
        del module.capture
    assert seen == {"prompts": [CONVERSATION], "completions": [[{"role": "assistant", "content": "5"}]]}
