"""The model card (README.md) an exported ES model or a GRPO run's model carries, built with
`huggingface_hub.ModelCard` so the folder uploads to the hub as is: metadata the hub reads (license, base
model, `pipeline_tag`, datasets, eval results as model-index), then what a reader of someone else's
checkpoint asks: the base model, the task and evaluator, the method's settings, the steps, the held-out
eval reward over the run, and how to load and reproduce it. No machine path appears in a card: local
folders and files are named by their last component only.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.run_records import IterationRecord

# The bundled model is the Q4_1 GGUF of this hub model, dequantised to float32 when loaded.
BUNDLED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
BUNDLED_LICENSE = "apache-2.0"
LOCAL_CARD = "README.md"


def is_hub_id(name: str) -> bool:
    """Whether a model or dataset name is a hub id (owner/name) rather than something on this machine."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def base_hub_id(name: str) -> str | None:
    """The base model's hub id (the bundled alias maps to its hub id); None for a local folder or file."""
    if name == BUNDLED_MODEL:
        return BUNDLED_HUB_ID
    return name if is_hub_id(name) else None


def base_license(name: str) -> str | None:
    """The base model's license where it is known here: the bundled model's, or a local folder's own card's
    (a folder exported from a hub model usually has one); None otherwise (nothing is fetched)."""
    if name == BUNDLED_MODEL:
        return BUNDLED_LICENSE
    card = Path(name).expanduser() / LOCAL_CARD
    if not card.is_file():
        return None
    try:
        return ModelCard.load(card).data.license
    except (ValueError, OSError):  # a README without front matter
        return None


def shown_name(name: str) -> str:
    """A model or data name as a card shows it: hub ids and aliases as they are, paths by their last part."""
    if name == BUNDLED_MODEL or is_hub_id(name):
        return name
    return Path(name).name or name


def _eval_result(config: TrainConfig, rows: list[IterationRecord]) -> list[EvalResult] | None:
    evals = [r.eval_reward for r in rows if r.eval_reward is not None]
    if not evals:
        return None
    task = config.task
    return [
        EvalResult(
            task_type="text-generation",
            dataset_type=task.path if task.dataset == "hf" and task.path else f"seedcast/{task.dataset}",
            dataset_name=f"{task.dataset} (the run's fixed {config.eval_size}-problem eval set)",
            metric_type="reward",
            metric_name=f"greedy reward ({task.evaluator_spec()})",
            metric_value=round(evals[-1], 4),
        )
    ]


def card_data(
    config: TrainConfig, rows: list[IterationRecord], model_name: str, method_tags: list[str]
) -> ModelCardData:
    """The card's metadata for a model trained from `config` with these metrics rows, by a method with these
    tags."""
    task = config.task
    datasets = [task.path] if task.dataset == "hf" and task.path and is_hub_id(task.path) else None
    return ModelCardData(
        model_name=model_name,
        base_model=base_hub_id(config.model.name),
        license=base_license(config.model.name),
        library_name="transformers",
        pipeline_tag="text-generation",
        tags=["seedcast", *method_tags],
        datasets=datasets,
        eval_results=_eval_result(config, rows),
    )


def eval_line(rows: list[IterationRecord]) -> str:
    """The held-out greedy reward at the run's first and last evaluation."""
    evals = [(r.step, r.eval_reward) for r in rows if r.eval_reward is not None]
    if not evals:
        return "not measured during the run (`eval_every: 0`); `seedcast eval --model FOLDER` measures it"
    (first_step, first), (last_step, last) = evals[0], evals[-1]
    return f"{first:.3f} at step {first_step} → {last:.3f} at step {last_step}"


def task_line(config: TrainConfig) -> str:
    """The task row of a card's table."""
    task = config.task
    dataset = task.dataset + (f" ({shown_name(task.path)})" if task.path else "")
    return f"{dataset}, scored by the `{shown_name(task.evaluator_spec())}` evaluator"


def base_line(config: TrainConfig) -> str:
    """The base-model row of a card's table."""
    name = config.model.name
    if name == BUNDLED_MODEL:
        return f"{name} (the Q4_1 GGUF of {BUNDLED_HUB_ID} bundled with Seedcast, dequantised)"
    return shown_name(name) + ("" if base_hub_id(name) else " (a local model folder)")


def render(data: ModelCardData, body: str) -> ModelCard:
    """A card from its metadata and its markdown body."""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def load_snippet(reference: str) -> str:
    """How to load the model from `reference` (a hub id, or the folder's name)."""
    return f"""```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("{reference}")
tokenizer = AutoTokenizer.from_pretrained("{reference}")
```"""


def es_model_card(config: TrainConfig, rows: list[IterationRecord], summary: dict, reference: str) -> ModelCard:
    """The card of an export of a run with `config` and metrics `rows`; `summary` is seedcast_export.json, and
    `reference` what the model is loaded by (its hub id, or the exported folder's name)."""
    es, sampling = config.es, config.sampling
    matches = {True: "yes", False: "**no**", None: "not recorded"}[summary["matches_servers"]]
    name = f"{shown_name(config.model.name)}, post-trained with evolution strategies"
    perturbation = "full-rank" if es.perturbation == "full" else f"rank-{es.rank} ({es.lowrank_targets} weights)"
    body = f"""# {name}

Written by `seedcast export`: the base model's weights plus the {summary["steps"]} logged ES update steps,
replayed in float32 and saved as {summary["dtype"]}. The run's update log and config, from which the weights
are rebuilt bit for bit, are in `seedcast/`.

| | |
|---|---|
| base model | {base_line(config)} |
| task | {task_line(config)} |
| ES | population {es.population}, σ {es.sigma:g}, learning rate {es.learning_rate:g}, {es.noise} noise, \
{perturbation} members, {es.fitness} fitness, momentum {es.momentum:g}, \
{"mirrored" if es.mirrored else "plain"} sampling |
| batch | {config.batch_size} problems per step, {sampling.max_new_tokens} new tokens, \
temperature {sampling.temperature:g} |
| steps | {summary["steps"]} |
| weights fingerprint | `{summary["fingerprint"]}` (float32); matches the servers' at that step: {matches} |
| greedy eval reward (the run's fixed eval set, {config.eval_size} problems) | {eval_line(rows)} |

Load it like any causal LM:

{load_snippet(reference)}

or serve it with vLLM (`vllm serve {reference}`). To rebuild it bit for bit, put `seedcast/config.yaml` and
`seedcast/updates.jsonl` in a folder as `config.yaml` and `updates.jsonl` (the run directory
`{Path(summary["run_dir"]).name}` holds them) and run `seedcast export FOLDER --out DIR --dtype {summary["dtype"]}`.
"""
    return render(card_data(config, rows, name, ["evolution-strategies"]), body)
