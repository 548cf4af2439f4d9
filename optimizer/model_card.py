"""The model card (README.md) an exported folder carries: where the weights came from and how well they do.

Hub-style YAML front matter (base model, library, tags) so the folder uploads as is, then what a reader of
someone else's checkpoint asks: the base model, the task and evaluator, the ES settings, the steps, the
weights' fingerprint and whether it matches what the servers held, the held-out eval reward over the run,
and how to load and reproduce it.
"""

from __future__ import annotations

from pathlib import Path

from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.run_records import IterationRecord

# The bundled model is the Q4_1 GGUF of this hub model, dequantised to float32 when loaded.
BUNDLED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _front_matter_base(name: str) -> list[str]:
    """`base_model:` for a hub id (the bundled alias maps to its hub id); none for a local folder."""
    if name == BUNDLED_MODEL:
        return [f"base_model: {BUNDLED_HUB_ID}"]
    if name.count("/") == 1 and not Path(name).exists():
        return [f"base_model: {name}"]
    return []


def _eval_line(rows: list[IterationRecord]) -> str:
    evals = [(r.step, r.eval_reward) for r in rows if r.eval_reward is not None]
    if not evals:
        return "not measured during the run (`eval_every: 0`); use `seedcast eval --model THIS_FOLDER`"
    (first_step, first), (last_step, last) = evals[0], evals[-1]
    return f"{first:.3f} at step {first_step} → {last:.3f} at step {last_step}"


def model_card(config: TrainConfig, rows: list[IterationRecord], summary: dict) -> str:
    """README.md for an export of a run with `config` and metrics `rows`; `summary` is seedcast_export.json."""
    es, task = config.es, config.task
    matches = {True: "yes", False: "**no**", None: "not recorded"}[summary["matches_servers"]]
    dataset = task.dataset + (f" ({task.path})" if task.path else "")
    base = config.model.name
    if base == BUNDLED_MODEL:
        base += f" (the Q4_1 GGUF of {BUNDLED_HUB_ID} bundled with Seedcast, dequantised)"
    front = "\n".join(["---", *_front_matter_base(config.model.name), "library_name: transformers"])
    return f"""{front}
tags:
- seedcast
- evolution-strategies
---

# {config.model.name}, post-trained with evolution strategies

Written by `seedcast export`: the base model's weights plus the {summary["steps"]} logged ES update steps,
replayed in float32 and saved as {summary["dtype"]}.

| | |
|---|---|
| base model | {base} |
| task | {dataset}, scored by the `{task.evaluator_spec()}` evaluator |
| ES | population {es.population}, σ {es.sigma:g}, learning rate {es.learning_rate:g}, {es.noise} noise, \
{es.fitness} fitness, momentum {es.momentum:g}, {"mirrored" if es.mirrored else "plain"} sampling |
| batch | {config.batch_size} problems per step, {config.sampling.max_new_tokens} new tokens, \
temperature {config.sampling.temperature:g} |
| steps | {summary["steps"]} |
| weights fingerprint | `{summary["fingerprint"]}` (float32); matches the servers' at that step: {matches} |
| greedy eval reward (the run's fixed eval set, {config.eval_size} problems) | {_eval_line(rows)} |

Load it like any causal LM:

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("THIS_FOLDER")
tokenizer = AutoTokenizer.from_pretrained("THIS_FOLDER")
```

or serve it with vLLM (`vllm serve THIS_FOLDER`). To rebuild it bit for bit from the run directory:
`seedcast export {summary["run_dir"]} --out DIR --dtype {summary["dtype"]}`.
"""
