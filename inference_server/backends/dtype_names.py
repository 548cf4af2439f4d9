"""Inference dtypes by name (`model.dtype`, `seedcast serve --dtype`, `seedcast export --dtype`): the one list,
loadable without torch so configs and `--help` can name them (`devices.DTYPES` maps them to torch dtypes)."""

from __future__ import annotations

DTYPE_NAMES = {
    "float32": "the master's precision; twice the memory and time of the 16-bit types",
    "bfloat16": "float32's range in 16 bits; native on recent GPUs and on CPUs with avx512_bf16 or AMX",
    "float16": "16 bits with more mantissa and less range than bfloat16",
}
AUTO = "auto"  # what a user may also set: bfloat16 where the device has it natively, else float32
