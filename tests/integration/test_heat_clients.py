"""Heat's own clients work against Converge exactly as the README tells a Heat user to set them up.

Real: `converge up` on a free port (tests/support/cli.py), the `openstack`
command (python-openstackclient with python-heatclient's plugin) and Python
running openstacksdk and python-heatclient, as subprocesses with a HOME of
their own, each README snippet (tests/support/readme.py) run as written with
the variables the banner exports: `heat-cli` in bash, `clouds.yaml` written
where openstack looks (with this server's URL and token in place of the
example's), `heat-python` by Python.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import readme
from tests.support.cli import CLIENT_VARIABLES, Server, running_up
from tests.support.processes import BIN

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_up(tmp_path_factory.mktemp("heat-clients"), {}) as running:
        yield running


def shell(server: Server, home: Path) -> dict[str, str]:
    """A Heat user's shell after the banner's `export` line: no OS_* settings of ours."""
    inherited = {
        k: v
        for k, v in os.environ.items()
        if k not in CLIENT_VARIABLES and not k.startswith(("OS_", "CONVERGE_"))
    }
    return {
        **inherited,
        "HOME": str(home),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "CONVERGE_URL": server.url,
        "CONVERGE_TOKEN": server.token,
    }


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)


def test_the_openstack_cli_with_admin_token_drives_a_stack_through_its_life(
    server: Server, tmp_path: Path
) -> None:
    script = "set -euo pipefail\n" + "\n".join(readme.commands("heat-cli"))
    done = run(["bash", "-c", script], shell(server, tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CREATE_COMPLETE" in done.stdout
    assert "server_addresses" in done.stdout, "output show --all"
    assert server.converge("stack", "show", "hello").code == 1, "deleted"


def test_clouds_yaml_serves_the_openstack_cli_openstacksdk_and_heatclient(
    server: Server, tmp_path: Path
) -> None:
    server.ok(
        "stack",
        "create",
        "listed",
        "-t",
        str(ROOT / "examples" / "failing.yaml"),
        "--parameter",
        "fail=false",
    )
    config = readme.text("clouds.yaml").replace("http://127.0.0.1:8004", server.url)
    assert "YOUR-TOKEN" in config
    (tmp_path / ".config" / "openstack").mkdir(parents=True)
    (tmp_path / ".config" / "openstack" / "clouds.yaml").write_text(
        config.replace("YOUR-TOKEN", server.token)
    )
    env = shell(server, tmp_path)

    listed = run(
        ["openstack", "--os-cloud", "converge", "stack", "list", "-f", "value", "-c", "Stack Name"], env
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["listed"]

    (tmp_path / "snippet.py").write_text(readme.text("heat-python"))
    printed = run([str(BIN / "python"), str(tmp_path / "snippet.py")], env)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == ["['listed']", "['listed']"], "openstacksdk, then heatclient"


def test_unsupported_heat_calls_say_so_in_the_openstack_cli(server: Server, tmp_path: Path) -> None:
    server.ok(
        "stack", "create", "kept", "-t", str(ROOT / "examples" / "failing.yaml"), "--parameter", "fail=false"
    )
    env = {**shell(server, tmp_path), "OS_AUTH_TYPE": "admin_token", "OS_TOKEN": server.token}
    env["OS_ENDPOINT"] = f"{server.url}/v1/demo"
    for argv, said in (
        (["orchestration", "service", "list"], "The orchestration service list is not supported by Converge"),
    ):
        refused = run(["openstack", *argv], env)
        assert refused.returncode == 1, (argv, refused.stdout, refused.stderr)
        assert said in refused.stderr, (argv, refused.stderr)
        assert "not found" not in refused.stderr.lower()
