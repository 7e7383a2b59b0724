"""TEMP_URL_SIGNAL's URLs (services/engine/deployment_urls.py), the API's admission of an
unauthenticated PUT to one (`auth.may_be_signal_url`) and the engine's public base URL
(`settings_map.public_url`). Pure; nothing faked."""

from __future__ import annotations

import uuid

from services.engine.api.auth import may_be_signal_url
from services.engine.deployment_urls import new_token, signal_url, token_in, token_ok
from services.engine.settings_map import public_url
from tests.support.engine_settings import engine_settings

DEPLOYMENT = uuid.UUID("00000000-0000-0000-0000-00000000000d")


def config_with(url: str) -> dict[str, object]:
    return {"inputs": [{"name": "who", "value": "x"}, {"name": "deploy_signal_id", "value": url}]}


def test_each_token_is_fresh_and_the_url_carries_it_under_the_deployment() -> None:
    token = new_token()
    assert token != new_token()
    assert len(token) == 43
    url = signal_url("http://converge:8004/", "my project", DEPLOYMENT, token)
    assert url == f"http://converge:8004/v1/my%20project/software_deployments/{DEPLOYMENT}/signal/{token}"
    assert token_in(config_with(url)) == token
    assert may_be_signal_url("PUT", url.removeprefix("http://converge:8004").split("/"))


def test_only_the_token_of_the_current_run_is_accepted() -> None:
    current, stale = new_token(), new_token()
    config = config_with(signal_url("http://c", "p", DEPLOYMENT, current))
    assert token_ok(config, current)
    assert not token_ok(config, stale)
    assert not token_ok(config, "")
    assert not token_ok({"inputs": []}, current), "a HEAT_SIGNAL run has no URL to PUT to"
    assert not token_ok(None, current), "no config: no deployment"


def test_the_api_admits_only_a_put_shaped_as_a_signal_url_without_a_token_header() -> None:
    path = f"/v1/p/software_deployments/{DEPLOYMENT}/signal/{new_token()}".split("/")
    assert may_be_signal_url("PUT", path)
    assert not may_be_signal_url("GET", path)
    assert not may_be_signal_url("DELETE", path)
    assert not may_be_signal_url("PUT", [*path[:5], "metadata", path[6]])
    assert not may_be_signal_url("PUT", [*path[:6], "short"])
    assert not may_be_signal_url("PUT", [*path, "more"])


def test_the_public_base_is_the_setting_else_the_api_address() -> None:
    assert public_url(engine_settings(public_api_url="https://heat.example/")) == "https://heat.example"
    assert public_url(engine_settings(api_host="10.0.0.5", api_port=9000)) == "http://10.0.0.5:9000"
    assert public_url(engine_settings(api_host="0.0.0.0", api_port=8004)) == "http://127.0.0.1:8004"
