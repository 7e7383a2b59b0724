"""The `converge` CLI gathers a template's and its environments' files as python-heatclient does.

Real: files in a temporary directory, python-heatclient's own `template_utils`
(a test dependency) run on the same files for comparison. Nothing faked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.cli.client import CliError
from services.cli.uploads import MAX_DEPTH, Uploads, file_url

MAIN = """\
heat_template_version: 2016-10-14
parameters:
  kind: {type: string, default: plain}
resources:
  script:
    type: OS::Heat::Value
    properties:
      value: {get_file: scripts/boot.sh}
  child:
    type: My::Child
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: member.yaml
  binary:
    type: OS::Heat::Value
    properties:
      value: {get_file: logo.bin}
"""
CHILD = """\
heat_template_version: 2016-10-14
resources:
  inner:
    type: OS::Heat::Value
    properties:
      value: {get_file: ../scripts/boot.sh}
  config:
    type: OS::Heat::Value
    properties:
      value: {get_file: data.json}
"""
MEMBER = """\
heat_template_version: 2016-10-14
resources:
  none: {type: OS::Heat::None}
"""
ENV = """\
parameters:
  kind: special
resource_registry:
  My::Child: children/child.yaml
  My::Alias: OS::Heat::None
  resources:
    child:
      My::Other: other.yaml
      hooks: pre-create
"""
LATER_ENV = """\
parameter_defaults:
  size: 3
resource_registry:
  base_url: {base}
  My::Late: late.yaml
"""


def layout(root: Path) -> Path:
    (root / "scripts").mkdir()
    (root / "children").mkdir()
    (root / "elsewhere").mkdir()
    (root / "main.yaml").write_text(MAIN)
    (root / "member.yaml").write_text(MEMBER)
    (root / "scripts" / "boot.sh").write_text("#!/bin/sh\necho booting\n")
    (root / "logo.bin").write_bytes(bytes(range(256)))
    (root / "children" / "child.yaml").write_text(CHILD)
    (root / "children" / "data.json").write_text('{"not": "a template"}')
    (root / "other.yaml").write_text(MEMBER)
    (root / "env.yaml").write_text(ENV)
    (root / "elsewhere" / "late.yaml").write_text(MEMBER)
    (root / "late-env.yaml").write_text(LATER_ENV.format(base=(root / "elsewhere").as_uri()))
    return root


def normalised(files: dict[str, Any]) -> dict[str, Any]:
    """Templates compared as data (both send them as JSON), other files as text."""
    out: dict[str, Any] = {}
    for url, content in files.items():
        text = content.decode() if isinstance(content, bytes) else content
        try:
            out[url] = json.loads(text)
        except ValueError:
            out[url] = text
    return out


def test_the_template_environments_and_files_are_what_heatclient_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from heatclient.common import template_utils

    root = layout(tmp_path)
    monkeypatch.chdir(root)
    uploads = Uploads()
    template = uploads.template("main.yaml")
    environment = uploads.environments(["env.yaml", "late-env.yaml"])

    their_files, their_template = template_utils.process_template_path("main.yaml")
    their_env_files, their_env = template_utils.process_multiple_environments_and_files(
        env_paths=["env.yaml", "late-env.yaml"]
    )
    assert template == their_template
    assert environment == their_env
    assert normalised(uploads.files) == normalised({**their_files, **their_env_files})

    # and what that is: absolute file URLs, references rewritten to them
    boot = (root / "scripts" / "boot.sh").as_uri()
    assert template["resources"]["script"]["properties"]["value"] == {"get_file": boot}
    assert uploads.files[boot] == "#!/bin/sh\necho booting\n"
    child = json.loads(uploads.files[(root / "children" / "child.yaml").as_uri()])
    assert child["resources"]["inner"]["properties"]["value"] == {"get_file": boot}
    assert environment["resource_registry"]["My::Alias"] == "OS::Heat::None"
    assert environment["resource_registry"]["resources"]["child"]["hooks"] == "pre-create"
    assert environment["resource_registry"]["My::Late"] == (root / "elsewhere" / "late.yaml").as_uri()
    assert environment["parameters"] == {"kind": "special"}
    assert environment["parameter_defaults"] == {"size": 3}


def test_a_script_that_mentions_a_version_key_is_sent_as_it_is(tmp_path: Path) -> None:
    """(heatclient takes the text for a template there, and sends it mangled.)"""
    (tmp_path / "t.yaml").write_text(
        "heat_template_version: 2016-10-14\nresources:\n  s: {type: OS::Heat::Value, "
        "properties: {value: {get_file: say.sh}}}\n"
    )
    (tmp_path / "say.sh").write_text("#!/bin/sh\necho heat_template_version\n")
    uploads = Uploads()
    uploads.template(str(tmp_path / "t.yaml"))
    assert uploads.files == {file_url(str(tmp_path / "say.sh")): "#!/bin/sh\necho heat_template_version\n"}


def test_a_template_that_refers_to_itself_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("heat_template_version: 2016-10-14\nresources:\n  b: {type: b.yaml}\n")
    (tmp_path / "b.yaml").write_text("heat_template_version: 2016-10-14\nresources:\n  a: {type: a.yaml}\n")
    uploads = Uploads()
    template = uploads.template(str(tmp_path / "a.yaml"))
    b = file_url(str(tmp_path / "b.yaml"))
    assert template["resources"]["b"]["type"] == b
    assert set(uploads.files) == {b, file_url(str(tmp_path / "a.yaml"))}


def test_templates_nested_too_deep_are_refused_naming_where(tmp_path: Path) -> None:
    for i in range(MAX_DEPTH + 2):
        (tmp_path / f"t{i}.yaml").write_text(
            f"heat_template_version: 2016-10-14\nresources:\n  next: {{type: t{i + 1}.yaml}}\n"
        )
    (tmp_path / f"t{MAX_DEPTH + 2}.yaml").write_text("heat_template_version: 2016-10-14\n")
    with pytest.raises(CliError, match=f"nest more than {MAX_DEPTH} deep at file:"):
        Uploads().template(str(tmp_path / "t0.yaml"))


def test_missing_files_and_urls_are_one_line_errors_naming_them(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "heat_template_version: 2016-10-14\nresources:\n  s: {type: OS::Heat::Value, "
        "properties: {value: {get_file: nothere.sh}}}\n"
    )
    with pytest.raises(CliError, match=r"cannot read file .*nothere.sh: No such file or directory"):
        Uploads().template(str(tmp_path / "t.yaml"))
    (tmp_path / "u.yaml").write_text(
        "heat_template_version: 2016-10-14\nresources:\n  s: {type: 'http://example.com/x.yaml'}\n"
    )
    with pytest.raises(CliError, match=r"http://example.com/x.yaml: converge uploads local files only"):
        Uploads().template(str(tmp_path / "u.yaml"))
    with pytest.raises(CliError, match=r"^cannot read environment missing-env.yaml: No such file"):
        Uploads().environments(["missing-env.yaml"])


def test_a_yaml_error_names_the_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("heat_template_version: 2016-10-14\nresources:\n  a: [1, 2\n")
    with pytest.raises(CliError) as caught:
        Uploads().template(str(tmp_path / "bad.yaml"))
    message = str(caught.value)
    where = "is not valid YAML or JSON: line 4, column 1:"
    assert message.startswith(f"template {tmp_path / 'bad.yaml'} {where}")
    assert "\n" not in message
