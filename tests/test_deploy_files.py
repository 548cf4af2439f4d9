"""Offline checks of the deployment files: Kubernetes schemas, the compose spec, Dockerfile lint,
and the cross-references between them (ports, labels, job names, mounted paths)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent
MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))
DOCKERFILES = sorted((DEPLOY / "docker").glob("Dockerfile.*"))


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _all_k8s() -> list[dict]:
    return [doc for path in MANIFESTS for doc in _documents(path)]


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_kubernetes_manifest_validates(path):
    result = subprocess.run([BIN / "kubernetes-validate", "--strict", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    custom = {doc["kind"] for doc in _documents(path) if "." in doc["apiVersion"].split("/")[0]}
    unchecked = [line for line in result.stdout.splitlines() if "Couldn't find schema" in line]
    # Only custom resources (the Prometheus Operator's PodMonitor) lack a bundled schema; they are
    # cross-checked against the pods below instead.
    assert len(unchecked) == len(custom), result.stdout


def test_podmonitor_selects_every_seedcast_pod_by_its_metrics_port():
    docs = _all_k8s()
    monitor = next(doc for doc in docs if doc["kind"] == "PodMonitor")
    wanted = monitor["spec"]["selector"]["matchLabels"]
    ports = {endpoint["port"] for endpoint in monitor["spec"]["podMetricsEndpoints"]}
    workloads = [doc for doc in docs if doc["kind"] in ("StatefulSet", "Job")]
    assert {doc["metadata"]["name"] for doc in workloads} == {"seedcast-server", "seedcast-optimizer"}
    for workload in workloads:
        template = workload["spec"]["template"]
        assert wanted.items() <= template["metadata"]["labels"].items(), workload["metadata"]["name"]
        container_ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert ports <= container_ports, workload["metadata"]["name"]


def test_servers_probe_grpc_health_and_request_gpus():
    statefulset = next(doc for doc in _all_k8s() if doc["kind"] == "StatefulSet")
    service = next(doc for doc in _all_k8s() if doc["kind"] == "Service")
    assert service["spec"]["clusterIP"] == "None" and statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["grpc"]["service"] == "seedcast.v1.InferenceServer"
    assert "grpc" in container["livenessProbe"] and "grpc" in container["startupProbe"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    job = next(doc for doc in _all_k8s() if doc["kind"] == "Job")
    command = " ".join(job["spec"]["template"]["spec"]["containers"][0]["args"])
    port = container["ports"][0]["containerPort"]
    assert f"--servers dns:///{service['metadata']['name']}:{port}" in command  # every ready pod, however many
    assert f"fleet.tls_server_name={statefulset['metadata']['name']}-0.{service['metadata']['name']}" in command


def test_train_config_in_the_configmap_validates(tmp_path):
    from seedcast.optimizer.config_files import load_config

    configmap = next(doc for doc in _all_k8s() if doc["metadata"]["name"] == "seedcast-train-config")
    path = tmp_path / "train.yaml"
    path.write_text(configmap["data"]["train.yaml"])
    ca = tmp_path / "ca.crt"
    ca.write_text("placeholder")
    job = next(doc for doc in _all_k8s() if doc["kind"] == "Job")
    arguments = " ".join(job["spec"]["template"]["spec"]["containers"][0]["args"]).split()
    servers = arguments[arguments.index("--servers") + 1]
    assert servers == "dns:///seedcast-server:50051"  # the headless Service: scaling needs no edit here
    load_config(path, [f"fleet.servers=[{servers}]", "fleet.local=0", f"fleet.tls_ca={ca}"])


def test_servers_and_optimizer_agree_on_tls_and_token():
    docs = _all_k8s()

    def args(kind: str) -> str:
        workload = next(d for d in docs if d["kind"] == kind)
        return " ".join(workload["spec"]["template"]["spec"]["containers"][0]["args"])

    server_args, job_args = args("StatefulSet"), args("Job")
    assert "--tls-cert" in server_args and "--token-file /etc/seedcast/token/token" in server_args
    assert "fleet.tls_ca=" in job_args and "fleet.token_file=/etc/seedcast/token/token" in job_args
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    assert "seedcast-token" in secrets


def test_compose_file_validates_against_the_compose_spec():
    compose = DEPLOY / "compose" / "docker-compose.yml"
    result = subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(compose)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_targets_match_the_compose_services():
    compose = yaml.safe_load((DEPLOY / "compose" / "docker-compose.yml").read_text())
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    for job in prometheus["scrape_configs"]:
        for target in job["static_configs"][0]["targets"]:
            host, port = target.split(":")
            assert host in compose["services"], target
            assert f"--metrics-port {port}" in " ".join(compose["services"][host]["command"]).replace('"', "")


def test_grafana_provisioning_points_at_the_mounted_dashboards():
    compose = yaml.safe_load((DEPLOY / "compose" / "docker-compose.yml").read_text())
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "seedcast.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert any(m.endswith(":" + provider["providers"][0]["options"]["path"] + ":ro") for m in mounts)
    datasource = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_dockerfile_lints_clean(path):
    result = subprocess.run([BIN / "hadolint", "--no-color", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_dockerfile_copies_every_folder_the_package_installs_from(path):
    # `pip install .` in the image fails when a folder pyproject.toml maps a package to is missing.
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    copied = {line.split()[1] for line in path.read_text().splitlines() if line.startswith("COPY ")}
    assert set(package_dirs.values()) <= copied, f"not copied: {set(package_dirs.values()) - copied}"


def test_dashboards_are_generated_and_templated():
    result = subprocess.run(
        [sys.executable, str(DEPLOY / "grafana" / "build_dashboards.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    for path in (DEPLOY / "grafana" / "dashboards").glob("*.json"):
        board = json.loads(path.read_text())
        assert {v["name"] for v in board["templating"]["list"]} >= {"job", "instance", "model"}
        for panel in board["panels"]:
            for target in panel["targets"]:
                if "rate(" in target["expr"]:
                    assert "[$__rate_interval]" in target["expr"], (panel["title"], target["expr"])


SBATCH = DEPLOY / "slurm" / "seedcast.sbatch"
FAKE_SLURM = {
    # Test doubles for the cluster: srun runs its command once per task (two per node) with that task's id;
    # scontrol names two nodes; seedcast records its arguments, one call a line (`train` once both servers have).
    "srun": 'shift; for id in 0 1; do SLURM_LOCALID=$id "$@"; done',
    "scontrol": 'printf "node-a\\nnode-b\\n"',
    "seedcast": 'if [[ $1 == train ]]; then for _ in $(seq 50); do [[ $(grep -c serve "$CALLS" 2>/dev/null) == 2 ]] '
    '&& break; sleep 0.1; done; fi; printf "%s\\0" "$@" >> "$CALLS"; printf "\\n" >> "$CALLS"',
}


def test_the_slurm_recipe_starts_a_server_per_task_and_trains_against_all_of_them(tmp_path, monkeypatch):
    from seedcast.cli import build_parser, parse_args
    from seedcast.inference_server.serve_config import serve_config_from_args
    from seedcast.optimizer.config_files import load_config

    assert subprocess.run(["bash", "-n", str(SBATCH)], check=False).returncode == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKE_SLURM.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    environment = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CALLS": str(calls),
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node-[a-b]",
        "SLURM_NTASKS_PER_NODE": "2",
        "CONFIG": str(ROOT / "configs" / "synthetic-cpu.yaml"),
    }
    subprocess.run(["bash", str(SBATCH)], cwd=tmp_path, env=environment, check=True, capture_output=True)
    recorded = [line.split("\0")[:-1] for line in calls.read_text().splitlines()]
    serves, trains = recorded[:-1], recorded[-1]
    assert len(serves) == 2 and trains[0] == "train"  # one node's two tasks in this double; then the optimizer
    ports = [serve_config_from_args(build_parser().parse_args(argv)).port for argv in serves]
    assert ports == [50051, 50052]
    servers = (tmp_path / "seedcast-job-42" / "servers.txt").read_text().split()
    assert servers == ["node-a:50051", "node-a:50052", "node-b:50051", "node-b:50052"]
    args = parse_args(trains)
    monkeypatch.chdir(tmp_path)  # the recipe's paths are relative to where it was submitted
    config = load_config(args.config, overrides=args.overrides)  # every key the recipe sets exists and validates
    assert config.fleet.servers_file.endswith("servers.txt") and config.fleet.local == 0 and config.fleet.insecure
