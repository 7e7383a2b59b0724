"""API credentials for `converge up` (and `make cluster`), kept where the CLI finds them.

With CONVERGE_API_TOKENS unset, `converge up` generates one token for project
`demo` on first start and keeps it in `<data_dir>/credentials.json` (mode
0600), so restarts keep working for clients that stored it. Each start also
records the URL it serves on there, so the `converge` client goes to the
right port without being told (`services/cli/config.py`).

Tokens never start with `-`: one that does reads as an option to any command
line that takes it (`converge --token -x...`, `openstack --os-token -x...`).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "credentials.json"
DEFAULT_PROJECT = "demo"
TOKEN_BYTES = 32


@dataclass(frozen=True)
class Credentials:
    token: str
    project_id: str


def new_token(draw: Callable[[int], str] = secrets.token_urlsafe) -> str:
    """A fresh random token (URL-safe base64) that starts with a letter or digit."""
    while True:
        token = draw(TOKEN_BYTES)
        if token[:1].isalnum():
            return token


def ensure_credentials(data_dir: Path, *, url: str | None = None) -> Credentials:
    """The stored credentials, made on first use; `url` (where the API now answers) is
    recorded with them, replacing the one an earlier start recorded."""
    path = data_dir / FILE_NAME
    if path.exists():
        stored = json.loads(path.read_text())
        creds = Credentials(token=stored["token"], project_id=stored["project_id"])
        if url is not None and stored.get("url") != url:
            write_credentials(data_dir, creds, url=url)
        return creds
    creds = Credentials(token=new_token(), project_id=DEFAULT_PROJECT)
    write_credentials(data_dir, creds, url=url)
    return creds


def write_credentials(data_dir: Path, creds: Credentials, *, url: str | None) -> None:
    """Write the file whole (0600 from the start, then renamed over the old one), so a
    reader never sees half of it and the token is never readable by others."""
    path = data_dir / FILE_NAME
    data = {"token": creds.token, "project_id": creds.project_id}
    if url is not None:
        data["url"] = url
    partial = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    os.replace(partial, path)
