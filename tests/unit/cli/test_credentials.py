"""Credentials `converge up` and `make cluster` keep for the CLI: tokens that never read as an
option, the URL remembered, the file private. Real files in a temporary directory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from services.cli.config import resolve_endpoint
from services.cli.credentials import ensure_credentials, new_token


def test_a_token_that_would_start_with_a_dash_is_drawn_again() -> None:
    drawn: Iterator[str] = iter(["-dashfirst", "_underscore", "Good-token_1"])
    assert new_token(lambda _nbytes: next(drawn)) == "Good-token_1"


def test_real_tokens_start_with_a_letter_or_digit() -> None:
    tokens = [new_token() for _ in range(2000)]  # ~31 of them would start with '-' or '_' unchecked
    assert all(token[0].isalnum() for token in tokens)
    assert len(set(tokens)) == len(tokens)


def test_the_url_is_recorded_and_updated_and_the_token_kept(tmp_path: Path) -> None:
    first = ensure_credentials(tmp_path, url="http://127.0.0.1:9100")
    path = tmp_path / "credentials.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text()) == {
        "token": first.token,
        "project_id": "demo",
        "url": "http://127.0.0.1:9100",
    }
    again = ensure_credentials(tmp_path, url="http://127.0.0.1:9200")
    assert again == first
    assert json.loads(path.read_text())["url"] == "http://127.0.0.1:9200"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["credentials.json"], "no partial file left behind"


def test_the_cli_goes_where_the_credentials_say_unless_told_otherwise(tmp_path: Path) -> None:
    creds = ensure_credentials(tmp_path, url="http://127.0.0.1:9300")
    env = {"CONVERGE_DATA_DIR": str(tmp_path)}
    found = resolve_endpoint(url=None, token=None, project=None, env=env)
    assert (found.url, found.token, found.project_id) == ("http://127.0.0.1:9300", creds.token, "demo")
    told = resolve_endpoint(url=None, token="t", project="p", env={**env, "CONVERGE_URL": "http://h:1"})
    assert (told.url, told.token, told.project_id) == ("http://h:1", "t", "p")
    flag = resolve_endpoint(
        url="http://h:2/", token=None, project=None, env={**env, "CONVERGE_URL": "http://h:1"}
    )
    assert flag.url == "http://h:2"
    only_token = resolve_endpoint(url=None, token="t", project="p", env=env)
    assert only_token.url == "http://127.0.0.1:9300", "the stored URL, even with a token given"
    nothing = resolve_endpoint(
        url=None, token="t", project="p", env={"CONVERGE_DATA_DIR": str(tmp_path / "none")}
    )
    assert nothing.url == "http://127.0.0.1:8004"
