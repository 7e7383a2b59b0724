"""Hidden parameters, masked wherever the API shows something: one function, `Secrets.mask`.

Where it sits: every API view showing a value that may have come from a
`hidden: true` parameter runs it through its stack's `Secrets` first: stack
show and list (status reasons; parameters are masked by name), the stored
environment (`parameters`, `parameter_defaults`), resources (properties,
attributes, status reasons), events (reasons, also those the live stream
pushes), the graph (status reasons) and the observation (drift differences
and reasons). The dashboard reads all of these through the same API.
Not masked: outputs (the template author chose to publish them, as in Heat)
and abandon data (the stack's own project's, carrying the parameters as
Heat's does). Converge never logs parameter or property values.

`Secrets` is pure. A stack's secrets are the hidden parameters' values of its
current and previous templates and of its ancestors' (a parent may pass a
hidden value to a child's ordinary parameter): every value given for one
(request, environment `parameters`, `parameter_defaults`, template default),
so an update's old value stays masked while rows still hold it. `SecretsCache`
reads only what that needs (the declared parameters and the values given,
never a whole template) once per template id; templates never change.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.engine.store.queries import Queries, StackView

HIDDEN = "******"
#: A secret shorter than this is masked where it is the whole value, not inside longer
#: text (a hidden "1" would otherwise mask every digit of every reason).
MIN_EMBEDDED = 4
_TRUE = frozenset({"t", "true", "on", "y", "yes", "1"})


@dataclass(frozen=True)
class Secrets:
    names: frozenset[str] = frozenset()  # hidden parameter names
    values: tuple[str, ...] = ()  # their values as text, longest first

    @classmethod
    def of(
        cls,
        declared: Any,
        *,
        given: Any = None,
        env_parameters: Any = None,
        env_defaults: Any = None,
    ) -> Secrets:
        """The secrets of one template: `declared` is its `parameters` section, the rest
        the values given for them (any of them may be malformed: stored input is shown,
        never trusted)."""
        if not isinstance(declared, Mapping):
            return cls()
        names: set[str] = set()
        texts: set[str] = set()
        for name, schema in declared.items():
            if not isinstance(schema, Mapping) or not _truthy(schema.get("hidden")):
                continue
            names.add(str(name))
            split = schema.get("type") == "comma_delimited_list"
            for source in (given, env_parameters, env_defaults, {name: schema.get("default")}):
                if isinstance(source, Mapping) and name in source:
                    texts.update(_texts(source[name], split=split))
        return cls(frozenset(names), _ordered(texts))

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self.names | other.names, _ordered({*self.values, *other.values}))

    def parameters(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Parameter values by name, hidden ones shown as HIDDEN."""
        return {k: (HIDDEN if k in self.names else v) for k, v in values.items()}

    def mask(self, value: Any) -> Any:
        """`value` (text, number, or JSON structure) with every secret in it masked: a string
        equal to a secret becomes HIDDEN, one containing a secret has it replaced."""
        if not self.values:
            return value
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, Mapping):
            return {k: self.mask(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.mask(v) for v in value]
        if isinstance(value, int | float) and not isinstance(value, bool) and str(value) in self.values:
            return HIDDEN
        return value

    def _text(self, text: str) -> str:
        if text in self.values:
            return HIDDEN
        for secret in self.values:  # longest first: a secret inside another is masked with it
            if len(secret) >= MIN_EMBEDDED and secret in text:
                text = text.replace(secret, HIDDEN)
        return text


NO_SECRETS = Secrets()


def _truthy(flag: Any) -> bool:
    return flag is True or (isinstance(flag, str) and flag.strip().lower() in _TRUE)


def _texts(value: Any, *, split: bool) -> Iterator[str]:
    """Every text a hidden value may show up as: itself, a list's items, a map's leaves,
    the items of a comma-delimited list given as text, the leaves of JSON given as text."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        if value:
            yield value
        if split and "," in value:
            yield from (item.strip() for item in value.split(",") if item.strip())
        elif value[:1] in ("{", "["):
            try:
                parsed = json.loads(value)
            except ValueError:
                return
            yield from _texts(parsed, split=False)
        return
    if isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item, split=False)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item, split=False)


def _ordered(texts: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(texts), key=lambda t: (-len(t), t)))


class SecretsCache:
    """`Secrets` of stacks, built once per template id (an LRU of `size` templates)."""

    def __init__(self, queries: Queries, *, size: int = 8192) -> None:  # entries are a few strings
        self._queries = queries
        self._size = size
        self._cache: OrderedDict[uuid.UUID, Secrets] = OrderedDict()

    async def for_stack(self, stack_id: uuid.UUID) -> Secrets:
        """The secrets of one stack: its templates' and its ancestors'."""
        return (await self.for_stacks([stack_id])).get(stack_id, NO_SECRETS)

    async def for_view(self, stack: StackView) -> Secrets:
        """The secrets of `stack` as just read: a stack nested in no other has no ancestor,
        so its view names every template they come from (no statement while those are
        cached); a nested one's are `for_stack`'s."""
        if stack.owner_stack_id is not None:
            return await self.for_stack(stack.stack_id)
        ids = {t for t in (stack.current_template_id, stack.previous_template_id) if t is not None}
        secrets = NO_SECRETS
        for found in (await self._for_templates(ids)).values():
            secrets = secrets | found
        return secrets

    async def for_stacks(self, stack_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Secrets]:
        """The secrets of each stack (two small statements, whatever the count)."""
        if not stack_ids:
            return {}
        templates = await self._queries.secret_templates(stack_ids)
        known = await self._for_templates({t for ids in templates.values() for t in ids})
        found: dict[uuid.UUID, Secrets] = {}
        for stack_id in stack_ids:
            secrets = NO_SECRETS
            for template_id in templates.get(stack_id, ()):
                secrets = secrets | known.get(template_id, NO_SECRETS)
            found[stack_id] = secrets
        return found

    async def _for_templates(self, template_ids: set[uuid.UUID]) -> dict[uuid.UUID, Secrets]:
        found = {t: self._cache[t] for t in template_ids if t in self._cache}
        for template_id in found:
            self._cache.move_to_end(template_id)
        missing = template_ids - found.keys()
        if missing:
            for r in await self._queries.secret_inputs(sorted(missing)):
                secrets = Secrets.of(
                    r["declared"],
                    given=r["given"],
                    env_parameters=r["env_parameters"],
                    env_defaults=r["env_defaults"],
                )
                found[r["template_id"]] = secrets
                self._cache[r["template_id"]] = secrets
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return found
