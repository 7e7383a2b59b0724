"""The sandbox servers' simulated configuration agent (os-collect-config + heat-config).

Where it sits: a Sandbox::Server created by Converge is given an agent (`PUT
/v1/servers/{id}/agent` with Converge's API base for its project and the
server's own agent token; the provider does it after the create). The
sandbox's `Agents` then poll, every `poll_seconds`, each ACTIVE server's
`GET {api}/software_deployments/metadata/{server}` with that token, "run"
every config not run before that waits for the server (a deployment
IN_PROGRESS, or one with NO_SIGNAL) by the rules of `run_script`, and after
the script's run time signal the result as heat-config does: with
TEMP_URL_SIGNAL a PUT of the outputs to the URL in `deploy_signal_id` (no
X-Auth-Token: the URL's token authorises it; only a URL on the agent's own
API origin), with HEAT_SIGNAL a resource signal to `deploy_stack_id` /
`deploy_resource_name` (or, for a deployment made through the API, a PUT on
the deployment). A config is run for whichever action it was delivered for
(`deploy_action`: CREATE, UPDATE, and DELETE, SUSPEND, RESUME when the
deployment's `actions` name them); each delivery is a new config. A
signal that does not get through (no answer, 5xx, 409, 429) is not lost: the
config is run again at a later poll while its deployment still waits. A
NO_SIGNAL deployment is run and not signalled.

The script rules (pure, `run_script`): a line of the config's text
`#sandbox: <directive> <value>` (the space after `#` optional) says what
running it gives; `${name}` in a value is replaced by the input `name`:

    #sandbox: exit 3              deploy_status_code (default 0)
    #sandbox: stdout hello ${who} a line of deploy_stdout (lines add up)
    #sandbox: stderr oops         a line of deploy_stderr (lines add up)
    #sandbox: output result=42    an output of the config (Heat's outputs)
    #sandbox: seconds 2.5         how long the run takes (default 0, at most 600)
    #sandbox[DELETE]: exit 1      only when run for these actions (deploy_action;
                                  a comma-separated list, e.g. [SUSPEND,RESUME])

Any other line is ignored; a structured config (a map) runs as an empty script.

A server's agent is kept with the server in the sandbox's state (records.py), so
a restarted sandbox's servers go on polling; which configs an agent has run is
not kept: after a restart a config still waiting for its server is run again.
"""

from __future__ import annotations

import asyncio
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import structlog

log = structlog.get_logger(__name__)

DIRECTIVE = re.compile(
    r"^\s*#\s*sandbox(?:\[([A-Za-z, ]*)\])?:\s*(exit|stdout|stderr|output|seconds)\b\s?(.*)$"
)
MAX_SECONDS = 600.0
#: Agents one sandbox keeps (one per server), and configs it remembers running per server.
MAX_AGENTS = 10_000
MAX_RUNS_REMEMBERED = 1000
REQUEST_SECONDS = 10.0
#: Answers to a signal after which the config is run and signalled again at a later poll.
RETRIED_STATUSES = frozenset({409, 429})


@dataclass(frozen=True)
class ScriptRun:
    """What running a config gives."""

    status_code: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: Mapping[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def signal(self) -> dict[str, Any]:
        """The signal body heat-config sends."""
        return {
            "deploy_stdout": self.stdout,
            "deploy_stderr": self.stderr,
            "deploy_status_code": self.status_code,
            **self.outputs,
        }


def run_script(config: Any, inputs: Mapping[str, Any]) -> ScriptRun:
    """The outcome the script's `#sandbox:` lines describe. Pure."""
    if not isinstance(config, str):
        return ScriptRun()
    values = {k: "" if v is None else str(v) for k, v in inputs.items()}
    action = values.get("deploy_action", "")
    code, seconds = 0, 0.0
    stdout: list[str] = []
    stderr: list[str] = []
    outputs: dict[str, str] = {}
    for line in config.splitlines():
        found = DIRECTIVE.match(line)
        if found is None:
            continue
        only = found.group(1)
        if only is not None and action not in {a.strip().upper() for a in only.split(",")}:
            continue
        directive, value = found.group(2), string.Template(found.group(3)).safe_substitute(values)
        if directive == "exit":
            code = _number(value, int, 0)
        elif directive == "seconds":
            seconds = min(max(_number(value, float, 0.0), 0.0), MAX_SECONDS)
        elif directive == "stdout":
            stdout.append(value + "\n")
        elif directive == "stderr":
            stderr.append(value + "\n")
        else:
            name, _, text = value.partition("=")
            if name.strip():
                outputs[name.strip()] = text
    return ScriptRun(code, "".join(stdout), "".join(stderr), outputs, seconds)


def same_origin(url: str, api: str) -> bool:
    """Whether `url` is on the scheme, host and port of the agent's API base (a signal URL
    elsewhere is not followed: the sandbox PUTs to Converge only)."""
    a, b = urlsplit(url), urlsplit(api)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc) and a.scheme in ("http", "https")


def _number(text: str, kind: type[Any], default: Any) -> Any:
    try:
        return kind(text.strip())
    except ValueError:
        return default


@dataclass(frozen=True)
class Agent:
    api: str  # Converge's API base for the server's project: http://host:port/v1/<project>
    token: str  # the server's agent token


class Agents:
    """The agents of the sandbox's servers, polled by one task (`run`)."""

    def __init__(self, *, poll_seconds: float) -> None:
        self._poll_seconds = poll_seconds
        self._agents: dict[str, Agent] = {}
        self._ran: dict[str, list[str]] = {}  # server -> config ids run and signalled (newest last)
        self._inflight: set[tuple[str, str]] = set()  # (server, config) being run now
        self._running: set[asyncio.Task[None]] = set()

    def set(self, server_id: str, agent: Agent) -> None:
        if server_id not in self._agents and len(self._agents) >= MAX_AGENTS:
            raise ValueError(f"the sandbox runs at most {MAX_AGENTS} agents")
        self._agents[server_id] = agent

    def get(self, server_id: str) -> Agent | None:
        return self._agents.get(server_id)

    def forget(self, server_id: str) -> None:
        self._agents.pop(server_id, None)
        self._ran.pop(server_id, None)

    async def run(self, active: Any) -> None:
        """Poll for ever (cancelled at shutdown); `active(server_id)` says whether a server
        is ACTIVE (only those poll)."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_SECONDS)) as http:
            try:
                while True:
                    for server_id, agent in list(self._agents.items()):
                        if active(server_id):
                            await self._poll(http, server_id, agent)
                    await asyncio.sleep(self._poll_seconds)
            finally:
                for task in self._running:
                    task.cancel()

    async def _poll(self, http: aiohttp.ClientSession, server_id: str, agent: Agent) -> None:
        url = f"{agent.api}/software_deployments/metadata/{server_id}"
        try:
            async with http.get(url, headers={"X-Auth-Token": agent.token}) as response:
                if response.status != 200:
                    log.info("agent_poll_refused", server=server_id, status=response.status)
                    return
                body = await response.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.info("agent_poll_failed", server=server_id, error=str(exc))
            return
        items = body.get("metadata") if isinstance(body, dict) else None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                self._maybe_run(http, server_id, agent, item)

    def _maybe_run(
        self, http: aiohttp.ClientSession, server_id: str, agent: Agent, item: Mapping[str, Any]
    ) -> None:
        inputs: dict[str, Any] = {
            str(i.get("name")): i.get("value") for i in item.get("inputs") or [] if isinstance(i, dict)
        }
        transport = inputs.get("deploy_signal_transport")
        waits = item.get("deployment_status") == "IN_PROGRESS" or transport == "NO_SIGNAL"
        config_id = str(item.get("id"))
        if not waits or config_id in self._ran.get(server_id, ()) or (server_id, config_id) in self._inflight:
            return
        outcome = run_script(item.get("config"), inputs)
        log.info("agent_runs", server=server_id, config=config_id, status_code=outcome.status_code)
        if transport == "NO_SIGNAL":
            self._done(server_id, config_id)
            return
        self._inflight.add((server_id, config_id))
        task = asyncio.create_task(self._run_and_signal(http, server_id, agent, item, inputs, outcome))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _done(self, server_id: str, config_id: str) -> None:
        ran = self._ran.setdefault(server_id, [])
        ran.append(config_id)
        del ran[:-MAX_RUNS_REMEMBERED]

    async def _run_and_signal(
        self,
        http: aiohttp.ClientSession,
        server_id: str,
        agent: Agent,
        item: Mapping[str, Any],
        inputs: Mapping[str, Any],
        outcome: ScriptRun,
    ) -> None:
        """Run, then signal; a signal that did not get through (no answer, 5xx, 409, 429)
        leaves the config to be run again at a later poll, as heat-config retries."""
        config_id = str(item.get("id"))
        try:
            if await self._signal(http, agent, item, inputs, outcome):
                self._done(server_id, config_id)
        finally:
            self._inflight.discard((server_id, config_id))

    async def _signal(
        self,
        http: aiohttp.ClientSession,
        agent: Agent,
        item: Mapping[str, Any],
        inputs: Mapping[str, Any],
        outcome: ScriptRun,
    ) -> bool:
        """Whether the signal got an answer that settles it (any but 5xx, 409, 429)."""
        await asyncio.sleep(outcome.seconds)
        headers = {"X-Auth-Token": agent.token}
        stack, resource = inputs.get("deploy_stack_id"), inputs.get("deploy_resource_name")
        signal_id = inputs.get("deploy_signal_id")
        if inputs.get("deploy_signal_transport") == "TEMP_URL_SIGNAL":
            if not isinstance(signal_id, str) or not same_origin(signal_id, agent.api):
                log.warning("agent_signal_url_refused", url=signal_id)
                return True  # nothing to retry: the URL will not change
            method, url, headers = "PUT", signal_id, {}
            body: dict[str, Any] = outcome.signal()
        elif stack and resource:
            method, url = "POST", f"{agent.api}/stacks/{stack}/resources/{resource}/signal"
            body = outcome.signal()
        else:
            method, url = "PUT", f"{agent.api}/software_deployments/{item.get('deployment_id')}"
            status = "COMPLETE" if outcome.status_code == 0 else "FAILED"
            reason = outcome.stderr[:255]
            body = {"status": status, "output_values": outcome.signal(), "status_reason": reason}
        try:
            async with http.request(method, url, json=body, headers=headers) as response:
                log.info("agent_signalled", url=url, status=response.status)
                return response.status < 500 and response.status not in RETRIED_STATUSES
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("agent_signal_failed", url=url, error=str(exc))
            return False
