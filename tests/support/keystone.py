"""A real Keystone for the Keystone-mode tests, started once per test run.

Real: the `keystone` package from PyPI (the test extra), run as its own process —
`keystone.wsgi.api` under werkzeug's threaded WSGI server — on SQLite, with fernet
tokens, set up the way an operator does: `keystone-manage db_sync`, `fernet_setup`
and `credential_setup` in a temporary directory, then `keystone-manage bootstrap`
(user `admin`, the admin/member/reader/service roles, region RegionOne, the identity
endpoint). Then, through Keystone's own v3 API: projects `alpha` and `beta`, users
`alice` (member of alpha), `rita` (reader of alpha), `bob` (member of beta), and
Converge's service user `converge` (role `service` in project `service`).
`register_orchestration` puts a Converge into the catalog as Heat is put there: a
service of type `orchestration` with the endpoint `{url}/v1/%(tenant_id)s`.

Bcrypt runs at its fewest rounds so password logins stay fast; nothing else is
tuned. The session fixture `keystone` (registered in tests/conftest.py) starts it
on first use and stops it at the end of the run.
"""

from __future__ import annotations

import getpass
import grp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port

BIN = Path(sys.executable).parent
PASSWORD = "keystone-test-password"  # every test user's; nothing here is reachable from outside
SERVICE_USER = "converge"
SERVICE_PASSWORD = "converge-service-password"
REGION = "RegionOne"
#: Users made after bootstrap: name -> (project, role).
USERS = {"alice": ("alpha", "member"), "rita": ("alpha", "reader"), "bob": ("beta", "member")}

CONFIG = """\
[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///{root}/keystone.db
[fernet_tokens]
key_repository = {root}/fernet-keys
[fernet_receipts]
key_repository = {root}/fernet-receipts
[credential]
key_repository = {root}/credential-keys
[identity]
password_hash_rounds = 4
"""

# Keystone reads its options from sys.argv (oslo.config), so the port comes by environment.
SERVE = """\
import os, sys
sys.argv = sys.argv[:1]
from werkzeug.serving import make_server
from keystone.wsgi.api import application
make_server("127.0.0.1", int(os.environ["KEYSTONE_TEST_PORT"]), application, threaded=True).serve_forever()
"""


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


def request(
    method: str,
    url: str,
    body: Any = None,
    *,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One HTTP request with a JSON body; any status comes back as an `Answer`."""
    headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    if token is not None:
        headers["X-Auth-Token"] = token
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            raw, status, got = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, dict(exc.headers)
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode(errors="replace")
    return Answer(status, parsed, got)


@dataclass
class Keystone:
    url: str  # the Identity API: http://127.0.0.1:<port>/v3
    root: Path
    projects: dict[str, str] = field(default_factory=dict)  # name -> id
    process: subprocess.Popen[bytes] | None = None
    _admin: tuple[str, float] | None = None  # the admin's token, and when it was issued

    def log(self) -> str:
        path = self.root / "keystone.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def issue(self, user: str, password: str, project: str | None) -> Answer:
        """POST /v3/auth/tokens with a password (project-scoped when `project` is given)."""
        auth: dict[str, Any] = {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"name": user, "domain": {"id": "default"}, "password": password}},
            }
        }
        if project is not None:
            auth["scope"] = {"project": {"name": project, "domain": {"id": "default"}}}
        return request("POST", f"{self.url}/auth/tokens?nocatalog", {"auth": auth})

    def token(self, user: str, project: str | None = None) -> str:
        """A token of `user` (password auth), scoped to its project unless another is named."""
        password = SERVICE_PASSWORD if user == SERVICE_USER else PASSWORD
        scope = (
            project
            or {"admin": "admin", SERVICE_USER: "service", **{u: p for u, (p, _) in USERS.items()}}[user]
        )
        answer = self.issue(user, password, scope)
        assert answer.status == 201, f"token for {user}: {answer.status} {answer.body}"
        return answer.headers["X-Subject-Token"]

    def admin(
        self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None
    ) -> Any:
        """One call to Keystone's API as its admin (a token reused for 10 minutes; they last an hour)."""
        if self._admin is None or time.monotonic() - self._admin[1] > 600:
            self._admin = (self.token("admin"), time.monotonic())
        answer = request(method, f"{self.url}{path}", body, token=self._admin[0], headers=headers)
        assert 200 <= answer.status < 300, f"{method} {path}: {answer.status} {answer.body}"
        return answer.body

    def revoke(self, token: str) -> None:
        """Revoke `token` in Keystone (as its admin): validating it answers 404 from now on."""
        self.admin("DELETE", "/auth/tokens", headers={"X-Subject-Token": token})

    def register_orchestration(self, converge_url: str) -> str:
        """Put a Converge into the catalog as Heat is: returns the endpoint id to remove."""
        service = self.admin(
            "POST", "/services", {"service": {"name": "heat", "type": "orchestration", "enabled": True}}
        )["service"]
        endpoint = self.admin(
            "POST",
            "/endpoints",
            {
                "endpoint": {
                    "service_id": service["id"],
                    "interface": "public",
                    "region_id": REGION,
                    "url": f"{converge_url}/v1/%(tenant_id)s",
                }
            },
        )["endpoint"]
        return f"{service['id']}/{endpoint['id']}"

    def unregister(self, registration: str) -> None:
        service_id, endpoint_id = registration.split("/")
        self.admin("DELETE", f"/endpoints/{endpoint_id}")
        self.admin("DELETE", f"/services/{service_id}")

    def openstack_env(self, user: str, home: Path) -> dict[str, str]:
        """The environment `openstack` needs to log `user` in with a password (and nothing of
        the machine's own OS_* settings or clouds.yaml)."""
        project = {"admin": "admin", **{u: p for u, (p, _) in USERS.items()}}[user]
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "CONVERGE_"))}
        return {
            **base,
            "HOME": str(home),
            "OS_AUTH_URL": self.url,
            "OS_IDENTITY_API_VERSION": "3",
            "OS_USERNAME": user,
            "OS_PASSWORD": PASSWORD,
            "OS_PROJECT_NAME": project,
            "OS_USER_DOMAIN_NAME": "Default",
            "OS_PROJECT_DOMAIN_NAME": "Default",
            "OS_REGION_NAME": REGION,
            "OS_INTERFACE": "public",
            "PYTHONWARNINGS": "ignore",
        }


def _manage(root: Path, *args: str) -> subprocess.Popen[bytes]:
    with (root / f"manage-{args[0]}.log").open("wb") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [str(BIN / "keystone-manage"), "--config-file", str(root / "keystone.conf"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )


def _finish(root: Path, processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        code = process.wait(timeout=180)
        if code != 0:
            command = " ".join(str(a) for a in process.args[3:])  # type: ignore[index]
            step = command.split()[0]
            output = (root / f"manage-{step}.log").read_text(errors="replace")[-4000:]
            raise RuntimeError(f"keystone-manage {command} failed ({code}):\n{output}")


def _wait_until_serving(keystone: Keystone, *, timeout: float = 60) -> None:
    """Until GET /v3 answers (bounded); fails with Keystone's log if it exits or never does."""
    assert keystone.process is not None
    deadline = time.monotonic() + timeout
    while True:
        if keystone.process.poll() is not None:
            raise RuntimeError(f"keystone exited ({keystone.process.returncode}):\n{keystone.log()}")
        try:
            if request("GET", keystone.url).status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"keystone did not answer within {timeout} s:\n{keystone.log()}")
        time.sleep(0.1)


def _populate(keystone: Keystone) -> None:
    roles = {r["name"]: r["id"] for r in keystone.admin("GET", "/roles")["roles"]}
    for name in ("alpha", "beta", "service", "admin"):
        found = keystone.admin("GET", f"/projects?name={name}")["projects"]
        project = (
            found[0]
            if found
            else keystone.admin("POST", "/projects", {"project": {"name": name, "domain_id": "default"}})[
                "project"
            ]
        )
        keystone.projects[name] = project["id"]
    grants = {**USERS, SERVICE_USER: ("service", "service")}
    for user, (project, role) in grants.items():
        password = SERVICE_PASSWORD if user == SERVICE_USER else PASSWORD
        made = keystone.admin(
            "POST", "/users", {"user": {"name": user, "password": password, "domain_id": "default"}}
        )["user"]
        keystone.admin(
            "PUT", f"/projects/{keystone.projects[project]}/users/{made['id']}/roles/{roles[role]}"
        )


def start_keystone() -> Keystone:
    root = Path(tempfile.mkdtemp(prefix="converge-keystone-"))
    port = free_port()
    keystone = Keystone(url=f"http://127.0.0.1:{port}/v3", root=root)
    try:
        (root / "keystone.conf").write_text(CONFIG.format(root=root))
        owner = ("--keystone-user", getpass.getuser(), "--keystone-group", grp.getgrgid(os.getgid()).gr_name)
        _finish(
            root,
            [
                _manage(root, "db_sync"),
                _manage(root, "fernet_setup", *owner),
                _manage(root, "credential_setup", *owner),
            ],
        )
        _finish(
            root,
            [
                _manage(
                    root,
                    "bootstrap",
                    "--bootstrap-password",
                    PASSWORD,
                    "--bootstrap-public-url",
                    keystone.url,
                    "--bootstrap-region-id",
                    REGION,
                )
            ],
        )
        with (root / "keystone.log").open("wb") as log:
            keystone.process = subprocess.Popen(
                [sys.executable, "-c", SERVE],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={
                    **os.environ,
                    "KEYSTONE_TEST_PORT": str(port),
                    "OS_KEYSTONE_CONFIG_FILES": str(root / "keystone.conf"),
                    "PYTHONWARNINGS": "ignore",
                },
            )
        _wait_until_serving(keystone)
        _populate(keystone)
    except BaseException:
        stop_keystone(keystone)
        raise
    return keystone


def stop_keystone(keystone: Keystone) -> None:
    if keystone.process is not None and keystone.process.poll() is None:
        keystone.process.terminate()
        try:
            keystone.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            keystone.process.kill()
            keystone.process.wait()
    shutil.rmtree(keystone.root, ignore_errors=True)


@pytest.fixture(scope="session")
def keystone() -> Iterator[Keystone]:
    """A real Keystone, once per test run (see the module docstring)."""
    running = start_keystone()
    try:
        yield running
    finally:
        stop_keystone(running)
