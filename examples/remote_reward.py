"""A reward service over HTTP, and an ES run scored by it (`task.evaluator=remote:URL`).

The service is what you would put in front of a judge model or a sandbox: it takes
`{"samples": [{"prompt", "completion", "reference"}, ...]}` and answers `{"rewards": [float | null, ...]}`
(null: this sample cannot be scored). Here it scores with examples/format_and_correctness.py.

    python -m examples.remote_reward --serve-only --port 8000        # just the service
    python -m examples.remote_reward                                  # the service, and a run that uses it
    python -m examples.remote_reward --model DIR --iterations 2 --out runs/remote-example
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import seedcast
from examples.format_and_correctness import reward


class RewardHandler(BaseHTTPRequestHandler):
    """POST /score: one reward per sample, in order."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        rewards = [reward(s["completion"], s["reference"]) for s in body["samples"]]
        answer = json.dumps({"rewards": rewards}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_args) -> None:  # one line per batch would drown the run's own log
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="the service's port (default: a free one)")
    parser.add_argument("--serve-only", action="store_true", help="run the service until interrupted")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default: the bundled one)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--out", default="runs/remote-example", help="the run directory")
    args = parser.parse_args()
    service = HTTPServer(("127.0.0.1", args.port), RewardHandler)
    url = f"http://127.0.0.1:{service.server_address[1]}/score"
    if args.serve_only:
        print(f"scoring at {url}", flush=True)
        service.serve_forever()
        return
    threading.Thread(target=service.serve_forever, daemon=True).start()
    config = seedcast.TrainConfig(
        model=seedcast.ModelConfig(name=args.model),
        iterations=args.iterations,
        batch_size=8,
        eval_every=0,
        task=seedcast.TaskConfig(evaluator=f"remote:{url}"),
        sampling=seedcast.SamplingConfig(max_new_tokens=16),
        es=seedcast.ESConfig(population=4, noise="table"),
        fleet=seedcast.FleetConfig(local=1),
    )
    result = seedcast.train(config, Path(args.out))
    rewards = [round(r.reward_mean, 3) for r in result.metrics if r.reward_mean is not None]
    print(f"scored remotely at {url}: population reward per iteration {rewards}")
    service.shutdown()


if __name__ == "__main__":
    main()
