"""The GPU check: prove Seedcast's CUDA path on a bare GPU machine in one command, in minutes (docs/gpu.md).

    python3 bench/gpu_check/run.py                  # on the GPU machine, with gpu-wheels/ carried along
    python3 bench/gpu_check/run.py --dry-run        # anywhere: tiny models on the CPU, under a minute

Writes OUT/report.json and OUT/report.md (default OUT: gpu-check-report/) and prints the table:

1. the gpu-marked tests (tests/test_gpu.py) on the device: perturb/restore bit-exact, noise a function of
   (seed, tensor name) across processes, update = replay, Sync and `export --device` reproduce a run,
   deterministic greedy and sampled generation;
2. per model shape (random Qwen2-0.5B- and 1.5B-shaped weights) and noise kind: perturb, restore and update
   seconds, member time ÷ plain generation (32 prompts × 128 new tokens), tokens/s, peak device memory of
   an ES server ÷ plain inference;
3. a two-server local run on the device (2 iterations, population 4) through real gRPC, whose servers
   agree on every fingerprint and whose export on the device reproduces the last.
4. per model shape, one ES iteration (population 32, 32 prompts) with full-rank members one at a time, low-rank
   members generated together in groups of 8 and 32, and plain batched generation of the same sequences:
   tokens/s and peak device memory of each (bench/population_batching.py; docs/low-rank.md).

Each part that fails is recorded with its error and the others still run; the exit code is 1 if any did.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from site_setup import REPO_ROOT, prepare_site

GPU_SHAPES, DRY_SHAPES = ("qwen2-0.5b", "qwen2-1.5b"), ("qwen2-mini",)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="tiny model on the CPU: checks this script works")
    parser.add_argument("--out", default="gpu-check-report", help="report folder (default: gpu-check-report)")
    parser.add_argument("--wheels", default=str(REPO_ROOT / "gpu-wheels"), help="wheels to install first")
    parser.add_argument("--site", default=str(REPO_ROOT / ".gpu-site"), help="where the wheels are installed")
    parser.add_argument("--shapes", default=None, help="comma-separated model shapes (default: by mode)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per row (default: 3, dry run 1)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="per member (default: 128, dry run 8)")
    parser.add_argument(
        "--parts",
        default="tests,speed,fleet,population",
        help="which parts to run (default: tests,speed,fleet,population), e.g. to rerun one",
    )
    return parser.parse_args(argv)


def machine() -> dict:
    """What ran the check: Python, torch, CUDA, the GPU, transformers, the checkout."""
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "gpu_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None,
        "bf16": torch.cuda.is_bf16_supported() if cuda else None,
        "commit": commit.stdout.strip() or None,
    }


def gpu_tests(out: Path, device: str) -> dict:
    """Run tests/test_gpu.py on `device`; pass/fail counts from its JUnit XML."""
    import os
    import xml.etree.ElementTree as ET

    junit = out / "gpu-tests.xml"
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    environment = {**os.environ, "SEEDCAST_CHECK_DEVICE": device}
    done = subprocess.run(
        [*command, str(REPO_ROOT / "tests" / "test_gpu.py")],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
    )
    (out / "gpu-tests.log").write_text(done.stdout + done.stderr)
    suite = ET.parse(junit).getroot() if junit.is_file() else None
    suite = suite.find("testsuite") if suite is not None and suite.tag == "testsuites" else suite
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")} if suite else {}
    failed = [
        case.get("name")
        for case in (suite.iter("testcase") if suite else [])
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return {**counts, "failed": failed, "ok": done.returncode == 0 and counts.get("skipped") == 0}


def run_part(report: dict, name: str, action) -> None:
    """Run one part, recording its result or its error and time; one failure never stops the others."""
    started = time.perf_counter()
    print(f"# {name} ...", flush=True)
    try:
        report[name] = action()
    except Exception as error:  # a report with the error beats no report: the machine may be gone next time
        report[name] = {"ok": False, "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()}
    report[name]["seconds"] = time.perf_counter() - started
    print(
        f"# {name}: {'ok' if report[name].get('ok', True) else 'FAILED'} in {report[name]['seconds']:.0f} s", flush=True
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prepare_site(Path(args.site), Path(args.wheels))
    import torch
    from fleet_run import two_server_run
    from model_shapes import build_model
    from population import measure_population
    from report_table import write_report
    from speed import measure_shape

    dry = args.dry_run
    if not dry and not torch.cuda.is_available():
        print("no CUDA device here: use --dry-run to check the script on a CPU", file=sys.stderr)
        return 2
    device = torch.device("cpu" if dry else "cuda:0")
    shapes = args.shapes.split(",") if args.shapes else list(DRY_SHAPES if dry else GPU_SHAPES)
    repeats = args.repeats or (1 if dry else 3)
    tokens = args.max_new_tokens or (8 if dry else 128)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = out / "models"
    report: dict = {"mode": "dry run (CPU)" if dry else "GPU", "machine": machine(), "shapes": {}}
    started = time.perf_counter()
    parts = set(args.parts.split(","))
    if "tests" in parts:
        run_part(report, "tests", lambda: gpu_tests(out, device.type))
    for shape in shapes if "speed" in parts else []:

        def measure(shape: str = shape) -> dict:
            folder = build_model(shape, models / shape, device=str(device))
            return {"ok": True, **measure_shape(str(folder), device, tokens, repeats)}

        run_part(report["shapes"], shape, measure)

    def fleet() -> dict:
        folder = build_model(shapes[0], models / shapes[0], device=str(device))  # already built above
        return two_server_run(str(folder), device.type, out, min(tokens, 32))

    if "fleet" in parts:
        run_part(report, "fleet_run", fleet)
    report["population"] = {}
    for shape in shapes if "population" in parts else []:

        def batching(shape: str = shape) -> dict:
            folder = build_model(shape, models / shape, device=str(device))
            return measure_population(str(folder), device, min(tokens, 64), dry)

        run_part(report["population"], shape, batching)
    report["seconds"] = time.perf_counter() - started
    report["ok"] = all(
        part.get("ok", True)
        for part in [
            report.get("tests", {}),
            report.get("fleet_run", {}),
            *report["shapes"].values(),
            *report["population"].values(),
        ]
    )
    table = write_report(report, out)
    print(table)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
