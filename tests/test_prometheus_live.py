"""Every shipped dashboard panel and alert rule, executed against a live Prometheus that scraped a
real training run (tiny model, two `seedcast serve` processes, the optimizer's metrics endpoint)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import yaml
from prometheus_client import CollectorRegistry

from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.telemetry import start_metrics_server
from tests.prometheus_server import PrometheusServer, free_port, prometheus_binary

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
TEMPLATE_VALUES = {"$__rate_interval": "1m", "$job": ".*", "$instance": ".*", "$model": ".*"}


def panel_queries() -> list[tuple[str, str]]:
    """(dashboard / panel / legend, PromQL with template variables filled in) for every target."""
    queries = []
    for path in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                for variable, value in TEMPLATE_VALUES.items():
                    expr = expr.replace(variable, value)
                queries.append((f"{path.stem} / {panel['title']} / {target['legendFormat']}", expr))
    return queries


def alert_rules() -> list[tuple[str, str]]:
    """(alert name, expression) for every shipped rule."""
    groups = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
    return [(rule["alert"], rule["expr"]) for group in groups for rule in group["rules"]]


def _start_server(model_dir: str, metrics_port: int, ready_file: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seedcast.inference_server",
            "--model",
            model_dir,
            "--port",
            "0",
            "--threads",
            "1",
            "--dtype",
            "bfloat16",
            "--metrics-port",
            str(metrics_port),
            "--ready-file",
            str(ready_file),
            "--allow-evaluator",
            "tests.",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not ready_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("seedcast serve did not start")
        time.sleep(0.2)
    return process


async def _provoke_rpc_error(address: str) -> None:
    """One refused update, so the error-by-code series exist as they would in a real fleet."""
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError):
            await pb_grpc.InferenceServerStub(channel).ApplyUpdate(pb.UpdateRequest(step=99))


@pytest.fixture(scope="module")
def scraped_run(tmp_path_factory, tiny_model_dir):
    prometheus_binary()
    workdir = tmp_path_factory.mktemp("prometheus-live")
    server_metrics = [free_port(), free_port()]
    servers = [
        _start_server(tiny_model_dir, port, workdir / f"ready-{index}.json")
        for index, port in enumerate(server_metrics)
    ]
    addresses = [f"127.0.0.1:{json.loads((workdir / f'ready-{i}.json').read_text())['port']}" for i in range(2)]
    registry = CollectorRegistry()
    optimizer_port = start_metrics_server(0, "127.0.0.1", registry)

    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(DEPLOY / "prometheus" / "alerts.yml")]
    targets = {
        "seedcast-optimizer": [f"127.0.0.1:{optimizer_port}"],
        "seedcast-servers": [f"127.0.0.1:{port}" for port in server_metrics],
    }
    assert {job["job_name"] for job in config["scrape_configs"]} == set(targets)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    prometheus = PrometheusServer(workdir / "prometheus.yml", workdir)
    try:
        prometheus.wait_for_targets(3)
        overrides = [
            f"model.name={tiny_model_dir}",
            "iterations=3",
            "batch_size=2",
            "eval_every=1",
            "eval_size=2",
            "task.evaluator=tests.tiny_model:digit_fraction_reward",
            "sampling.max_new_tokens=4",
            "sampling.temperature=1.0",
            "es.population=4",
            "es.sigma=0.05",
            "fleet.local=0",
            f"fleet.servers=[{','.join(addresses)}]",
        ]
        run_config = load_config(overrides=overrides)
        run = RunDirectory.create(workdir / "run", run_config)
        asyncio.run(Trainer(run_config, run, show_progress=False, registry=registry).train())
        asyncio.run(_provoke_rpc_error(addresses[0]))
        time.sleep(4)  # a few more scrapes and rule evaluations after the run
        yield prometheus
    finally:
        prometheus.stop()
        for server in servers:
            server.terminate()
            server.wait(timeout=20)


def test_all_targets_were_scraped(scraped_run):
    result = scraped_run.query("up")["data"]["result"]
    assert len(result) == 3 and all(sample["value"][1] == "1" for sample in result)


@pytest.mark.parametrize(("where", "expr"), panel_queries(), ids=[q[0] for q in panel_queries()])
def test_every_dashboard_query_returns_data(scraped_run, where, expr):
    answer = scraped_run.query(expr)
    assert answer["status"] == "success", f"{where}: {answer.get('error')}"
    if "vllm:" in expr:
        return  # this run has hf servers; tests/test_vllm_end_to_end.py checks these names on a vLLM server
    assert answer["data"]["result"], f"{where}: no data for {expr}"


@pytest.mark.parametrize(("alert", "expr"), alert_rules(), ids=[r[0] for r in alert_rules()])
def test_every_alert_expression_parses(scraped_run, alert, expr):
    answer = scraped_run.query(expr)
    assert answer["status"] == "success", f"{alert}: {answer.get('error')}"


def test_alert_rules_are_loaded_and_healthy(scraped_run):
    rules = [rule for group in scraped_run.api("rules")["data"]["groups"] for rule in group["rules"]]
    assert {rule["name"] for rule in rules} == {name for name, _ in alert_rules()}
    assert all(rule["health"] == "ok" for rule in rules), [(r["name"], r.get("lastError")) for r in rules]


def test_no_alert_fires_on_a_healthy_run(scraped_run):
    firing = [a for a in scraped_run.api("alerts")["data"]["alerts"] if a["state"] == "firing"]
    assert firing == []
