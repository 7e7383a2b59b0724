"""What the engine's settings become: the records `EngineService` is built from.

Where it sits: every host of the engine (`converge-engine`, `converge up`,
the test harnesses, the bench through those two) builds it with
`EngineService.from_settings(settings, ...)`, which reads `EngineSettings`
(shared/settings.py, read once in each `main`) through the functions here,
once. Below this point nothing sees the settings object: each part receives
the record it needs (`TemplateLimits`, `Quotas`, `ApiLimits`, `HealPolicy`,
`EngineTuning`). The defaults, units and reasons of every value are the
settings' own; this module only maps them. Pure, apart from `template_pool`,
which makes (and leaves unstarted) the pool the caller runs and closes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from services.engine.api.deps import ApiLimits
from services.engine.batching import BatchPolicy
from services.engine.conflicts import ConflictPolicy
from services.engine.core.healing import HealPolicy
from services.engine.core.quotas import Quotas
from services.engine.template import DEFAULT_CONSTRAINTS, DEFAULT_LIMITS, CustomConstraints, TemplateLimits
from services.engine.template_pool import TemplatePool
from shared.plugins import ResourceType
from shared.settings import EngineSettings


@dataclass(frozen=True)
class EngineTuning:
    """How an engine paces its background loops, what it keeps and how long it waits:
    each field is the `EngineSettings` field of the same meaning (all times in seconds).
    No defaults here: they are the settings', so the two cannot drift apart."""

    prefetch: int  # engine_prefetch
    batches: BatchPolicy  # engine_batch_size, _concurrency, _follow_on, _fill, _linger_seconds
    heartbeat_seconds: float  # engine_heartbeat_seconds (the lease check too)
    lease_wait_seconds: float  # engine_lease_wait_seconds
    store_retries: int  # engine_store_retries
    conflicts: ConflictPolicy  # conflict_attempts, conflict_pause_seconds, conflict_max_pause_seconds
    outbox_stale_seconds: float
    relay_seconds: float  # outbox_relay_seconds
    stall_seconds: float
    stall_check_seconds: float
    deployment_wait_seconds: float
    timeout_scan_seconds: float
    observation_scan_seconds: float
    event_purge_seconds: float
    prune_seconds: float
    inbox_keep_seconds: float
    traversal_keep_seconds: float


def engine_tuning(settings: EngineSettings) -> EngineTuning:
    """The engine's pacing, as this deployment set it."""
    return EngineTuning(
        prefetch=settings.engine_prefetch,
        batches=BatchPolicy(
            size=settings.engine_batch_size,
            concurrency=settings.engine_batch_concurrency,
            follow_on=settings.engine_batch_follow_on,
            fill=settings.engine_batch_fill,
            linger=settings.engine_batch_linger_seconds,
        ),
        heartbeat_seconds=settings.engine_heartbeat_seconds,
        lease_wait_seconds=settings.engine_lease_wait_seconds,
        store_retries=settings.engine_store_retries,
        conflicts=ConflictPolicy(
            attempts=settings.conflict_attempts,
            first=settings.conflict_pause_seconds,
            cap=settings.conflict_max_pause_seconds,
        ),
        outbox_stale_seconds=settings.outbox_stale_seconds,
        relay_seconds=settings.outbox_relay_seconds,
        stall_seconds=settings.stall_seconds,
        stall_check_seconds=settings.stall_check_seconds,
        deployment_wait_seconds=settings.deployment_wait_seconds,
        timeout_scan_seconds=settings.timeout_scan_seconds,
        observation_scan_seconds=settings.observation_scan_seconds,
        event_purge_seconds=settings.event_purge_seconds,
        prune_seconds=settings.prune_seconds,
        inbox_keep_seconds=settings.inbox_keep_seconds,
        traversal_keep_seconds=settings.traversal_keep_seconds,
    )


def public_url(settings: EngineSettings) -> str:
    """The base URL at which servers reach this engine's API (public_api_url, else the
    address the API binds to; a wildcard bind is reached on 127.0.0.1)."""
    if settings.public_api_url:
        return settings.public_api_url.rstrip("/")
    host = "127.0.0.1" if settings.api_host in ("0.0.0.0", "::", "") else settings.api_host
    return f"http://{host}:{settings.api_port}"


def quotas(settings: EngineSettings) -> Quotas:
    """Per-project and per-tree quotas (each project gets the same; every engine must use the same)."""
    return Quotas(
        stacks_per_project=settings.max_stacks_per_project,
        resources_per_tree=settings.max_resources_per_tree,
    )


def heal_policy(settings: EngineSettings) -> HealPolicy:
    """How long healing waits before retrying a heal that failed."""
    return HealPolicy(first=settings.heal_retry_seconds, cap=settings.heal_retry_max_seconds)


def api_limits(settings: EngineSettings) -> ApiLimits:
    """What one API request may cost (signals, live streams)."""
    return ApiLimits(
        signal_bytes=settings.max_signal_bytes,
        signals_per_handle=settings.max_signals_per_handle,
        signal_reason_chars=settings.max_signal_reason_chars,
        streams_per_token=settings.max_streams_per_token,
        snapshots_per_stack=settings.max_snapshots_per_stack,
        events_per_stack=settings.max_events_per_stack,
        config_bytes=settings.max_software_config_bytes,
    )


def template_limits(settings: EngineSettings) -> TemplateLimits:
    """The deployment's template limits (every engine must use the same)."""
    return dataclasses.replace(
        DEFAULT_LIMITS,
        max_template_bytes=settings.max_template_bytes,
        max_resources=settings.max_resources_per_stack,
        max_nested_depth=settings.max_nested_depth,
        max_depth=settings.max_document_depth,
        max_yaml_nodes=settings.max_yaml_nodes,
        max_yaml_aliases=settings.max_yaml_aliases,
        max_evaluation_bytes=settings.max_evaluation_bytes,
        max_evaluation_items=settings.max_evaluation_items,
        max_yaql_expression_length=settings.max_yaql_expression_length,
        yaql_limit_iterators=settings.yaql_limit_iterators,
        yaql_memory_quota=settings.yaql_memory_quota,
    )


def template_pool(
    settings: EngineSettings,
    types: Mapping[str, type[ResourceType]],
    constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
) -> TemplatePool:
    """The process pool where this engine's template work runs (start it, and close it when done)."""
    modules = {cls.__module__ for cls in types.values()}
    modules |= {getattr(v, "__module__", None) or "" for v in constraints.validators.values()} - {""}
    return TemplatePool(
        workers=settings.template_workers,
        timeout_seconds=settings.template_timeout_seconds,
        memory_bytes=settings.template_worker_memory_bytes,
        preload=sorted(modules),
    )
