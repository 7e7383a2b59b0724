"""The web dashboard works end to end, driven in a real browser.

Real: `converge up` (engine, worker, observer, the in-process sandbox cloud,
PostgreSQL) started as its own process, the dashboard's files as the engine
serves them, and a headless Chromium (tests/support/browser.py: skipped
without one) driven through Playwright. The
test does what a person would: signs in, creates the examples' web tier,
watches it converge in the graph, opens a resource, previews and applies an
update, cancels a slow one, observes, and deletes. Screenshots of the graph
mid-convergence land in test-artifacts/dashboard/ (gitignored). Nothing is
faked; every wait is on a condition the page shows, with a generous bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.async_api import Browser, Page, Route, async_playwright, expect

from tests.support.browser import MISSING, find_chromium
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

    # Create the examples' web tier from the page.
    await page.fill("#new-name", "web")
    await page.set_input_files("#new-file", str(ROOT / "examples" / "web-tier.yaml"))
    await expect(page.locator("#new-template")).to_have_value(
        (ROOT / "examples" / "web-tier.yaml").read_text()
    )
    await page.click("form button:has-text('Create')")
    await page.wait_for_url("**/#/stacks/web/*")
    await page.wait_for_function(GRAPH_READY)

    # Mid-convergence: some resources done while others still build, pushed by the stream.
    await wait_graph(page, "(c.complete || 0) > 0 && (c.progress || 0) > 0")
    await expect(page.locator("#live-state")).to_have_text("live")
    await page.locator("#graph").screenshot(path=ARTIFACTS / "create-mid-convergence-graph.png")
    await page.screenshot(path=ARTIFACTS / "create-mid-convergence.png")
    await wait_graph(page, "c.complete === g.nodes.size")
    await expect(page.locator("#stack-status")).to_have_text("CREATE COMPLETE")
    await expect(page.locator("#resource-list li[data-state=complete]")).to_have_count(
        len(yaml.safe_load((ROOT / "examples" / "web-tier.yaml").read_text())["resources"])
    )
    edges = await page.evaluate("() => window.convergeDashboard.graph.edges")
    assert {"from": "net", "to": "subnet"} in edges
    assert {"from": "subnet", "to": "web1"} in edges
    layers = await page.evaluate(
        "() => Object.fromEntries([...window.convergeDashboard.graph.nodes.values()]"
        ".map(n => [n.name, n.layer]))"
    )
    assert all(layers[e["from"]] < layers[e["to"]] for e in edges), "every edge points down a layer"
    await page.click("#tab-outputs")
    await expect(page.locator("#outputs")).to_contain_text("server_addresses")

    # Keyboard: tab into the graph, arrow to a resource, Enter opens its details.
    await page.locator("#graph").focus()
    await page.keyboard.press("ArrowDown")
    focused = await page.evaluate("() => window.convergeDashboard.graph.focused")
    await page.keyboard.press("Enter")
    await expect(page.locator("#resource-detail h2")).to_have_text(focused)
    # The list beside the graph opens a resource too: physical id, properties, attributes.
    await page.locator("#resource-list li[data-name=web1] button").press("Enter")
    await expect(page.locator("#resource-detail h2")).to_have_text("web1")
    await expect(page.locator("#resource-physical-id")).not_to_have_text("—")
    await expect(page.locator("#resource-properties")).to_contain_text('"name": "web-1"')
    await expect(page.locator("#resource-status")).to_have_text("CREATE COMPLETE")

    # Update from an edited template: preview first, then apply and watch it converge.
    v2 = (ROOT / "examples" / "web-tier-v2.yaml").read_text()
    await page.click("text=Update…")
    await expect(page.locator("#template-text")).to_have_value(re.compile('"heat_template_version"'))
    await page.fill("#template-text", v2)
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

    # A slow update, cancelled: it rolls back and the slow resource goes again.
    slow = yaml.safe_load(v2)
    slow["resources"]["slow"] = {
        "type": "OS::Heat::TestResource",
        "properties": {"value": "late", "action_wait_secs": {"create": 5}},
    }
    await page.fill("#template-text", json.dumps(slow, indent=2, default=str))
    await page.click("#preview-update")
    await expect(page.locator("#preview-changes dt[data-change=added]")).to_be_visible()
    await page.click("#apply-update")
    await wait_graph(page, "g.state('slow') === 'progress'")
    await page.click("#cancel-update")
    await expect(page.locator("#stack-status")).to_have_text("ROLLBACK COMPLETE")
    await wait_graph(page, "!g.nodes.has('slow') && c.complete + (c.replaced || 0) === g.nodes.size")

    # Observation on and off.
    await page.click("#observe-start")
    await expect(page.locator("#observation-state")).to_contain_text("Observing every 10s")
    await page.click("#observe-stop")
    await expect(page.locator("#observation-state")).to_have_text("Not observed.")

    # Delete, confirmed in the browser's dialog; the page says when it is gone.
    page.once("dialog", lambda dialog: dialog.accept())
    await page.click("#delete-stack")
    await expect(page.locator("#action-result")).to_have_text("This stack is deleted.")
    await page.click("text=← All stacks")
    await expect(page.locator("table.stacks tbody")).to_contain_text("No stacks match.")
    assert errors == [], errors


async def test_layout_layers_follow_dependencies_and_barycentres_remove_crossings(browser: Browser) -> None:
    """The layout module in the browser itself, served from the working tree."""
    page, errors = await open_page(browser, "http://dashboard.test")

    async def serve(route: Route) -> None:
        name = route.request.url.rsplit("/", 1)[-1] or "index.html"
        if name == "blank":
            await route.fulfill(body="<!doctype html><title>layout</title>", content_type="text/html")
        else:
            await route.fulfill(path=STATIC / name, content_type="text/javascript")

    await page.route("http://dashboard.test/**", serve)
    await page.goto("/dashboard/blank")
    result: dict[str, Any] = await page.evaluate(
        """async () => {
            const { layout, crossings } = await import('/dashboard/layout.js');
            // A diamond, a chain and a crossing pair: b1 needs a2, b2 needs a1.
            const names = ['a1', 'a2', 'b1', 'b2', 'top', 'left', 'right', 'bottom', 'x'];
            const edges = [
                {from: 'a2', to: 'b1'}, {from: 'a1', to: 'b2'},
                {from: 'top', to: 'left'}, {from: 'top', to: 'right'},
                {from: 'left', to: 'bottom'}, {from: 'right', to: 'bottom'},
                {from: 'top', to: 'bottom'}, {from: 'bottom', to: 'x'},
            ];
            const placed = layout(names, edges);
            const plain = layout(names, edges, {sweeps: 0});
            const wide = layout(Array.from({length: 2000}, (_, i) => `r${i}`), [], {maxPerRow: 40});
            const cycle = layout(['p', 'q'], [{from: 'p', to: 'q'}, {from: 'q', to: 'p'}]);
            return {
                layer: Object.fromEntries(placed.layerOf),
                crossings: crossings(placed.rows, edges),
                before: crossings(plain.rows, edges),
                rows: placed.rows,
                wideRows: new Set([...wide.position.values()].map(p => p.y)).size,
                wideWidth: wide.width,
                cyclePlaced: cycle.position.size,
            };
        }"""
    )
    assert result["layer"] == {
        "a1": 0, "a2": 0, "top": 0, "x": 3,
        "b1": 1, "b2": 1, "left": 1, "right": 1,
        "bottom": 2,
    }  # fmt: skip
    assert result["before"] > 0, "the input order crosses"
    assert result["crossings"] == 0, result["rows"]
    assert result["wideRows"] == 50, "2,000 independent resources wrap onto rows of 40"
    assert result["wideWidth"] < 8000
    assert result["cyclePlaced"] == 2, "a cycle is drawn, not lost"
    assert errors == [], errors
