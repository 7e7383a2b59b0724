"""`make cluster`: every Converge service as its own process on this machine.

Where it sits: a launcher for developers and tests, not part of any service.
It prepares what the processes share, then hands over to honcho, which runs
`deploy/Procfile` and multiplexes the logs:

1. creates the database if it is missing, and applies migrations
   (`converge-engine migrate`), so engines start on a ready schema;
2. picks the API token (CONVERGE_API_TOKENS, or the one for project `demo`
   kept in `<data dir>/credentials.json`, generated there on first use) and
   records the first engine's URL there, where the `converge` CLI finds both;
   prints the URLs, the token and each process's port;
3. execs `honcho start` with the counts as concurrency. honcho sets `$PORT`
   per process: the Procfile's first line gets base, base+1, ..., each later
   line starts 100 higher, which `ports()` mirrors for the printout.

Ctrl-C (SIGINT) or SIGTERM to honcho stops every process; each drains first.
`--clean` (`make cluster-clean`) removes what a cluster leaves behind: its
database (refused while anything is connected to it) and its queues and
dead-letter exchange in RabbitMQ.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import asyncpg
from honcho.environ import parse_procfile  # type: ignore[import-untyped]

from services.cli.credentials import FILE_NAME, Credentials, ensure_credentials
from shared.notifications import notification_queue
from shared.protocol import ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE
from shared.settings import SANDBOX_ENDPOINT

PROCFILE = Path(__file__).resolve().parent / "Procfile"
BIN = Path(sys.executable).parent
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/converge_cluster"
DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
DEFAULT_QUEUE_PREFIX = "converge-cluster"
DEFAULT_BASE_PORT = 8004  # the first engine answers where `converge` looks by default
DEFAULT_DATA_DIR = "./data"  # where `converge up` keeps credentials.json too: the CLI looks there
PROJECT = "demo"
# honcho SIGKILLs whatever still runs 5 s after the first process stopped
# (honcho.manager.KILL_WAIT), so processes must finish draining before that.
DRAIN_SECONDS = 4
PORT_STEP = 100  # honcho: each Procfile line's ports start this much above the previous line's
SERVICES = ("engine", "worker", "observer", "sandbox")


class LaunchError(Exception):
    """Something the operator must fix before the cluster can start."""


def first_ports(base: int) -> dict[str, int]:
    """The first port of each Procfile process type, as honcho hands them out."""
    names = list(parse_procfile(PROCFILE.read_text()).processes)
    missing = [name for name in SERVICES if name not in names]
    if missing:
        raise LaunchError(f"{PROCFILE} has no line for {', '.join(missing)}")
    return {name: base + PORT_STEP * index for index, name in enumerate(names)}


def ports(base: int, counts: dict[str, int]) -> dict[str, list[int]]:
    """Every process's port, by process type (honcho runs one of a type it has no count for)."""
    return {
        name: [first + i for i in range(counts.get(name, 1))] for name, first in first_ports(base).items()
    }


def check_ports_free(layout: dict[str, list[int]]) -> None:
    for name, numbers in layout.items():
        for port in numbers:
            with closing(socket.socket()) as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError as exc:
                    raise LaunchError(
                        f"port {port} for {name} is in use ({exc.strerror}); "
                        "stop what holds it or choose another base port (CLUSTER_PORT=...)"
                    ) from exc


async def ensure_database(url: str) -> bool:
    """Create the database `url` names if it does not exist; True if created."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name:
        raise LaunchError(f"{url}: the database URL names no database")
    server = urlunsplit(parts._replace(path="/postgres"))
    try:
        conn = await asyncpg.connect(server, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise LaunchError(f"cannot connect to PostgreSQL at {server}: {exc}") from exc
    try:
        if await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return False
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            await conn.execute(f"CREATE DATABASE {quoted}")
        except asyncpg.DuplicateDatabaseError:
            return False  # created meanwhile by someone else: just as good
        return True
    finally:
        await conn.close()


async def drop_database(url: str) -> bool:
    """Drop the database `url` names; True if it was there. Refused while in use."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name or name == "postgres":
        raise LaunchError(f"{url}: name the cluster's own database, not {name or 'none'}")
    server = urlunsplit(parts._replace(path="/postgres"))
    try:
        conn = await asyncpg.connect(server, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise LaunchError(f"cannot connect to PostgreSQL at {server}: {exc}") from exc
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return False
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            await conn.execute(f"DROP DATABASE {quoted}")
        except asyncpg.ObjectInUseError as exc:
            raise LaunchError(f"database {name} is in use: stop the cluster first ({exc})") from exc
        return True
    finally:
        await conn.close()


async def delete_queues(url: str, prefix: str) -> list[str]:
    """Delete the cluster's queues (each with its `.dead` queue) and its dead-letter exchange;
    RabbitMQ takes the deletion of one that is not there as done."""
    queues = [ENGINE_QUEUE, JOBS_QUEUE, OBSERVE_QUEUE, notification_queue(SANDBOX_ENDPOINT)]
    names = [f"{prefix}.{queue}{suffix}" for queue in queues for suffix in ("", ".dead")]
    try:
        connection = await aio_pika.connect(url, timeout=10)
    except (OSError, aio_pika.exceptions.AMQPError) as exc:
        raise LaunchError(f"cannot connect to RabbitMQ at {urlsplit(url).hostname}: {exc}") from exc
    async with connection:
        channel = await connection.channel()
        for name in names:
            await channel.queue_delete(name)
        await channel.exchange_delete(f"{prefix}.dead-letter")
    return [*names, f"{prefix}.dead-letter"]


def clean(args: argparse.Namespace) -> None:
    dropped = asyncio.run(drop_database(args.database_url))
    database = urlsplit(args.database_url).path.lstrip("/")
    print(f"{'dropped' if dropped else 'no'} database {database}", flush=True)
    asyncio.run(delete_queues(args.amqp_url, args.queue_prefix))
    print(f"deleted the queues and exchange with prefix {args.queue_prefix}", flush=True)


def cluster_credentials(data_dir: Path, api_url: str) -> Credentials:
    """The CLI's token for project demo (kept across starts) with the cluster's URL recorded."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        return ensure_credentials(data_dir, url=api_url)
    except (OSError, ValueError, KeyError) as exc:
        raise LaunchError(f"cannot keep the credentials in {data_dir / FILE_NAME}: {exc}") from exc


def service_environment(
    args: argparse.Namespace, layout: dict[str, list[int]], tokens: str
) -> dict[str, str]:
    """What every process gets; honcho adds $PORT, the Procfile maps it to the port setting."""
    environment = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "CONVERGE_DATABASE_URL": args.database_url,
        "CONVERGE_AMQP_URL": args.amqp_url,
        "CONVERGE_QUEUE_PREFIX": args.queue_prefix,
        "CONVERGE_API_TOKENS": tokens,
        "CONVERGE_PUBLIC_API_URL": f"http://127.0.0.1:{layout['engine'][0]}",
        # Outbound HTTP reaches the sandbox (CONVERGE_SANDBOX_URL, allowed by host:port) and
        # nothing else on this machine unless the operator lists it; every port of the
        # cluster's own processes is refused even then, unless named as host:port.
        "CONVERGE_HTTP_ALLOWED_HOSTS": os.environ.get("CONVERGE_HTTP_ALLOWED_HOSTS", ""),
        "CONVERGE_HTTP_PROTECTED_PORTS": ",".join(
            str(port) for port in sorted({p for numbers in layout.values() for p in numbers})
        ),
        "CONVERGE_DRAIN_SECONDS": os.environ.get("CONVERGE_DRAIN_SECONDS", str(DRAIN_SECONDS)),
    }
    if layout["sandbox"]:
        environment["CONVERGE_SANDBOX_URL"] = f"http://127.0.0.1:{layout['sandbox'][0]}"
    if "CONVERGE_LOG_FORMAT" not in os.environ and sys.stdout.isatty():
        environment["CONVERGE_LOG_FORMAT"] = "console"  # honcho pipes output: `auto` would pick JSON
    return environment


def migrate(environment: dict[str, str]) -> None:
    done = subprocess.run([str(BIN / "converge-engine"), "migrate"], env=environment, check=False)
    if done.returncode != 0:
        raise LaunchError(f"`converge-engine migrate` failed (exit {done.returncode}); see above")


def banner(
    args: argparse.Namespace, counts: dict[str, int], layout: dict[str, list[int]], token: str | None
) -> str:
    api = f"http://127.0.0.1:{layout['engine'][0]}"
    running = ", ".join(f"{name} x{counts[name]}" for name in SERVICES)
    lines = [
        f"Converge cluster: {running} (deploy/Procfile, run by honcho)",
        f"  API:      {api}/v1/{PROJECT}",
        f"  Token:    {token}" if token else "  Tokens:   from CONVERGE_API_TOKENS",
        f"  Database: {args.database_url}",
        f"  Queues:   {args.amqp_url} with prefix {args.queue_prefix}",
    ]
    for name in SERVICES:
        if layout[name]:
            lines.append(
                f"  {name + ':':9} ports {', '.join(map(str, layout[name]))} (/healthz /readyz /metrics)"
            )
    if token:
        credentials = (Path(args.data_dir) / FILE_NAME).resolve()
        lines.append(f"  Credentials: {credentials} (the converge CLI finds the URL and token there)")
        lines.append(f"  export CONVERGE_URL={api} CONVERGE_TOKEN={token} CONVERGE_PROJECT={PROJECT}")
    lines.append("Ctrl-C stops every process; each drains its work first.")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="deploy/cluster.py", description="Run every Converge service as its own process under honcho."
    )
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--observers", type=int, default=2)
    parser.add_argument(
        "--sandboxes",
        type=int,
        default=1,
        choices=[0, 1],
        help="its cloud lives in its memory, and workers and observers use one (CONVERGE_SANDBOX_URL)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_BASE_PORT, help="base port (honcho's -p)")
    parser.add_argument("--database-url", default=env("CONVERGE_DATABASE_URL") or DEFAULT_DATABASE_URL)
    parser.add_argument("--amqp-url", default=env("CONVERGE_AMQP_URL") or DEFAULT_AMQP_URL)
    parser.add_argument("--queue-prefix", default=env("CONVERGE_QUEUE_PREFIX") or DEFAULT_QUEUE_PREFIX)
    parser.add_argument(
        "--data-dir",
        default=env("CONVERGE_DATA_DIR") or DEFAULT_DATA_DIR,
        help="where credentials.json is kept (as `converge up` keeps it)",
    )
    parser.add_argument(
        "--clean", action="store_true", help="remove the cluster's database, queues and exchange, and exit"
    )
    args = parser.parse_args(argv)
    for name in ("engines", "workers", "observers"):
        if not 1 <= getattr(args, name) < PORT_STEP:
            parser.error(f"--{name} must be between 1 and {PORT_STEP - 1}")
    return args


def prepare(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """Everything before honcho; returns honcho's command line and environment."""
    counts = {
        "engine": args.engines,
        "worker": args.workers,
        "observer": args.observers,
        "sandbox": args.sandboxes,
    }
    if counts["sandbox"] and shutil.which("converge-sandbox", path=str(BIN)) is None:
        raise LaunchError("converge-sandbox is not installed in this environment; run with SANDBOXES=0")
    layout = ports(args.port, counts)
    check_ports_free(layout)
    if asyncio.run(ensure_database(args.database_url)):
        print(f"created database {urlsplit(args.database_url).path.lstrip('/')}", flush=True)
    tokens = os.environ.get("CONVERGE_API_TOKENS")
    api_url = f"http://127.0.0.1:{layout['engine'][0]}"
    token = None if tokens else cluster_credentials(Path(args.data_dir), api_url).token
    environment = service_environment(args, layout, tokens or f"{token}={PROJECT}")
    migrate(environment)
    print(banner(args, counts, layout, token), flush=True)
    concurrency = ",".join(f"{name}={count}" for name, count in counts.items())
    # `-e /dev/null`: no .env file may override the environment or the base port.
    command = [
        str(BIN / "honcho"),
        "start",
        "--procfile",
        str(PROCFILE),
        "--env",
        os.devnull,
        "--port",
        str(args.port),
        "--concurrency",
        concurrency,
    ]
    return command, environment


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.clean:
            clean(args)
            return 0
        command, environment = prepare(args)
    except LaunchError as exc:
        print(f"make cluster{'-clean' if args.clean else ''}: {exc}", file=sys.stderr)
        return 2
    os.execve(command[0], command, environment)


if __name__ == "__main__":
    sys.exit(main())
