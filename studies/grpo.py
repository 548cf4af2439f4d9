"""`seedcast grpo`: the GRPO baseline, trained by TRL's `GRPOTrainer` on the same task as ES.

Same problems, same chat-templated prompts, same instruction, same evaluator (wrapped as a TRL
reward function), same fixed evaluation set and the same run-directory layout:

    RUN_DIR/config.yaml     the validated config (the `grpo` section holds the GRPO settings)
    RUN_DIR/metrics.jsonl   one line per step: rewards of the sampled group, tokens, seconds, eval reward
    RUN_DIR/model/          the trained Hugging Face model folder (what `seedcast eval --model` takes)
    RUN_DIR/summary.json    wall time, peak resident memory, tokens generated
    RUN_DIR/trl_log.jsonl   TRL's own statistics per step (loss, entropy, clipping, KL when beta > 0)

GRPO trains in float32 on one process here; the point is a faithful baseline, not a fast one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from seedcast.evaluators.base import Problem, ScoredSample, ScoringInputs
from seedcast.evaluators.datasets import load_problems
from seedcast.evaluators.registry import load_evaluator
from seedcast.inference_server.model_source import chat_text, load_model_and_tokenizer
from seedcast.optimizer.config import ConfigError, TrainConfig
from seedcast.optimizer.eval_set import eval_problems, model_prompt, scoring_inputs
from seedcast.optimizer.machine import machine_kind
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.run_kinds import GRPO_LOG_FILE, GRPO_MODEL_DIR
from seedcast.optimizer.run_records import BASELINE_ITERATION, IterationRecord, RunSummary
from seedcast.optimizer.trackers import open_run_trackers
from seedcast.proto.errors import SeedcastError
from seedcast.studies.grpo_card import grpo_model_card

log = logging.getLogger("seedcast.grpo")

EVAL_BATCH = 16


class GRPOUnavailableError(SeedcastError, RuntimeError):
    """TRL is not installed."""


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports kilobytes, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def micro_batch_size(config: TrainConfig) -> int:
    """Completions per forward/backward: the configured one (checked), else the largest divisor <= 16."""
    completions = config.batch_size * config.grpo.group_size
    chosen = config.grpo.micro_batch_size
    if chosen is None:
        return max(d for d in range(1, min(16, completions) + 1) if completions % d == 0)
    if completions % chosen:
        raise ConfigError(
            f"grpo.micro_batch_size: {chosen} does not divide batch_size x grpo.group_size = "
            f"{completions}; set a divisor of {completions}"
        )
    return chosen


@dataclass
class RewardTally:
    """What the reward function saw since the last optimizer step (TRL generates once per step)."""

    rewards: list[float] = field(default_factory=list)
    tokens: int = 0
    completions: int = 0

    def take(self) -> RewardTally:
        """Return the tally and start a new one."""
        taken = RewardTally(self.rewards, self.tokens, self.completions)
        self.rewards, self.tokens, self.completions = [], 0, 0
        return taken


class EvaluatorReward:
    """A Seedcast evaluator as a TRL reward function: `(prompts, completions, reference, ...) -> rewards`.

    Unscorable samples (None) stay None, which TRL turns into NaN and leaves out, like ES does.
    """

    def __init__(self, spec: str, scoring: ScoringInputs | None = None) -> None:
        self.evaluator = load_evaluator(spec)
        self.scoring = scoring  # the training problems' scoring inputs, by the dataset's `problem` index
        self.__name__ = f"seedcast:{spec}"  # TRL logs rewards under the function's name
        self.tally = RewardTally()

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        reference: list[str],
        completion_ids: list[list[int]] | None = None,
        problem: list[int] | None = None,
        **_: Any,
    ) -> list[float | None]:
        if self.scoring is not None and problem is not None:  # scored as ES servers score: text, columns...
            samples = [self.scoring.samples(i, [c])[0] for i, c in zip(problem, completions, strict=True)]
        else:
            samples = [
                ScoredSample(prompt=p, completion=c, reference=r)
                for p, c, r in zip(prompts, completions, reference, strict=True)
            ]
        rewards = self.evaluator.score_batch(samples)
        self.tally.rewards.extend(r for r in rewards if r is not None)
        self.tally.completions += len(completions)
        self.tally.tokens += sum(len(ids) for ids in completion_ids or [])
        return rewards


@torch.no_grad()
def greedy_eval_reward(
    model: Any, tokenizer: Any, texts: list[str], scoring: ScoringInputs, evaluator: Any, max_new_tokens: int
) -> float:
    """Mean greedy reward of `model` on the evaluation set: what ES logs as `eval_reward`."""
    was_training = model.training
    model.eval()
    rewards: list[float] = []
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        for start in range(0, len(texts), EVAL_BATCH):
            chunk = texts[start : start + EVAL_BATCH]
            encoded = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            output = model.generate(
                **encoded, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            completions = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
            samples = [scoring.samples(start + i, [c])[0] for i, c in enumerate(completions)]
            rewards.extend(r for r in evaluator.score_batch(samples) if r is not None)
    finally:
        tokenizer.padding_side = padding_side
        model.train(was_training)
    return statistics.fmean(rewards) if rewards else math.nan


def _trl():
    try:
        import trl
        from transformers import PrinterCallback, TrainerCallback
    except ImportError as error:
        raise GRPOUnavailableError(
            f"`seedcast grpo` needs TRL: pip install 'seedcast[grpo]' (or pip install trl datasets) ({error})"
        ) from error
    return trl, TrainerCallback, PrinterCallback


def _model_text(tokenizer: Any, problem: Problem, instruction: str, config: TrainConfig) -> str:
    """The text the model generates from, formatted as the servers format it for ES."""
    task = config.task
    prompt = model_prompt(problem, instruction)
    return chat_text(tokenizer, prompt, task.system_prompt, not task.chat_template, task.chat_template_kwargs)


def _dataset(problems: list[Problem], tokenizer: Any, config: TrainConfig):
    from datasets import Dataset

    instruction = config.task.instruction_text()
    return Dataset.from_dict(
        {
            "prompt": [_model_text(tokenizer, p, instruction, config) for p in problems],
            "reference": [p.reference for p in problems],
            "problem": list(range(len(problems))),  # the reward scores by the problem's own scoring inputs
        }
    )


TRL_TENSORBOARD_VARIABLE = "TENSORBOARD_LOGGING_DIR"


def train_grpo(config: TrainConfig, run: RunDirectory, show_progress: bool = True) -> RunSummary:
    """Run GRPO for `config.grpo_steps()` optimizer steps; writes metrics, the model folder and summary.json."""
    trl, TrainerCallback, PrinterCallback = _trl()
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    model, tokenizer = load_model_and_tokenizer(config.model.name)
    problems = load_problems(config.task.dataset_spec(config.seed))
    instruction = config.task.instruction_text()
    reward = EvaluatorReward(config.task.evaluator_spec(), scoring_inputs(problems, instruction))
    held_out = eval_problems(config, problems)
    eval_texts = [_model_text(tokenizer, p, instruction, config) for p in held_out]
    eval_scoring = scoring_inputs(held_out, instruction)
    micro = micro_batch_size(config)
    steps = config.grpo_steps()
    completions_per_step = config.batch_size * config.grpo.group_size
    grpo = config.grpo
    optional = {"loss_type": grpo.loss_type} if grpo.loss_type else {}
    args = trl.GRPOConfig(
        output_dir=str(run.path / "logs"),
        max_steps=steps,
        learning_rate=grpo.learning_rate,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=completions_per_step // micro,
        num_generations=grpo.group_size,
        max_completion_length=config.sampling.max_new_tokens,
        temperature=grpo.temperature,
        top_p=grpo.top_p,
        top_k=grpo.top_k,
        min_p=grpo.min_p or None,
        repetition_penalty=grpo.repetition_penalty,
        beta=grpo.beta,
        epsilon=grpo.epsilon,
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        fp16=False,
        logging_steps=1,
        gradient_checkpointing=grpo.gradient_checkpointing,
        save_strategy="no",
        report_to=list(config.report_to) or "none",  # TRL's own metrics (loss, KL...) to the same trackers
        run_name=config.run_name or run.path.name,
        disable_tqdm=not show_progress,
        **optional,
    )

    def run_eval() -> float:
        return greedy_eval_reward(
            model, tokenizer, eval_texts, eval_scoring, reward.evaluator, config.sampling.max_new_tokens
        )

    class MetricsCallback(TrainerCallback):
        """Writes one metrics.jsonl line per optimizer step, in the ES trainer's format."""

        def __init__(self) -> None:
            self.step_started = time.perf_counter()

        def on_step_begin(self, _args, _state, _control, **_kwargs):
            self.step_started = time.perf_counter()

        def on_step_end(self, _args, state, _control, **_kwargs):
            tally = reward.tally.take()
            seconds = time.perf_counter() - self.step_started
            rewards = tally.rewards
            record = IterationRecord(
                iteration=state.global_step - 1,
                step=state.global_step,
                seconds=seconds,
                reward_mean=statistics.fmean(rewards) if rewards else None,
                reward_std=statistics.pstdev(rewards) if rewards else None,
                reward_max=max(rewards, default=None),
                reward_min=min(rewards, default=None),
                completions=tally.completions,
                completion_tokens=tally.tokens,
                tokens_per_second=tally.tokens / seconds if seconds else 0.0,
                peak_rss_bytes=peak_rss_bytes(),
            )
            if config.eval_every and (state.global_step % config.eval_every == 0 or state.global_step == steps):
                record.eval_reward = run_eval()
            run.append_metrics(record)
            trackers.log_record(record)
            log.info(
                "step %d: reward %s, %d tokens, %.1f s%s",
                state.global_step,
                "n/a" if record.reward_mean is None else f"{record.reward_mean:.3f}",
                tally.tokens,
                seconds,
                "" if record.eval_reward is None else f", eval {record.eval_reward:.3f}",
            )

    # TRL's TensorBoard events beside Seedcast's, one folder to open; TRL reads the variable when it starts.
    tensorboard_variable = os.environ.get(TRL_TENSORBOARD_VARIABLE)
    if "tensorboard" in config.report_to and tensorboard_variable is None:
        os.environ[TRL_TENSORBOARD_VARIABLE] = str(run.path / "tensorboard" / "trl")
    # Opened before TRL's trainer, so TRL's W&B callback logs into this run instead of starting another.
    trackers = open_run_trackers(config, run.path)
    if config.eval_every:
        baseline_record = IterationRecord(iteration=BASELINE_ITERATION, step=0, eval_reward=run_eval())
        run.append_metrics(baseline_record)
        trackers.log_record(baseline_record)
        log.info("base model eval reward %.3f", baseline_record.eval_reward)
    model.train()
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=_dataset(problems, tokenizer, config),
        processing_class=tokenizer,
        callbacks=[MetricsCallback()],
    )
    trainer.remove_callback(PrinterCallback)  # our own line per step replaces TRL's printed dicts
    try:
        trainer.train()
    finally:
        trackers.close()
        if tensorboard_variable is None:
            os.environ.pop(TRL_TENSORBOARD_VARIABLE, None)
    with (run.path / GRPO_LOG_FILE).open("w") as handle:  # TRL's own per-step statistics (loss, KL, entropy...)
        handle.writelines(json.dumps(entry) + "\n" for entry in trainer.state.log_history)
    model_dir = run.path / GRPO_MODEL_DIR
    model.eval()
    model.save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)
    rows = run.metrics()
    summary = RunSummary(
        method="grpo",
        steps=steps,
        wall_seconds=time.perf_counter() - started,
        completion_tokens=sum(r.completion_tokens or 0 for r in rows),
        peak_rss_bytes=peak_rss_bytes(),
        peak_memory_of="the GRPO training process",
        completions=sum(r.completions or 0 for r in rows),
        model_dir=str(model_dir),
        trl_version=trl.__version__,
        device=str(model.device),
        machine=machine_kind(),
    )
    run.write_summary(summary)
    reference = f"{run.path.name}/{GRPO_MODEL_DIR}"
    grpo_model_card(config, rows, steps, trl.__version__, reference).save(model_dir / "README.md")
    return summary
