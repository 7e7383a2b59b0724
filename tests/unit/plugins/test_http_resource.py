"""Proves Converge::HTTP::Resource's create/update/delete/observe and error mapping;
real gateway and aiohttp client against a real aiohttp.web API on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest

from shared.errors import PermanentError, TransientError
from shared.http_client import HttpGateway
from shared.plugins import ActionContext, ObservedState, Outcome, ReplacementNeeded, ResourceGone
from shared.plugins.builtin.http_resource import HttpResource, HttpResourceProperties, item_url
from tests.support.fake_rest_api import FakeApi
from tests.unit.plugins.plugin_fakes import CtxFactory


def props(api: FakeApi, **fields: Any) -> HttpResourceProperties:
    return HttpResourceProperties.model_validate({"url": f"{api.base}/things", **fields})


@pytest.fixture
def ctx(make_ctx: CtxFactory, gateway: HttpGateway) -> ActionContext:
    return make_ctx(http=gateway, idempotency_key="job-42")


async def test_create_posts_body_with_idempotency_key(ctx: ActionContext, api: FakeApi) -> None:
    result = await HttpResource().create(ctx, props(api, body={"name": "web"}, headers={"X-Team": "a"}))
    assert result.physical_id == "it-1"
    assert result.outcome is Outcome.COMPLETE
    assert result.attributes["id"] == "it-1"
    assert result.attributes["body"] == {"name": "web", "id": "it-1", "status": "ACTIVE"}
    [post] = api.seen
    assert (post.method, post.path, post.body) == ("POST", "/things", {"name": "web"})
    assert post.headers["Idempotency-Key"] == "job-42"
    assert post.headers["X-Team"] == "a"


async def test_create_response_without_the_id_field_is_permanent(ctx: ActionContext, api: FakeApi) -> None:
    with pytest.raises(PermanentError, match="'uuid'"):
        await HttpResource().create(ctx, props(api, id_field="uuid"))


async def test_put_update_sends_the_whole_body(ctx: ActionContext, api: FakeApi) -> None:
    old = props(api, body={"name": "web", "size": 1})
    created = await HttpResource().create(ctx, old)
    assert created.physical_id is not None
    new = props(api, body={"name": "web", "size": 2})
    result = await HttpResource().update(ctx, created.physical_id, old, new)
    assert result.attributes["body"]["size"] == 2
    assert (api.seen[-1].method, api.seen[-1].path, api.seen[-1].body) == (
        "PUT",
        "/things/it-1",
        {"name": "web", "size": 2},
    )


async def test_patch_update_sends_a_merge_patch(ctx: ActionContext, api: FakeApi) -> None:
    old = props(api, body={"name": "web", "size": 1, "note": "x"}, update_method="PATCH")
    created = await HttpResource().create(ctx, old)
    assert created.physical_id is not None
    new = props(api, body={"name": "web", "size": 2}, update_method="PATCH")
    await HttpResource().update(ctx, created.physical_id, old, new)
    assert api.seen[-1].method == "PATCH"
    assert api.seen[-1].body == {"size": 2, "note": None}
    assert api.items["it-1"] == {"name": "web", "size": 2, "id": "it-1", "status": "ACTIVE"}


async def test_change_to_a_replace_on_change_key_needs_replacement(ctx: ActionContext, api: FakeApi) -> None:
    old = props(api, body={"region": "a", "size": 1}, replace_on_change=["region"])
    new = props(api, body={"region": "b", "size": 1}, replace_on_change=["region"])
    with pytest.raises(ReplacementNeeded, match="region"):
        await HttpResource().update(ctx, "it-1", old, new)
    assert api.seen == []


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_an_update_of_an_item_gone_behind_our_back_says_it_is_gone(
    ctx: ActionContext, api: FakeApi, method: str
) -> None:
    old = props(api, body={"name": "web"}, update_method=method)
    created = await HttpResource().create(ctx, old)
    assert created.physical_id is not None
    del api.items[created.physical_id]
    new = props(api, body={"name": "web2"}, update_method=method)
    with pytest.raises(ResourceGone, match=f"{method} .*/things/it-1 returned 404"):
        await HttpResource().update(ctx, created.physical_id, old, new)
    with pytest.raises(ResourceGone, match="GET"):  # nothing to change: still found gone
        await HttpResource().update(ctx, created.physical_id, new, new)


async def test_delete_removes_the_item(ctx: ActionContext, api: FakeApi) -> None:
    p = props(api, body={"name": "web"})
    created = await HttpResource().create(ctx, p)
    assert created.physical_id is not None
    result = await HttpResource().delete(ctx, created.physical_id, p)
    assert result.outcome is Outcome.COMPLETE
    assert api.items == {}


async def test_delete_of_a_missing_item_counts_as_deleted(ctx: ActionContext, api: FakeApi) -> None:
    result = await HttpResource().delete(ctx, "it-404", props(api))
    assert result.outcome is Outcome.COMPLETE
    assert api.seen[-1].method == "DELETE"


async def test_slow_item_is_in_progress_until_active(ctx: ActionContext, api: FakeApi) -> None:
    api.create_status = "BUILDING"
    p = props(api, body={"name": "db"}, status_field="status")
    created = await HttpResource().create(ctx, p)
    assert created.outcome is Outcome.IN_PROGRESS
    assert created.physical_id is not None
    seen = await HttpResource().observe(ctx, created.physical_id, p)
    assert seen.state is ObservedState.IN_PROGRESS
    api.items["it-1"]["status"] = "ACTIVE"
    seen = await HttpResource().observe(ctx, created.physical_id, p)
    assert seen.state is ObservedState.READY
    assert seen.attributes["status"] == "ACTIVE"
    assert seen.properties == {"body": {"name": "db"}}


async def test_item_in_error_status_fails(ctx: ActionContext, api: FakeApi) -> None:
    api.create_status = "ERROR"
    p = props(api, status_field="status")
    created = await HttpResource().create(ctx, p)
    assert created.physical_id is not None
    seen = await HttpResource().observe(ctx, created.physical_id, p)
    assert seen.state is ObservedState.FAILED
    assert seen.reason == "status is ERROR"


async def test_delete_with_status_field_completes_when_get_answers_404(
    ctx: ActionContext, api: FakeApi
) -> None:
    api.delete_slowly = True
    p = props(api, status_field="status")
    created = await HttpResource().create(ctx, p)
    assert created.physical_id is not None
    deleting = await HttpResource().delete(ctx, created.physical_id, p)
    assert deleting.outcome is Outcome.IN_PROGRESS
    assert (await HttpResource().observe(ctx, created.physical_id, p)).state is ObservedState.IN_PROGRESS
    del api.items["it-1"]
    assert (await HttpResource().observe(ctx, created.physical_id, p)).state is ObservedState.GONE


async def test_get_attr_path_reads_into_the_body(ctx: ActionContext, api: FakeApi) -> None:
    p = props(api, body={"net": {"ip": "10.0.0.5"}})
    created = await HttpResource().create(ctx, p)
    assert created.physical_id is not None
    seen = await HttpResource().observe(ctx, created.physical_id, p)
    assert seen.attributes["body"]["net"]["ip"] == "10.0.0.5"


async def test_server_error_is_transient_with_retry_after(ctx: ActionContext, api: FakeApi) -> None:
    with pytest.raises(TransientError, match="500: database down") as caught:
        await HttpResource().create(ctx, props(api).model_copy(update={"url": f"{api.base}/broken"}))
    assert caught.value.retry_after == 7


async def test_rate_limit_is_transient(ctx: ActionContext, api: FakeApi) -> None:
    with pytest.raises(TransientError, match="429") as caught:
        await HttpResource().create(ctx, props(api).model_copy(update={"url": f"{api.base}/limited"}))
    assert caught.value.retry_after == 3


async def test_bad_request_is_permanent_with_the_message(ctx: ActionContext, api: FakeApi) -> None:
    with pytest.raises(PermanentError, match="400: name is required"):
        await HttpResource().create(ctx, props(api).model_copy(update={"url": f"{api.base}/bad"}))


async def test_disallowed_host_is_refused_before_any_request(ctx: ActionContext, api: FakeApi) -> None:
    p = HttpResourceProperties(url="http://forbidden.example/things")
    with pytest.raises(PermanentError, match="CONVERGE_HTTP_ALLOWED_HOSTS"):
        await HttpResource().create(ctx, p)
    assert api.seen == []


async def test_redirect_to_disallowed_host_is_refused(ctx: ActionContext, api: FakeApi) -> None:
    with pytest.raises(PermanentError, match=r"forbidden\.example"):
        await HttpResource().create(ctx, props(api).model_copy(update={"url": f"{api.base}/away"}))


async def test_without_an_http_client_the_type_refuses_clearly(make_ctx: CtxFactory, api: FakeApi) -> None:
    with pytest.raises(PermanentError, match="outbound HTTP is not available"):
        await HttpResource().create(make_ctx(), props(api))


def test_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        HttpResourceProperties(url="file:///etc/passwd")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:9000/admin/pause#", "fragment"),
        ("http://me:pw@127.0.0.1:9000/things", "user information"),
        ("http://127.0.0.1:notaport/things", "not a URL"),
    ],
)
def test_url_may_not_carry_a_fragment_or_user_information(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        HttpResourceProperties(url=url)


def test_the_item_url_adds_the_id_as_a_path_segment_before_any_query() -> None:
    mine = HttpResourceProperties(url="http://127.0.0.1:9000/things/?tenant=a")
    assert item_url(mine, "it/1") == "http://127.0.0.1:9000/things/it%2F1?tenant=a"
