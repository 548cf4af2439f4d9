"""`seedcast.train` with TRL's arguments: a list of dicts as the dataset, reward functions passed as Python
objects (one the servers import by name, one written here and served from this process), weights, any scale,
and the dataset's other columns handed to the rewards, on real local servers."""

from __future__ import annotations

import json
import threading

import pytest

import seedcast
from seedcast.reward_functions import importable_spec, reward_specs
from tests.trl_style_rewards import one_per_answer

RECORDS = [{"prompt": f"Count to {i}.", "target": "x" * i, "level": i % 3} for i in range(1, 9)]
TINY = [
    "iterations=1",
    "batch_size=4",
    "eval_every=0",
    "es.population=2",
    "sampling.max_new_tokens=4",
    "fleet.local=1",
    "fleet.threads_per_server=1",
]


def test_an_importable_function_is_named_and_a_local_one_is_served_until_closed():
    import requests

    def written_here(prompts, completions, **_):
        return [2.5] * len(completions)

    specs, server = reward_specs([one_per_answer, written_here, "tests.trl_style_rewards:target_length"])
    assert importable_spec(one_per_answer) == "tests.trl_style_rewards:one_per_answer"
    assert specs[0] == "tests.trl_style_rewards:one_per_answer" and specs[2].endswith(":target_length")
    url = specs[1].removeprefix("remote:")
    batch = {"prompts": ["p"], "completions": ["c"], "columns": {}}
    assert requests.post(url, json=batch, timeout=10).json() == {"rewards": [2.5]}
    assert requests.post(url.rsplit("/", 1)[0] + "/wrong-token", json=batch, timeout=10).status_code == 404
    server.close()
    with pytest.raises(requests.ConnectionError):
        requests.post(url, json=batch, timeout=10)


def test_train_takes_a_list_of_dicts_and_reward_functions_as_trl_does(tmp_path, tiny_model_dir):
    seen: list[dict] = []
    lock = threading.Lock()

    def longer_targets_score_more(prompts, completions, target, level, **_):
        with lock:
            seen.append({"prompts": list(prompts), "target": list(target), "level": list(level)})
        return [10.0 + len(t) + 0.1 * len(c) for t, c in zip(target, completions, strict=True)]

    run_dir = tmp_path / "trl-style"
    result = seedcast.train(
        run_dir=run_dir,
        model=tiny_model_dir,
        dataset=RECORDS,
        reward_funcs=[one_per_answer, longer_targets_score_more],
        reward_weights=[0.5, 1.0],
        overrides=TINY,
        show_progress=False,
    )
    assert result.iterations == 1
    assert [json.loads(line) for line in (run_dir / "dataset.jsonl").read_text().splitlines()] == RECORDS
    assert seen, "the served function was never called"
    by_prompt = {record["prompt"]: record for record in RECORDS}
    for call in seen:  # every column arrived, aligned with the prompts, with its JSON type
        for prompt, target, level in zip(call["prompts"], call["target"], call["level"], strict=True):
            assert (target, level) == (by_prompt[prompt]["target"], by_prompt[prompt]["level"])
    row = result.metrics[-1]
    assert 10.5 < row.reward_min <= row.reward_max  # any scale: far above 1
    logged = seedcast.load_config(run_dir / "config.yaml").task
    assert logged.reward_funcs[0] == "tests.trl_style_rewards:one_per_answer"
    assert logged.reward_funcs[1].startswith("remote:http://127.0.0.1:") and logged.reward_weights == [0.5, 1.0]


def test_a_refused_run_leaves_no_folder_and_no_data(tmp_path, tiny_model_dir):
    run_dir = tmp_path / "refused"
    with pytest.raises(seedcast.ConfigError, match="reward_weights needs one weight per reward function"):
        seedcast.train(
            run_dir=run_dir,
            model=tiny_model_dir,
            dataset=RECORDS,
            reward_funcs=[one_per_answer],
            reward_weights=[1.0, 2.0],
            overrides=TINY,
        )
    assert not run_dir.exists()
    with pytest.raises(seedcast.ConfigError, match=r"records \[0, 1\] have no 'prompt' field"):
        seedcast.train(run_dir=run_dir, dataset=[{"question": "a"}, {"question": "b"}], reward_funcs=[one_per_answer])
    assert not run_dir.exists()
