"""The model card of `seedcast grpo`'s model (RUN_DIR/model/README.md): the same hub metadata and table as an
ES export's (optimizer/model_card.py), with GRPO's settings, so the two models are described alike."""

from __future__ import annotations

from huggingface_hub import ModelCard

from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.model_card import (
    base_line,
    card_data,
    eval_line,
    load_snippet,
    render,
    shown_name,
    task_line,
)
from seedcast.optimizer.run_records import IterationRecord


def grpo_model_card(
    config: TrainConfig, rows: list[IterationRecord], steps: int, trl_version: str, reference: str
) -> ModelCard:
    """The card of a GRPO run's model after `steps` optimizer steps with TRL `trl_version`, loaded by `reference`
    (a hub id, or the folder's name)."""
    grpo = config.grpo
    name = f"{shown_name(config.model.name)}, post-trained with GRPO"
    body = f"""# {name}

Written by `seedcast grpo`: TRL {trl_version}'s GRPOTrainer on the same problems, prompts, evaluator and
held-out evaluation set as Seedcast's ES runs, so the two can be compared (`seedcast compare`).

| | |
|---|---|
| base model | {base_line(config)} |
| task | {task_line(config)} |
| GRPO | group size {grpo.group_size}, learning rate {grpo.learning_rate:g}, β {grpo.beta:g}, ε {grpo.epsilon:g}, \
temperature {grpo.temperature:g}, top-p {grpo.top_p:g} |
| batch | {config.batch_size} problems per step, {config.sampling.max_new_tokens} new tokens |
| steps | {steps} |
| greedy eval reward (the run's fixed eval set, {config.eval_size} problems) | {eval_line(rows)} |

Load it like any causal LM:

{load_snippet(reference)}
"""
    return render(card_data(config, rows, name, ["grpo", "trl"]), body)
