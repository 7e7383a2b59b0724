"""What the engine's shells are handed: one record, built once by the service.

Where it sits: `EngineService` (services/engine/service.py, built by
`EngineService.from_settings`, the one composition root) builds one
`EngineDeps` with `EngineDeps.build` and hands it to each part that reads and
writes stacks: the stack operations (`operations.Operations`), the
convergence shell (`convergence.Convergence`, and through it the gates and the
nested-stack jobs, `nested.children.Children`), observation (`observation`)
and healing (`healing`). It holds the store and the outbox (how they read and
write), the goals cache (`definitions`), the plugin types, the limits and
quotas from the settings, the template pool, the custom constraints, the
one `nested.answer.Answers` that tells a parent job its child stack's outcome,
and where time and new ids come from (`core.sources`: the wall clock and
random UUIDs unless a test passes its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.engine.configs import DEFAULT_CONFIG_BYTES
from services.engine.core.quotas import DEFAULT_QUOTAS, Quotas
from services.engine.core.sources import RANDOM_IDS, WALL_CLOCK, Clock, Ids
from services.engine.definitions import DefinitionCache
from services.engine.deployments import DEFAULT_API_URL
from services.engine.nested.answer import Answers
from services.engine.outbox import Outbox
from services.engine.store import Store
from services.engine.template import DEFAULT_CONSTRAINTS, DEFAULT_LIMITS, CustomConstraints, TemplateLimits
from services.engine.template_pool import INLINE, TemplateRunner
from shared.plugins import ResourceType


@dataclass(frozen=True)
class EngineDeps:
    store: Store
    outbox: Outbox
    definitions: DefinitionCache  # goals by template id, parsed once
    types: Mapping[str, type[ResourceType]]
    limits: TemplateLimits
    quotas: Quotas
    templates: TemplateRunner  # the template pool (INLINE: the caller's thread)
    constraints: CustomConstraints  # what parameters' custom constraints may name
    config_bytes: int  # the largest config a config resource stores
    answers: Answers  # a child stack's operation answering its parent's job
    api_url: str  # the engine API's public base (deployment signal URLs, TEMP_URL_SIGNAL)
    clock: Clock  # seconds since the epoch: deadlines, pauses, looks (`core.sources`)
    ids: Ids  # new stacks', templates', traversals' and jobs' ids

    @classmethod
    def build(
        cls,
        *,
        store: Store,
        outbox: Outbox,
        types: Mapping[str, type[ResourceType]],
        limits: TemplateLimits = DEFAULT_LIMITS,
        quotas: Quotas = DEFAULT_QUOTAS,
        templates: TemplateRunner = INLINE,
        constraints: CustomConstraints = DEFAULT_CONSTRAINTS,
        config_bytes: int = DEFAULT_CONFIG_BYTES,
        api_url: str = DEFAULT_API_URL,
        clock: Clock = WALL_CLOCK,
        ids: Ids = RANDOM_IDS,
    ) -> EngineDeps:
        """The record, with the goals cache and the answers built from what it is given."""
        definitions = DefinitionCache(types=types, limits=limits, templates=templates)
        return cls(
            store=store,
            outbox=outbox,
            definitions=definitions,
            types=types,
            limits=limits,
            quotas=quotas,
            templates=templates,
            constraints=constraints,
            config_bytes=config_bytes,
            answers=Answers(definitions=definitions, types=types, templates=templates),
            api_url=api_url,
            clock=clock,
            ids=ids,
        )
