"""Real HOT templates (tests/templates/) load, validate and resolve as Heat would.

Real: the template layer and the plugin registry's built-in types when the
registry is installed (else the declaration-only test types). Resources are
"created" in dependency order with deterministic simulated attributes.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from services.engine.template import (
    DeletionPolicy,
    ResourceData,
    TemplateInvalid,
    load_stack,
    parse_environment,
    resolve_metadata,
)

from .helpers import IDENTITY, TEMPLATES, converge, real_types

FILES = {
    "scripts/setup.sh": "#!/bin/sh\necho hi\n",
    "config.tmpl": "name=__NAME__\n",
    "nested_server.yaml": (TEMPLATES / "nested_server.yaml").read_text(),
}
SCRIPT = '#!/bin/sh\necho booting\nwc_notify --data-binary \'{"status": "SUCCESS"}\'\n'
URL = "https://admin:p%40ss%20word@[2001:db8::1]:8443/v1/items%20list?limit=10&path=a/b#top"

# file, parameters, environment file, expected resource properties, expected outputs
CASES: list[tuple[str, dict[str, Any], str | None, dict[str, Any], dict[str, Any]]] = [
    (
        "hello_world.yaml",
        {"key_name": "mykey"},
        None,
        {"my_instance": {"value": "server key=mykey image=cirros-0.5 flavor=m1.small"}},
        {"instance_ip": "server key=mykey image=cirros-0.5 flavor=m1.small"},
    ),
    (
        "parameters_all_types.yaml",
        {},
        None,
        {
            "summary": {
                "value": {
                    "name": "web",
                    "count": 4,
                    "first_zone": "az1",
                    "zones": ["az1", "az2"],
                    "mode": "fast",
                    "missing": "",
                    "debug": True,
                    "port": 8080,
                    "stack": "teststack",
                    "stack_id": "sid-1",
                    "project": "pid-1",
                }
            }
        },
        {
            "summary": {
                "name": "web",
                "count": 4,
                "first_zone": "az1",
                "zones": ["az1", "az2"],
                "mode": "fast",
                "missing": "",
                "debug": True,
                "port": 8080,
                "stack": "teststack",
                "stack_id": "sid-1",
                "project": "pid-1",
            }
        },
    ),
    (
        "conditions_newton.yaml",
        {},
        None,
        {
            "server": {"value": "no-volume", "update_replace": False},
            "test_only": {"value": "test-only"},
        },
        {"volume_value": None, "server_value": "no-volume", "mode": "testing"},
    ),
    (
        "conditions_newton.yaml",
        {"env_type": "prod", "zone": "z1"},
        None,
        {
            "volume": {"value": "big-volume"},
            "server": {"value": "big-volume", "update_replace": True},
            "zone_marker": {},
        },
        {"volume_value": "big-volume", "server_value": "big-volume", "mode": "production"},
    ),
    (
        "wallaby_if.yaml",
        {},
        None,
        {"app": {"value": "premium", "fail": False}, "tags": {"value": ["always", "listed"]}},
        {"tags": ["always", "listed"]},
    ),
    (
        "wallaby_if.yaml",
        {"tier": "bronze", "extra": "true"},
        None,
        {
            "app": {"value": "standard", "update_replace_value": "changed", "fail": False},
            "tags": {"value": ["always", "extra"]},
        },
        {"tags": ["always", "extra"]},
    ),
    (
        "list_functions.yaml",
        {},
        None,
        {
            "lists": {
                "value": {
                    "concat": ["a", "b", "b", "c", "x", "y", "x"],
                    "unique": ["a", "b", "c", "x", "y"],  # the first of repeated items, as Heat
                    "filtered": ["a", "y"],
                    "has_c": True,
                    "has_y": True,
                    "b_listed": "yes-b",
                }
            }
        },
        {},
    ),
    (
        "string_functions.yaml",
        {},
        None,
        {
            "strings": {
                "value": {
                    "dsn": "postgres://user:s3cr3t@db.example.com:5432/db",
                    "strict": "hello world",
                    "vstrict": "id=secret-id",
                    "json_param": 'config: {"a": [1, 2]}',
                    "joined": "a, b, c, d, e",
                    "joined_maps": '{"k": "v"}|[1, 2]',
                    "second": "example",
                    "digest": hashlib.sha256(b"s3cr3t").hexdigest(),
                    "md5": "5d41402abc4b2a76b9719d911017c592",
                }
            }
        },
        {},
    ),
    (
        "map_functions.yaml",
        {},
        None,
        {
            "merged": {
                "value": {
                    "merged": {"colour": "red", "size": "large", "owner": "team-a", "source": "tagged"},
                    "replaced": {"color": "R", "size": "S", "owner": "team-a"},
                }
            }
        },
        {},
    ),
    (
        "repeat_ports.yaml",
        {},
        None,
        {
            "rules": {
                "value": [
                    {"protocol": proto, "port_range_min": port, "port_range_max": port}
                    for port in ("80", "443", "8080")
                    for proto in ("tcp", "udp")
                ]
            },
            "pairs": {"value": ["a-1", "b-2"]},
            "keys": {"value": [{"web": "web-server"}, {"db": "db-server"}]},
        },
        {"pair_marks": "a-1!,b-2!"},
    ),
    (
        "make_url.yaml",
        {},
        None,
        {"endpoint": {"url": URL, "body": {"static_url": "http://example.com/"}}},
        {"url": URL},
    ),
    (
        "get_attr_paths.yaml",
        {},
        None,
        {
            "consumer": {"value": "alpha 10.0.0.2 config-id"},
            "missing": {},
        },
        {"owner": "ops", "consumer_ref": "consumer-id"},
    ),
    (
        "cfn_functions_2013.yaml",
        {},
        None,
        {
            "first": {"value": "hello-two-plain"},
            "second": {"value": "hi hello-two-plain"},
            "third": {"value": {"split": ["a", "b", "c"], "ref": "first-id", "joined": "x:y"}},
        },
        {"second": "hi hello-two-plain"},
    ),
    (
        "juno_select.json",
        {},
        None,
        {"picker": {"value": "m1.xlarge"}, "indexer": {"value": "l/m1.xlarge"}},
        {"choice": "l/m1.xlarge"},
    ),
    (
        "wait_condition.yaml",
        {},
        None,
        {
            "boot_script": {
                "value": SCRIPT.replace("wc_notify", "curl -i -X POST http://signal/wait_handle")
            },
            "wait_condition": {"handle": "wait_handle-id", "count": 1, "timeout": 600},
        },
        {"wc_data": '{"1": "done"}'},
    ),
    (
        "random_string_policies.yaml",
        {},
        None,
        {
            "password": {"length": 24, "sequence": "lettersdigits"},
            "adopted": {"value": "adopted"},
            "user": {"value": "R" * 24},
        },
        {"password": "R" * 24},
    ),
    (
        "http_resource.json",
        {},
        None,
        {
            "item": {
                "url": "http://api.example.com/items",
                "headers": {"X-Stack": "teststack"},
                "body": {
                    "name": "RRRRRRRR",
                    "labels": {"team": "a", "stack_id": "sid-1"},
                    "owner": "pid-1",
                },
            }
        },
        {"item_id": "item-1", "item_ref": "item-id"},
    ),
    (
        "get_file.yaml",
        {},
        None,
        {
            "script": {"value": "#!/bin/sh\necho hi\n"},
            "config": {"value": {"config": "name=teststack\n", "filtered": ["a", "b"]}},
        },
        {"config": {"config": "name=teststack\n", "filtered": ["a", "b"]}},
    ),
    (
        "template_resource.yaml",
        {},
        "template_resource_env.yaml",
        {
            "server": {"flavor": "m1.large"},
            "watcher": {"value": "server-nested"},
            "direct": {"flavor": "m1.small", "name": "direct"},
        },
        {"server_name": "server-nested"},
    ),
    (
        "registry_aliases.yaml",
        {},
        "registry_aliases_env.yaml",
        {"legacy": {"value": "size=3"}, "placeholder": {"anything": "goes"}},
        {"value": "size=3"},
    ),
    (
        "registry_aliases.yaml",
        {"size": "5"},
        "registry_aliases_env.yaml",
        {"legacy": {"value": "size=5"}},
        {"value": "size=5"},
    ),
    (
        "hot_guide_outputs.yaml",
        {},
        None,
        {"db": {"value": "appdb"}, "web": {"value": "connect to appdb on db-id"}},
        {
            "web_value": "connect to appdb on db-id",
            "db_all": {"output": "appdb"},
            "both": ["appdb", "connect to appdb on db-id"],
        },
    ),
]


def _load(file: str, params: dict[str, Any], env_file: str | None) -> Any:
    env = (TEMPLATES / env_file).read_text() if env_file else None
    return load_stack(
        (TEMPLATES / file).read_bytes(),
        environment=env,
        parameters=params,
        files=FILES,
        types=real_types(),
        identity=IDENTITY,
    )


@pytest.mark.parametrize(
    ("file", "params", "env_file", "expected_props", "expected_outputs"),
    CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)],
)
def test_template_resolves_like_heat(
    file: str,
    params: dict[str, Any],
    env_file: str | None,
    expected_props: dict[str, Any],
    expected_outputs: dict[str, Any],
) -> None:
    stack = _load(file, params, env_file)
    props, outputs = converge(stack)
    for name, expected in expected_props.items():
        assert props[name] == expected, name
    for name, expected in expected_outputs.items():
        assert outputs[name] == expected, name


def test_there_are_at_least_fifteen_real_templates() -> None:
    used = {case[0] for case in CASES}
    assert len(used) >= 15
    on_disk = {p.name for p in TEMPLATES.iterdir() if p.suffix in (".yaml", ".json")}
    assert used <= on_disk
    assert any(name.endswith(".json") for name in used)


def test_conditions_remove_resources_and_their_edges() -> None:
    test = _load("conditions_newton.yaml", {}, None)
    assert set(test.resources) == {"server", "test_only"}
    assert test.disabled == {"volume", "zone_marker"}
    assert test.requires("server") == frozenset()  # depends_on a disabled resource is ignored
    prod = _load("conditions_newton.yaml", {"env_type": "prod"}, None)
    assert prod.requires("server") == {"volume"}
    assert prod.conditions == {
        "is_prod": True,
        "is_test": False,
        "has_zone": False,
        "prod_with_zone": False,
        "prod_or_zone": True,
    }


def test_output_referencing_a_disabled_resource_is_an_error() -> None:
    with pytest.raises(TemplateInvalid) as caught:
        _load("http_resource.json", {"enabled": False}, None)
    assert caught.value.errors[0].path == "outputs.item_id.value.get_attr"
    assert "disabled by its condition" in caught.value.errors[0].message


def test_resource_options_are_kept() -> None:
    stack = _load("random_string_policies.yaml", {}, None)
    assert stack.resources["password"].deletion_policy is DeletionPolicy.RETAIN
    assert stack.resources["adopted"].deletion_policy is DeletionPolicy.RETAIN
    assert stack.resources["adopted"].external_id == "existing-1234"
    user = stack.resources["user"]
    assert user.update_policy == {"max_batch_size": 2, "pause_time": 5}
    assert user.requires == {"password", "adopted"}
    assert user.depends_on == ("adopted",)
    assert user.references == {"password"}
    data = {"password": ResourceData("pw-id", {"value": "x"})}
    assert resolve_metadata(stack, "user", data) == {"password_ref": "pw-id", "note": "static"}


def test_template_resource_types_map_to_files() -> None:
    stack = _load("template_resource.yaml", {}, "template_resource_env.yaml")
    assert stack.resources["server"].type == "nested_server.yaml"
    assert stack.resources["server"].template_type == "My::Server"
    assert stack.resources["server"].nested_template == "nested_server.yaml"
    env = parse_environment((TEMPLATES / "template_resource_env.yaml").read_text())
    assert env.resolve_type("Legacy::Value") == "OS::Heat::Value"
