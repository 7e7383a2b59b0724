"""The web dashboard works end to end, driven in a real browser.

Real: `converge up` (engine, worker, observer, the in-process sandbox cloud,
PostgreSQL) started as its own process, the dashboard's files as the engine
serves them, and a headless Chromium (tests/support/browser.py: skipped
without one) driven through Playwright. The
test does what a person would: signs in, creates the examples' web tier with
an environment and parameters, watches it converge in the graph (whose edges,
read back from the page, pass through no box), opens a resource, previews and
applies an update through the form, cancels a slow one, observes drift, opens a
failed stack by its name, and deletes; another opens the examples' configured
web tier, a failed deployment and the autoscaling group and reads, from the
Resource tab, each deployment's status, reason and outputs as the servers'
agents left them and the group's size changing as the sandbox alarm scales it.
Screenshots (the list, a converging stack, drift and a failed stack at 1400 and
800 px; deployments and a group at 1400 px) land in
test-artifacts/dashboard/ (gitignored; docs/ keeps a copy for the README). Nothing is
faked; every wait is on a condition the page shows, with a generous bound.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.support.browser import MISSING, find_chromium
from tests.support.geometry import edges_through_boxes, unconnected_edges
from tests.support.sandbox import RunningUp, start_up

CHROMIUM = find_chromium()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(CHROMIUM is None, reason=MISSING)]

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "services" / "engine" / "dashboard" / "static"
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
WAIT_MS = 60_000

expect.set_options(timeout=WAIT_MS)

GRAPH_READY = "() => { const g = window.convergeDashboard?.graph; return !!g && g.nodes.size > 0; }"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def up(tmp_path: Path, database_url: str) -> AsyncIterator[RunningUp]:
    # Each sandbox resource builds for 1 s, so there is a convergence to watch.
    running = await start_up(tmp_path, database_url, latency=1.0)
    try:
        yield running
    finally:
        await running.process.stop()


async def open_page(browser: Browser, base: str) -> tuple[Page, list[str]]:
    page = await browser.new_page(viewport={"width": 1400, "height": 900}, base_url=base)
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []  # uncaught exceptions, console errors, server errors
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        # Chromium logs each 4xx answer too (the refused token, a deleted stack): those are expected.
        lambda msg: (
            errors.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    return page, errors


async def counts(page: Page) -> dict[str, int]:
    result: dict[str, int] = await page.evaluate("() => window.convergeDashboard.graph.counts()")
    return result


async def wait_graph(page: Page, condition: str) -> None:
    """Wait until `condition`, JS over `g` (the graph view) and `c` (its counts by state), holds."""
    await page.wait_for_function(
        f"() => {{ const g = window.convergeDashboard?.graph; if (!g || !g.nodes.size) return false;"
        f" const c = g.counts(); return {condition}; }}",
        timeout=WAIT_MS,
    )


async def shoot(page: Page, name: str, wait: str | None = None) -> None:
    """Screenshots of the page at 1400 and 800 px wide (docs/ keeps a copy of them)."""
    for width in (1400, 800):
        await page.set_viewport_size({"width": width, "height": 900})
        if wait:
            await page.wait_for_function(wait)
        await page.evaluate(
            "() => new Promise((r) => { scrollTo(0, 0);"
            " requestAnimationFrame(() => requestAnimationFrame(r)); })"
        )
        await page.screenshot(path=ARTIFACTS / f"{name}-{width}.png", full_page=width == 800)
    await page.set_viewport_size({"width": 1400, "height": 900})


async def check_edges_avoid_boxes(page: Page) -> int:
    """Read the graph as the page draws it (each box's rectangle, each edge's path) and check
    no piece of a path enters a box and every dependency is drawn source to target."""
    drawn: dict[str, Any] = await page.evaluate(
        "() => { const g = window.convergeDashboard.graph;"
        " return { boxes: g.boxes(), paths: g.paths, edges: g.edges }; }"
    )
    boxes = {b["name"]: (b["x"], b["y"], b["x"] + b["width"], b["y"] + b["height"]) for b in drawn["boxes"]}
    assert edges_through_boxes(drawn["paths"], boxes) == []
    wanted = [(e["from"], e["to"]) for e in drawn["edges"]]
    assert unconnected_edges(wanted, drawn["paths"], boxes) == []
    return len(wanted)


async def test_a_stack_converges_live_and_is_updated_cancelled_and_deleted(
    up: RunningUp, browser: Browser
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page, errors = await open_page(browser, up.base)

    # Sign in: a wrong token is refused, the real one lands on the (empty) stack list.
    await page.goto("/")
    await page.fill("#token", "not-a-token")
    await page.click("button[type=submit]")
    await expect(page.get_by_role("alert")).to_have_text("That token is not valid.")
    await page.fill("#token", up.token)
    await page.fill("#project", "demo")
    await page.click("button[type=submit]")
    await expect(page.get_by_role("heading", name="Stacks")).to_be_visible()
    assert await page.evaluate("() => sessionStorage.getItem('converge.token')") == up.token
    icon = await page.evaluate("() => document.querySelector('link[rel=icon]').href")
    assert icon.endswith("/dashboard/favicon.svg")

    # Create the examples' web tier from the page, with an environment and parameters: the
    # form asks the engine for the template's parameters and shows them as fields.
    web_tier = (ROOT / "examples" / "web-tier.yaml").read_text()
    await page.fill("#new-name", "web")
    await page.set_input_files("#new-template-file", str(ROOT / "examples" / "web-tier.yaml"))
    await expect(page.locator("#new-template")).to_have_value(web_tier)
    await expect(page.locator("#new-param-flavor")).to_be_visible()
    assert await page.locator("#new-param-flavor option").all_inner_texts() == [
        "Default (m1.small)", "m1.tiny", "m1.small", "m1.medium", "m1.large", "m1.xlarge",
    ]  # fmt: skip
    assert await page.get_attribute("#new-param-volume_size", "type") == "number"
    await page.click("details.environment summary")
    await page.fill("#new-environment", "parameter_defaults:\n  volume_size: 20  # GiB\n")
    await page.select_option("#new-param-flavor", "m1.medium")
    await expect(page.locator("#new-param-volume_size")).to_have_attribute("placeholder", "default: 20")
    await page.click("form button:has-text('Create stack')")
    await page.wait_for_url("**/#/stacks/web/*")
    await page.wait_for_function(GRAPH_READY)
    shown = await api_get(up, "/stacks/web")
    assert shown["stack"]["parameters"]["flavor"] == "m1.medium"
    assert shown["stack"]["parameters"]["volume_size"] == "20"

    # Mid-convergence: some resources done while others still build, pushed by the stream.
    await wait_graph(page, "(c.complete || 0) > 0 && (c.progress || 0) > 0")
    await expect(page.locator("#live-state")).to_have_text("live")
    await page.locator("#graph").screenshot(path=ARTIFACTS / "create-mid-convergence-graph.png")
    await page.screenshot(path=ARTIFACTS / "converging-1400.png")
    await wait_graph(page, "c.complete === g.nodes.size")
    await expect(page.locator("#stack-status")).to_have_text("CREATE COMPLETE")
    await expect(page.locator("#resource-list li[data-state=complete]")).to_have_count(
        len(yaml.safe_load(web_tier)["resources"])
    )
    edges = await page.evaluate("() => window.convergeDashboard.graph.edges")
    assert {"from": "net", "to": "subnet"} in edges
    assert {"from": "subnet", "to": "web1"} in edges
    layers = await page.evaluate(
        "() => Object.fromEntries([...window.convergeDashboard.graph.nodes.values()]"
        ".map(n => [n.name, n.layer]))"
    )
    assert all(layers[e["from"]] < layers[e["to"]] for e in edges), "every edge points down a row"
    assert any(layers[e["to"]] - layers[e["from"]] > 1 for e in edges), "some edges pass a row"
    assert await check_edges_avoid_boxes(page) == len(edges)
    await page.click("#tab-outputs")
    await expect(page.locator("#outputs")).to_contain_text("server_addresses")

    # Keyboard: tab into the graph, arrow to a resource, Enter opens its details.
    await page.locator("#graph").focus()
    await page.keyboard.press("ArrowDown")
    focused = await page.evaluate("() => window.convergeDashboard.graph.focused")
    await page.keyboard.press("Enter")
    await expect(page.locator("#resource-detail h2")).to_have_text(focused)
    # The list beside the graph opens a resource too: physical id, properties, attributes. A
    # reload of the graph (as the stream asks for when an operation ends) keeps the list's
    # focus where it was, so the keyboard's next key still reaches the item.
    web1_button = page.locator("#resource-list li[data-name=web1] button")
    await web1_button.focus()
    await page.evaluate("() => window.convergeDashboard.page.load()")
    assert await web1_button.evaluate("b => b === document.activeElement"), "a reload kept the focus"
    await page.keyboard.press("Enter")
    await expect(page.locator("#resource-detail h2")).to_have_text("web1")
    await expect(page.locator("#resource-physical-id")).not_to_have_text("—")
    await expect(page.locator("#resource-properties")).to_contain_text('"name": "web-1"')
    await expect(page.locator("#resource-status")).to_have_text("CREATE COMPLETE")

    # Update through the form: the template as it was sent (comments and all), the current
    # parameters filled in; a new template and a changed parameter, previewed, then applied.
    v2 = (ROOT / "examples" / "web-tier-v2.yaml").read_text()
    await page.click("text=Update…")
    await expect(page.locator("#template-text")).to_have_value(web_tier)
    await expect(page.locator("#update-param-flavor")).to_have_value("m1.medium")
    await page.fill("#template-text", v2)
    await expect(page.locator("#update-param-flavor")).to_have_value("m1.medium")  # kept as the fields change
    await page.select_option("#update-param-flavor", "m1.large")
    await page.click("#preview-update")
    await expect(page.locator("#preview-changes dt[data-change=added]")).to_contain_text("added")
    await expect(page.locator("#preview-changes")).to_contain_text("web3")
    await expect(page.locator("#preview-changes dt[data-change=replaced]")).to_be_visible()
    await page.click("#apply-update")
    await expect(page.locator("#stack-status")).to_have_text("UPDATE IN PROGRESS")
    await wait_graph(page, "g.nodes.has('web3') && (c.progress || 0) > 0")
    await page.locator("#graph").screenshot(path=ARTIFACTS / "update-mid-convergence-graph.png")
    await expect(page.locator("#stack-status")).to_have_text("UPDATE COMPLETE")
    await wait_graph(page, "g.state('web1') === 'replaced' && g.state('web3') === 'complete'")
    shown = await api_get(up, "/stacks/web")
    assert shown["stack"]["parameters"]["flavor"] == "m1.large"
    assert shown["stack"]["parameters"]["volume_size"] == "20", "the environment is kept"
    await check_edges_avoid_boxes(page)

    # A slow update, cancelled: it rolls back and the slow resource goes again.
    slow = yaml.safe_load(v2)
    slow["resources"]["slow"] = {
        "type": "OS::Heat::TestResource",
        "properties": {"value": "late", "action_wait_secs": {"create": 5}},
    }
    await page.click("#reload-template")
    await expect(page.locator("#template-text")).to_have_value(v2)
    await page.fill("#template-text", json.dumps(slow, indent=2, default=str))
    await page.click("#preview-update")
    await expect(page.locator("#preview-changes dt[data-change=added]")).to_be_visible()
    await page.click("#apply-update")
    await wait_graph(page, "g.state('slow') === 'progress'")
    await page.click("#cancel-update")
    await expect(page.locator("#stack-status")).to_have_text("ROLLBACK COMPLETE")
    await wait_graph(page, "!g.nodes.has('slow') && c.complete + (c.replaced || 0) === g.nodes.size")

    # Observation: the controls show what is in force; drift shows in the graph and the list.
    await page.fill("#observe-interval", "1")
    await page.click("#observe-start")
    await expect(page.locator("#observation-state")).to_contain_text(
        "Observing every 1s, reporting drift only"
    )
    await expect(page.locator("#observe-state")).to_have_text("Observed")
    await expect(page.locator("#observe-interval")).to_have_value("1")
    assert not await page.is_checked("#observe-heal")
    web1 = (await api_get(up, "/stacks/web/resources/web1"))["resource"]["physical_resource_id"]
    await up_post(up, f"/sandbox/v1/servers/{web1}/break", {"reason": "host lost"})
    await wait_graph(page, "g.state('web1') === 'drifted'")
    await page.click("#tab-observation")
    await expect(page.locator("#observation")).to_contain_text("web1 drifted")
    await shoot(page, "drift")
    await page.click("text=← All stacks")
    await expect(page.locator("tr[data-stack=web] td.drift")).to_have_text("1 drifted")
    await expect(page.locator("tr[data-stack=web] td.observation")).to_have_text("every 1 s")

    # A failed stack, opened by a deep link with its name alone; then the list with all of them.
    await api_post(
        up, "/stacks", {"stack_name": "flaky", "template": (ROOT / "examples" / "failing.yaml").read_text()}
    )
    await page.goto(f"{up.base}/#/stacks/flaky")
    await page.wait_for_url("**/#/stacks/flaky/*")
    await expect(page.locator("#stack-status")).to_have_text("CREATE FAILED")
    await expect(page.locator("#stack-reason")).to_contain_text("the thing was asked to fail")
    await shoot(page, "failed", GRAPH_READY)
    await page.goto(f"{up.base}/#/stacks/nosuch")
    await expect(page.get_by_role("alert")).to_have_text("There is no stack named nosuch in project demo.")
    await page.goto(f"{up.base}/#/")
    await expect(page.locator("tr[data-stack=flaky]")).to_contain_text("CREATE FAILED")
    await shoot(page, "list")

    # The converging shot at 800 px: a fresh create, caught while it builds.
    await api_post(up, "/stacks", {"stack_name": "web2", "template": web_tier})
    await page.goto(f"{up.base}/#/stacks/web2")
    await page.set_viewport_size({"width": 800, "height": 900})
    await wait_graph(page, "(c.complete || 0) > 0 && (c.progress || 0) > 0")
    await page.screenshot(path=ARTIFACTS / "converging-800.png", full_page=True)
    await page.set_viewport_size({"width": 1400, "height": 900})

    # Observation off; then delete, confirmed in the browser's dialog.
    await page.goto(f"{up.base}/#/stacks/web")
    await page.click("#observe-stop")
    await expect(page.locator("#observation-state")).to_have_text("Not observed.")
    page.once("dialog", lambda dialog: dialog.accept())
    await page.click("#delete-stack")
    await expect(page.locator("#action-result")).to_have_text("This stack is deleted.")
    await page.click("text=← All stacks")
    await expect(page.locator("tr[data-stack=web]")).to_have_count(0)
    assert errors == [], errors


async def api_get(up: RunningUp, path: str) -> Any:
    async with (
        aiohttp.ClientSession(headers={"X-Auth-Token": up.token}) as http,
        http.get(f"{up.base}/v1/demo{path}") as r,
    ):
        assert r.status == 200, await r.text()
        return await r.json()


async def api_post(up: RunningUp, path: str, body: Any) -> None:
    await up_post(up, f"/v1/demo{path}", body)


async def up_post(up: RunningUp, path: str, body: Any) -> None:
    async with (
        aiohttp.ClientSession(headers={"X-Auth-Token": up.token}) as http,
        http.post(f"{up.base}{path}", json=body) as r,
    ):
        assert r.status < 300, await r.text()


FAILING_DEPLOYMENT = {
    "heat_template_version": "2018-08-31",
    "resources": {
        "server": {"type": "Sandbox::Server", "properties": {"name": "broken", "image": "cirros"}},
        "config": {
            "type": "OS::Heat::SoftwareConfig",
            "properties": {
                "group": "script",
                "config": "#sandbox: stdout installing nginx\n#sandbox: stderr no such package: nginx\n"
                "#sandbox: exit 3\n",
            },
        },
        "deploy": {
            "type": "OS::Heat::SoftwareDeployment",
            "properties": {"config": {"get_resource": "config"}, "server": {"get_resource": "server"}},
        },
    },
}


async def test_a_deployment_shows_its_status_and_outputs_and_a_group_its_size(
    up: RunningUp, browser: Browser
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    template = (ROOT / "examples" / "configured-web-tier.yaml").read_text()
    await api_post(up, "/stacks", {"stack_name": "site", "template": template})
    await api_post(up, "/stacks", {"stack_name": "broken", "template": FAILING_DEPLOYMENT})
    await api_post(
        up, "/stacks", {"stack_name": "asg", "template": (ROOT / "examples" / "autoscaling.yaml").read_text()}
    )
    page, errors = await open_page(browser, up.base)
    await page.goto("/")
    await page.fill("#token", up.token)
    await page.click("button[type=submit]")
    await expect(page.get_by_role("heading", name="Stacks")).to_be_visible()

    # A deployment group: each server's deployment, its status and what its agent printed.
    await page.goto(f"{up.base}/#/stacks/site")
    await expect(page.locator("#stack-status")).to_have_text("CREATE COMPLETE")
    await page.locator("#resource-list li[data-name=deploy_site] button").click()
    members = page.locator("#deployment-members .member")
    await expect(members).to_have_count(2)
    web1 = page.locator("#deployment-members .member[data-member=web1]")
    await expect(web1.locator(".deployment-status")).to_have_text("CREATE COMPLETE")
    await expect(web1.locator("[data-output=deploy_stdout]")).to_have_text("site 1.0 installed on web1\n")
    await expect(web1.locator("[data-output=url]")).to_have_text("http://web1/v1.0/")
    await expect(web1.locator("[data-output=deploy_status_code]")).to_have_text("0")
    await expect(web1.locator("summary")).to_have_text("web1CREATE COMPLETEexit 0")
    await page.evaluate("() => scrollTo(0, 0)")
    await page.screenshot(path=ARTIFACTS / "deployment-1400.png")

    # A failed deployment: its reason, its stderr and its exit code.
    await page.goto(f"{up.base}/#/stacks/broken")
    await expect(page.locator("#stack-status")).to_have_text("CREATE FAILED")
    await page.locator("#resource-list li[data-name=deploy] button").click()
    deployment = page.locator("#resource-summary .deployment")
    await expect(deployment.locator(".deployment-status")).to_have_text("CREATE FAILED")
    await expect(deployment.locator(".deployment-reason")).to_contain_text("no such package: nginx")
    await expect(deployment.locator("[data-output=deploy_stderr]")).to_have_text("no such package: nginx\n")
    await expect(deployment.locator("[data-output=deploy_stdout]")).to_have_text("installing nginx\n")
    await expect(deployment.locator("[data-output=deploy_status_code]")).to_have_text("3")
    await page.evaluate("() => scrollTo(0, 0)")
    await page.screenshot(path=ARTIFACTS / "deployment-failed-1400.png")

    # An autoscaling group: its size and bounds, and the size changing live as the alarm
    # on its servers' load scales it.
    await page.goto(f"{up.base}/#/stacks/asg")
    await expect(page.locator("#stack-status")).to_have_text("CREATE COMPLETE")
    await page.locator("#resource-list li[data-name=web] button").click()
    sizes = page.locator("#group-size")
    await expect(sizes.locator("dd[data-size=current_size]")).to_have_text("2")
    await expect(sizes.locator("dd[data-size=desired_size]")).to_have_text("2")
    await expect(sizes.locator("dd[data-size=min_size]")).to_have_text("2")
    await expect(sizes.locator("dd[data-size=max_size]")).to_have_text("4")
    servers = await api_get(up, "/stacks/asg/resources/web")
    for server in servers["resource"]["attributes"]["refs"]:
        await up_put(up, f"/sandbox/v1/servers/{server}/load", {"load": 90})
    await expect(sizes.locator("dd[data-size=current_size]")).to_have_text("3")
    await expect(sizes.locator(".size-line")).to_have_text("3 members (min 2, max 4)")
    await page.evaluate("() => scrollTo(0, 0)")
    await page.screenshot(path=ARTIFACTS / "autoscaling-1400.png")
    assert errors == [], errors


async def up_put(up: RunningUp, path: str, body: Any) -> None:
    async with (
        aiohttp.ClientSession(headers={"X-Auth-Token": up.token}) as http,
        http.put(f"{up.base}{path}", json=body) as r,
    ):
        assert r.status < 300, await r.text()
