"""An ES run scored by a reward model: any local Hugging Face sequence-classification folder
(`task.evaluator=reward-model:DIR`); each server loads it beside the policy and scores (prompt, completion)
pairs with it, a sigmoid of the logit for one label, a softmax's last class for several.

    python -m examples.reward_model --reward-model DIR                       # the bundled policy model
    python -m examples.reward_model --reward-model DIR --model POLICY --iterations 2 --out runs/rm-example
"""

from __future__ import annotations

import argparse
from pathlib import Path

import seedcast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reward-model", required=True, help="a local sequence-classification model folder")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="policy model spec (default: bundled)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--out", default="runs/reward-model-example", help="the run directory")
    args = parser.parse_args()
    config = seedcast.TrainConfig(
        model=seedcast.ModelConfig(name=args.model),
        iterations=args.iterations,
        batch_size=8,
        eval_every=0,
        task=seedcast.TaskConfig(evaluator=f"reward-model:{Path(args.reward_model).resolve()}"),
        sampling=seedcast.SamplingConfig(max_new_tokens=16),
        es=seedcast.ESConfig(population=4, noise="table"),
        fleet=seedcast.FleetConfig(local=1),
    )
    result = seedcast.train(config, Path(args.out))
    rewards = [round(r.reward_mean, 4) for r in result.metrics if r.reward_mean is not None]
    print(f"scored by {args.reward_model}: population reward per iteration {rewards}")


if __name__ == "__main__":
    main()
