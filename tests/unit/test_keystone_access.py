"""Keystone mode's pure decisions: what a validated token grants (project, admin, read-only),
which requests a reader may make, how long a Keystone answer is believed, and the settings
that turn the mode on.

Real: the functions themselves, Keystone's answer as recorded from a real Keystone 30;
the cache runs on an injected clock. No I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from services.engine.api.auth import Principal, Tokens, reader_may
from services.engine.api.keystone import keystone_config, plausible_token
from services.engine.api.keystone_tokens import (
    INVALID_SECONDS,
    MAX_INVALID_ENTRIES,
    TokenCache,
    TokenFacts,
    facts_from_answer,
    principal_for,
)
from shared.errors import Forbidden, TransientError
from shared.settings import EngineSettings, describe_error

ALPHA = "a49f7e5d5d854bcd93f284690bcda61e"
NOW = 1_800_000_000.0


def answer(*roles: str, project: str | None = ALPHA, **extra: Any) -> dict[str, Any]:
    """Keystone's GET /v3/auth/tokens?nocatalog body, shaped as a real Keystone answers it."""
    token: dict[str, Any] = {
        "methods": ["password"],
        "user": {"domain": {"id": "default", "name": "Default"}, "id": "u-1", "name": "alice"},
        "audit_ids": ["wwii8DhhQ56EGoJLGwgZCA"],
        "expires_at": "2027-01-15T08:00:00.000000Z",
        "issued_at": "2027-01-15T07:00:00.000000Z",
        "is_domain": False,
        "roles": [{"id": f"id-{r}", "name": r} for r in roles],
        **extra,
    }
    if project is not None:
        token["project"] = {"domain": {"id": "default", "name": "Default"}, "id": project, "name": "alpha"}
    return {"token": token}


def facts(*roles: str, expires_at: float = NOW + 3600, **kwargs: Any) -> TokenFacts:
    return TokenFacts(
        user_id="u-1",
        project_id=kwargs.get("project_id", ALPHA),
        roles=frozenset(roles),
        expires_at=expires_at,
        admin_project=kwargs.get("admin_project", True),
    )


# -- what a token grants -----------------------------------------------------------------


def test_keystones_answer_becomes_the_tokens_facts() -> None:
    got = facts_from_answer(answer("member", "reader"))
    assert got.project_id == ALPHA
    assert got.user_id == "u-1"
    assert got.roles == {"member", "reader"}
    assert got.expires_at == datetime(2027, 1, 15, 8, 0, tzinfo=UTC).timestamp()
    assert got.admin_project  # absent means true, as Keystone means it


def test_an_answer_that_is_not_a_token_is_keystone_misbehaving_not_the_callers_fault() -> None:
    with pytest.raises(TransientError, match="could not be read"):
        facts_from_answer({"error": {"code": 500}})


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        (("member", "reader"), Principal(ALPHA)),
        (("reader",), Principal(ALPHA, read_only=True)),
        (("admin", "manager", "member", "reader"), Principal(ALPHA, admin=True)),
        (("Member",), Principal(ALPHA)),  # role names compare case-insensitively, as in oslo.policy
    ],
)
def test_roles_map_to_what_the_principal_may_do(roles: tuple[str, ...], expected: Principal) -> None:
    assert principal_for(facts_from_answer(answer(*roles))) == expected


def test_admin_outside_keystones_admin_project_is_a_member_of_its_own_project_only() -> None:
    got = principal_for(facts_from_answer(answer("admin", "member", "reader", is_admin_project=False)))
    assert got == Principal(ALPHA, admin=False, read_only=False)


def test_a_token_with_no_orchestration_role_is_forbidden_and_told_which_roles_are_needed() -> None:
    with pytest.raises(Forbidden, match=r"roles in project .* \(heat_stack_user\).*admin, member or reader"):
        principal_for(facts("heat_stack_user"))


def test_a_token_without_a_project_is_forbidden() -> None:
    with pytest.raises(Forbidden, match="not scoped to a project"):
        principal_for(facts_from_answer(answer("admin", project=None)))


def test_only_plausible_tokens_are_sent_to_keystone() -> None:
    assert plausible_token("gAAAAABrByrsClzk4SxLvjwl-PacW1XyaF0pHRpBLi4JdBeiTnPbg")
    assert not plausible_token("")
    assert not plausible_token("x" * 5000)
    assert not plausible_token("has space")
    assert not plausible_token("tökén")


def test_static_tokens_may_be_readers_too() -> None:
    tokens = Tokens.parse("r=alpha:reader,a=ops:admin,m=alpha")
    assert tokens.lookup("r") == Principal("alpha", read_only=True)
    assert tokens.lookup("a") == Principal("ops", admin=True)
    assert tokens.lookup("m") == Principal("alpha")


# -- what a reader may do ------------------------------------------------------------------

STACK = "stacks/web/2b1c2f8e-8a8e-4c44-9d3c-2f6c1d2e3f40"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "stacks"),
        ("GET", STACK),
        ("GET", "stacks/web"),
        ("HEAD", STACK),
        ("GET", f"{STACK}/resources/server"),
        ("GET", f"{STACK}/events"),
        ("GET", f"{STACK}/template"),
        ("GET", f"{STACK}/outputs/url"),
        ("GET", f"{STACK}/stream"),
        ("GET", "resource_types"),
        ("GET", "template_versions/heat_template_version.2018-08-31/functions"),
        ("POST", "stacks/preview"),  # Heat: reader
        ("POST", "validate"),  # Heat: member; it changes nothing, so a reader's here
        ("PUT", f"{STACK}/preview"),  # Heat: member; the same reason
        ("PUT", "stacks/web/preview"),  # answered by a redirect to the above
    ],
)
def test_a_reader_may_read_and_preview_and_validate(method: str, path: str) -> None:
    assert reader_may(method, f"/v1/{ALPHA}/{path}".split("/"))


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "stacks"),
        ("PUT", STACK),
        ("PATCH", STACK),
        ("DELETE", STACK),
        ("DELETE", f"{STACK}/abandon"),
        ("POST", f"{STACK}/actions"),  # every action, check included (Heat lets a reader check)
        ("POST", f"{STACK}/resources/wait_handle/signal"),  # with a project token (Heat: reader)
        ("PATCH", f"{STACK}/resources/server"),  # mark unhealthy
        ("POST", f"{STACK}/snapshots"),  # a route Converge does not have: refused all the same
        ("PUT", "stacks/preview"),  # a stack named "preview": an update
        ("PATCH", f"{STACK}/preview"),
    ],
)
def test_a_reader_may_not_make_anything_that_could_change_something(method: str, path: str) -> None:
    assert not reader_may(method, f"/v1/{ALPHA}/{path}".split("/"))


# -- how long an answer is believed ----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def test_a_valid_token_is_believed_for_the_cache_time_then_asked_about_again() -> None:
    clock = Clock()
    cache = TokenCache(ttl=300, size=10, clock=clock)
    cache.remember("tok", facts("member"))
    clock.now += 299
    known = cache.lookup("tok")
    assert known is not None
    assert known.facts == facts("member")
    clock.now += 1
    assert cache.lookup("tok") is None


def test_a_token_is_never_believed_past_its_own_expiry() -> None:
    clock = Clock()
    cache = TokenCache(ttl=300, size=10, clock=clock)
    cache.remember("tok", facts("member", expires_at=NOW + 30))
    clock.now += 29
    assert cache.lookup("tok") is not None
    clock.now += 1
    assert cache.lookup("tok") is None
    cache.remember("old", facts("member", expires_at=NOW))  # already expired: not kept at all
    assert cache.lookup("old") is None


def test_a_zero_cache_time_remembers_nothing() -> None:
    cache = TokenCache(ttl=0, size=10, clock=Clock())
    cache.remember("tok", facts("member"))
    cache.remember("bad", None)
    assert cache.lookup("tok") is None
    assert cache.lookup("bad") is None


def test_an_invalid_token_is_remembered_only_briefly() -> None:
    clock = Clock()
    cache = TokenCache(ttl=300, size=10, clock=clock)
    cache.remember("bad", None)
    known = cache.lookup("bad")
    assert known is not None
    assert known.facts is None
    clock.now += INVALID_SECONDS
    assert cache.lookup("bad") is None


def test_the_least_recently_used_token_goes_first_when_the_cache_is_full() -> None:
    cache = TokenCache(ttl=300, size=2, clock=Clock())
    cache.remember("a", facts("member"))
    cache.remember("b", facts("member"))
    assert cache.lookup("a") is not None  # a is now the most recently used
    cache.remember("c", facts("member"))
    assert cache.lookup("b") is None
    assert cache.lookup("a") is not None
    assert cache.lookup("c") is not None


def test_a_flood_of_made_up_tokens_never_pushes_valid_ones_out() -> None:
    cache = TokenCache(ttl=300, size=10, clock=Clock())
    cache.remember("good", facts("member"))
    for n in range(MAX_INVALID_ENTRIES * 2):
        cache.remember(f"made-up-{n}", None)
    assert cache.lookup("good") is not None
    assert len(cache) <= 1 + min(10, MAX_INVALID_ENTRIES)


def test_the_cache_keeps_digests_never_the_tokens_themselves() -> None:
    cache = TokenCache(ttl=300, size=10, clock=Clock())
    secret = "gAAAAABsecret-token-value"
    cache.remember(secret, facts("member"))
    cache.remember(secret + "-bad", None)
    assert secret not in repr(vars(cache))
    assert secret.encode() not in repr(vars(cache)).encode()


# -- settings ---------------------------------------------------------------------------------


def test_keystone_mode_without_service_credentials_is_refused_naming_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGE_KEYSTONE_URL", "http://keystone:5000")
    with pytest.raises(ValidationError) as info:
        EngineSettings()
    line = describe_error(info.value, EngineSettings)
    assert line.startswith("invalid configuration: CONVERGE_KEYSTONE_URL='http://keystone:5000'")
    assert "CONVERGE_KEYSTONE_USERNAME and CONVERGE_KEYSTONE_PASSWORD" in line


def test_a_password_login_is_scoped_to_the_service_project_and_keeps_its_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVERGE_KEYSTONE_URL", "http://keystone:5000/")
    monkeypatch.setenv("CONVERGE_KEYSTONE_USERNAME", "converge")
    monkeypatch.setenv("CONVERGE_KEYSTONE_PASSWORD", "s3cret-pw")
    settings = EngineSettings()
    config = keystone_config(settings)
    assert config is not None
    assert config.url == "http://keystone:5000/v3"
    assert config.auth["identity"]["password"]["user"] == {
        "name": "converge",
        "domain": {"name": "Default"},
        "password": "s3cret-pw",
    }
    assert config.auth["scope"] == {"project": {"name": "service", "domain": {"name": "Default"}}}
    assert "s3cret-pw" not in repr(settings)
    assert "s3cret-pw" not in repr(config)


def test_an_application_credential_needs_no_user_or_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_KEYSTONE_URL", "https://keystone.example/identity/v3")
    monkeypatch.setenv("CONVERGE_KEYSTONE_APPLICATION_CREDENTIAL_ID", "ac-1")
    monkeypatch.setenv("CONVERGE_KEYSTONE_APPLICATION_CREDENTIAL_SECRET", "ac-secret")
    config = keystone_config(EngineSettings())
    assert config is not None
    assert config.url == "https://keystone.example/identity/v3"
    assert config.auth == {
        "identity": {
            "methods": ["application_credential"],
            "application_credential": {"id": "ac-1", "secret": "ac-secret"},
        }
    }


def test_without_a_keystone_url_the_mode_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVERGE_KEYSTONE_URL", raising=False)
    assert keystone_config(EngineSettings()) is None
