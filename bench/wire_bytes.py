"""Bytes on the wire per population member, versus shipping weights (prints a table, writes JSON).

A member costs one MemberTask (optimizer → server) and one MemberResult (server → optimizer): seeds
and scalars. The trainer asks for summary-only results (the member's mean reward, prompts scored,
total tokens), so a result has the same size whatever the batch; with per-prompt results
(`summary_only=false`) it grows by one reward and one token count per prompt. Nothing depends on the
model's size.
Shipping a bf16 perturbation instead would cost 2 bytes per parameter per member. Sizes are the
serialized protobuf messages plus gRPC's 5-byte length prefix (HTTP/2 frame headers add 9 bytes per
frame on top of both).

    python bench/wire_bytes.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json

from seedcast.proto import seedcast_pb2 as pb

GRPC_PREFIX = 5
MODELS = {"SmolLM2-135M": 134_515_008, "Qwen2.5-1.5B": 1_543_714_304, "Llama-3-8B": 8_030_261_248}


def member_bytes(prompts: int, summary_only: bool) -> tuple[int, int]:
    """(task bytes, result bytes) for a member over `prompts` prompts, worst-case field values."""
    task = pb.EvaluateRequest(
        task=pb.MemberTask(
            iteration=2**40,
            member=2**20,
            seed=2**64 - 1,
            sign=-1,
            sigma=1.5e-3,
            expected_step=2**40,
            summary_only=summary_only,
            sampling=pb.SamplingParams(
                temperature=1.0, top_p=0.95, max_new_tokens=1024, samples_per_prompt=16, seed=2**64 - 1
            ),
        )
    )
    per_prompt = {} if summary_only else {"rewards": [0.123456] * prompts, "completion_tokens": [16_384] * prompts}
    result = pb.EvaluateResponse(
        result=pb.MemberResult(
            iteration=2**40,
            member=2**20,
            reward_mean=0.123456789,
            prompts_scored=prompts,
            total_completion_tokens=16_384 * prompts,
            **per_prompt,
            timings=pb.Timings(perturb_seconds=0.3, generate_seconds=12.5, score_seconds=0.01, restore_seconds=0.02),
        )
    )
    return task.ByteSize() + GRPC_PREFIX, result.ByteSize() + GRPC_PREFIX


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    rows = []
    print(f"{'prompts/member':>15}{'mode':>12}{'task B':>9}{'result B':>10}{'total B':>9}")
    for prompts in (0, 1, 32, 64, 256, 4096):
        for summary_only in (True, False):
            task, result = member_bytes(prompts, summary_only)
            mode = "summary" if summary_only else "per-prompt"
            rows.append({"prompts": prompts, "mode": mode, "task_bytes": task, "result_bytes": result})
            print(f"{prompts:>15}{mode:>12}{task:>9}{result:>10}{task + result:>9}")
    task, result_fixed = member_bytes(4096, summary_only=True)
    print(
        f"\nper member (summary results, the trainer's default): at most {task + result_fixed} bytes for any batch "
        "and any model size; per-prompt results add about 7 bytes per prompt"
    )
    print(f"{'model':<16}{'params':>16}{'bf16 weights/member':>22}{'ratio':>12}")
    for name, params in MODELS.items():
        print(f"{name:<16}{params:>16,}{2 * params:>22,}{2 * params / (task + result_fixed):>12,.0f}x")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": rows, "fixed_bytes_per_member": task + result_fixed}, handle, indent=2)


if __name__ == "__main__":
    main()
