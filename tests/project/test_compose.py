"""docker-compose.yml checked statically (no Docker engine runs here): services, images,
ports, health checks and the wiring between them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from durable_agent._cli.main import build_parser

ROOT = Path(__file__).parent.parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def services(compose: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = compose["services"]
    return found


ONE_SHOT = {"temporal-schema", "temporal-namespace", "make-current"}


def test_the_services_with_pinned_images_and_health_checks(
    compose: dict[str, Any],
) -> None:
    svc = services(compose)
    assert set(svc) == {
        "postgresql",
        "temporal",
        "temporal-ui",
        "worker",
        "worker-next",
        "gateway",
        "otel-collector",
        "jaeger",
        *ONE_SHOT,
    }
    for name, service in svc.items():
        image = service.get("image", "")
        assert re.fullmatch(r"[\w./-]+:[\w.-]+", image), f"{name}: unpinned image {image!r}"
        assert not image.endswith(":latest"), name
        if name in ONE_SHOT:  # set-up steps: they run, succeed and stay stopped
            assert service["restart"] == "no" and "healthcheck" not in service, name
            continue
        assert service["healthcheck"]["test"], f"{name} has no health check"
        assert service.get("restart") == "unless-stopped", name
    assert svc["postgresql"]["image"].startswith("postgres:")
    # worker deployments with upgrade at continue-as-new need a 1.32 server
    assert svc["temporal"]["image"] == "temporalio/server:1.32.0"
    assert svc["temporal-schema"]["image"] == svc["temporal-namespace"]["image"]
    assert svc["temporal-schema"]["image"] == "temporalio/admin-tools:1.32.0"
    assert svc["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert svc["worker"]["build"] == "."
    assert svc["gateway"]["image"] == svc["worker"]["image"], "the gateway runs the same image"


def test_start_order_waits_for_health(compose: dict[str, Any]) -> None:
    svc = services(compose)
    healthy = {"condition": "service_healthy"}
    done = {"condition": "service_completed_successfully"}
    assert svc["temporal-schema"]["depends_on"] == {"postgresql": healthy}
    assert svc["temporal"]["depends_on"] == {"postgresql": healthy, "temporal-schema": done}
    assert svc["temporal-namespace"]["depends_on"] == {"temporal": healthy}
    assert svc["temporal-ui"]["depends_on"] == {"temporal": healthy}
    assert svc["worker"]["depends_on"] == {
        "temporal-namespace": done,
        "postgresql": healthy,
        "otel-collector": healthy,
    }
    assert svc["worker-next"]["depends_on"] == svc["worker"]["depends_on"]
    assert svc["make-current"]["depends_on"] == {"worker": healthy}
    assert svc["otel-collector"]["depends_on"] == {"jaeger": healthy}


def test_workers_are_builds_of_one_versioned_deployment(compose: dict[str, Any]) -> None:
    """Each worker runs as a build of the deployment; the next build runs beside the
    current one during a rollout; the set-up makes the workers' build current."""
    svc = services(compose)
    worker, following = svc["worker"], svc["worker-next"]
    assert worker["environment"]["DURABLE_AGENT_DEPLOYMENT"] == "durable-agent"
    assert worker["environment"]["DURABLE_AGENT_BUILD_ID"] == "${DURABLE_AGENT_BUILD_ID:-1}"
    assert following["profiles"] == ["rollout"] and following["build"] == "."
    assert following["image"] != worker["image"], "the next build is another image"
    build = following["environment"].pop("DURABLE_AGENT_BUILD_ID")
    assert build == "${DURABLE_AGENT_NEXT_BUILD_ID:-next}"
    assert following["environment"] == {
        k: v for k, v in worker["environment"].items() if k != "DURABLE_AGENT_BUILD_ID"
    }
    assert following["command"] == worker["command"]
    parser = build_parser()
    args = parser.parse_args(worker["command"])
    assert args.deployment == "durable-agent"  # the flag's default; the variable names it
    # make-current: until the workers poll, `versions current BUILD` is refused; it retries
    script = svc["make-current"]["entrypoint"][-1]
    call = re.search(r"durable-agent (versions current) .\$\$DURABLE_AGENT_BUILD_ID", script)
    assert call and script.startswith("until ")
    assert parser.parse_args([*call.group(1).split(), "1"]).action == "current"
    assert (
        svc["make-current"]["environment"]["DURABLE_AGENT_BUILD_ID"]
        == (worker["environment"]["DURABLE_AGENT_BUILD_ID"])
    )
    # the server: versioning switched on, its database set up by the admin tools
    temporal = svc["temporal"]
    [mount] = temporal["volumes"]
    source, target, _ = mount.split(":")
    assert target.endswith(temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"])
    settings = yaml.safe_load((ROOT / source).read_text())
    assert settings["system.enableDeploymentVersions"] == [{"value": True}]
    assert settings["frontend.workerVersioningWorkflowAPIs"] == [{"value": True}]
    [script_mount] = svc["temporal-schema"]["volumes"]
    setup = (ROOT / script_mount.split(":")[0]).read_text()
    for db in ("temporal", "temporal_visibility"):
        assert f"--db {db} setup-schema" in setup and f"--db {db} update-schema" in setup
    assert "set -eu" in setup


def test_ports_published(compose: dict[str, Any]) -> None:
    svc = services(compose)
    assert svc["temporal"]["ports"] == ["7233:7233"]
    assert svc["temporal-ui"]["ports"] == ["8080:8080"]
    assert svc["gateway"]["ports"] == ["8700:8700"]
    assert "ports" not in svc["worker"] and "ports" not in svc["postgresql"]
    assert "16686:16686" in svc["jaeger"]["ports"]  # the trace viewer


def test_temporal_uses_the_postgresql_service_with_its_credentials(
    compose: dict[str, Any],
) -> None:
    svc = services(compose)
    temporal = svc["temporal"]["environment"]
    postgres = svc["postgresql"]["environment"]
    assert temporal["DB"].startswith("postgres") and temporal["POSTGRES_SEEDS"] == "postgresql"
    assert temporal["POSTGRES_USER"] == postgres["POSTGRES_USER"]
    assert temporal["POSTGRES_PWD"] == postgres["POSTGRES_PASSWORD"]
    schema = svc["temporal-schema"]["environment"]
    assert (schema["SQL_HOST"], schema["SQL_PLUGIN"]) == ("postgresql", temporal["DB"])
    assert schema["SQL_USER"] == postgres["POSTGRES_USER"]
    assert schema["SQL_PASSWORD"] == postgres["POSTGRES_PASSWORD"]
    assert "postgresql-data" in compose["volumes"]


def test_ui_and_worker_point_at_the_temporal_service(compose: dict[str, Any]) -> None:
    svc = services(compose)
    assert svc["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    worker = svc["worker"]["environment"]
    assert worker["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert worker["DURABLE_AGENT_TASK_QUEUE"] == "durable-agent"


def test_workers_share_the_postgresql_transcript_store(compose: dict[str, Any]) -> None:
    from durable_agent._activities.transcript_store import open_transcript_store

    svc = services(compose)
    url = svc["worker"]["environment"]["DURABLE_AGENT_TRANSCRIPT_STORE"]
    user = svc["postgresql"]["environment"]["POSTGRES_USER"]
    password = svc["postgresql"]["environment"]["POSTGRES_PASSWORD"]
    assert url == f"postgresql://{user}:{password}@postgresql:5432/postgres"
    with pytest.raises(ValueError, match="unknown transcript store"):
        open_transcript_store(url.replace("postgresql", "mysql", 1))  # the scheme is checked
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert '".[postgres,gateway,otel]"' in dockerfile  # the image can speak to it


def test_model_keys_come_from_the_host_never_literal(compose: dict[str, Any]) -> None:
    worker = services(compose)["worker"]["environment"]
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert worker[key] == f"${{{key}:-}}", f"{key} must be passed through from the host"
    text = (ROOT / "docker-compose.yml").read_text()
    assert not re.search(r"sk-[A-Za-z0-9]{8,}", text)


def test_worker_command_and_health_check_are_valid_cli_invocations(
    compose: dict[str, Any],
) -> None:
    worker = services(compose)["worker"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["durable-agent"]' in dockerfile
    parser = build_parser()
    assert parser.parse_args(worker["command"]).command == "worker"
    check = worker["healthcheck"]["test"]
    assert check[:2] == ["CMD", "durable-agent"]
    assert parser.parse_args(check[2:]).command == "sessions"
    gateway = services(compose)["gateway"]
    serve = parser.parse_args(gateway["command"])
    assert serve.command == "serve" and serve.host == "0.0.0.0" and serve.port == 8700
    assert gateway["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert gateway["depends_on"] == {"temporal": {"condition": "service_healthy"}}
    assert "127.0.0.1:8700/healthz" in " ".join(gateway["healthcheck"]["test"])
    # off loopback the gateway needs tokens, and answers the names it is reached by
    assert gateway["environment"]["DURABLE_AGENT_GATEWAY_TOKENS"].startswith(
        "${DURABLE_AGENT_GATEWAY_TOKENS:?"
    )
    assert {"localhost", "127.0.0.1"} <= set(serve.trusted_host)
    assert "OPENAI_API_KEY" not in gateway["environment"], "keys stay with the workers"
    assert '".[postgres,gateway,otel]"' in dockerfile
    for path in ("durable_agent", "workflows", "activities", "worker.py", "pyproject.toml"):
        assert f"COPY {path}" in dockerfile or f" {path} " in dockerfile, path


def test_workers_export_to_the_collector_which_feeds_the_trace_viewer(
    compose: dict[str, Any],
) -> None:
    svc = services(compose)
    worker = svc["worker"]["environment"]
    assert worker["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    parser = build_parser()
    args = parser.parse_args(svc["worker"]["command"])
    assert args.command == "worker"
    assert "DURABLE_AGENT_METRICS_ADDRESS" in worker
    assert "DURABLE_AGENT_OTEL_CONTENT" not in worker, "message content stays off spans"
    collector = svc["otel-collector"]
    [mount] = collector["volumes"]
    source, target, _ = mount.split(":")
    assert target == "/etc/otelcol/config.yaml" and f"--config={target}" in collector["command"]
    config = yaml.safe_load((ROOT / source).read_text())
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"] and "batch" in traces["processors"]
    [exporter] = traces["exporters"]
    assert config["exporters"][exporter]["endpoint"] == "jaeger:4317"
    assert svc["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    scrape = config["receivers"]["prometheus"]["config"]["scrape_configs"][0]
    assert scrape["dns_sd_configs"][0] == {"names": ["worker"], "type": "A", "port": 9464}
    assert worker["DURABLE_AGENT_METRICS_ADDRESS"].endswith(":9464")


def test_each_worker_may_drain_before_it_is_killed(compose: dict[str, Any]) -> None:
    """A stop sends SIGTERM, then SIGKILL after the stop grace: the grace must outlast
    the worker's drain, or a call in flight is cut short and runs again elsewhere."""
    svc = services(compose)
    for name in ("worker", "worker-next"):
        drain = float(svc[name]["environment"]["DURABLE_AGENT_DRAIN_SECONDS"])
        grace = svc[name]["stop_grace_period"]
        assert grace.endswith("s") and float(grace[:-1]) > drain, name
    args = build_parser().parse_args(["worker"])
    assert args.drain_seconds == 120.0, "the compose file's drain is the worker's default"
