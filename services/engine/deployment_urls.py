"""The pollable-URL signal transport of software deployments (Heat's TEMP_URL_SIGNAL).

Where it sits (pure helpers): when `services.engine.deployments` delivers an action of a
deployment whose `signal_transport` is TEMP_URL_SIGNAL, it asks `signal_url`
for the URL the server's agent PUTs its outputs to; the URL goes into the
derived config as the `deploy_signal_id` input (with `deploy_signal_verb`
PUT), as Heat gives a Swift TempURL. The URL is Converge's own:

    PUT {public API}/v1/{project}/software_deployments/{deployment}/signal/{token}

The object it names is held by the engine (Converge has no object store): a
PUT there (`services.engine.api.software_deployments`, no X-Auth-Token: the
token in the URL authorises it, as a TempURL's signature does) is handed to
`put_signal_object`, which stores it as the deployment's outputs and completes
the job waiting for them, in one transaction, as a HEAT_SIGNAL does. Heat
polls its Swift object until it holds the result; here the holder is the
engine itself, so writing the object and reading it are one step, and no
poller runs.

The token is drawn afresh (`secrets`) for each delivered action and lives only
in that action's derived config, so a URL is good for the run it was given
for: a late PUT of an earlier run (CREATE's, after an UPDATE was delivered),
a PUT to a deleted deployment and a wrong token all get the same 401.
"""

from __future__ import annotations

import hmac
import secrets
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

#: Where the agent PUTs; the path segment after the deployment id.
SIGNAL_SEGMENT = "signal"
TOKEN_BYTES = 32


def new_token() -> str:
    """An unguessable token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def signal_url(api_url: str, project_id: str, deployment_id: uuid.UUID, token: str) -> str:
    """The URL an agent PUTs the outputs of one run of the deployment to."""
    project = quote(project_id, safe="")
    return f"{api_url.rstrip('/')}/v1/{project}/software_deployments/{deployment_id}/{SIGNAL_SEGMENT}/{token}"


def token_in(config: Mapping[str, Any]) -> str | None:
    """The token of the signal URL a derived config gives (`deploy_signal_id`), if any."""
    for item in config.get("inputs") or []:
        if isinstance(item, Mapping) and item.get("name") == "deploy_signal_id":
            value = item.get("value")
            if isinstance(value, str) and f"/{SIGNAL_SEGMENT}/" in value:
                return value.rsplit("/", 1)[-1]
    return None


def token_ok(config: Mapping[str, Any] | None, token: str) -> bool:
    """Whether `token` is the one in the derived config's signal URL (constant time)."""
    expected = token_in(config) if config is not None else None
    return expected is not None and hmac.compare_digest(expected.encode(), token.encode())
