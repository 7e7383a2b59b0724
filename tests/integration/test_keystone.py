"""Keystone mode: `openstack stack ...` with a Keystone password works against Converge
as against Heat, roles are honoured, projects are kept apart, and handle signals still
need only the handle's token.

Real: a Keystone (tests/support/keystone.py: the PyPI package as its own process,
SQLite, fernet tokens) in whose catalog Converge is registered as the orchestration
service; `converge up` as a process (PostgreSQL, in-process bus) in Keystone mode with
Converge's own service user; the `openstack` CLI (python-openstackclient with
heatclient's plugin) logging in with users' passwords. Nothing is faked.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DB_URL, RUN_ID
from tests.support.databases import create_database, drop_database
from tests.support.keystone import SERVICE_PASSWORD, SERVICE_USER, Keystone, request
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
OPERATOR_TOKEN = "operator-" + "0" * 24  # a static token beside Keystone's (CONVERGE_API_TOKENS)

TEMPLATE = """\
heat_template_version: 2018-08-31
parameters:
  greeting: {type: string, default: hello}
resources:
  value:
    type: OS::Heat::Value
    properties: {value: {get_param: greeting}}
outputs:
  said: {value: {get_attr: [value, value]}}
"""

WAITING = {
    "heat_template_version": "2018-08-31",
    "resources": {
        "handle": {"type": "OS::Heat::WaitConditionHandle"},
        "wait": {
            "type": "OS::Heat::WaitCondition",
            "properties": {"handle": {"get_resource": "handle"}, "count": 1, "timeout": 120},
        },
    },
}


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@dataclass
class Converge:
    url: str  # http://127.0.0.1:<port>
    keystone: Keystone
    home: Path
    template: Path

    def openstack(self, user: str | None, *args: str) -> Result:
        """The real `openstack` CLI, logged in as `user` with its password (None: no OS_*
        settings at all, for a command that says how to authenticate in its arguments)."""
        env = self.keystone.openstack_env(user or "admin", self.home)
        if user is None:
            env = {k: v for k, v in env.items() if not k.startswith("OS_")}
        done = subprocess.run(
            [str(BIN / "openstack"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, user: str, *args: str) -> Any:
        """`openstack ... -f json` that must succeed: its output, parsed."""
        result = self.openstack(user, *args, "-f", "json")
        assert result.code == 0, f"openstack {' '.join(args)} as {user}:\n{result.out}\n{result.err}"
        return _json_document(result.out)

    def api(self, method: str, path: str, body: Any = None, *, token: str) -> tuple[int, Any]:
        """One request to Converge's Heat API with any token (no CLI in between)."""
        answer = request(method, f"{self.url}{path}", body, token=token)
        return answer.status, answer.body

    def project(self, name: str) -> str:
        return self.keystone.projects[name]

    def create(self, user: str, name: str, template: Any = TEMPLATE) -> str:
        """Create a stack through the API with `user`'s Keystone token; its path under /v1."""
        project = {"alice": "alpha", "bob": "beta"}[user]
        token = self.keystone.token(user)
        status, body = self.api(
            "POST",
            f"/v1/{self.project(project)}/stacks",
            {"stack_name": name, "template": template},
            token=token,
        )
        assert status == 201, body
        return f"/v1/{self.project(project)}/stacks/{name}/{body['stack']['id']}"

    def settled(self, path: str, token: str) -> dict[str, Any]:
        """The stack at `path` once its operation has ended (bounded wait)."""
        return dict(_poll(lambda: _settled(self, path, token)))


def _json_document(out: str) -> Any:
    """The JSON document `-f json` printed (after `--wait`'s event lines, if any)."""
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(("{", "["))), None)
    return json.loads("\n".join(lines[start:])) if start is not None else None


def _wait_until_ready(process: subprocess.Popen[bytes], log_path: Path, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "ready":
                return
        if process.poll() is not None:
            raise AssertionError(
                f"converge up exited ({process.returncode}):\n{log_path.read_text()[-4000:]}"
            )
        time.sleep(0.1)  # polling the log for the condition, bounded by the deadline
    raise AssertionError(f"converge up was not ready in {timeout} s:\n{log_path.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def converge(keystone: Keystone, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Converge]:
    """`converge up` in Keystone mode, registered in Keystone's catalog as `orchestration`."""
    root = tmp_path_factory.mktemp("keystone-mode")
    database = f"converge_test_{RUN_ID}_keystone_{uuid.uuid4().hex[:6]}"
    database_url = asyncio.run(create_database(DB_URL, database))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CONVERGE_", "OS_"))},
        "CONVERGE_DATA_DIR": str(root / "data"),
        "CONVERGE_API_PORT": str(port),
        "CONVERGE_DATABASE_URL": database_url,
        "CONVERGE_AMQP_URL": "",
        "CONVERGE_LOG_FORMAT": "json",
        "CONVERGE_SANDBOX_LATENCY": "0.1",
        "CONVERGE_API_TOKENS": f"{OPERATOR_TOKEN}=operators:admin",
        "CONVERGE_KEYSTONE_URL": keystone.url,
        "CONVERGE_KEYSTONE_USERNAME": SERVICE_USER,
        "CONVERGE_KEYSTONE_PASSWORD": SERVICE_PASSWORD,
    }
    log_path = root / "up.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(BIN / "converge"), "up"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    registration = None
    try:
        _wait_until_ready(process, log_path, timeout=90)
        registration = keystone.register_orchestration(url)
        template = root / "template.yaml"
        template.write_text(TEMPLATE)
        (root / "home").mkdir()
        yield Converge(url, keystone, root / "home", template)
    finally:
        if registration is not None:
            keystone.unregister(registration)
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        asyncio.run(drop_database(DB_URL, database))
        assert "Traceback" not in log_path.read_text(errors="replace"), log_path.read_text()[-4000:]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_a_member_creates_lists_shows_and_deletes_a_stack_with_the_openstack_cli(converge: Converge) -> None:
    name = unique("web")
    created = converge.ok(
        "alice",
        "stack",
        "create",
        "-t",
        str(converge.template),
        "--parameter",
        "greeting=hi",
        "--wait",
        "--poll",
        "1",
        name,
    )
    assert created["stack_status"] == "CREATE_COMPLETE", created
    listed = converge.ok("alice", "stack", "list")
    assert name in [s["Stack Name"] for s in listed]
    shown = converge.ok("alice", "stack", "show", name)
    assert shown["stack_status"] == "CREATE_COMPLETE"
    assert shown["project"] == converge.project("alpha")  # the Keystone project is the Converge project
    assert shown["outputs"][0]["output_value"] == "hi"
    assert converge.openstack("alice", "stack", "delete", "--yes", name).code == 0
    _poll(lambda: name not in [s["Stack Name"] for s in converge.ok("alice", "stack", "list")] or None)


def test_a_reader_may_look_but_gets_403_on_anything_that_changes(converge: Converge) -> None:
    name = unique("kept")
    path = converge.create("alice", name)
    assert name in [s["Stack Name"] for s in converge.ok("rita", "stack", "list")]
    refused = converge.openstack("rita", "stack", "create", "-t", str(converge.template), unique("mine"))
    assert refused.code != 0
    assert "ERROR: The reader role may only read" in refused.err, refused.err
    # Looking at a template changes nothing: validate (and preview, below) are a reader's too.
    assert (
        converge.openstack("rita", "orchestration", "template", "validate", "-t", str(converge.template)).code
        == 0
    )

    alpha, rita = converge.project("alpha"), converge.keystone.token("rita")
    preview = {"stack_name": "x", "template": TEMPLATE}
    assert converge.api("POST", f"/v1/{alpha}/stacks/preview", preview, token=rita)[0] == 200
    # Heat's error shape, status 403, on whatever would change something: nothing changes.
    for method, where, body in (
        ("POST", "stacks", {"stack_name": "x", "template": TEMPLATE}),
        ("POST", f"{path}/actions", {"suspend": None}),
        ("PATCH", path, {"parameters": {"greeting": "bye"}}),
        ("DELETE", path, None),
    ):
        status, answer = converge.api(
            method, where if where.startswith("/") else f"/v1/{alpha}/{where}", body, token=rita
        )
        assert status == 403, (method, where, answer)
        assert answer["code"] == 403
        assert answer["title"] == "Forbidden"
        assert answer["error"]["type"] == "Forbidden"
        assert "member or admin" in answer["error"]["message"]
    assert converge.settled(path, converge.keystone.token("alice"))["stack_status"] == "CREATE_COMPLETE"


def test_another_projects_member_gets_404_and_an_admin_sees_every_project(converge: Converge) -> None:
    name = unique("alphas")
    path = converge.create("alice", name)
    stack_id = path.rsplit("/", 1)[1]

    hidden = converge.openstack("bob", "stack", "show", stack_id)
    assert hidden.code != 0
    assert "not found" in hidden.err.lower(), hidden.err
    status, body = converge.api(
        "GET", f"/v1/{converge.project('alpha')}/stacks", token=converge.keystone.token("bob")
    )
    assert status == 404, body  # another project's URL: as if nothing were there
    status, body = converge.api(
        "GET", f"/v1/{converge.project('beta')}/stacks/{stack_id}", token=converge.keystone.token("bob")
    )
    assert status == 404, body  # and its stack's id, in bob's own project: as if it did not exist

    everyone = converge.ok("admin", "stack", "list", "--all-projects")
    assert (name, converge.project("alpha")) in [(s["Stack Name"], s["Project"]) for s in everyone]
    # An admin may use the project's own URL: the admin's Keystone token, alpha's endpoint.
    on_alpha = converge.openstack(
        None,
        "--os-auth-type",
        "admin_token",
        "--os-endpoint",
        f"{converge.url}/v1/{converge.project('alpha')}",
        "--os-token",
        converge.keystone.token("admin"),
        "stack",
        "show",
        stack_id,
        "-f",
        "json",
    )
    assert on_alpha.code == 0, on_alpha.err
    assert json.loads(on_alpha.out)["stack_name"] == name


def test_a_wait_condition_handle_signals_with_its_own_token(converge: Converge) -> None:
    path, token = converge.create("alice", unique("waits"), WAITING), converge.keystone.token("alice")
    handle = _poll(lambda: _complete_handle(converge, f"{path}/resources/handle", token))
    endpoint, handle_token = handle["attributes"]["endpoint"], handle["attributes"]["token"]
    assert request("POST", endpoint, {"status": "SUCCESS"}, token="f" * 48).status == 401
    assert request("POST", endpoint, {"status": "SUCCESS", "data": "up"}, token=handle_token).status == 200
    assert converge.settled(path, token)["stack_status"] == "CREATE_COMPLETE"


def test_tokens_keystone_does_not_vouch_for_get_401_and_static_tokens_still_work(converge: Converge) -> None:
    stacks = f"/v1/{converge.project('alpha')}/stacks"
    for token in ("not-a-token", "gAAAAAB" + "x" * 180):
        status, body = converge.api("GET", stacks, token=token)
        assert status == 401, body
        assert body["error"]["type"] == "Unauthorized"
    unscoped = converge.keystone.issue("alice", "keystone-test-password", None).headers["X-Subject-Token"]
    status, body = converge.api("GET", stacks, token=unscoped)
    assert status == 403
    assert "not scoped to a project" in body["error"]["message"]
    status, _ = converge.api("GET", stacks, token=OPERATOR_TOKEN)  # an operator's static admin token
    assert status == 200


def _complete_handle(converge: Converge, path: str, token: str) -> dict[str, Any] | None:
    status, body = converge.api("GET", path, token=token)
    assert status == 200, body
    return dict(body["resource"]) if body["resource"]["resource_status"] == "CREATE_COMPLETE" else None


def _settled(converge: Converge, path: str, token: str) -> dict[str, Any] | None:
    status, body = converge.api("GET", path, token=token)
    assert status == 200, body
    return None if body["stack"]["stack_status"].endswith("IN_PROGRESS") else dict(body["stack"])


def _poll(check: Any, *, timeout: float = 60) -> Any:
    """Until `check()` gives something (bounded)."""
    deadline = time.monotonic() + timeout
    while (found := check()) is None:
        assert time.monotonic() < deadline, f"nothing within {timeout} s"
        time.sleep(0.1)  # polling the API for the condition, bounded by the deadline
    return found
