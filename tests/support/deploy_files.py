"""Reading deploy/ the way its consumers do, for the deployment-file tests.

Commands, variables and ports are compared with what the code defines: the
console scripts in pyproject.toml, the settings class each script loads
(found in its source), the health routes, the queue naming of the bus.
`converge-sandbox` counts as pending while it is not installed (its checks
are skipped; remove `SANDBOX` handling here once the sandbox has landed).
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import inspect
import io
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from honcho.environ import parse_procfile  # type: ignore[import-untyped]
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
PROCFILE = DEPLOY / "Procfile"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
SANDBOX = "converge-sandbox"
VARIABLE = re.compile(r"\bCONVERGE_[A-Z0-9_]+\b")
# honcho's own pattern for a Procfile line; lines it does not match are silently ignored.
PROCFILE_LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")


def console_scripts() -> dict[str, str]:
    """[project.scripts] of pyproject.toml: name -> "module:function"."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    scripts: dict[str, str] = project["scripts"]
    return scripts


def entry_point(command: str) -> Any:
    module_name, _, function = console_scripts()[command].partition(":")
    return getattr(importlib.import_module(module_name), function)


def settings_class(command: str) -> type[BaseSettings]:
    """The settings class `command` loads, read from its main module's source."""
    module = inspect.getmodule(entry_point(command))
    assert module is not None
    found = re.search(r"load_settings\(\s*(\w+)", inspect.getsource(module))
    assert found is not None, f"{command}: its main module calls no load_settings(...)"
    cls = getattr(module, found.group(1))
    assert isinstance(cls, type)
    assert issubclass(cls, BaseSettings)
    return cls


def variables_of(cls: type[BaseSettings]) -> dict[str, Any]:
    """Environment variable -> default, for every field of a settings class."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    return {f"{prefix}{name}".upper(): info.default for name, info in cls.model_fields.items()}


def all_settings_variables() -> set[str]:
    names: set[str] = set()
    for command in console_scripts():
        if command.startswith("converge-"):
            names |= set(variables_of(settings_class(command)))
    return names


def client_variables() -> set[str]:
    """What the `converge` client reads (services/cli/config.py), e.g. CONVERGE_URL."""
    source = (ROOT / "services" / "cli" / "config.py").read_text()
    return set(re.findall(r"env\.get\(\"(CONVERGE_[A-Z0-9_]+)\"\)", source))


def subcommands(command: str) -> set[str] | None:
    """The sub-commands `command` accepts; None if it takes no arguments at all."""
    main = entry_point(command)
    if not inspect.signature(main).parameters:
        return None
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--help"])
    usage = out.getvalue()
    choices = re.search(r"\{([a-z0-9_,-]+)\}", usage)
    assert choices is not None, f"{command} --help shows no sub-commands:\n{usage}"
    return set(choices.group(1).split(","))


def port_variable(cls: type[BaseSettings]) -> str:
    """The one setting a service's port comes from (API_PORT, HEALTH_PORT, ...)."""
    ports = [name for name in variables_of(cls) if name.endswith("_PORT")]
    assert len(ports) == 1, f"{cls.__name__}: expected one *_PORT setting, found {ports}"
    return ports[0]


# -- the files ---------------------------------------------------------------


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert documents, f"{path}: no YAML document"
    for document in documents:
        assert isinstance(document, dict), f"{path}: a document is not a mapping"
    return documents


def k8s_objects() -> list[dict[str, Any]]:
    return [d for path in sorted(K8S.glob("*.yaml")) for d in yaml_documents(path)]


def k8s_named(kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in k8s_objects() if o["kind"] == kind}


def compose_services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = yaml_documents(COMPOSE)[0]["services"]
    return services


def procfile() -> dict[str, str]:
    processes: dict[str, str] = dict(parse_procfile(PROCFILE.read_text()).processes)
    return processes


@dataclass(frozen=True)
class Command:
    """A Converge process a deployment file starts, with the environment it sets itself."""

    where: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def split_shell_command(line: str) -> Command:
    """`exec env A=1 converge-x sub` -> argv ["converge-x", "sub"], env {"A": "1"}."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and (words[0] in ("exec", "env") or re.match(r"^[A-Z_][A-Z0-9_]*=", words[0])):
        word = words.pop(0)
        if "=" in word:
            name, _, value = word.partition("=")
            env[name] = value
    return Command("", words, env)


def procfile_commands() -> Iterator[Command]:
    for name, line in procfile().items():
        parsed = split_shell_command(line)
        yield Command(f"Procfile {name}", parsed.argv, parsed.env)


def compose_commands() -> Iterator[Command]:
    for name, service in compose_services().items():
        if "command" in service and "build" in service:
            env = {k: str(v) for k, v in (service.get("environment") or {}).items()}
            yield Command(f"compose {name}", list(service["command"]), env)


def configmap_data(name: str) -> dict[str, str]:
    data: dict[str, str] = k8s_named("ConfigMap")[name]["data"]
    return data


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        spec: dict[str, Any] = obj["spec"]["template"]["spec"]
        return spec
    return None


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """A container's variables: ConfigMaps it loads, then its own `env` (values from
    Secrets appear as "<secret>")."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env |= configmap_data(source["configMapRef"]["name"])
    for item in container.get("env", []):
        env[item["name"]] = str(item["value"]) if "value" in item else "<secret>"
    return env


def k8s_commands() -> Iterator[tuple[dict[str, Any], dict[str, Any], Command]]:
    """(object, container, command) for every container of every workload."""
    for obj in k8s_objects():
        spec = pod_spec(obj)
        if spec is None:
            continue
        for container in spec["containers"]:
            argv = [*container.get("command", []), *container.get("args", [])]
            where = f"k8s {obj['kind']} {obj['metadata']['name']}"
            yield obj, container, Command(where, argv, container_env(container))


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Each stage's (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: list[list[tuple[str, str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        assert stages, "Dockerfile: an instruction before FROM"
        stages[-1].append((instruction.upper(), rest.strip()))
    return stages


def dockerignored(path: str) -> bool:
    """Whether Dockerfile.dockerignore keeps `path` out of the build context
    (last matching pattern wins; `!` re-includes; a pattern matches a path or its parents)."""
    ignored = False
    for raw in DOCKERIGNORE.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        globbed = pattern.removeprefix("**/")
        if any(
            fnmatch.fnmatchcase(p, pattern)
            or (pattern.startswith("**/") and fnmatch.fnmatchcase(part, globbed))
            for p, part in zip(prefixes, parts, strict=True)
        ):
            ignored = not negate
    return ignored


def duration_seconds(text: str) -> float:
    """Compose durations: "45s", "1m30s", "2m"."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    assert "".join(n + u for n, u in parts) == text != "", f"not a duration: {text!r}"
    return sum(float(n) * units[u] for n, u in parts)
