"""`converge software config create|show|list|delete`: the /software_configs API.

As `openstack software config ...`: `create NAME [--config-file FILE]
[--definition-file FILE] [--group GROUP]` (the definition file is YAML or JSON
with `inputs`, `outputs` and `options`), `show CONFIG [--config-only]`,
`list [--limit N] [--marker ID]`, `delete CONFIG [CONFIG ...]`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from services.cli.client import CliError, segment
from services.cli.commands import Context, Groups, command
from services.cli.output import Column

LIST_COLUMNS = [
    Column("ID", "id"),
    Column("Name", "name"),
    Column("Group", "group"),
    Column("Creation Time", "creation_time"),
]
DEFINITION_KEYS = ("inputs", "outputs", "options")


def register(groups: Groups) -> None:
    config = groups("software").add_parser(
        "config", help="create, show, list and delete software configs", description="software configs"
    )
    config.set_defaults(parser=config)
    actions = config.add_subparsers(dest="config_action", required=True, metavar="ACTION")
    create = command(actions, "create", create_config, help="create a software config", common=groups.common)
    create.add_argument("name", metavar="NAME")
    create.add_argument("--config-file", type=Path, help="file holding the config (script or manifest)")
    create.add_argument(
        "--definition-file", type=Path, help="YAML or JSON file with the config's inputs, outputs and options"
    )
    create.add_argument("--group", default="Heat::Ungrouped", help="the tool that runs the config")
    show = command(actions, "show", show_config, help="show a software config", common=groups.common)
    show.add_argument("config", metavar="CONFIG")
    show.add_argument("--config-only", action="store_true", help="print only the config itself")
    listing = command(actions, "list", list_configs, help="list software configs", common=groups.common)
    listing.add_argument("--limit", type=int, help="show at most this many")
    listing.add_argument("--marker", help="start after the config with this id")
    delete = command(actions, "delete", delete_configs, help="delete software configs", common=groups.common)
    delete.add_argument("configs", metavar="CONFIG", nargs="+")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc


def definition(path: Path) -> dict[str, Any]:
    """The inputs, outputs and options a definition file gives."""
    try:
        loaded = yaml.safe_load(_read(path))
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not YAML or JSON: {exc}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise CliError(f"{path}: a definition is a map of inputs, outputs and options")
    unknown = sorted(set(loaded) - set(DEFINITION_KEYS))
    if unknown:
        raise CliError(f"{path}: unknown keys {', '.join(unknown)} (allowed: {', '.join(DEFINITION_KEYS)})")
    return {k: loaded[k] for k in DEFINITION_KEYS if k in loaded}


async def create_config(args: argparse.Namespace, ctx: Context) -> int:
    body: dict[str, Any] = {"name": args.name, "group": args.group}
    if args.definition_file is not None:
        body |= definition(args.definition_file)
    body["config"] = _read(args.config_file) if args.config_file is not None else ""
    created = await ctx.api.post("software_configs", body)
    ctx.print(ctx.output.record(created["software_config"]))
    return 0


async def show_config(args: argparse.Namespace, ctx: Context) -> int:
    shown = (await ctx.api.get(f"software_configs/{segment(args.config)}"))["software_config"]
    if args.config_only:
        config = shown.get("config")
        ctx.print(config if isinstance(config, str) else yaml.safe_dump(config, default_flow_style=False))
        return 0
    ctx.print(ctx.output.record(shown))
    return 0


async def list_configs(args: argparse.Namespace, ctx: Context) -> int:
    params = {}
    if args.limit is not None:
        params["limit"] = str(args.limit)
    if args.marker is not None:
        params["marker"] = args.marker
    listed = await ctx.api.get("software_configs", params=params or None)
    ctx.print(ctx.output.rows(listed["software_configs"], LIST_COLUMNS))
    return 0


async def delete_configs(args: argparse.Namespace, ctx: Context) -> int:
    for config in args.configs:
        await ctx.api.request("DELETE", f"software_configs/{segment(config)}")
        print(f"Deleted software config {config}.", file=ctx.console.err)
    return 0
