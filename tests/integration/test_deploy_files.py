"""The deployment files in deploy/ agree with the code they deploy.

Pure file checks, nothing started: every file parses; every command is a
console script with a sub-command it accepts; every CONVERGE_* variable is a
setting of the service it is given to; probes and healthchecks hit the port
the service really listens on and a path it serves; the image runs as a
non-root user; KEDA watches the queues the services really consume; grace
periods outlast the drain. The sandbox's checks wait for converge-sandbox to
be installed (tests/support/deploy_files.py).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from honcho.manager import KILL_WAIT  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry

from services.observer.service import ObserverMetrics, ObserverService
from services.worker.service import WorkerMetrics, WorkerService
from shared.bus.amqp import AmqpBus
from shared.health import Readiness, health_routes
from tests.support import deploy_files as df

HEALTH_PATHS = {route.path for route in health_routes(readiness=Readiness(), registry=CollectorRegistry())}
# Time a process needs after draining to close its connections and exit.
CLOSE_SECONDS = 5
# PostgreSQL's default max_connections (100) minus superuser_reserved_connections (3).
POSTGRES_CONNECTIONS = 97


def every_command() -> list[df.Command]:
    commands = [*df.procfile_commands(), *df.compose_commands()]
    commands += [command for _, _, command in df.k8s_commands()]
    cmd = [args for instruction, args in df.dockerfile_stages()[-1] if instruction == "CMD"]
    assert len(cmd) == 1, "the image's final stage has one CMD"
    assert cmd[0].startswith("["), "CMD in exec form, so the service gets signals directly"
    commands.append(df.Command("Dockerfile CMD", list(json.loads(cmd[0]))))
    return commands


def effective(command: df.Command) -> dict[str, Any]:
    """The settings a command runs with: its class's defaults, then what the file sets."""
    values = df.variables_of(df.settings_class(command.argv[0]))
    return {**values, **command.env}


def drain_seconds(command: df.Command) -> float:
    return float(effective(command)["CONVERGE_DRAIN_SECONDS"])


def test_every_file_parses() -> None:
    yaml_files = sorted(df.DEPLOY.rglob("*.yaml")) + sorted(df.DEPLOY.rglob("*.yml"))
    assert {p.name for p in yaml_files} >= {"compose.yaml", "kustomization.yaml"}
    for path in yaml_files:
        for document in df.yaml_documents(path):
            if path.parent == df.K8S and document.get("kind") not in ("Kustomization", "Namespace"):
                assert document.get("apiVersion"), f"{path}: a document has no apiVersion"
                assert document["metadata"]["name"], f"{path}: a document has no name"
                assert document["metadata"].get("namespace") == "converge", f"{path}: namespace"
    lines = [
        line
        for line in df.PROCFILE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines, "the Procfile has processes"
    for line in lines:
        assert df.PROCFILE_LINE.match(line), f"honcho would silently ignore this Procfile line: {line!r}"
        shlex.split(line)
    assert len(df.procfile()) == len(lines), "Procfile process names are unique"
    assert df.dockerfile_stages()[-1][0][0] == "FROM"


def test_kustomization_lists_every_manifest() -> None:
    kustomization = df.yaml_documents(df.K8S / "kustomization.yaml")[0]
    listed = set(kustomization["resources"])
    present = {p.name for p in df.K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert listed == present, "kustomization.yaml lists exactly the manifests (the Secret is created apart)"


def test_every_command_is_a_console_script_with_a_sub_command_it_accepts() -> None:
    scripts = df.console_scripts()
    seen = set()
    for command in every_command():
        program, *args = command.argv
        seen.add(program)
        assert program in scripts, f"{command.where}: {program} is not in [project.scripts]"
        accepted = df.subcommands(program)
        if accepted is None:
            assert not args, f"{command.where}: {program} takes no arguments, given {args}"
        else:
            assert len(args) <= 1, f"{command.where}: {program} takes one sub-command, given {args}"
            assert set(args) <= accepted, f"{command.where}: {program} accepts {sorted(accepted)}, not {args}"
    assert {"converge-engine", "converge-worker", "converge-observer", df.SANDBOX} <= seen


def test_every_converge_variable_is_a_real_setting() -> None:
    known = df.all_settings_variables() | df.client_variables()
    for path in sorted(p for p in df.DEPLOY.rglob("*") if p.is_file()):
        for name in set(df.VARIABLE.findall(path.read_text())):
            assert name in known, f"{path.relative_to(df.ROOT)}: {name} is not a Converge setting"


def test_every_service_is_given_only_its_own_settings() -> None:
    for command in [*df.compose_commands(), *(c for _, _, c in df.k8s_commands())]:
        own = set(df.variables_of(df.settings_class(command.argv[0])))
        for name in command.env:
            if name.startswith("CONVERGE_"):
                assert name in own, f"{command.where}: {command.argv[0]} has no setting {name}"


def test_procfile_gives_each_process_its_port_setting() -> None:
    for command in df.procfile_commands():
        variable = df.port_variable(df.settings_class(command.argv[0]))
        assert command.env.get(variable) == "$PORT", f"{command.where} must set {variable}=$PORT"


def health_url_port_and_path(test: list[str] | str) -> tuple[int, str]:
    text = " ".join(test) if isinstance(test, list) else test
    found = re.search(r"https?://[^\s'\"]+", text)
    assert found is not None, f"healthcheck without a URL: {text}"
    url = urlsplit(found.group(0))
    assert url.port is not None
    return url.port, url.path


def test_compose_healthchecks_and_ports_match_the_service_ports() -> None:
    services = df.compose_services()
    for command in df.compose_commands():
        name = command.where.removeprefix("compose ")
        if command.argv[1:] == ["migrate"]:
            continue
        port = int(effective(command)[df.port_variable(df.settings_class(command.argv[0]))])
        check_port, path = health_url_port_and_path(services[name]["healthcheck"]["test"])
        assert check_port == port, f"compose {name}: healthcheck port"
        assert path in HEALTH_PATHS, f"compose {name}: healthcheck path"
        for published in services[name].get("ports", []):
            assert int(str(published).rsplit(":", 1)[1]) == port, f"compose {name}: published port"


def resolve_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in named, f"container {container['name']}: no port named {port}"
    return int(named[port])


def test_k8s_probes_hit_the_service_port_and_health_paths() -> None:
    for obj, container, command in df.k8s_commands():
        if obj["kind"] == "Job":
            continue
        port = int(effective(command)[df.port_variable(df.settings_class(command.argv[0]))])
        assert [p["containerPort"] for p in container["ports"]] == [port], f"{command.where}: containerPort"
        wanted = {"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"}
        assert {"readinessProbe", "livenessProbe"} <= set(container), f"{command.where}: probes"
        for probe, path in wanted.items():
            if probe in container:
                get = container[probe]["httpGet"]
                assert resolve_port(container, get["port"]) == port, f"{command.where}: {probe} port"
                assert get["path"] == path, f"{command.where}: {probe} path"
                assert path in HEALTH_PATHS


def test_k8s_services_route_to_a_container_port() -> None:
    deployments = df.k8s_named("Deployment")
    for name, service in df.k8s_named("Service").items():
        selector = service["spec"]["selector"]
        targets = [
            d
            for d in deployments.values()
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(targets) == 1, f"Service {name} selects one Deployment"
        container = targets[0]["spec"]["template"]["spec"]["containers"][0]
        for port in service["spec"]["ports"]:
            resolve_port(container, port["targetPort"])


def test_the_image_runs_as_a_non_root_user_that_pods_also_require() -> None:
    users = [args for instruction, args in df.dockerfile_stages()[-1] if instruction == "USER"]
    assert users, "the image's final stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), "the image runs as a non-root user"
    assert user.isdigit(), "numeric USER, so Kubernetes' runAsNonRoot can verify it"
    for obj in df.k8s_objects():
        spec = df.pod_spec(obj)
        if spec is not None:
            context = spec["securityContext"]
            where = f"{obj['kind']} {obj['metadata']['name']}"
            assert context["runAsNonRoot"] is True, where
            assert str(context["runAsUser"]) == user, f"{where}: runAsUser is the image's USER"
            assert spec["enableServiceLinks"] is False, f"{where}: service links inject CONVERGE_* variables"


def test_the_image_builds_from_what_the_context_holds() -> None:
    for stage in df.dockerfile_stages():
        for instruction, args in stage:
            if instruction != "COPY" or "--from=" in args:
                continue
            sources = [a for a in shlex.split(args) if not a.startswith("--")][:-1]
            for source in sources:
                assert (df.ROOT / source).exists(), f"Dockerfile copies missing {source}"
                assert not df.dockerignored(source), f"Dockerfile.dockerignore leaves out {source}"
    for source in ("deploy", ".venv", ".git", "tests"):
        assert df.dockerignored(source), f"the build context should not carry {source}"
    for name, service in df.compose_services().items():
        if "build" in service:
            context = (df.COMPOSE.parent / service["build"]["context"]).resolve()
            assert context == df.ROOT, f"compose {name}: builds from the repository root"
            assert (context / service["build"]["dockerfile"]).resolve() == df.DOCKERFILE


def work_queues(program: str) -> set[str]:
    """The queues `program` takes work from: those it prefetches its concurrency from
    (an observer's provider notifications are hints with a fixed prefetch, not work)."""
    bus = cast(Any, None)
    registry = CollectorRegistry()
    service: WorkerService | ObserverService
    if program == "converge-worker":
        service = WorkerService(bus=bus, deps=bus, concurrency=SENTINEL, metrics=WorkerMetrics(registry))
    else:
        service = ObserverService(
            bus=bus, runtime=bus, concurrency=SENTINEL, metrics=ObserverMetrics(registry)
        )
    return {c.queue for c in service.consumptions() if c.prefetch == SENTINEL}


SENTINEL = 7919
CONCURRENCY = {
    "converge-worker": "CONVERGE_WORKER_CONCURRENCY",
    "converge-observer": "CONVERGE_OBSERVER_CONCURRENCY",
}


def test_keda_scales_workers_and_observers_on_the_queues_they_consume() -> None:
    scaled = df.k8s_named("ScaledObject")
    auths = df.k8s_named("TriggerAuthentication")
    secret = df.k8s_named("Secret")
    by_deployment = {
        obj["metadata"]["name"]: command
        for obj, _, command in df.k8s_commands()
        if obj["kind"] == "Deployment"
    }
    covered = set()
    for name, scaled_object in scaled.items():
        command = by_deployment[scaled_object["spec"]["scaleTargetRef"]["name"]]
        program = command.argv[0]
        assert program in CONCURRENCY, f"ScaledObject {name} scales {program}"
        covered.add(program)
        settings = effective(command)
        prefix = settings["CONVERGE_QUEUE_PREFIX"]
        bus = AmqpBus(cast(Any, None), cast(Any, None), prefix=prefix, max_deliveries=1, publish_timeout=1)
        triggers = {t["metadata"]["queueName"]: t for t in scaled_object["spec"]["triggers"]}
        wanted = {bus.queue_name(queue) for queue in work_queues(program)}
        assert set(triggers) == wanted, f"ScaledObject {name}: triggers on what {program} consumes"
        for trigger in triggers.values():
            assert trigger["type"] == "rabbitmq"
            metadata = trigger["metadata"]
            assert metadata["mode"] == "QueueLength"
            assert int(metadata["value"]) == int(settings[CONCURRENCY[program]]), (
                f"ScaledObject {name}: one {program} per {CONCURRENCY[program]} messages"
            )
            auth = auths[trigger["authenticationRef"]["name"]]
            for ref in auth["spec"]["secretTargetRef"]:
                value = secret[ref["name"]]["stringData"][ref["key"]]
                assert urlsplit(value).scheme == metadata["protocol"], f"{name}: {ref['key']} protocol"
    assert covered == set(CONCURRENCY)


def test_engines_scale_on_cpu_within_the_database_connection_limit() -> None:
    hpas = df.k8s_named("HorizontalPodAutoscaler")
    deployments = df.k8s_named("Deployment")
    engines = {
        obj["metadata"]["name"]: command
        for obj, _, command in df.k8s_commands()
        if obj["kind"] == "Deployment" and command.argv[0] == "converge-engine"
    }
    migrations = [c for obj, _, c in df.k8s_commands() if obj["kind"] == "Job"]
    assert len(hpas) == 1
    (hpa,) = hpas.values()
    target = hpa["spec"]["scaleTargetRef"]["name"]
    assert target in engines, "the HPA scales the engines"
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    deployment = deployments[target]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"], "CPU utilisation needs a CPU request"
    assert "replicas" not in deployment["spec"], "the HPA owns replicas; apply must not reset them"
    pool = int(effective(engines[target])["CONVERGE_DB_POOL_SIZE"])
    surge = int(deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"])
    migrate = sum(int(effective(c)["CONVERGE_DB_POOL_SIZE"]) for c in migrations)
    assert (hpa["spec"]["maxReplicas"] + surge) * pool + migrate <= POSTGRES_CONNECTIONS, (
        "engines at their most, during a rolling update, plus the migration fit PostgreSQL's default limit"
    )


def test_grace_periods_outlast_the_drain() -> None:
    for obj, _, command in df.k8s_commands():
        if obj["kind"] != "Deployment":
            continue
        grace = obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace >= drain_seconds(command) + CLOSE_SECONDS, f"{command.where}: grace period"
    services = df.compose_services()
    for command in df.compose_commands():
        grace = df.duration_seconds(services[command.where.removeprefix("compose ")]["stop_grace_period"])
        assert grace >= drain_seconds(command) + CLOSE_SECONDS, f"{command.where}: stop_grace_period"


def test_the_cluster_launcher_drains_before_honcho_kills() -> None:
    spec = importlib.util.spec_from_file_location("deploy_cluster", df.DEPLOY / "cluster.py")
    assert spec is not None
    assert spec.loader is not None
    launcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launcher)
    assert launcher.DRAIN_SECONDS < KILL_WAIT, "honcho SIGKILLs KILL_WAIT s after the first process stopped"
    assert set(launcher.SERVICES) == set(df.procfile()), "the launcher counts every Procfile process"
    assert Path(launcher.PROCFILE) == df.PROCFILE


def test_pod_disruption_budgets_cover_every_deployment() -> None:
    budgets = df.k8s_named("PodDisruptionBudget")
    for name, deployment in df.k8s_named("Deployment").items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        matching = [
            b for b in budgets.values() if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(matching) == 1, f"Deployment {name} has one PodDisruptionBudget"
