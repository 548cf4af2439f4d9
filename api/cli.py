"""The `seedcast` command line.

seedcast train                          # ES on the bundled SmolLM2-135M, offline arithmetic task
seedcast train --config configs/gsm8k-cpu.yaml es.sigma=0.002 --local 2
seedcast train --resume runs/RUN        # continue a run where its update log stops
seedcast serve --backend hf --model smollm2-135m-instruct --port 50051
seedcast export runs/RUN --out exported/  # a Hugging Face folder transformers can load
seedcast plot runs/RUN                  # reward curve PNG
seedcast eval --model exported/ --n 16 --out evals/es  # pass@k, entropy, distinct answers
seedcast grpo --config configs/synthetic-cpu.yaml       # the GRPO baseline (TRL) on the same task
seedcast train --init-from runs/GRPO_RUN                # hybrid: GRPO -> ES (and grpo --init-from ES_RUN)
seedcast compare base=smollm2-135m-instruct es=runs/ES grpo=runs/GRPO --out report/

Exit status: 0 done, 2 a problem to fix (one line says what), 3 an evaluation paused at --sample-until (the same
command resumes it), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys

import seedcast
from seedcast import commands
from seedcast.clock_time import sample_until_argument
from seedcast.inference_server.backends.dtype_names import DTYPE_NAMES
from seedcast.optimizer.shipped_configs import shipped_config_names
from seedcast.proto.errors import SeedcastError
from seedcast.studies.eval_resume import EvaluationPaused

EXIT_PAUSED = 3  # an evaluation stopped at --sample-until, its finished calls kept for the same command


def _serve(args: argparse.Namespace) -> int:
    from seedcast.inference_server.server import serve_from_args

    return serve_from_args(args)


def _add_sampling_options(parser: argparse.ArgumentParser) -> None:
    """The task and sampling options `eval` and `compare` share (see `commands.eval_options`)."""
    parser.add_argument("--task", default="synthetic", help="dataset kind, as task.dataset (default: synthetic)")
    parser.add_argument("--data", default=None, help="dataset file (task.path)")
    parser.add_argument("--evaluator", default=None, help="evaluator spec (default: the dataset's)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N problems")
    parser.add_argument("--n", type=int, default=16, help="samples per problem (default: 16)")
    parser.add_argument("--k", default="1,2,4,8,16", help="k values, each <= n (default: 1,2,4,8,16)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default: 1.0)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus threshold (default: 1.0)")
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens per completion at most (default: 256)")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling and synthetic problems (default: 0)")
    parser.add_argument("--no-entropy", action="store_true", help="skip the token entropy (recorded while generating)")
    parser.add_argument(
        "--sample-until",
        type=sample_until_argument,
        default=None,
        metavar="HH:MM",
        help="for evaluations longer than a session: start no Sample call that would not end by HH:MM (local time, "
        "judged by the longest call so far), then stop with exit status 3; the finished calls stay in the "
        "evaluation's partial.jsonl and the same command resumes them, here or on a machine that has that file",
    )
    parser.add_argument(
        "--exclude-training-seeds",
        default="",
        metavar="SEEDS",
        help="drop held-out problems a training run with one of these seeds could draw (generated tasks), e.g. "
        "0,1,2; the rest are disjoint from every such run's problems",
    )


def _add_run_options(parser: argparse.ArgumentParser, example: str) -> None:
    """The options `train` and `grpo` share: overrides, config file, run directory, starting weights."""
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=f"config overrides, e.g. {example}")
    parser.add_argument(
        "--config",
        default=None,
        help="YAML config file, or a shipped config by name: " + ", ".join(shipped_config_names()),
    )
    parser.add_argument("--run-dir", default=None, help="new run directory (default: runs/TIMESTAMP)")
    parser.add_argument(
        "--init-from",
        default=None,
        metavar="DIR",
        help="start from these weights: an ES run (exported to RUN_DIR/init-model), a GRPO run or a model folder "
        "(sets model.name)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with all subcommands and their documented options."""
    from seedcast.inference_server.serve_config import add_serve_flags

    parser = argparse.ArgumentParser(
        prog="seedcast", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"seedcast {seedcast.__version__}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = subcommands.add_parser(
        "serve",
        help="run an inference server",
        description=("Run a long-lived inference server that perturbs, generates, scores and updates from seeds."),
    )
    add_serve_flags(serve)
    serve.set_defaults(handler=_serve)

    train = subcommands.add_parser(
        "train",
        help="run ES training",
        description=(
            "Run ES post-training. With no arguments: one local server on the bundled SmolLM2-135M-Instruct, "
            "the offline arithmetic task, 10 iterations. Any config key can be set as key=value "
            "(see --help-config)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(train, "es.sigma=0.002")
    train.add_argument(
        "--servers",
        default=None,
        help="running servers host:port,host:port (sets fleet.servers; no local server unless --local is given)",
    )
    train.add_argument("--local", type=int, default=None, help="start N servers on this machine (fleet.local)")
    train.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its update log (overrides may raise iterations)",
    )
    train.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve the optimizer's Prometheus metrics on this port (sets metrics_port)",
    )
    train.add_argument("--help-config", action="store_true", help="list every config key with its default and exit")
    train.set_defaults(handler=commands.train)

    grpo = subcommands.add_parser(
        "grpo",
        help="run the GRPO baseline (TRL) on the same task",
        description=(
            "Train with TRL's GRPOTrainer on the same problems, prompts, evaluator and evaluation set as ES. Uses "
            "batch_size (problems per step), sampling.max_new_tokens, task.* and grpo.* from the config (see "
            "`seedcast train --help-config`); grpo.steps defaults to the steps that generate as many completions as "
            "ES would (iterations x es.population / grpo.group_size). Writes RUN_DIR/model, metrics.jsonl and "
            "summary.json (wall time, peak memory). Needs TRL: pip install 'seedcast[grpo]'."
        ),
    )
    _add_run_options(grpo, "grpo.group_size=8")
    grpo.set_defaults(handler=commands.grpo)

    evaluate = subcommands.add_parser(
        "eval",
        help="pass@k, entropy and diversity of a model",
        description=(
            "Sample n completions per problem through inference servers and report pass@k (unbiased estimator, "
            "bootstrap 95%% intervals), mean token entropy, distinct answers per problem, length and truncation. "
            "Resumable: run the same command again after an interruption and only the missing calls are sampled."
        ),
    )
    evaluate.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides (task.*, fleet.*, model.dtype...)"
    )
    evaluate.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="bundled alias, HF folder, .gguf file, hub id, or an ES/GRPO run directory",
    )
    _add_sampling_options(evaluate)
    evaluate.add_argument("--servers", default=None, help="running servers host:port,... (no local server then)")
    evaluate.add_argument("--local", type=int, default=None, help="start N local servers (default: 1)")
    evaluate.add_argument("--out", required=True, help="output folder for results.json, samples.jsonl, pass_at_k.png")
    evaluate.set_defaults(handler=commands.evaluate)

    compare = subcommands.add_parser(
        "compare",
        help="one report: pass@k, entropy, diversity, cost, geometry",
        description=(
            "Compare models (base, ES, GRPO...) on the same problems and samples budget. Each entry is "
            "[LABEL=]PATH: an eval folder (reused), an ES run, a GRPO run, a model folder or a model spec (evaluated "
            "here, cached in OUT/evals/LABEL). Paired differences are against the first entry. Writes OUT/report.md, "
            "compare.json, pass_at_k.png, reward_curves.png and geometry.png. An evaluation cut off resumes where it "
            "stopped when the same command runs again."
        ),
    )
    compare.add_argument(
        "entries",
        nargs="+",
        metavar="[LABEL=]PATH",
        help="models to compare; the first is the reference (usually the base)",
    )
    compare.add_argument("--out", required=True, help="output folder")
    _add_sampling_options(compare)
    compare.add_argument("--local", type=int, default=None, help="local servers started per model (default: 1)")
    compare.add_argument("--no-geometry", action="store_true", help="skip the parameter geometry")
    compare.add_argument(
        "--evaluate-only",
        action="store_true",
        help="only evaluate the entries (and measure their geometry) into OUT/evals, no report or claims: run it "
        "where a run's weights are, and a later compare with the same options reuses the results without them",
    )
    compare.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every evaluation (task.*, fleet.*, model.dtype...), repeatable; e.g. "
        "--set task.countdown_difficulty=8 evaluates Countdown's level 8, --set model.dtype=float32 samples in "
        "float32 where dtype=auto would serve bf16 (keep one dtype across a comparison's cached evaluations)",
    )
    compare.add_argument(
        "--claims",
        default=None,
        metavar="FILE",
        help="also check the ES papers' claims on these entries (labelled METHOD[:BUDGET][@SEED], e.g. grpo@0, "
        "es:wall@1; see studies/claims.py) and write them into FILE under the task's name",
    )
    compare.add_argument("--claims-task", default=None, help="the task's name in the claims file (default: --task)")
    compare.add_argument(
        "--delta-threshold",
        type=float,
        default=1e-5,
        help="|Δθ| above this counts as a changed coordinate (default: 1e-5)",
    )
    compare.set_defaults(handler=commands.compare)

    export = subcommands.add_parser(
        "export",
        help="write a trained Hugging Face model folder",
        description=(
            "Replay a run's update log onto its base model and write safetensors + config + tokenizer, a model "
            "card (README.md) and the run's config and update log (seedcast/)."
        ),
    )
    export.add_argument("run_dir", help="the run directory")
    export.add_argument("--out", required=True, help="output folder")
    export.add_argument(
        "--device", default="cpu", help="replay device; must match the servers' device type (default: cpu)"
    )
    export.add_argument(
        "--dtype",
        default="float32",
        choices=list(DTYPE_NAMES),
        help="dtype of the written weights (default: float32, the master copy)",
    )
    export.add_argument("--steps", type=int, default=None, help="replay only the first N steps")
    export.add_argument(
        "--push-to-hub",
        default=None,
        metavar="REPO",
        help="also upload the folder to this hub model repository (owner/name; created if needed; the token from "
        "HF_TOKEN or `hf auth login`, the hub from HF_ENDPOINT)",
    )
    export.add_argument("--private", action="store_true", help="create the hub repository private")
    export.set_defaults(handler=commands.export)

    plot = subcommands.add_parser("plot", help="plot a run's reward curve")
    plot.add_argument("run_dir", help="the run directory")
    plot.add_argument("--out", default=None, help="PNG path (default: RUN_DIR/reward_curve.png)")
    plot.set_defaults(handler=commands.plot)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse a command line. `key=value` overrides may stand anywhere after the subcommand, also after its flags
    (`seedcast train iterations=1 --no-progress batch_size=4`), and `-v` either before or after it."""
    parser = build_parser()
    for subparser in _subparsers(parser):
        if "verbose" not in {action.dest for action in subparser._actions}:
            subparser.add_argument(
                "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
            )
    args, extra = parser.parse_known_args(argv)
    overrides = [token for token in extra if "=" in token and not token.startswith("-")]
    unknown = [token for token in extra if token not in overrides]
    if unknown or (overrides and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(unknown or overrides)}")
    if overrides:
        args.overrides = [*args.overrides, *overrides]
    return args


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [
        subparser
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for subparser in action.choices.values()
    ]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `seedcast` console script."""
    args = parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in reports
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "urllib3", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SeedcastError as error:  # the user's to fix: one clear line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    except EvaluationPaused as paused:  # --sample-until: stopped on purpose, to be resumed
        print(f"paused at --sample-until: {paused}", file=sys.stderr)
        return EXIT_PAUSED


if __name__ == "__main__":
    sys.exit(main())
