"""The `converge` executable against a real `converge up`, for the CLI's tests.

`running_up` starts `converge up` (embedded PostgreSQL, in-process bus) on a
free port with its own data directory and waits for its `ready` log event;
`Server.converge` runs the real `converge` executable as a subprocess in a
directory of the test's files, with the server's URL and data directory in
its environment (and nothing else of a client's settings), and checks that
no traceback ever reaches the user.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import BIN

CLIENT_VARIABLES = ("CONVERGE_URL", "CONVERGE_TOKEN", "CONVERGE_PROJECT", "CONVERGE_DATA_DIR")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Server:
    url: str
    data_dir: Path
    files: Path

    def converge(self, *args: str, env: dict[str, str] | None = None, url: bool = True) -> Result:
        """Run the real `converge` executable with this server's credentials (and its URL
        in CONVERGE_URL unless `url` is false: the CLI then finds it in credentials.json)."""
        base = {k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES}
        overrides = {"CONVERGE_DATA_DIR": str(self.data_dir), **({"CONVERGE_URL": self.url} if url else {})}
        done = subprocess.run(
            [str(BIN / "converge"), *args],
            env={**base, **overrides, **(env or {})},
            cwd=self.files,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        for stream in (done.stdout, done.stderr):
            assert "Traceback" not in stream, stream
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, env: dict[str, str] | None = None, url: bool = True) -> Result:
        result = self.converge(*args, env=env, url=url)
        assert result.code == 0, f"converge {' '.join(args)}:\n{result.out}\n{result.err}"
        return result

    def json(self, *args: str) -> object:
        return json.loads(self.ok(*args, "-f", "json").out)

    @property
    def token(self) -> str:
        return str(json.loads((self.data_dir / "credentials.json").read_text())["token"])


@contextmanager
def running_up(
    root: Path, files: Mapping[str, str], *, env: Mapping[str, str] | None = None
) -> Iterator[Server]:
    """`converge up` on a free port, data under `root/data`; `files` written under `root/files`."""
    data_dir, where = root / "data", root / "files"
    where.mkdir()
    for name, text in files.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
    port = free_port()
    log_path = root / "up.log"
    environment = {
        **{k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES},
        "CONVERGE_DATA_DIR": str(data_dir),
        "CONVERGE_API_PORT": str(port),
        "CONVERGE_LOG_FORMAT": "json",
        **(env or {}),
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(BIN / "converge"), "up"], env=environment, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_until_ready(process, log_path, timeout=90)
        yield Server(f"http://127.0.0.1:{port}", data_dir, where)
    finally:
        process.terminate()
        process.wait(timeout=60)


def wait_until_ready(process: subprocess.Popen[bytes], log_path: Path, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if any(_event(line) == "ready" for line in text.splitlines()):
            return
        if process.poll() is not None:
            raise AssertionError(f"converge up exited with {process.returncode}:\n{text[-4000:]}")
        time.sleep(0.1)  # polling the log for the condition, bounded by the deadline
    raise AssertionError(f"converge up was not ready within {timeout} s:\n{log_path.read_text()[-4000:]}")


def _event(line: str) -> str | None:
    try:
        parsed = json.loads(line)
    except json.JSONDecodeError:
        return None
    return parsed.get("event") if isinstance(parsed, dict) else None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
