"""The `converge` CLI does what a Heat user types into `openstack stack`, against a real server.

Real: the `converge` executable as a subprocess, `converge up` (embedded
PostgreSQL, in-process bus) on a free port that is not 8004, the files a
template and its environment refer to on disk, HTTP (tests/support/cli.py).
One `converge up` serves the module; each test uses its own stacks and tags.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Server, running_up, unique
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

TEMPLATE = """\
heat_template_version: 2016-10-14
parameters:
  greeting: {type: string, default: hello}
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: greeting}
outputs:
  message: {value: {get_attr: [first, output]}, description: the greeting}
  doubled: {value: {list_join: ['-', [{get_attr: [first, output]}, {get_attr: [first, output]}]]}}
"""
MORE = """\
heat_template_version: 2016-10-14
parameters:
  greeting: {type: string, default: hello}
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: greeting}
  third:
    type: OS::Heat::None
"""
# A normal Heat layout: get_file in the template, a template resource from the
# environment's registry, and a get_file inside that template, relative to it.
MAIN = """\
heat_template_version: 2016-10-14
resources:
  script:
    type: OS::Heat::Value
    properties:
      value: {get_file: scripts/hello.sh}
  child:
    type: My::Child
outputs:
  script: {value: {get_attr: [script, value]}}
  child: {value: {get_attr: [child, note]}}
"""
ENV = """\
resource_registry:
  My::Child: children/child.yaml
"""
CHILD = """\
heat_template_version: 2016-10-14
resources:
  note:
    type: OS::Heat::Value
    properties:
      value: {get_file: note.txt}
outputs:
  note: {value: {get_attr: [note, value]}}
"""
WAITING = """\
heat_template_version: 2016-10-14
resources:
  handle:
    type: OS::Heat::WaitConditionHandle
  waiter:
    type: OS::Heat::WaitCondition
    properties:
      handle: {get_resource: handle}
      timeout: 600
"""
HOOKED = """\
resource_registry:
  resources:
    first:
      hooks: pre-create
"""
FILES = {
    "template.yaml": TEMPLATE,
    "more.yaml": MORE,
    "main.yaml": MAIN,
    "env.yaml": ENV,
    "children/child.yaml": CHILD,
    "children/note.txt": "a note from the child\n",
    "scripts/hello.sh": "#!/bin/sh\necho hello\n",
    "waiting.yaml": WAITING,
    "hooked.yaml": HOOKED,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_up(tmp_path_factory.mktemp("cli-commands"), FILES) as running:
        assert not running.url.endswith(":8004")
        yield running


def created(server: Server, template: str = "template.yaml", *options: str) -> str:
    name = unique("s")
    server.ok("stack", "create", name, "-t", template, *options, "--wait")
    return name


def status(server: Server, name: str) -> str:
    return server.ok("stack", "show", name, "-f", "value", "-c", "stack_status").out.strip()


def test_version_and_a_subcommands_own_usage_on_a_bad_option(server: Server) -> None:
    shown = server.ok("--version")
    assert shown.out.strip().startswith("converge 0.1")
    for argv, usage in (
        (["stack", "list", "--bogus"], "converge stack list"),
        (["event", "list", "x", "--limit", "3", "--nope"], "converge event list"),
        (["--url", server.url, "stack", "list", "--long", "--wrong"], "converge stack list"),
    ):
        refused = server.converge(*argv)
        assert refused.code == 2, refused
        assert refused.err.startswith(f"usage: {usage} "), refused.err
        assert f"{usage}: error: unrecognized arguments: {argv[-1]}" in refused.err


def test_connection_options_work_before_and_after_the_command(server: Server) -> None:
    name = created(server)
    wrong = {"CONVERGE_URL": f"http://127.0.0.1:{free_port()}", "CONVERGE_TOKEN": "not-it"}
    for argv in (
        ["--url", server.url, "--token", server.token, "stack", "list", "-f", "value", "-c", "Stack Name"],
        ["stack", "list", "--url", server.url, "--token", server.token, "-f", "value", "-c", "Stack Name"],
        ["--url", server.url, "stack", "list", "--token", server.token, "-f", "value", "-c", "Stack Name"],
    ):
        listed = server.ok(*argv, env=wrong)
        assert name in listed.out.split(), argv
    refused = server.converge("--url", f"http://127.0.0.1:{free_port()}", "stack", "list")
    assert refused.code == 1
    assert "cannot connect to" in refused.err


def test_credentials_json_remembers_the_url_so_no_port_is_needed(server: Server) -> None:
    stored = json.loads((server.data_dir / "credentials.json").read_text())
    assert stored["url"] == server.url
    assert stored["token"][0].isalnum(), "a token never starts with '-'"
    name = created(server)
    listed = server.ok("stack", "list", "-f", "value", "-c", "Stack Name", url=False)
    assert name in listed.out.split()


def test_a_template_with_get_file_and_a_registry_template_from_an_environment_is_uploaded(
    server: Server,
) -> None:
    name = unique("files")
    made = server.ok("stack", "create", name, "-t", "main.yaml", "-e", "env.yaml", "--wait")
    assert "CREATE_COMPLETE" in made.out
    outputs = server.json("output", "show", name, "--all")
    assert isinstance(outputs, dict)
    assert outputs["script"]["output_value"] == "#!/bin/sh\necho hello\n"
    assert outputs["child"]["output_value"] == "a note from the child\n"
    checked = server.json("template", "validate", "-t", "main.yaml", "-e", "env.yaml")
    assert isinstance(checked, dict)
    assert "Parameters" in checked
    missing = server.converge("template", "validate", "-t", "main.yaml")
    assert missing.code == 1, "without the environment My::Child is unknown"
    assert "My::Child" in missing.err


def test_update_dry_run_shows_the_changes_and_changes_nothing(server: Server) -> None:
    name = created(server)
    preview = server.json(
        "stack", "update", name, "-t", "more.yaml", "--parameter", "greeting=hi", "--dry-run"
    )
    assert preview == {
        "added": ["third"],
        "deleted": [],
        "replaced": [],
        "updated": ["first"],
        "unchanged": [],
    }
    assert status(server, name) == "CREATE_COMPLETE"
    resources = server.json("resource", "list", name)
    assert isinstance(resources, list)
    assert [r["Resource Name"] for r in resources] == ["first"]
    kept = server.json("stack", "update", name, "--existing", "--dry-run")
    assert kept == {"added": [], "deleted": [], "replaced": [], "updated": [], "unchanged": ["first"]}


def test_check_suspend_and_resume_wait_for_their_end(server: Server) -> None:
    name = created(server)
    for action, reached in (
        ("check", "CHECK_COMPLETE"),
        ("suspend", "SUSPEND_COMPLETE"),
        ("resume", "RESUME_COMPLETE"),
    ):
        done = server.ok("stack", action, name, "--wait", "-f", "value", "-c", "stack_status")
        assert done.out.strip() == reached, action
    refused = server.converge("stack", "resume", name)
    assert refused.code == 1
    assert "error: " in refused.err


def test_abandon_then_adopt_takes_the_same_resources_back(server: Server, tmp_path: Path) -> None:
    name = created(server)
    before = server.ok("resource", "show", name, "first", "-f", "value", "-c", "physical_resource_id").out
    data = tmp_path / "abandoned.json"
    left = server.ok("stack", "abandon", name, "--output-file", str(data))
    assert "abandoned" in left.err
    assert json.loads(data.read_text())["resources"]["first"]["resource_id"] == before.strip()
    gone = server.converge("stack", "show", name)
    assert gone.code == 1
    adopted = server.ok("stack", "adopt", name, "--adopt-file", str(data), "--wait")
    assert "ADOPT_COMPLETE" in adopted.out
    after = server.ok("resource", "show", name, "first", "-f", "value", "-c", "physical_resource_id").out
    assert after == before
    unwritable = server.converge("stack", "abandon", name, "--output-file", str(tmp_path / "no" / "x.json"))
    assert unwritable.code == 1
    assert "cannot write" in unwritable.err
    assert status(server, name) == "ADOPT_COMPLETE", "nothing is abandoned without a place for its data"
    printed = server.json("stack", "abandon", name)
    assert isinstance(printed, dict)
    assert printed["name"] == name


def test_a_resource_is_signalled_and_marked_unhealthy(server: Server) -> None:
    name = unique("waits")
    started = server.ok("stack", "create", name, "-t", "waiting.yaml", "-f", "value", "-c", "stack_status")
    assert started.out.strip() == "CREATE_IN_PROGRESS"
    bad = server.converge("resource", "signal", name, "handle", "--data", "{not json")
    assert bad.code == 1
    assert "--data is not valid JSON" in bad.err
    signalled = server.ok(
        "resource", "signal", name, "handle", "--data", '{"status": "SUCCESS", "reason": "up"}'
    )
    assert signalled.out == ""
    waited = server.ok("event", "list", name, "--follow")
    assert "[waiter]: CREATE_COMPLETE" in waited.out
    assert status(server, name) == "CREATE_COMPLETE"

    server.ok("resource", "mark-unhealthy", name, "waiter", "found broken")
    shown = server.json("resource", "show", name, "waiter")
    assert isinstance(shown, dict)
    assert (shown["resource_status"], shown["resource_status_reason"]) == ("CHECK_FAILED", "found broken")
    server.ok("resource", "mark-unhealthy", name, "waiter", "--reset")
    shown = server.json("resource", "show", name, "waiter")
    assert isinstance(shown, dict)
    assert shown["resource_status"] == "CHECK_COMPLETE"


def test_a_hook_is_polled_and_cleared(server: Server) -> None:
    name = unique("hooked")
    started = server.ok("stack", "create", name, "-t", "template.yaml", "-e", "hooked.yaml")
    assert started.out
    polled: Any = []
    for _ in range(600):  # the pause is an event the engine records as it reaches the hook
        polled = server.json("stack", "hook", "poll", name)
        if polled:
            break
    assert polled == [
        {"Resource Name": "first", "Type": "OS::Heat::TestResource", "Hook": "pre-create", "Stack Name": name}
    ]
    refused = server.converge("stack", "hook", "clear", name, "first")
    assert refused.code == 1
    assert "say which hook to clear" in refused.err
    server.ok("stack", "hook", "clear", "--pre-create", name, "first")
    server.ok("event", "list", name, "--follow")
    assert status(server, name) == "CREATE_COMPLETE"
    assert server.json("stack", "hook", "poll", name) == []


def test_output_show_all_lists_every_output_with_its_value(server: Server) -> None:
    name = created(server, "template.yaml", "--parameter", "greeting=hey")
    outputs: Any = server.json("output", "show", name, "--all")
    assert {k: v["output_value"] for k, v in outputs.items()} == {"message": "hey", "doubled": "hey-hey"}
    assert outputs["message"]["description"] == "the greeting"
    table = server.ok("output", "show", name, "--all").out
    assert "message" in table
    assert "doubled" in table
    neither = server.converge("output", "show", name)
    assert neither.code == 1
    assert "output KEY or --all" in neither.err


def test_stack_list_filters_by_tags_pages_and_shows_more_with_long(server: Server) -> None:
    x, y = f"x{uuid.uuid4().hex[:6]}", f"y{uuid.uuid4().hex[:6]}"
    both = created(server, "template.yaml", "--tags", f"{x},{y}")
    only_x = created(server, "template.yaml", "--tags", x)
    none = created(server)

    def names(*options: str) -> set[str]:
        rows: Any = server.json("stack", "list", *options)
        return {row["Stack Name"] for row in rows} & {both, only_x, none}

    assert names("--tags", f"{x},{y}") == {both}
    assert names("--tags", f"{x},{y}", "--tag-mode", "any") == {both, only_x}
    assert names("--tags", f"{x},{y}", "--tag-mode", "not") == {only_x, none}
    assert names("--tags", f"{x},{y}", "--tag-mode", "not-any") == {none}

    long: Any = server.json("stack", "list", "--long", "--tags", x)
    assert {row["Stack Name"]: (row["Project"], row["Tags"]) for row in long} == {
        both: ("demo", [x, y]),
        only_x: ("demo", [x]),
    }
    everything: Any = server.json("stack", "list")
    ids = [row["ID"] for row in everything]
    assert len(ids) >= 3
    limited: Any = server.json("stack", "list", "--limit", "1")
    assert [row["ID"] for row in limited] == ids[:1]
    after: Any = server.json("stack", "list", "--marker", ids[0], "--limit", "2")
    assert [row["ID"] for row in after] == ids[1:3]


def test_event_list_pages_with_limit_and_marker(server: Server) -> None:
    name = created(server)
    events: Any = server.json("event", "list", name)
    assert len(events) >= 4
    two: Any = server.json("event", "list", name, "--limit", "2")
    assert [e["ID"] for e in two] == [e["ID"] for e in events[:2]]
    rest: Any = server.json("event", "list", name, "--marker", events[1]["ID"])
    assert [e["ID"] for e in rest] == [e["ID"] for e in events[2:]]


def test_deleting_several_stacks_reports_each_and_goes_on_past_a_missing_one(server: Server) -> None:
    first, second = created(server), created(server)
    missing = unique("typo")
    deleted = server.converge("stack", "delete", first, missing, second, "-y", "--wait")
    assert deleted.code == 1, deleted
    lines = deleted.err.strip().splitlines()
    assert f"error: cannot delete stack {missing}: The Stack ({missing}) could not be found." in lines
    assert f"Stack {first} deleted." in lines
    assert f"Stack {second} deleted." in lines
    for name in (first, second):
        assert server.converge("stack", "show", name).code == 1
    third = created(server)
    started = server.ok("stack", "delete", third, "-y")
    assert started.err.strip() == f"Deleting stack {third}."


def test_up_on_a_busy_port_is_one_line_and_exit_2(server: Server, tmp_path: Path) -> None:
    port = server.url.rsplit(":", 1)[1]
    for argv, env in (
        (["up", "--port", port, "--data-dir", str(tmp_path / "a")], {}),
        (["up"], {"CONVERGE_API_PORT": port, "CONVERGE_DATA_DIR": str(tmp_path / "b")}),
    ):
        busy = server.converge(*argv, env=env)
        assert busy.code == 2, busy
        assert busy.err.strip() == (
            f"converge up: port {port} on 127.0.0.1 is in use; stop what holds it, or choose "
            "another port with --port (or CONVERGE_API_PORT)"
        )
        assert busy.out == ""
    helped = server.ok("up", "--help")
    assert "--port PORT" in helped.out
    assert "--data-dir DIR" in helped.out
