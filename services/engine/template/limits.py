"""Size limits for templates: passed in by the caller, never read globally.

The API builds one `TemplateLimits` from its settings at start-up and passes it
to every parse; tests pass small limits to exercise the refusals. `Budget` is
the per-request allowance of evaluation output that the limits' evaluation
fields describe: one is made for each request (a stack load, a validation, a
resolution at check time) and charged while values are produced, so a small
request cannot make the engine build something huge before it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.template.errors import BudgetExceeded


@dataclass(frozen=True)
class TemplateLimits:
    """Limits on what a template (or environment, or nested file) may hold.

    - `max_template_bytes`: size of one document as submitted (UTF-8 bytes),
      and as expanded (YAML aliases counted as the size of what they repeat;
      a map given directly is measured while it is walked). Default 1 MiB, as
      Heat's `max_template_size`.
    - `max_resources`: resources in one stack; also the most members a
      ResourceGroup may ask for. Default 100,000: the engine is built for very
      large stacks; operators lower it per deployment.
    - `max_depth`: nesting depth of maps/lists in one document. Default 100;
      real templates rarely exceed 15.
    - `max_yaml_nodes`: scalars + collections after YAML alias expansion.
      Default 1,000,000; a 1 MiB document without aliases has fewer, so
      this only refuses alias bombs ("billion laughs").
    - `max_yaml_aliases`: alias (`*name`) uses in one document. Default 10,000.
    - `max_nested_depth`: how deep stacks may nest (a top-level stack is depth 0,
      its nested stacks depth 1, ...). Default 5, as Heat's `max_nested_stack_depth`;
      it stops a template resource that (directly or not) contains itself.
    - `max_evaluation_bytes`: characters of strings one request may produce
      while it is evaluated: function results (str_replace, list_join, repeat,
      str_split, ...), YAML alias repeats, ResourceGroup members, resolved
      values copied for storage. Searching text (str_replace) counts one byte
      per `SEARCH_COST` characters searched. Default 16 MiB.
    - `max_evaluation_items`: list items and map entries one request may
      produce the same way (repeat's product, list_concat, map_merge, filter,
      group members, ...). Default 200,000. With the bytes this keeps a request
      under 1 MiB to a few tens of MiB of memory; real templates need far less.
    - `max_yaql_expression_length`: characters of one `yaql` expression.
      Default 65,536 (Heat has no limit but the template's size); TripleO's
      longest are a few thousand.
    - `yaql_limit_iterators`, `yaql_memory_quota`: yaql's own limits, the most
      items a collection may have and the most bytes one intermediate result may
      take while an expression is evaluated. Defaults 200 and 10,000, Heat's
      `[yaql] limit_iterators` and `memory_quota`.
    """

    max_template_bytes: int = 1024 * 1024
    max_resources: int = 100_000
    max_depth: int = 100
    max_yaml_nodes: int = 1_000_000
    max_yaml_aliases: int = 10_000
    max_nested_depth: int = 5
    max_evaluation_bytes: int = 16 * 1024 * 1024
    max_evaluation_items: int = 200_000
    max_yaql_expression_length: int = 65_536
    yaql_limit_iterators: int = 200
    yaql_memory_quota: int = 10_000


DEFAULT_LIMITS = TemplateLimits()

#: The environment variable that sets each limit, named in refusals so an
#: operator knows what to raise (shared.settings.EngineSettings reads them).
SETTINGS = {
    "max_template_bytes": "CONVERGE_MAX_TEMPLATE_BYTES",
    "max_resources": "CONVERGE_MAX_RESOURCES_PER_STACK",
    "max_nested_depth": "CONVERGE_MAX_NESTED_DEPTH",
    "max_depth": "CONVERGE_MAX_DOCUMENT_DEPTH",
    "max_yaml_nodes": "CONVERGE_MAX_YAML_NODES",
    "max_yaml_aliases": "CONVERGE_MAX_YAML_ALIASES",
    "max_evaluation_bytes": "CONVERGE_MAX_EVALUATION_BYTES",
    "max_evaluation_items": "CONVERGE_MAX_EVALUATION_ITEMS",
    "max_yaql_expression_length": "CONVERGE_MAX_YAQL_EXPRESSION_LENGTH",
    "yaql_limit_iterators": "CONVERGE_YAQL_LIMIT_ITERATORS",
    "yaql_memory_quota": "CONVERGE_YAQL_MEMORY_QUOTA",
}

#: Searching this many characters costs one byte of the evaluation budget.
SEARCH_COST = 16


class Budget:
    """What one request may still produce; `charge` before (or as) it is produced.

    Not thread-safe; one per request. Raises `BudgetExceeded` (an
    `InvalidInput` without a path: the caller that knows the function and the
    template path adds them) once either allowance would go below zero.
    """

    __slots__ = ("_bytes", "_items", "limits")

    def __init__(self, limits: TemplateLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._bytes = limits.max_evaluation_bytes
        self._items = limits.max_evaluation_items

    @property
    def bytes_left(self) -> int:
        return self._bytes

    @property
    def items_left(self) -> int:
        return self._items

    def charge(self, *, items: int = 0, chars: int = 0) -> None:
        """Take `items` and `chars` from the allowance, or raise saying which ran out."""
        if items > self._items:
            raise BudgetExceeded(
                _over(f"{items} items", self._items, self.limits.max_evaluation_items, "items")
            )
        if chars > self._bytes:
            raise BudgetExceeded(
                _over(f"{chars} bytes of strings", self._bytes, self.limits.max_evaluation_bytes, "bytes")
            )
        self._items -= items
        self._bytes -= chars

    def search(self, chars: int) -> None:
        """Searching `chars` characters of text (see `SEARCH_COST`)."""
        if chars >= SEARCH_COST:
            self.charge(chars=chars // SEARCH_COST)


def _over(wanted: str, left: int, limit: int, unit: str) -> str:
    setting = SETTINGS[f"max_evaluation_{unit}"]
    return (
        f"would produce {wanted}, more than the {max(left, 0)} left of the evaluation budget of "
        f"one request ({limit} {unit}; raise it with {setting})"
    )


def limit_hint(field: str, limits: TemplateLimits) -> str:
    """`max_resources` -> "100000 (CONVERGE_MAX_RESOURCES_PER_STACK)", for messages."""
    return f"{getattr(limits, field)} ({SETTINGS[field]})"
