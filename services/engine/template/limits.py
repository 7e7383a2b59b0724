"""Size limits for templates: passed in by the caller, never read globally.

The API builds one `TemplateLimits` from its settings at start-up and passes it
to every parse; tests pass small limits to exercise the refusals.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TemplateLimits:
    """Limits on what a template (or environment, or nested file) may hold.

    - `max_template_bytes`: size of one document as submitted (UTF-8 bytes).
      Default 1 MiB, as Heat's `max_template_size`.
    - `max_resources`: resources in one stack. Default 100,000: the engine is
      built for very large stacks; operators lower it per deployment.
    - `max_depth`: nesting depth of maps/lists in one document. Default 100;
      real templates rarely exceed 15.
    - `max_yaml_nodes`: scalars + collections after YAML alias expansion.
      Default 1,000,000; a 1 MiB document without aliases has fewer, so
      this only refuses alias bombs ("billion laughs").
    - `max_yaml_aliases`: alias (`*name`) uses in one document. Default 10,000.
    - `max_nested_depth`: how deep stacks may nest (a top-level stack is depth 0,
      its nested stacks depth 1, ...). Default 5, as Heat's `max_nested_stack_depth`;
      it stops a template resource that (directly or not) contains itself.
    """

    max_template_bytes: int = 1024 * 1024
    max_resources: int = 100_000
    max_depth: int = 100
    max_yaml_nodes: int = 1_000_000
    max_yaml_aliases: int = 10_000
    max_nested_depth: int = 5


DEFAULT_LIMITS = TemplateLimits()
