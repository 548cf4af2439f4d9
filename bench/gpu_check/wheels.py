"""Download the wheels the GPU check needs on a machine without network (run here, with PyPI reachable).

The GPU machine (docs/gpu.md) has Python 3.12, PyTorch with CUDA, transformers, grpcio, protobuf,
prometheus-client, pyyaml, tqdm, numpy and safetensors. What else the check imports comes along as wheels
for CPython 3.12 on manylinux x86-64, pinned to the versions installed here (the ones this checkout is
tested with) where this environment has them. grpcio and protobuf come too: the generated stubs in proto/
refuse older runtimes than the ones that generated them, and the machine's may be older.

    python bench/gpu_check/wheels.py                      # into gpu-wheels/ (git-ignored), for the GPU machine
    python bench/gpu_check/wheels.py --python 3.11 --out /tmp/wheels-311   # e.g. to rehearse on this machine
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# What the GPU check imports beyond the machine's own packages, with the dependencies those bring.
PACKAGES = (
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "typing-extensions",
    "grpcio",
    "grpcio-health-checking",
    "protobuf",
    "gguf",
    "pytest",
    "pluggy",
    "iniconfig",
    "pytest-timeout",
)
# Also on the GPU machine (docs/gpu.md); not downloaded.
MACHINE_PACKAGES = (
    "torch",
    "transformers",
    "grpcio",
    "protobuf",
    "prometheus-client",
    "pyyaml",
    "tqdm",
    "numpy",
    "safetensors",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")


def pinned(name: str) -> str:
    """`name==VERSION` as installed here, else `name` (the newest wheel for the target)."""
    try:
        return f"{name}=={version(name)}"
    except PackageNotFoundError:
        return name


def download_command(out: Path, python: str) -> list[str]:
    """pip download of every package, binary only, for CPython `python` on x86-64 Linux, without resolving
    dependencies (the list is complete; the machine has the rest)."""
    abi = "cp" + python.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "none"]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    command += ["--platform", "any", "--dest", str(out)]
    return command + [pinned(name) for name in PACKAGES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="gpu-wheels", help="folder for the wheels (default: gpu-wheels)")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version (default: 3.12)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(download_command(out, args.python), check=True)
    wheels = sorted(out.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    for wheel in wheels:
        print(f"{wheel.stat().st_size / 2**20:7.2f} MiB  {wheel.name}")
    print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {out}/ (the device takes at most 64 MiB in all)")


if __name__ == "__main__":
    main()
