"""The `model` section of a run's config: the model every server loads, and how the servers the run starts run it."""

from __future__ import annotations

from pydantic import Field, model_validator

from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.inference_server.serve_config import BACKEND_HELP, DEVICE_HELP, DTYPE_HELP, BackendName, DtypeName
from seedcast.optimizer.config_section import Section


class ModelConfig(Section):
    """The model every server loads."""

    name: str = Field(BUNDLED_MODEL, description="Bundled alias, local HF folder, .gguf file, or hub id.")
    backend: BackendName = Field("hf", description=f"Inference backend of local servers: {BACKEND_HELP}")
    device: str = Field("auto", description=f"Device of local servers: {DEVICE_HELP}")
    dtype: DtypeName = Field("auto", description=DTYPE_HELP)
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="vllm: GPUs each server the run starts spreads every layer over (a model larger than one GPU); "
        "fleet.local_devices then gives each server that many GPUs (times pipeline_parallel_size).",
    )
    pipeline_parallel_size: int = Field(
        1, ge=1, le=64, description="vllm: GPUs each server the run starts spreads its layers over, in stages."
    )

    @property
    def gpus_per_server(self) -> int:
        """GPUs one server of this model spans: tensor × pipeline parallel size (1 for a server on one GPU)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @model_validator(mode="after")
    def _parallelism_needs_vllm(self) -> ModelConfig:
        if self.gpus_per_server > 1 and self.backend != "vllm":
            raise ValueError(
                "model.tensor_parallel_size and model.pipeline_parallel_size spread a server over several GPUs on "
                "the vllm backend only; set model.backend=vllm, or leave them at 1"
            )
        return self
