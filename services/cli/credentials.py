"""API credentials for `converge up`.

With CONVERGE_API_TOKENS unset, `converge up` generates one token for project
`demo` on first start and keeps it in `<data_dir>/credentials.json` (mode
0600), so restarts keep working for clients that stored it.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "credentials.json"
DEFAULT_PROJECT = "demo"


@dataclass(frozen=True)
class Credentials:
    token: str
    project_id: str


def ensure_credentials(data_dir: Path) -> Credentials:
    path = data_dir / FILE_NAME
    if path.exists():
        stored = json.loads(path.read_text())
        return Credentials(token=stored["token"], project_id=stored["project_id"])
    creds = Credentials(token=secrets.token_urlsafe(32), project_id=DEFAULT_PROJECT)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"token": creds.token, "project_id": creds.project_id}, handle)
    return creds
