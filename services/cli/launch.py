"""`converge up` on the command line: its options, what is checked before anything starts,
and the "what next" lines of its banner.

`up.py` composes the services; this module only decides how it is started.
Options win over the environment (`--port` over CONVERGE_API_PORT,
`--data-dir` over CONVERGE_DATA_DIR); every other setting is an environment
variable (README, Configuration). Before the embedded database starts, the
port is tried and the data directory made: a port another process holds, or
a directory this user cannot write, is one line on stderr and exit 2, not a
traceback. The services are imported only once they are to run, so
`converge up --help` and the client commands stay quick.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.cli.commands import Subparsers
    from shared.settings import UpSettings

PROGRAM = "converge up"
EXIT_BAD_START = 2  # as for a bad setting
HELP = "run engine, worker, observer and the sandbox cloud in one process (embedded defaults)"
EPILOG = (
    "Every other setting is a CONVERGE_* environment variable (README.md, Configuration). "
    "Ctrl-C stops it after in-flight work drains."
)


def register(commands: Subparsers) -> None:
    up = commands.add_parser("up", help=HELP, description=HELP, epilog=EPILOG)
    up.add_argument(
        "--port",
        type=_port,
        metavar="PORT",
        help="port of the API, the dashboard and the sandbox cloud (default: CONVERGE_API_PORT, else 8004)",
    )
    up.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="where the embedded database and credentials.json live "
        "(default: CONVERGE_DATA_DIR, else ./data)",
    )
    up.set_defaults(parser=up)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1..65535, not {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from shared.logging import configure_logging
    from shared.service import run_service
    from shared.settings import UpSettings, load_settings

    settings = with_options(load_settings(UpSettings, program=PROGRAM), args)
    problem = data_dir_problem(settings.data_dir) or listen_problem(settings.api_host, settings.api_port)
    if problem is not None:
        print(f"{PROGRAM}: {problem}", file=sys.stderr)
        return EXIT_BAD_START
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    from services.cli.up import up

    try:
        return run_service(lambda stop: up(settings, stop), name="up", event_loop=settings.event_loop)
    except OSError as exc:  # the port was taken between the check above and the bind
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"{PROGRAM}: {_in_use(settings.api_host, settings.api_port, exc)}", file=sys.stderr)
        return EXIT_BAD_START


def with_options(settings: UpSettings, args: argparse.Namespace) -> UpSettings:
    """The settings with the command line's options applied (they were validated by argparse)."""
    update: dict[str, Any] = {}
    if getattr(args, "port", None) is not None:
        update["api_port"] = args.port
    if getattr(args, "data_dir", None) is not None:
        update["data_dir"] = args.data_dir
    return settings.model_copy(update=update) if update else settings


def data_dir_problem(data_dir: Path) -> str | None:
    """Why `converge up` could not keep its data in `data_dir`, if it could not."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the data directory {data_dir}: {exc.strerror or exc} (--data-dir)"
    if not os.access(data_dir, os.W_OK | os.X_OK):
        return f"cannot write to the data directory {data_dir.resolve()} (choose another with --data-dir)"
    return None


def listen_problem(host: str, port: int) -> str | None:
    """Why the API could not listen on host:port, if it could not (tried the way aiohttp binds)."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {host}: {exc.strerror} (CONVERGE_API_HOST)"
    for family, kind, proto, _, address in addresses:
        with closing(socket.socket(family, kind, proto)) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return _in_use(host, port, exc)
    return None


def _in_use(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use; stop what holds it, or choose another port "
            "with --port (or CONVERGE_API_PORT)"
        )
    return f"cannot listen on {host}:{port}: {exc.strerror or exc} (--port, CONVERGE_API_HOST)"


def next_steps(api_url: str, token: str, *, prefix: str | None = None, cwd: Path | None = None) -> list[str]:
    """What to type in another terminal to use the CLI, as the banner shows it: put
    `converge` on PATH (activate the virtualenv it runs from), export where the API is
    and its token, then a first command."""
    prefix = prefix if prefix is not None else sys.prefix
    cwd = cwd if cwd is not None else Path.cwd()
    lines = []
    if prefix != sys.base_prefix:  # a virtualenv: `converge` is on PATH once it is activated
        activate = Path(prefix) / "bin" / "activate"
        try:
            shown = str(activate.relative_to(cwd))
        except ValueError:
            shown = str(activate)
        lines.append(f". {shown}")
    lines.append(f"export CONVERGE_URL={api_url} CONVERGE_TOKEN={token}")
    lines.append("converge stack list")
    return lines
