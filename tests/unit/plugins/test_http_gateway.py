"""Proves the outbound HTTP gateway's allow-list, redirect and error mapping; real
aiohttp client against a real aiohttp.web server on 127.0.0.1."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from shared.errors import ConfigError, PermanentError, TransientError
from shared.http_client import (
    AllowList,
    HostRule,
    HttpGateway,
    HttpResponse,
    check_url,
    error_for,
    parse_retry_after,
)
from tests.support.fake_rest_api import FakeApi


def test_allow_list_parses_hosts_ports_and_ipv6() -> None:
    allow = AllowList.parse(" api.example , 127.0.0.1:8080,[::1]:9000,[fe80::1], ")
    assert allow.rules == {
        HostRule("api.example"),
        HostRule("127.0.0.1", 8080),
        HostRule("::1", 9000),
        HostRule("fe80::1"),
    }


def test_bare_host_admits_any_port_and_host_port_only_that_port() -> None:
    allow = AllowList.parse("api.example,db.example:5000")
    assert allow.allows("API.example.", 1234)
    assert allow.allows("db.example", 5000)
    assert not allow.allows("db.example", 5001)
    assert not allow.allows("other.example", 80)


@pytest.mark.parametrize("bad", ["host:port", "host:99999", ":80", "[::1]x"])
def test_malformed_allow_list_entry_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="CONVERGE_HTTP_ALLOWED_HOSTS"):
        AllowList.parse(bad)


def test_a_bare_host_never_admits_a_protected_port_but_an_exact_entry_does() -> None:
    allow = AllowList.parse("127.0.0.1,localhost,127.0.0.1:8006", protected_ports={8004, 8005, 8006})
    assert allow.allows("127.0.0.1", 9000)
    assert not allow.allows("127.0.0.1", 8004), "Converge's API port"
    assert not allow.allows("localhost", 8005), "a worker's admin port, by any name"
    assert allow.allows("127.0.0.1", 8006), "named as host:port: the operator means it"
    assert not allow.allows("localhost", 8006), "only that host"


def test_a_path_entry_admits_only_paths_under_its_prefix() -> None:
    allow = AllowList.parse("127.0.0.1:8004/sandbox/", protected_ports={8004})
    assert allow.rules == {HostRule("127.0.0.1", 8004, "/sandbox")}
    check_url(allow, "http://127.0.0.1:8004/sandbox/v1/things?x=1")
    check_url(allow, "http://127.0.0.1:8004/sandbox")
    for escape in (
        "/v1/alpha/stacks",
        "/sandboxes",
        "/sandbox/../v1/alpha/stacks",
        "/sandbox/%2e%2E/v1",
        "/sandbox/..%2Fv1",
        "/sandbox/.",
        "/admin/pause",
    ):
        with pytest.raises(PermanentError, match="not allowed"):
            check_url(allow, f"http://127.0.0.1:8004{escape}")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:9000/admin/pause#", "fragment"),
        ("http://127.0.0.1:9000/things#/it-1", "fragment"),
        ("http://user:pw@127.0.0.1:9000/things", "user information"),
        ("http://127.0.0.1:9000@10.255.255.1/", "user information"),
    ],
)
def test_urls_with_a_fragment_or_user_information_are_refused(url: str, problem: str) -> None:
    with pytest.raises(PermanentError, match=problem):
        check_url(AllowList.parse("127.0.0.1:9000,10.255.255.1"), url)


@pytest.mark.parametrize("bad", ["a.example/x", "host:port/x"])
def test_a_path_entry_needs_a_port(bad: str) -> None:
    with pytest.raises(ConfigError, match="CONVERGE_HTTP_ALLOWED_HOSTS"):
        AllowList.parse(bad)


def test_check_url_uses_the_scheme_default_port() -> None:
    allow = AllowList.parse("a.example:443")
    check_url(allow, "https://a.example/x")
    with pytest.raises(PermanentError, match=r"a\.example:80"):
        check_url(allow, "http://a.example/x")


def test_check_url_names_the_host_and_the_variable() -> None:
    with pytest.raises(PermanentError, match=r"evil\.example:80.*CONVERGE_HTTP_ALLOWED_HOSTS"):
        check_url(AllowList.parse("good.example"), "http://evil.example/steal")


@pytest.mark.parametrize("url", ["ftp://a.example/x", "a.example/x", "http://a.example:notaport/"])
def test_check_url_refuses_non_http_urls(url: str) -> None:
    with pytest.raises(PermanentError, match="invalid URL"):
        check_url(AllowList.parse("a.example"), url)


def test_empty_allow_list_refuses_everything() -> None:
    with pytest.raises(PermanentError, match="not allowed"):
        check_url(AllowList.parse(""), "http://127.0.0.1/")


def response(status: int, body: bytes = b"", **headers: str) -> HttpResponse:
    return HttpResponse("GET", "http://a.example/x", status, headers, body)


def test_server_errors_and_429_are_transient_with_retry_after() -> None:
    error = error_for(response(503, b'{"message": "busy"}', **{"retry-after": "12"}), now=0)
    assert isinstance(error, TransientError)
    assert error.retry_after == 12
    assert "busy" in str(error)
    assert isinstance(error_for(response(429), now=0), TransientError)


def test_client_errors_are_permanent_with_the_servers_message() -> None:
    error = error_for(response(422, b'{"error": {"message": "size too big"}}'), now=0)
    assert type(error) is PermanentError
    assert str(error) == "GET http://a.example/x returned 422: size too big"


def test_success_and_redirect_statuses_are_not_errors() -> None:
    assert error_for(response(200), now=0) is None
    assert error_for(response(304), now=0) is None


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("5", now=0) == 5
    assert parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=40) == 60
    assert parse_retry_after("soon", now=0) is None


async def test_request_to_a_disallowed_host_never_leaves(gateway: HttpGateway, api: FakeApi) -> None:
    with pytest.raises(PermanentError, match=r"forbidden\.example:80.*CONVERGE_HTTP_ALLOWED_HOSTS"):
        await gateway.request("GET", "http://forbidden.example/things")
    assert api.seen == []


async def test_allowed_redirect_is_followed_with_method_and_body(gateway: HttpGateway, api: FakeApi) -> None:
    result = await gateway.request("POST", f"{api.base}/moved", json={"name": "x"})
    assert result.status == 201
    assert result.url == f"{api.base}/things"
    assert [(s.method, s.path, s.body) for s in api.seen] == [
        ("POST", "/moved", {"name": "x"}),
        ("POST", "/things", {"name": "x"}),
    ]


async def test_redirect_to_a_disallowed_host_is_refused(gateway: HttpGateway, api: FakeApi) -> None:
    with pytest.raises(PermanentError, match=r"forbidden\.example"):
        await gateway.request("GET", f"{api.base}/away")
    assert [s.path for s in api.seen] == ["/away"]


async def test_redirect_loops_are_bounded(api: FakeApi) -> None:
    async with aiohttp.ClientSession() as session:
        gateway = HttpGateway(session, AllowList.parse(f"127.0.0.1:{api.port}"), max_redirects=3)
        with pytest.raises(PermanentError, match="more than 3 redirects"):
            await gateway.request("GET", f"{api.base}/loop")
    assert len(api.seen) == 4


async def test_a_redirect_with_an_unreadable_port_is_a_permanent_error_naming_it(
    gateway: HttpGateway, api: FakeApi
) -> None:
    with pytest.raises(PermanentError, match=r"invalid redirect URL .*99999999.*out of range"):
        await gateway.request("POST", f"{api.base}/bad-port", json={})
    assert [s.path for s in api.seen] == ["/bad-port"]


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:  # find a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with aiohttp.ClientSession() as session:
        gateway = HttpGateway(session, AllowList.parse("127.0.0.1"))
        with pytest.raises(TransientError, match="ClientConnectorError"):
            await gateway.request("GET", f"http://127.0.0.1:{port}/")
