"""Run a command (the test suite) with PostgreSQL and RabbitMQ reachable.

    python -m tests.support.provide_services -- pytest ...

Uses CONVERGE_TEST_DATABASE_URL / CONVERGE_TEST_AMQP_URL (defaults: the
local PostgreSQL and RabbitMQ). Where one is not reachable it is provided:
PostgreSQL through the pgserver wheel; RabbitMQ by starting a private
`rabbitmq-server` node (installing Debian's package first when running as
root with apt), else it stops with one line saying what to install. Never
skips silently. Private servers are stopped and removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, closing
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_DB = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_AMQP = "amqp://guest:guest@127.0.0.1:5672/"


def reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    if not parts.hostname:  # unix socket URL: trust it
        return True
    try:
        with closing(socket.create_connection((parts.hostname, parts.port or default_port), timeout=2)):
            return True
    except OSError:
        return False


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def provide_postgres(stack: ExitStack) -> str:
    import pgserver

    data = Path(tempfile.mkdtemp(prefix="converge-test-pg-"))
    stack.callback(shutil.rmtree, data, True)
    server = pgserver.get_server(data, cleanup_mode="stop")
    stack.callback(server.cleanup)
    print(f"provide_services: started private PostgreSQL in {data}", file=sys.stderr)
    return str(server.get_uri())


def provide_rabbitmq(stack: ExitStack) -> tuple[str, str]:
    if shutil.which("rabbitmq-server") is None:
        if os.geteuid() == 0 and shutil.which("apt-get"):
            subprocess.run(["apt-get", "update", "-q"], check=True)
            subprocess.run(["apt-get", "install", "-y", "-q", "rabbitmq-server"], check=True)
        else:
            sys.exit(
                "provide_services: RabbitMQ is not reachable and not installed: "
                "install the rabbitmq-server package or set CONVERGE_TEST_AMQP_URL"
            )
    base = Path(tempfile.mkdtemp(prefix="converge-test-rabbit-"))
    base.chmod(0o755)
    stack.callback(shutil.rmtree, base, True)
    port, dist_port = free_port(), free_port()
    node = f"converge-test-{port}@localhost"
    env = {
        **os.environ,
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
    }
    (base / "enabled_plugins").write_text("[].\n")
    (base / "rabbitmq.conf").write_text("loopback_users = none\n")
    _give_to_rabbitmq_user(base)
    server = subprocess.Popen(
        ["rabbitmq-server"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stack.callback(_stop_rabbitmq, server, node, env)
    deadline = time.monotonic() + 120
    while True:  # await_startup needs the Erlang node up first, so poll until it answers
        if server.poll() is not None:
            sys.exit(f"provide_services: rabbitmq-server exited with {server.returncode}; logs in {base}/log")
        probe = subprocess.run(
            ["rabbitmqctl", "-n", node, "await_startup", "--timeout", "60"],
            env=env,
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            break
        if time.monotonic() > deadline:
            sys.exit(f"provide_services: RabbitMQ node {node} did not start within 120s")
        time.sleep(1)
    print(f"provide_services: started private RabbitMQ node {node} on port {port}", file=sys.stderr)
    return f"amqp://guest:guest@127.0.0.1:{port}/", node


def _stop_rabbitmq(server: subprocess.Popen[bytes], node: str, env: dict[str, str]) -> None:
    subprocess.run(["rabbitmqctl", "-n", node, "stop"], env=env, capture_output=True, check=False)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _give_to_rabbitmq_user(base: Path) -> None:
    """Debian's rabbitmq-server drops root privileges to the `rabbitmq` user."""
    if os.geteuid() != 0:
        return
    try:
        import pwd

        entry = pwd.getpwnam("rabbitmq")
    except KeyError:
        return
    for path in [base, *base.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    env = dict(os.environ)
    db = env.setdefault("CONVERGE_TEST_DATABASE_URL", DEFAULT_DB)
    amqp = env.setdefault("CONVERGE_TEST_AMQP_URL", DEFAULT_AMQP)
    with ExitStack() as stack:
        if not reachable(db, 5432):
            env["CONVERGE_TEST_DATABASE_URL"] = provide_postgres(stack)
        if not reachable(amqp, 5672):
            env["CONVERGE_TEST_AMQP_URL"], env["CONVERGE_TEST_RABBIT_NODE"] = provide_rabbitmq(stack)
        started = time.monotonic()
        code = subprocess.call(command, env=env)
        print(f"provide_services: tests took {time.monotonic() - started:.0f}s", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
