"""Build the Grafana dashboards of a Seedcast fleet from one description of their panels.

    python deploy/grafana/build_dashboards.py          # write dashboards/*.json and the k8s ConfigMap
    python deploy/grafana/build_dashboards.py --check  # exit 1 if the JSON files are stale

The JSON is generated so every query shares one label selector and one rate window, and so the
tests can execute every panel's PromQL against a live Prometheus (tests/test_prometheus_live.py).
Dashboards are templated on job, instance and model, and use `$__rate_interval`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from seedcast.proto.telemetry import SERVER_PHASES

DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboards"
K8S_CONFIGMAP = Path(__file__).resolve().parents[1] / "k8s" / "grafana-dashboards.yaml"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SERVER = '{job=~"$job", instance=~"$instance", model=~"$model"}'
OPTIMIZER = '{model=~"$model"}'
# vLLM's own metrics (servers with --backend vllm) carry model_name, not our model label.
VLLM = '{job=~"$job", instance=~"$instance"}'
RATE = "[$__rate_interval]"
PHASES = SERVER_PHASES


def rate(metric: str, selector: str = SERVER, by: str = "") -> str:
    """sum [by (...)] (rate(metric{selector}[$__rate_interval]))"""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}{selector}{RATE}))"


def mean_seconds(phase: str, selector: str = SERVER) -> str:
    """Mean seconds per observation of a phase histogram over the rate window."""
    histogram = f"seedcast_server_{phase}_seconds"
    return f"{rate(f'{histogram}_sum', selector)} / {rate(f'{histogram}_count', selector)}"


def quantile(q: float, histogram: str, selector: str) -> str:
    """histogram_quantile over the summed bucket rates."""
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{selector}{RATE})))"


def panel(
    title: str,
    targets: list[tuple[str, str]],
    unit: str = "short",
    kind: str = "timeseries",
    width: int = 12,
    description: str = "",
) -> dict:
    """One panel; `targets` are (legend, PromQL) pairs."""
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "gridPos": {"w": width, "h": 8},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
            for i, (legend, expr) in enumerate(targets)
        ],
    }


def variables(instance_multi: bool) -> list[dict]:
    """Template variables: datasource, job, instance, model."""

    def query_variable(name: str, query: str, multi: bool = True) -> dict:
        return {
            "name": name,
            "type": "query",
            "datasource": DATASOURCE,
            "refresh": 2,
            "includeAll": multi,
            "multi": multi,
            "allValue": ".*",
            "query": {"query": query, "refId": name},
            "definition": query,
        }

    return [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
        query_variable("job", "label_values(seedcast_server_step, job)"),
        query_variable("instance", 'label_values(seedcast_server_step{job=~"$job"}, instance)', instance_multi),
        query_variable("model", "label_values(seedcast_server_step, model)"),
    ]


def layout(panels: list[dict]) -> list[dict]:
    """Place panels left to right, top to bottom, and number them."""
    x = y = 0
    for number, item in enumerate(panels, 1):
        width = item["gridPos"]["w"]
        if x + width > 24:
            x, y = 0, y + 8
        item["gridPos"].update(x=x, y=y)
        item["id"] = number
        x += width
    return panels


def dashboard(uid: str, title: str, panels: list[dict], instance_multi: bool) -> dict:
    """A complete dashboard document."""
    return {
        "uid": uid,
        "title": title,
        "tags": ["seedcast"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": variables(instance_multi)},
        "panels": layout(panels),
        "editable": True,
    }


def fleet_overview() -> dict:
    """Throughput per server and in total, rewards, time breakdown, failures."""
    return dashboard(
        "seedcast-fleet",
        "Seedcast — fleet overview",
        [
            panel(
                "Tokens/s per server",
                [("{{instance}}", rate("seedcast_server_tokens_generated_total", by="instance"))],
                "short",
            ),
            panel("Tokens/s, fleet", [("total", rate("seedcast_server_tokens_generated_total"))], "short"),
            panel(
                "Members/s per server",
                [("{{instance}}", rate("seedcast_server_members_evaluated_total", by="instance"))],
            ),
            panel(
                "Members/s, fleet",
                [
                    ("evaluated", rate("seedcast_server_members_evaluated_total")),
                    ("failed", rate("seedcast_server_members_failed_total")),
                ],
            ),
            panel(
                "Reward",
                [
                    ("population mean", f"max(seedcast_optimizer_reward_mean{OPTIMIZER})"),
                    ("population max", f"max(seedcast_optimizer_reward_max{OPTIMIZER})"),
                    ("eval (unperturbed)", f"max(seedcast_optimizer_eval_reward{OPTIMIZER})"),
                ],
                "percentunit",
                description="Rewards lie in [0, 1]; eval is the greedy score of the unperturbed weights.",
            ),
            panel("Mean seconds per member phase", [(phase, mean_seconds(phase)) for phase in PHASES], "s"),
            panel(
                "Iteration seconds",
                [
                    ("p50", quantile(0.5, "seedcast_optimizer_iteration_seconds", OPTIMIZER)),
                    ("p90", quantile(0.9, "seedcast_optimizer_iteration_seconds", OPTIMIZER)),
                ],
                "s",
            ),
            panel(
                "Step and servers",
                [
                    ("step", f"max(seedcast_optimizer_step{OPTIMIZER})"),
                    ("servers up", f"max(seedcast_optimizer_servers_up{OPTIMIZER})"),
                    ("scrape targets up", 'sum(up{job=~"$job", instance=~"$instance"})'),
                ],
                kind="stat",
            ),
            panel(
                "Failures",
                [
                    ("members failed/s", rate("seedcast_server_members_failed_total")),
                    (
                        "members reassigned",
                        f"sum(increase(seedcast_optimizer_members_reassigned_total{OPTIMIZER}{RATE}))",
                    ),
                    ("fingerprint mismatches", f"sum(seedcast_optimizer_fingerprint_mismatches_total{OPTIMIZER})"),
                ],
                width=12,
            ),
            panel(
                "RPC errors/s by code", [("{{code}}", rate("seedcast_server_rpc_errors_total", by="code"))], width=12
            ),
        ],
        instance_multi=True,
    )


def server_detail() -> dict:
    """One server: throughput, phase latency quantiles, step, errors."""
    return dashboard(
        "seedcast-server",
        "Seedcast — server detail",
        [
            panel("Tokens/s", [("tokens", rate("seedcast_server_tokens_generated_total"))]),
            panel(
                "Members/s",
                [
                    ("evaluated", rate("seedcast_server_members_evaluated_total")),
                    ("failed", rate("seedcast_server_members_failed_total")),
                    ("sample completions", rate("seedcast_server_sample_completions_total")),
                ],
            ),
            *[
                panel(
                    f"{phase.capitalize()} seconds",
                    [
                        ("p50", quantile(0.5, f"seedcast_server_{phase}_seconds", SERVER)),
                        ("p90", quantile(0.9, f"seedcast_server_{phase}_seconds", SERVER)),
                    ],
                    "s",
                    width=8,
                )
                for phase in ("perturb", "generate", "restore")
            ],
            panel(
                "Update step",
                [
                    ("step", f"max(seedcast_server_step{SERVER})"),
                    ("updates/s", rate("seedcast_server_updates_applied_total")),
                ],
                width=12,
            ),
            panel(
                "RPC errors/s by method and code",
                [("{{method}} {{code}}", rate("seedcast_server_rpc_errors_total", by="method, code"))],
                width=12,
            ),
            *vllm_engine_panels(),
        ],
        instance_multi=False,
    )


def vllm_engine_panels() -> list[dict]:
    """vLLM's own engine metrics; empty for hf servers."""
    note = "vLLM's own metrics; shown only for servers started with --backend vllm."
    return [
        panel(
            "vLLM requests",
            [
                ("running", f"sum(vllm:num_requests_running{VLLM})"),
                ("waiting", f"sum(vllm:num_requests_waiting{VLLM})"),
            ],
            width=8,
            description=note,
        ),
        panel(
            "vLLM KV cache usage",
            [("used", f"max(vllm:kv_cache_usage_perc{VLLM})")],
            "percentunit",
            width=8,
            description=note,
        ),
        panel(
            "vLLM tokens/s",
            [
                ("generated", rate("vllm:generation_tokens_total", VLLM)),
                ("prompt", rate("vllm:prompt_tokens_total", VLLM)),
                ("prompt, from prefix cache", rate("vllm:prefix_cache_hits_total", VLLM)),
            ],
            width=8,
            description=note,
        ),
    ]


DASHBOARDS = {"seedcast-fleet.json": fleet_overview, "seedcast-server.json": server_detail}


def render(build) -> str:
    """The JSON text of a dashboard, as committed."""
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def render_configmap() -> str:
    """The dashboards as a Kubernetes ConfigMap for Grafana's dashboard sidecar (label grafana_dashboard)."""
    lines = [
        "# Generated by deploy/grafana/build_dashboards.py; do not edit by hand.",
        "# Grafana's dashboard sidecar (e.g. kube-prometheus-stack) loads ConfigMaps labelled grafana_dashboard.",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: seedcast-grafana-dashboards",
        "  labels:",
        '    grafana_dashboard: "1"',
        "    app.kubernetes.io/part-of: seedcast",
        "data:",
    ]
    for name, build in DASHBOARDS.items():
        lines.append(f"  {name}: |")
        lines.extend(f"    {line}" for line in render(build).splitlines())
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a JSON file is stale")
    args = parser.parse_args(argv)
    stale = []
    outputs = {DASHBOARD_DIR / name: render(build) for name, build in DASHBOARDS.items()}
    outputs[K8S_CONFIGMAP] = render_configmap()
    for path, text in outputs.items():
        name = path.name
        if not path.exists() or path.read_text() != text:
            stale.append(name)
            if not args.check:
                path.write_text(text)
    if args.check and stale:
        print(f"stale dashboards: {', '.join(stale)}; run `python deploy/grafana/build_dashboards.py`", file=sys.stderr)
        return 1
    print("dashboards up to date" if not stale else f"wrote {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
