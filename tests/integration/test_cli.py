"""The `converge` client commands drive a real `converge up` the way `openstack stack` would.

Real: the `converge` executable run as a subprocess, `converge up` (embedded
PostgreSQL, in-process bus) on a free port, HTTP, the credentials file it
writes (tests/support/cli.py). One `converge up` serves the whole module; each
test uses its own stacks. The commands a Heat user knows from `openstack stack`
beyond these are in test_cli_commands.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import Server, running_up, unique
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

TEMPLATE = """\
heat_template_version: 2016-10-14
parameters:
  greeting:
    type: string
    default: hello
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: greeting}
  second:
    type: OS::Heat::TestResource
    properties:
      value: {get_attr: [first, output]}
outputs:
  message:
    description: what the second resource stored
    value: {get_attr: [second, output]}
"""
FAILING = """\
heat_template_version: 2016-10-14
resources:
  broken:
    type: OS::Heat::TestResource
    properties:
      fail: true
"""
SLOW = """\
heat_template_version: 2016-10-14
resources:
  slow:
    type: OS::Heat::TestResource
    properties:
      wait_secs: 1
"""
UNKNOWN_TYPE = """\
heat_template_version: 2016-10-14
resources:
  thing:
    type: OS::Nope::Missing
"""
FILES = {"template.yaml": TEMPLATE, "failing.yaml": FAILING, "slow.yaml": SLOW, "unknown.yaml": UNKNOWN_TYPE}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_up(tmp_path_factory.mktemp("cli"), FILES) as running:
        yield running


def test_create_wait_reports_progress_and_the_stack_comes_up_with_its_output(server: Server) -> None:
    name = unique("web")
    created = server.ok("stack", "create", name, "-t", "template.yaml", "--wait")
    assert "CREATE_COMPLETE" in created.out
    assert "2/2 done, 0 in progress, 0 failed" in created.err, "the progress display went to stderr"
    value = server.ok("output", "show", name, "message", "-f", "value", "-c", "output_value")
    assert value.out.strip() == "hello"


def test_stack_list_prints_an_aligned_table_and_json(server: Server) -> None:
    name = unique("listed")
    server.ok("stack", "create", name, "-t", "template.yaml", "--tags", "a,b")
    table = server.ok("stack", "list").out.splitlines()
    assert [c.strip() for c in table[1].split("|")[1:-1]] == [
        "ID",
        "Stack Name",
        "Stack Status",
        "Creation Time",
        "Updated Time",
    ]
    assert len({len(line) for line in table}) == 1, "every line of the table has the same width"
    assert any(f" {name} " in line for line in table)
    listed = server.json("stack", "list")
    assert isinstance(listed, list)
    assert name in [row["Stack Name"] for row in listed]
    assert server.json("stack", "show", name, "-c", "tags") == {"tags": ["a", "b"]}


def test_show_resource_list_and_event_list_describe_a_created_stack(server: Server) -> None:
    name = unique("described")
    server.ok("stack", "create", name, "-t", "template.yaml", "--parameter", "greeting=hi", "--wait")
    stack = server.json("stack", "show", name)
    assert isinstance(stack, dict)
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert stack["parameters"]["greeting"] == "hi"
    resources = server.json("resource", "list", name)
    assert isinstance(resources, list)
    assert sorted((r["Resource Name"], r["Resource Status"]) for r in resources) == [
        ("first", "CREATE_COMPLETE"),
        ("second", "CREATE_COMPLETE"),
    ]
    detail = server.json("resource", "show", name, "second")
    assert isinstance(detail, dict)
    assert detail["attributes"] == {"output": "hi"}
    events = server.ok("event", "list", name).out
    assert "Stack CREATE completed successfully" in events
    outputs = server.ok("output", "list", name).out
    assert "message" in outputs
    assert "what the second resource stored" in outputs


def test_update_with_a_parameter_and_wait_changes_the_output(server: Server) -> None:
    name = unique("updated")
    server.ok("stack", "create", name, "-t", "template.yaml", "--wait")
    updated = server.ok(
        "stack", "update", name, "-t", "template.yaml", "--parameter", "greeting=bye", "--wait"
    )
    assert "UPDATE_COMPLETE" in updated.out
    assert (
        server.ok("output", "show", name, "message", "-f", "value", "-c", "output_value").out.strip() == "bye"
    )
    kept = server.ok("stack", "update", name, "--existing", "--wait", "-f", "value", "-c", "stack_status")
    assert kept.out.strip() == "UPDATE_COMPLETE"
    assert (
        server.ok("output", "show", name, "message", "-f", "value", "-c", "output_value").out.strip() == "bye"
    )


def test_template_validate_describes_parameters_and_rejects_unknown_types(server: Server) -> None:
    described = server.json("template", "validate", "-t", "template.yaml")
    assert isinstance(described, dict)
    assert described["Parameters"]["greeting"]["Default"] == "hello"
    rejected = server.converge("template", "validate", "-t", "unknown.yaml")
    assert rejected.code == 1
    assert "OS::Nope::Missing" in rejected.err


def test_a_failing_stack_makes_wait_exit_non_zero_with_the_reason(server: Server) -> None:
    name = unique("failing")
    failed = server.converge("stack", "create", name, "-t", "failing.yaml", "--wait")
    assert failed.code == 1
    assert f"stack {name} CREATE_FAILED" in failed.err
    assert "Test Resource failed broken" in failed.err


def test_delete_wait_returns_once_the_stack_is_gone(server: Server) -> None:
    name = unique("doomed")
    server.ok("stack", "create", name, "-t", "template.yaml", "--wait")
    deleted = server.ok("stack", "delete", name, "--wait", "-y")
    assert f"Stack {name} deleted." in deleted.err
    gone = server.converge("stack", "show", name)
    assert gone.code == 1
    assert gone.err.strip() == f"error: The Stack ({name}) could not be found."


def test_event_list_follow_prints_events_until_the_stack_settles(server: Server) -> None:
    name = unique("followed")
    started = server.ok("stack", "create", name, "-t", "slow.yaml", "-f", "value", "-c", "stack_status")
    assert started.out.strip() == "CREATE_IN_PROGRESS", "the stack is still running when following starts"
    lines = server.ok("event", "list", name, "--follow").out.splitlines()
    assert f"[{name}]: CREATE_IN_PROGRESS  Stack CREATE started" in lines[0]
    assert "[slow]: CREATE_COMPLETE" in "\n".join(lines)
    assert f"[{name}]: CREATE_COMPLETE  Stack CREATE completed successfully" in lines[-1]


def test_refused_actions_show_the_servers_message(server: Server) -> None:
    name = unique("acted")
    server.ok("stack", "create", name, "-t", "template.yaml", "--wait")
    refused = server.converge("stack", "cancel", name)
    assert refused.code == 1
    assert "Cancelling update when stack is CREATE_COMPLETE is not supported" in refused.err
    refused = server.converge("stack", "cancel", name, "--no-rollback")
    assert refused.code == 1
    assert "Cancelling update when stack is CREATE_COMPLETE is not supported" in refused.err
    too_often = server.converge("observe", "start", name, "--interval", "0")
    assert too_often.code == 2
    assert "must be at least 1" in too_often.err


def test_observe_start_show_and_stop(server: Server) -> None:
    name = unique("watched")
    server.ok("stack", "create", name, "-t", "template.yaml", "--wait")
    started = server.ok("observe", "start", name, "--interval", "30", "--heal")
    assert f"Observing stack {name} every 30 s." in started.err
    shown = json.loads(server.ok("observe", "show", name, "-f", "json").out)
    assert shown["enabled"] is True
    assert shown["interval"] == 30
    assert shown["heal"] is True
    assert shown["drifted"] == []
    server.ok("observe", "stop", name)
    assert json.loads(server.ok("observe", "show", name, "-f", "json").out)["enabled"] is False


def test_missing_credentials_and_a_wrong_token_are_one_line_errors(server: Server, tmp_path: Path) -> None:
    missing = server.converge("stack", "list", env={"CONVERGE_DATA_DIR": str(tmp_path)})
    assert missing.code == 1
    assert missing.err.startswith("error: no credentials found: set CONVERGE_TOKEN")
    assert len(missing.err.strip().splitlines()) == 1
    wrong = server.converge("stack", "list", env={"CONVERGE_TOKEN": "not-the-token"})
    assert wrong.code == 1
    assert wrong.err.startswith("error: Authentication required")
    assert "not-the-token" not in wrong.out + wrong.err, "the token is never printed"


def test_unreachable_api_and_unreadable_template_are_one_line_errors(server: Server) -> None:
    refused = server.converge("stack", "list", "--url", f"http://127.0.0.1:{free_port()}")
    assert refused.code == 1
    assert "cannot connect to http://127.0.0.1:" in refused.err
    assert "Connection refused" in refused.err
    unreadable = server.converge("stack", "create", unique("nofile"), "-t", "missing.yaml")
    assert unreadable.code == 1
    assert unreadable.err.strip() == "error: cannot read template missing.yaml: No such file or directory"
    assert server.token not in refused.err + unreadable.err
