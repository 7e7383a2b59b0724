"""Structured logging for every service (structlog over stdlib logging).

JSON lines when stderr is not a terminal, readable console output when it is.
Context (service, stack_id, traversal_id, resource, job_id, message_id) is
bound through contextvars where a message is received, so every line logged
while handling it carries those fields.

At `info` a service says what an operator follows: start-up, readiness, one
line as each stack operation ends (`stack_complete`, `stack_failed`),
drift, healing, draining. What happens per message (checks, jobs, watches,
notifications) is logged at `debug`. Warnings of libraries about their own
fallbacks that need no action (platformdirs' XDG_RUNTIME_DIR, which pgserver
triggers on every start) are not shown.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import structlog

LogFormat = Literal["auto", "json", "console"]


def configure_logging(*, level: str = "info", fmt: LogFormat = "auto") -> None:
    """Route structlog and stdlib logging (aiohttp, aio-pika) to one renderer."""
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        # Below `level` a call returns at once: a per-message `debug` costs nothing at `info`.
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *([] if use_console else [structlog.processors.format_exc_info]),
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Chatty at INFO about (re)connects and server start-up we log ourselves.
    for noisy in ("aiormq", "aio_pika", "pgserver"):
        logging.getLogger(noisy).setLevel(max(root.level, logging.WARNING))
    # pgserver asks platformdirs for a runtime directory; without XDG_RUNTIME_DIR (any
    # shell that did not log in through systemd) it falls back to a private one in /tmp.
    warnings.filterwarnings("ignore", message=r"XDG_RUNTIME_DIR .*, falling back to")


def get_logger(name: str | None = None, **context: Any) -> Any:
    """A structlog logger, optionally with bound context."""
    return structlog.get_logger(name).bind(**context) if context else structlog.get_logger(name)


@contextlib.contextmanager
def log_context(**values: Any) -> Iterator[None]:
    """Bind `values` to the lines logged inside (structlog's context-local context, as
    `structlog.contextvars.bound_contextvars` does) and put back what was bound before
    on the way out. The tokens of the variables set restore them exactly, where
    `bound_contextvars` copies and walks the whole context twice a call: per message,
    4 of its calls were 6% of `converge up`'s CPU (docs/performance.md, issue 18)."""
    tokens = structlog.contextvars.bind_contextvars(**values)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
