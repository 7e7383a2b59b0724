"""The config types' declarations and the pure parts the engine runs them with."""

from __future__ import annotations

import email
import uuid
from email.message import Message
from typing import cast

import pytest
from pydantic import ValidationError

from shared.errors import PermanentError
from shared.plugins.base import UpdateRule, update_rule
from shared.plugins.builtin.software_config import (
    CloudConfigProperties,
    MultipartMime,
    MultipartMimeProperties,
    SoftwareConfig,
    SoftwareConfigProperties,
    StructuredConfig,
    StructuredConfigProperties,
    cloud_config_text,
    config_spec,
    referenced_ids,
)
from shared.plugins.registry import type_schema


def test_software_config_fills_heats_defaults_for_inputs_and_outputs() -> None:
    props = SoftwareConfigProperties.model_validate(
        {"config": "echo hi", "inputs": [{"name": "x"}], "outputs": [{"name": "y", "error_output": True}]}
    )
    spec = config_spec(props)
    assert spec.group == "Heat::Ungrouped"
    assert spec.inputs == [
        {"name": "x", "description": None, "type": "String", "default": None, "replace_on_change": False}
    ]
    assert spec.outputs == [{"name": "y", "description": None, "type": "String", "error_output": True}]
    assert spec.stored() == {
        "config": "echo hi",
        "inputs": spec.inputs,
        "outputs": spec.outputs,
        "options": {},
    }


@pytest.mark.parametrize(
    ("props", "where"),
    [
        ({"inputs": [{"description": "nameless"}]}, "inputs"),
        ({"outputs": [{"name": "o", "type": "Float"}]}, "outputs"),
        ({"config": {"a": 1}}, "config"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_software_config_refuses_bad_properties_naming_them(props: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as refused:
        SoftwareConfigProperties.model_validate(props)
    assert refused.value.errors()[0]["loc"][0] == where


def test_structured_config_keeps_a_map() -> None:
    spec = config_spec(StructuredConfigProperties.model_validate({"group": "ansible", "config": {"a": [1]}}))
    assert (spec.group, spec.config) == ("ansible", {"a": [1]})
    with pytest.raises(ValidationError):
        StructuredConfigProperties.model_validate({"config": "text"})


def test_cloud_config_is_the_cloud_config_header_then_yaml() -> None:
    spec = config_spec(CloudConfigProperties.model_validate({"cloud_config": {"runcmd": ["ls"]}}))
    assert spec.config == "#cloud-config\nruncmd:\n- ls\n"
    assert cloud_config_text({}) == "#cloud-config\n{}\n"


def test_multipart_mime_uses_referenced_configs_and_keeps_unknown_ids_as_text() -> None:
    known, unknown = uuid.uuid4(), uuid.uuid4()
    props = MultipartMimeProperties.model_validate(
        {
            "parts": [
                {"config": str(known), "filename": "setup.sh", "subtype": "x-shellscript"},
                {"config": str(unknown)},
                {"config": "inline", "filename": "cloud-config.txt"},
            ]
        }
    )
    assert referenced_ids(props) == [known, unknown]
    message = email.message_from_string(config_spec(props, {known: "#!/bin/sh\nls\n"}).config)
    parts = [
        (p.get_content_type(), p.get_filename(), p.get_payload())
        for p in cast("list[Message]", message.get_payload())
    ]
    assert parts == [
        ("text/x-shellscript", "setup.sh", "#!/bin/sh\nls\n"),
        ("text/plain", None, str(unknown)),
        ("text/cloud-config", "cloud-config.txt", "inline"),
    ], "the subtype defaults to the filename without its extension, as Heat's"


def test_a_multipart_part_adds_the_parts_of_another_message() -> None:
    inner_id = uuid.uuid4()
    inner = config_spec(
        MultipartMimeProperties.model_validate(
            {"parts": [{"config": "one"}, {"config": "two", "subtype": "x-a"}]}
        )
    ).config
    outer = MultipartMimeProperties.model_validate(
        {"parts": [{"config": str(inner_id), "type": "multipart"}, {"config": "three"}]}
    )
    message = email.message_from_string(config_spec(outer, {inner_id: inner}).config)
    assert [
        (p.get_content_type(), p.get_payload()) for p in cast("list[Message]", message.get_payload())
    ] == [
        ("text/plain", "one"),
        ("text/x-a", "two"),
        ("text/plain", "three"),
    ]


def test_every_config_property_replaces_the_resource() -> None:
    for schema in (
        SoftwareConfigProperties,
        StructuredConfigProperties,
        CloudConfigProperties,
        MultipartMimeProperties,
    ):
        assert {update_rule(schema, name) for name in schema.model_fields} == {UpdateRule.REPLACE}


async def test_a_worker_refuses_a_config_job_the_engine_runs() -> None:
    with pytest.raises(PermanentError, match="run by the engine"):
        await SoftwareConfig().create(None, SoftwareConfigProperties())  # type: ignore[arg-type]


def test_the_types_describe_their_config_attribute() -> None:
    for cls in (SoftwareConfig, StructuredConfig, MultipartMime):
        schema = type_schema(cls)
        assert "config" in schema["attributes"]
    assert type_schema(StructuredConfig)["attributes"]["config"]["type"] == "map"
