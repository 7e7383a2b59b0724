"""Where the client commands connect and with which token, decided once in `main`.

Flags win over the environment, which wins over what `converge up` stored:

    url      --url,     CONVERGE_URL,     <CONVERGE_DATA_DIR or ./data>/credentials.json,
                                          else http://127.0.0.1:8004
    token    --token,   CONVERGE_TOKEN,   the same file
    project  --project, CONVERGE_PROJECT, the same file, else `demo`

The credentials file is only read here, never written (`converge up` and
`make cluster` write it, with the URL they serve on).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from services.cli.client import CliError, Endpoint
from services.cli.credentials import DEFAULT_PROJECT, FILE_NAME

DEFAULT_URL = "http://127.0.0.1:8004"
DEFAULT_DATA_DIR = "./data"


def resolve_endpoint(
    *, url: str | None, token: str | None, project: str | None, env: Mapping[str, str]
) -> Endpoint:
    url = url or env.get("CONVERGE_URL")
    token = token or env.get("CONVERGE_TOKEN")
    project = project or env.get("CONVERGE_PROJECT")
    if url is None or token is None or project is None:
        data_dir = Path(env.get("CONVERGE_DATA_DIR") or DEFAULT_DATA_DIR)
        stored = _stored(data_dir / FILE_NAME, need=token is None)
        url = url or stored.get("url")
        token = token or stored.get("token")
        project = project or stored.get("project_id") or DEFAULT_PROJECT
    assert token is not None  # _stored raised when the file was needed and had none
    url = (url or DEFAULT_URL).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise CliError(f"the API URL must start with http:// or https://, got {url!r}")
    return Endpoint(url=url, project_id=project, token=token)


def _stored(path: Path, *, need: bool) -> dict[str, str]:
    """The credentials `converge up` wrote; {} when absent and not needed."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        if need:
            raise CliError(
                f"no credentials found: set CONVERGE_TOKEN (and CONVERGE_URL), pass --token, "
                f"or point CONVERGE_DATA_DIR at the data directory of `converge up` (looked in {path})"
            ) from None
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read credentials from {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("token"), str):
        if need:
            raise CliError(f"{path} has no token: set CONVERGE_TOKEN or pass --token")
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)}
