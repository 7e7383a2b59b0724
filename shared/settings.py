"""Typed service settings, read once from `CONVERGE_*` environment variables.

Only a service's `main` calls `load_settings`; everything below receives the
settings object (or the few values it needs) as an argument. A bad value
stops the service at start with one line naming the variable (exit code 2).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Literal, NoReturn, TypeVar
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "CONVERGE_"
EXIT_BAD_CONFIG = 2

Port = int  # documented as 1..65535 through Field constraints below

#: Name of the sandbox cloud in the endpoint catalog (`PluginRuntime.endpoints`).
SANDBOX_ENDPOINT = "sandbox"
SANDBOX_URL_VARIABLE = f"{ENV_PREFIX}SANDBOX_URL"


def _endpoint_url(value: object) -> str | None:
    """An optional http(s) base URL with a host; unset or empty = None; no trailing slash."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("must be an http:// or https:// URL")
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    return value.rstrip("/")


EndpointUrl = Annotated[str | None, BeforeValidator(_endpoint_url)]

#: Converge's default ports: API (8004), worker and observer health/admin (8005, 8006), sandbox (8007).
DEFAULT_PROTECTED_PORTS = "8004,8005,8006,8007"


def parse_ports(text: str) -> frozenset[int]:
    """ "8004, 8005" -> {8004, 8005}; ValueError naming the bad entry."""
    ports: set[int] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if not entry.isdigit() or not 0 < int(entry) < 65536:
            raise ValueError(f"{entry!r} is not a port (1-65535); give comma-separated port numbers")
        ports.add(int(entry))
    return frozenset(ports)


def _port_list(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be comma-separated port numbers")
    parse_ports(value)
    return value


PortList = Annotated[str, BeforeValidator(_port_list)]
ALLOWED_HOSTS_HELP = (
    "Hosts Converge::HTTP::Resource may call: host (any port but the protected ones), host:port, "
    "or host:port/path (only paths under that prefix). Empty = none."
)
PROTECTED_PORTS_HELP = (
    "Ports of Converge's own services (API, health, admin) that outbound HTTP refuses even on an "
    "allowed host unless CONVERGE_HTTP_ALLOWED_HOSTS names that host:port; the process's own ports "
    "are always added."
)


#: Deliveries of one failing message before it is dead-lettered: the default of
#: `CONVERGE_MAX_DELIVERIES`, and what the buses and the test harnesses use unless told.
MAX_DELIVERIES = 5
EventLoop = Literal["auto", "uvloop", "asyncio"]


def uvloop_available() -> bool:
    return importlib.util.find_spec("uvloop") is not None


class CommonSettings(BaseSettings):
    """Settings every service shares."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    amqp_url: str | None = Field(
        None,
        description="RabbitMQ URL (amqp://user:pass@host:port/vhost). Unset = in-process bus, "
        "only possible when every service runs in one process (`converge up`).",
    )
    queue_prefix: str = Field(
        "converge",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="Prefix of every queue and exchange name, so deployments and test runs "
        "can share one broker.",
    )
    max_deliveries: int = Field(
        MAX_DELIVERIES,
        ge=1,
        le=20,
        description="Deliveries of one failing message before it is dead-lettered (handler errors; "
        "a permanent error is dead-lettered on its first delivery).",
    )
    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="auto = console on a terminal, JSON lines otherwise."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    data_dir: Path = Field(
        Path("./data"),
        description="Where `converge up` keeps its embedded database and credentials.",
    )
    drain_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="On SIGTERM, how long in-flight work may take to finish (seconds).",
    )
    bus_bundle_max: int = Field(
        64,
        ge=1,
        le=1000,
        description="RabbitMQ only: most messages for one queue carried by one AMQP message (a "
        "bundle), when a publish sends several at once; the broker stores, confirms and "
        "delivers a bundle once. 1 = every message alone.",
    )
    connect_wait_seconds: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="At start-up, how long to keep trying to reach RabbitMQ and PostgreSQL "
        "before giving up (seconds).",
    )
    event_loop: EventLoop = Field(
        "auto",
        description="The asyncio event loop the process runs on: uvloop (faster sockets and "
        "timers), asyncio (the standard library's), or auto = uvloop where it is installed.",
    )

    @field_validator("event_loop")
    @classmethod
    def _loop_installed(cls, value: str) -> str:
        if value == "uvloop" and not uvloop_available():
            raise ValueError("uvloop is not installed here (pip install uvloop), or choose auto or asyncio")
        return value

    @field_validator("amqp_url")
    @classmethod
    def _amqp_scheme(cls, value: str | None) -> str | None:
        if not value:
            return None
        if value is not None and not value.startswith(("amqp://", "amqps://")):
            raise ValueError("must start with amqp:// or amqps://")
        return value or None


class EngineSettings(CommonSettings):
    """converge-engine: HTTP API, convergence logic, the only database writer."""

    database_url: str | None = Field(
        None,
        description="PostgreSQL URL. Unset = embedded PostgreSQL (pgserver) under data_dir.",
    )
    db_pool_size: int = Field(
        10, ge=2, le=200, description="asyncpg pool size per engine (one connection holds its lease)."
    )
    api_host: str = Field("127.0.0.1", description="Address the HTTP API binds to.")
    api_port: int = Field(8004, ge=1, le=65535, description="Port of the API, health and metrics.")
    public_api_url: str | None = Field(
        None,
        description="Base URL at which servers reach the engine API: the base of the signal URLs "
        "of TEMP_URL_SIGNAL software deployments. Unset = http://api_host:api_port (127.0.0.1 "
        "for a wildcard address); set it when engines are behind a proxy or load balancer.",
    )
    max_template_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=256 * 1024 * 1024,
        description="Largest template/environment/file accepted (bytes); same on every engine.",
    )
    max_resources_per_stack: int = Field(
        100_000, ge=1, le=1_000_000, description="Most resources one stack may hold; same on every engine."
    )
    max_stacks_per_project: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description="Most live stacks one project may hold, nested stacks included; same on every engine.",
    )
    max_resources_per_tree: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        description="Most resources a stack tree (a top-level stack and every stack nested under it) "
        "may hold in all; stops templates that fan out through nested stacks. Same on every engine.",
    )
    max_nested_depth: int = Field(
        5,
        ge=1,
        le=100,
        description="How deep stacks may nest (a top-level stack's children are depth 1); "
        "stops a template resource that contains itself. Same on every engine; Heat's default.",
    )
    max_document_depth: int = Field(
        100,
        ge=10,
        le=1000,
        description="How deeply maps and lists may nest in one template, environment or file "
        "(and in a request's JSON body); real templates rarely go past 15.",
    )
    max_yaml_nodes: int = Field(
        1_000_000,
        ge=1000,
        le=100_000_000,
        description="Scalars and collections one YAML document may hold once its aliases are "
        "counted as what they repeat; a 1 MiB document without aliases has fewer, so this only "
        "refuses alias bombs.",
    )
    max_yaml_aliases: int = Field(
        10_000,
        ge=0,
        le=1_000_000,
        description="Alias uses (*name) one YAML document may hold.",
    )
    max_evaluation_bytes: int = Field(
        16 * 1024 * 1024,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="Bytes of strings one request may produce while its templates are evaluated "
        "(function results, YAML alias repeats, group members, resolved values); checked while "
        "they are produced. Keeps a request under 1 MiB to a few tens of MiB of memory.",
    )
    max_evaluation_items: int = Field(
        200_000,
        ge=1000,
        le=100_000_000,
        description="List items and map entries one request may produce the same way (repeat, "
        "list_concat, map_merge, filter, group members, ...).",
    )
    max_yaql_expression_length: int = Field(
        65_536,
        ge=64,
        le=16 * 1024 * 1024,
        description="Characters of one yaql expression in a template (Heat has no limit but the "
        "template's size).",
    )
    yaql_limit_iterators: int = Field(
        200,
        ge=1,
        le=10_000_000,
        description="Most items a collection may have while a yaql expression is evaluated "
        "(Heat's [yaql] limit_iterators and its default).",
    )
    yaql_memory_quota: int = Field(
        10_000,
        ge=100,
        le=1024 * 1024 * 1024,
        description="Most bytes one intermediate result may take while a yaql expression is "
        "evaluated (Heat's [yaql] memory_quota and its default).",
    )
    template_workers: int = Field(
        2,
        ge=1,
        le=64,
        description="Processes that parse, validate and evaluate templates, off the event loop; "
        "requests beyond this many wait their turn.",
    )
    template_timeout_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Most seconds one request's template work may take; past it the worker is "
        "killed (and replaced) and the request answered 400. A 100,000-resource template takes ~10 s.",
    )
    template_worker_memory_bytes: int = Field(
        2 * 1024 * 1024 * 1024,
        ge=0,
        le=1024 * 1024 * 1024 * 1024,
        description="Address space of each template worker (RLIMIT_AS; 0 = no cap): a safety net "
        "behind the evaluation budget, so no template can take the machine's memory.",
    )
    api_tokens: str | None = Field(
        None,
        description="Comma-separated token=project_id[:admin] entries. Unset with `converge up` "
        "= a generated token for project demo.",
    )
    heal_retry_seconds: float = Field(
        10.0,
        ge=0.1,
        le=86_400,
        description="After a heal (of an observed stack with heal on) fails, seconds before it is "
        "retried; the pause doubles with each further failure. Long enough not to hammer a cloud "
        "that refuses, short enough that a passing refusal is soon healed.",
    )
    heal_retry_max_seconds: float = Field(
        600.0,
        ge=0.1,
        le=86_400,
        description="The longest pause between retries of a heal that keeps failing (seconds).",
    )
    max_signal_bytes: int = Field(
        64 * 1024,
        ge=1024,
        le=2 * 1024 * 1024,
        description="Largest resource-signal body (bytes); more is 413. A handle keeps every signal "
        "it accepted, so this times max_signals_per_handle bounds what one handle holds.",
    )
    max_software_config_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=16 * 1024 * 1024,
        description="Largest software config (bytes of its config text, or of a structured config as "
        "JSON) that POST /software_configs or a config resource stores; more is refused.",
    )
    max_signals_per_handle: int = Field(
        100, ge=1, le=10_000, description="Signals one wait-condition handle accepts; more is 400."
    )
    max_signal_reason_chars: int = Field(
        255,
        ge=16,
        le=10_000,
        description="A signal's reason is cut to this many characters before it is stored and shown "
        "(events, the live stream); Heat's events keep 255.",
    )
    max_streams_per_token: int = Field(
        10,
        ge=1,
        le=10_000,
        description="Live event streams (GET .../stream) one token may hold open at once on one "
        "engine; more is 429.",
    )
    max_events_per_stack: int = Field(
        1000,
        ge=0,
        le=10_000_000,
        description="Events each stack keeps; older ones are purged every event_purge_seconds (0 = keep "
        "all). Heat's max_events_per_stack; observation adds events every round, so a watched "
        "stack would otherwise grow without bound.",
    )
    max_snapshots_per_stack: int = Field(
        32,
        ge=0,
        le=10_000,
        description="Snapshots one stack may keep (a snapshot holds the stack's template, "
        "environment, files and resources). Heat's max_snapshots_per_stack.",
    )
    stall_seconds: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description="A stack in progress with no progress (no event, no change) for this long, or "
        "a job in flight heard nothing of for this long, is reported and its work in flight sent "
        "again (seconds). Long enough that a slow action is not asked twice for nothing; a "
        "duplicate is harmless, only wasted.",
    )
    deployment_wait_seconds: float = Field(
        3600.0,
        gt=0,
        le=7 * 86_400,
        description="How long a software deployment waits for its server's signal before it fails "
        "(seconds; checked by the stall sweep, so up to stall_seconds later). An hour, Heat's "
        "default stack timeout, within which a deployment normally ends.",
    )
    stall_check_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="How often each engine looks for stacks nothing has moved for stall_seconds "
        "(seconds); also done once at start-up.",
    )
    # Engine tuning: how often an engine's background loops run, how long it keeps or waits
    # for things, and how it rides out races (services/engine/settings_map.py:EngineTuning). The
    # defaults suit any size of deployment; engines of one deployment may differ.
    engine_prefetch: int = Field(
        128,
        ge=1,
        le=10_000,
        description="Engine-queue messages (node checks, job results, observations) one engine "
        "takes from the queue at once: being handled, or waiting for a batch "
        "(engine_batch_size); what one engine holds no other engine takes.",
    )
    engine_batch_size: int = Field(
        64,
        ge=1,
        le=1_000,
        description="Most node checks and job results one engine handles in one transaction "
        "(services/engine/batching.py); 1 handles each alone.",
    )
    engine_batch_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description="Batches one engine handles at once (each holds a database connection).",
    )
    engine_batch_fill: int = Field(
        16,
        ge=1,
        le=1_000,
        description="While one of an engine's batches is in flight, messages its idle batch runner "
        "waits for before it starts another, for at most engine_batch_linger_seconds (if the "
        "batch in flight ends first, its own runner takes them); 1 starts at once.",
    )
    engine_batch_linger_seconds: float = Field(
        0.025,
        ge=0,
        le=1,
        description="Longest an idle batch runner waits for engine_batch_fill messages while "
        "another batch is in flight (seconds).",
    )
    engine_batch_follow_on: int = Field(
        256,
        ge=0,
        le=10_000,
        description="Most of the node checks a batch triggers that its engine handles in the "
        "batch's own transaction instead of sending them through the queue "
        "(services/engine/convergence/follow_on.py); 0 sends them all.",
    )
    engine_heartbeat_seconds: float = Field(
        2.0,
        gt=0,
        le=60,
        description="How often an engine records its heartbeat and checks that it still holds its "
        "lease (seconds). A dead engine's outbox rows are relayed as soon as its database session "
        "is gone, whatever this is.",
    )
    engine_lease_wait_seconds: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="At start-up, how long an engine waits to hold its lease before it goes on "
        "without (seconds); outbox rows it writes unleased are relayed by other engines too, "
        "which only duplicates (harmless) messages.",
    )
    engine_store_retries: int = Field(
        5,
        ge=0,
        le=100,
        description="Times one engine message is handled again after the database failed under "
        "it (each time once the database answers again) before it counts as a failed delivery; "
        "waiting for a database that is down spends nothing.",
    )
    outbox_stale_seconds: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="An outbox row (a message committed but not yet published) older than this "
        "is published by its own engine's relay, unless that engine is publishing it now "
        "(seconds): its publish failed. A row of no engine is published by any relay at this "
        "age, a live engine's by another engine's relay at 12 times it (the row of a dead "
        "engine at once). Shorter sends such messages sooner.",
    )
    outbox_relay_seconds: float = Field(
        1.0,
        gt=0,
        le=60,
        description="How often each engine's relay looks for outbox rows to publish (seconds); "
        "bounds how late a dead engine's messages leave.",
    )
    conflict_attempts: int = Field(
        10,
        ge=1,
        le=1000,
        description="Runs of one engine message that keeps losing a race with another handler (a "
        "compare-and-swap, a serialization failure, a deadlock) before the conflict counts as a "
        "failed delivery; each run reads the rows again and decides again.",
    )
    conflict_pause_seconds: float = Field(
        0.01,
        ge=0,
        le=60,
        description="Pause before the first run again after a conflict (seconds); it doubles with "
        "each further conflict and is jittered, so handlers that collided do not collide again.",
    )
    conflict_max_pause_seconds: float = Field(
        1.0,
        ge=0,
        le=600,
        description="The longest pause between runs after conflicts (seconds); at least "
        "conflict_pause_seconds.",
    )
    timeout_scan_seconds: float = Field(
        1.0,
        gt=0,
        le=60,
        description="How often each engine ends stacks past their timeout and the batch pauses of "
        "rolling updates that are due (seconds): either is noticed at most this late.",
    )
    observation_scan_seconds: float = Field(
        0.25,
        gt=0,
        le=60,
        description="How often each engine closes the observation rounds that are over (healing "
        "what they found) and starts those that are due (seconds); a stack's observation interval "
        "(at least 1 s) is kept to within this.",
    )
    event_purge_seconds: float = Field(
        5.0,
        gt=0,
        le=3600,
        description="How often each engine purges the oldest events of stacks past "
        "max_events_per_stack (seconds).",
    )
    prune_seconds: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="How often each engine drops superseded traversal graphs and the ids of "
        "messages handled long ago (seconds).",
    )
    inbox_keep_seconds: float = Field(
        86_400.0,
        ge=60,
        le=30 * 86_400,
        description="How long the id of a handled engine message is kept, so that a copy of it is "
        "recognised and dropped (seconds). A copy older than this is handled again, which handlers "
        "survive (they are idempotent); a day outlasts any redelivery or relay.",
    )
    traversal_keep_seconds: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="How long a superseded traversal's graph is kept after it started (seconds): "
        "checks of it still committing then stop quietly instead of finding no rows.",
    )
    # Keystone mode (services/engine/api/keystone.py): set keystone_url to validate Keystone
    # tokens. The credentials are Converge's own service user's, as a Heat service user's.
    keystone_username: str | None = Field(
        None, description="Converge's service user in Keystone (with the `service` role), by name."
    )
    keystone_password: SecretStr | None = Field(None, description="The service user's password.")
    keystone_project_name: str = Field(
        "service", min_length=1, description="The project the service user's token is scoped to."
    )
    keystone_user_domain_name: str = Field("Default", min_length=1, description="The service user's domain.")
    keystone_project_domain_name: str = Field(
        "Default", min_length=1, description="The service project's domain."
    )
    keystone_application_credential_id: str | None = Field(
        None, description="Instead of a user and password: an application credential's id."
    )
    keystone_application_credential_secret: SecretStr | None = Field(
        None, description="The application credential's secret."
    )
    keystone_cache_seconds: float = Field(
        300.0,
        ge=0,
        le=3600,
        description="How long a validated token is believed without asking Keystone again "
        "(seconds; never past the token's expiry; 0 = ask every time). A revoked token keeps "
        "working at most this long; keystonemiddleware's default.",
    )
    keystone_cache_size: int = Field(
        10_000, ge=1, le=1_000_000, description="Most validated tokens remembered (least recent go first)."
    )
    keystone_timeout_seconds: float = Field(
        10.0, gt=0, le=300, description="How long one call to Keystone may take (seconds)."
    )
    keystone_url: EndpointUrl = Field(
        None,
        description="Keystone's Identity API, e.g. http://keystone:5000/v3 (`/v3` is added when "
        "missing). Set = Keystone mode: tokens from Keystone are accepted, besides api_tokens. "
        "Declared after the credentials, which its check reads.",
    )

    @field_validator("keystone_url")
    @classmethod
    def _keystone_credentials(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Keystone mode needs service credentials: a user and password, or an application credential."""
        if value is None:
            return None
        given = {name for name, v in info.data.items() if name.startswith("keystone_") and v}
        if {"keystone_username", "keystone_password"} <= given or {
            "keystone_application_credential_id",
            "keystone_application_credential_secret",
        } <= given:
            return value
        raise ValueError(
            f"needs {ENV_PREFIX}KEYSTONE_USERNAME and {ENV_PREFIX}KEYSTONE_PASSWORD (or "
            f"{ENV_PREFIX}KEYSTONE_APPLICATION_CREDENTIAL_ID and _SECRET): the service credentials "
            "Converge validates tokens with"
        )

    @field_validator("conflict_max_pause_seconds")
    @classmethod
    def _pauses_in_order(cls, value: float, info: ValidationInfo) -> float:
        first = info.data.get("conflict_pause_seconds")
        if first is not None and value < first:
            raise ValueError(
                f"must be at least {ENV_PREFIX}CONFLICT_PAUSE_SECONDS ({first}): the pauses grow up to it"
            )
        return value

    @field_validator("database_url")
    @classmethod
    def _database_scheme(cls, value: str | None) -> str | None:
        if not value:
            return None
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql://")
        return value or None


class WorkerSettings(CommonSettings):
    """converge-worker: runs resource actions from the jobs queue."""

    health_host: str = Field("127.0.0.1", description="Address of /healthz, /readyz, /metrics.")
    health_port: int = Field(8005, ge=1, le=65535, description="Port of /healthz, /readyz, /metrics.")
    worker_concurrency: int = Field(32, ge=1, le=10_000, description="Jobs run at once.")
    public_api_url: str = Field(
        "http://127.0.0.1:8004",
        description="Base URL at which resources reach the engine API (wait-condition signal URLs).",
    )
    http_allowed_hosts: str = Field("", description=ALLOWED_HOSTS_HELP)
    http_protected_ports: PortList = Field(DEFAULT_PROTECTED_PORTS, description=PROTECTED_PORTS_HELP)
    sandbox_url: EndpointUrl = Field(
        None,
        description="Base URL of the sandbox cloud (converge-sandbox) the Sandbox::* types call, "
        "e.g. http://127.0.0.1:8007; its host:port is allowed for outbound HTTP. Unset = none.",
    )


class ObserverSettings(CommonSettings):
    """converge-observer: watches real resources and reports to the engine."""

    health_host: str = Field("127.0.0.1", description="Address of /healthz, /readyz, /metrics.")
    health_port: int = Field(8006, ge=1, le=65535, description="Port of /healthz, /readyz, /metrics.")
    http_allowed_hosts: str = Field("", description=ALLOWED_HOSTS_HELP)
    http_protected_ports: PortList = Field(DEFAULT_PROTECTED_PORTS, description=PROTECTED_PORTS_HELP)
    observer_concurrency: int = Field(
        256, ge=1, le=100_000, description="Resources watched at once (polling is cheap)."
    )
    sandbox_url: EndpointUrl = Field(
        None,
        description="Base URL of the sandbox cloud (converge-sandbox) the Sandbox::* types call, "
        "e.g. http://127.0.0.1:8007; its host:port is allowed for outbound HTTP. Unset = none.",
    )


class SandboxBehaviour(CommonSettings):
    """How the sandbox cloud behaves; shared by `converge-sandbox` and `converge up`."""

    sandbox_latency: float = Field(
        0.5,
        ge=0,
        le=3600,
        description="Seconds a resource stays in BUILD after a create (or a rebuilding update) "
        "before it turns ACTIVE; half a second makes the asynchrony visible without slowing demos.",
    )
    sandbox_failure_rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Chance (0..1) that a build ends in ERROR instead of ACTIVE. 0 = never.",
    )
    sandbox_seed: int | None = Field(
        None, description="Seed of the sandbox's ids and failures, so a run can be replayed. Unset = random."
    )
    sandbox_alarm_hosts: str = Field(
        "127.0.0.1,localhost",
        description="Hosts the sandbox's alarms may POST to (host, host:port or host:port/path, "
        "comma separated), e.g. Converge's API for scaling policies' signal URLs. Default: this "
        "machine only; nothing else is reached.",
    )
    sandbox_state: Path | None = Field(
        None,
        description="SQLite file where the sandbox keeps its state (resources, builds, idempotency "
        "keys), so a restarted sandbox is the same cloud. Unset = in memory for converge-sandbox, "
        "<data_dir>/sandbox.sqlite3 for converge up.",
    )
    sandbox_agent_poll_seconds: float = Field(
        1.0,
        gt=0,
        le=3600,
        description="Seconds between two polls of a sandbox server's agent for its software "
        "deployments (as os-collect-config's polling interval); one second keeps demos lively.",
    )

    @field_validator("sandbox_state", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if value == "" else value


class SandboxSettings(SandboxBehaviour):
    """converge-sandbox: a small simulated cloud (API, health and metrics on one port)."""

    sandbox_host: str = Field("127.0.0.1", description="Address the sandbox's HTTP API binds to.")
    sandbox_port: int = Field(8007, ge=1, le=65535, description="Port of the API, health and metrics.")


class UpSettings(EngineSettings, SandboxBehaviour):
    """`converge up`: every service in one process, on embedded defaults."""

    worker_concurrency: int = Field(32, ge=1, le=10_000, description="Jobs run at once.")
    observer_concurrency: int = Field(
        256, ge=1, le=100_000, description="Resources watched at once (polling is cheap)."
    )
    http_allowed_hosts: str = Field(
        "",
        description=ALLOWED_HOSTS_HELP + " The sandbox (in-process under {API}/sandbox, or "
        "CONVERGE_SANDBOX_URL) is always allowed; nothing else on this machine is by default.",
    )
    http_protected_ports: PortList = Field(DEFAULT_PROTECTED_PORTS, description=PROTECTED_PORTS_HELP)
    sandbox_url: EndpointUrl = Field(
        None,
        description="Base URL of an external sandbox cloud for the Sandbox::* types. Unset = the "
        "in-process sandbox served under {API}/sandbox.",
    )


S = TypeVar("S", bound=CommonSettings)


def plugin_endpoints(*, sandbox_url: str | None) -> dict[str, str]:
    """The endpoint catalog plugins receive (`ActionContext.endpoints`): name -> base URL."""
    return {SANDBOX_ENDPOINT: sandbox_url} if sandbox_url else {}


def allow_endpoints(allowed_hosts: str, endpoints: Mapping[str, str]) -> str:
    """`allowed_hosts` (CONVERGE_HTTP_ALLOWED_HOSTS syntax) plus each endpoint's
    host:port and path (`converge up`'s sandbox lives under the API's port at
    /sandbox: only that prefix is allowed), so configuring an endpoint is enough
    for plugins to reach it."""
    entries = [entry for entry in allowed_hosts.split(",") if entry.strip()]
    for url in endpoints.values():
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        entries.append(address + parts.path.rstrip("/"))
    return ",".join(entries)


def own_ports(protected: str, *, ports: Iterable[int] = (), urls: Iterable[str] = ()) -> frozenset[int]:
    """The ports outbound HTTP protects: CONVERGE_HTTP_PROTECTED_PORTS, the process's own
    `ports`, and the port of each of `urls` (e.g. the engine API the worker signals)."""
    found = set(parse_ports(protected)) | set(ports)
    for url in urls:
        if url:
            parts = urlsplit(url)
            found.add(parts.port or (443 if parts.scheme == "https" else 80))
    return frozenset(found)


def describe_error(error: ValidationError, settings_class: type[CommonSettings]) -> str:
    """One line naming the first bad variable, its value and what is wrong."""
    first = error.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else "?"
    variable = f"{ENV_PREFIX}{field.upper()}"
    value = first.get("input")
    shown = f"={value!r}" if isinstance(value, str | int | float) else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    more = len(error.errors()) - 1
    tail = f" (and {more} more)" if more else ""
    return f"invalid configuration: {variable}{shown}: {message}{tail}"


def load_settings(settings_class: type[S], *, program: str) -> S:
    """Read settings from the environment or exit(2) with one clear line."""
    try:
        return settings_class()
    except ValidationError as exc:
        _die(f"{program}: {describe_error(exc, settings_class)}")


def _die(line: str) -> NoReturn:
    print(line, file=sys.stderr)
    raise SystemExit(EXIT_BAD_CONFIG)


def require_amqp(settings: CommonSettings, *, program: str) -> str:
    """The AMQP URL a separately run service needs, or exit(2) saying so."""
    if settings.amqp_url is None:
        _die(
            f"{program}: invalid configuration: {ENV_PREFIX}AMQP_URL is required when services "
            "run as separate processes (use `converge up` for the all-in-one mode)"
        )
    return settings.amqp_url
