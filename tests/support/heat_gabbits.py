"""Run Heat's own API tests (../shared/heat-gabbits) against a fresh `converge up`.

    python -m tests.support.heat_gabbits

Starts `converge up` on a free port with a scratch data directory, waits for
/healthz, runs the suite's runner with the generated token, stops Converge
and exits with the runner's status (it prints "N passed, M failed").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
GABBITS = ROOT.parent / "shared" / "heat-gabbits"


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"converge up exited early with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"converge up did not answer {url} within {timeout}s")


def main() -> int:
    if not (GABBITS / "run.py").exists():
        print(f"heat_gabbits: {GABBITS} not found", file=sys.stderr)
        return 1
    data = Path(tempfile.mkdtemp(prefix="converge-gabbits-"))
    port = free_port()
    log = (data / "converge.log").open("wb")
    env = {
        **os.environ,
        "CONVERGE_DATA_DIR": str(data),
        "CONVERGE_API_PORT": str(port),
        "CONVERGE_LOG_FORMAT": "json",
    }
    for name in ("CONVERGE_DATABASE_URL", "CONVERGE_AMQP_URL", "CONVERGE_API_TOKENS"):
        env.pop(name, None)
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "converge"), "up"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}/healthz", process)
        token = json.loads((data / "credentials.json").read_text())["token"]
        return subprocess.call(
            [sys.executable, str(GABBITS / "run.py"), f"http://127.0.0.1:{port}/v1/demo", token]
        )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
