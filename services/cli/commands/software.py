"""`converge software config ...` and `converge software deployment ...`: the
/software_configs and /software_deployments APIs.

As `openstack software config ...`: `create NAME [--config-file FILE]
[--definition-file FILE] [--group GROUP]` (the definition file is YAML or JSON
with `inputs`, `outputs` and `options`), `show CONFIG [--config-only]`,
`list [--limit N] [--marker ID]`, `delete CONFIG [CONFIG ...]`.

As `openstack software deployment ...`: `list [--server SERVER]`, `show
DEPLOYMENT`, `output show DEPLOYMENT [OUTPUT]` (every output without a name),
`metadata show SERVER` (the configs the server's agent runs, as JSON), `delete
DEPLOYMENT [DEPLOYMENT ...]`. Deployments are made by the deployment resource
types (or `POST /software_deployments`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from services.cli.client import CliError, segment
from services.cli.commands import Context, Groups, command
from services.cli.output import Column

DEPLOYMENT_COLUMNS = [
    Column("ID", "id"),
    Column("Config ID", "config_id"),
    Column("Server ID", "server_id"),
    Column("Action", "action"),
    Column("Status", "status"),
]
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

    register_deployments(groups)


def register_deployments(groups: Groups) -> None:
    deployment = groups("software").add_parser(
        "deployment", help="show, list and delete software deployments", description="software deployments"
    )
    deployment.set_defaults(parser=deployment)
    actions = deployment.add_subparsers(dest="deployment_action", required=True, metavar="ACTION")
    listing = command(
        actions, "list", list_deployments, help="list software deployments", common=groups.common
    )
    listing.add_argument("--server", help="only the deployments to this server")
    show = command(actions, "show", show_deployment, help="show a software deployment", common=groups.common)
    show.add_argument("deployment", metavar="DEPLOYMENT")
    delete = command(
        actions, "delete", delete_deployments, help="delete software deployments", common=groups.common
    )
    delete.add_argument("deployments", metavar="DEPLOYMENT", nargs="+")
    output = actions.add_parser("output", help="a deployment's outputs")
    output.set_defaults(parser=output)
    output_actions = output.add_subparsers(dest="output_action", required=True, metavar="ACTION")
    output_show = command(
        output_actions,
        "show",
        show_deployment_output,
        help="show a deployment's outputs",
        common=groups.common,
    )
    output_show.add_argument("deployment", metavar="DEPLOYMENT")
    output_show.add_argument("output", metavar="OUTPUT", nargs="?", help="one output (default: all)")
    metadata = actions.add_parser("metadata", help="the configs a server's agent runs")
    metadata.set_defaults(parser=metadata)
    metadata_actions = metadata.add_subparsers(dest="metadata_action", required=True, metavar="ACTION")
    metadata_show = command(
        metadata_actions,
        "show",
        show_metadata,
        help="show a server's deployment metadata",
        common=groups.common,
    )
    metadata_show.add_argument("server", metavar="SERVER")


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


async def list_deployments(args: argparse.Namespace, ctx: Context) -> int:
    params = {"server_id": args.server} if args.server is not None else None
    listed = await ctx.api.get("software_deployments", params=params)
    ctx.print(ctx.output.rows(listed["software_deployments"], DEPLOYMENT_COLUMNS))
    return 0


async def show_deployment(args: argparse.Namespace, ctx: Context) -> int:
    shown = await ctx.api.get(f"software_deployments/{segment(args.deployment)}")
    ctx.print(ctx.output.record(shown["software_deployment"]))
    return 0


async def show_deployment_output(args: argparse.Namespace, ctx: Context) -> int:
    shown = (await ctx.api.get(f"software_deployments/{segment(args.deployment)}"))["software_deployment"]
    outputs = dict(shown.get("output_values") or {})
    if args.output is not None:
        if args.output not in outputs:
            raise CliError(f"deployment {args.deployment} has no output {args.output!r}")
        outputs = {args.output: outputs[args.output]}
    ctx.print(ctx.output.record(outputs))
    return 0


async def show_metadata(args: argparse.Namespace, ctx: Context) -> int:
    shown = await ctx.api.get(f"software_deployments/metadata/{segment(args.server)}")
    ctx.print(json.dumps(shown["metadata"], indent=2))
    return 0


async def delete_deployments(args: argparse.Namespace, ctx: Context) -> int:
    for deployment in args.deployments:
        await ctx.api.request("DELETE", f"software_deployments/{segment(deployment)}")
        print(f"Deleted software deployment {deployment}.", file=ctx.console.err)
    return 0
