"""Benchmark: the web dashboard on a 2,000-resource stack, in headless Chromium.

A real `converge up` (scratch database on the PostgreSQL at
CONVERGE_BENCH_DATABASE_URL, else CONVERGE_TEST_DATABASE_URL, else the local
server) gets a stack of N `OS::Heat::None` resources in layers (width W, each
depending on two of the layer above). The dashboard's stack page is opened as
the create starts, and measured while the engine pushes the events:

- time to first render: navigation start to the first drawn graph, and its
  parts (the /graph call, the layout);
- frames while events stream: the interval between animation frames (what a
  person feels: 16.7 ms is 60 fps) and the time each redraw of the canvas took;
- events applied, long tasks (main thread busy > 50 ms), and the time from a
  key press (pan/zoom) to the frame that shows it, while events keep arriving.

`make bench` runs it as the module `dashboard` (rows for the results table);
alone it prints one JSON document. Run it with the services a test run would use:

    .venv/bin/python -m tests.support.provide_services -- .venv/bin/python -m bench.dashboard

(`--resources 2000 --width 40 --screenshot out.png` change the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from playwright.async_api import Page, async_playwright

from bench.harness.options import Options, Row, row
from tests.support.databases import create_database, drop_database
from tests.support.sandbox import start_up

SERVER = os.environ.get(
    "CONVERGE_BENCH_DATABASE_URL",
    os.environ.get("CONVERGE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"),
)
CHROMIUM = "/usr/bin/chromium"
RESOURCES, WIDTH = 2000, 40

#: Injected before the page's own scripts: frame intervals and long tasks, from the start.
PROBE = """
window.__bench = { frames: [], longTasks: [], recording: false };
(() => {
  let last = performance.now();
  const tick = (now) => {
    if (window.__bench.recording) window.__bench.frames.push(now - last);
    last = now;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__bench.longTasks.push(entry.duration);
  }).observe({ type: "longtask", buffered: true });
})();
"""


def layered_none(n: int, width: int) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for i in range(n):
        layer, pos = divmod(i, width)
        body: dict[str, Any] = {"type": "OS::Heat::None"}
        if layer:
            above = (layer - 1) * width
            body["depends_on"] = sorted({f"r{above + pos}", f"r{above + (pos * 7 + 3) % width}"})
        resources[f"r{i}"] = body
    return {"heat_template_version": "2018-08-31", "resources": resources}


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    return {
        "count": len(values),
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
        "max": round(ordered[-1], 2),
    }


async def key_to_frame(page: Page, key: str) -> float:
    """Milliseconds from a key press on the graph to the end of the frame that redraws it."""
    ms: float = await page.evaluate(
        """(key) => new Promise((resolve) => {
            const g = window.convergeDashboard.graph;
            const drawn = g.metrics.draws;
            const start = performance.now();
            const canvas = document.getElementById('graph');
            canvas.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true }));
            const wait = () => g.metrics.draws > drawn ? resolve(performance.now() - start)
                                                       : requestAnimationFrame(wait);
            requestAnimationFrame(wait);
        })""",
        key,
    )
    return ms


def run(options: Options) -> list[Row]:
    """`make bench`: the 2,000-resource figures as rows (no numeric target in the
    issue: "stays usable"; 16.7 ms between frames is 60 fps)."""
    result = asyncio.run(measure_up(RESOURCES, WIDTH, None, server=options.database_url))
    n = f"{result['resources']} resources"
    frames, redraw, keys = result["frame_interval_ms"], result["redraw_ms"], result["key_to_frame_ms"]
    return [
        row(f"dashboard time to first render ({n})", result["time_to_first_render_ms"], "ms", mode="up"),
        row(
            f"dashboard frame interval p95 while events stream ({n})",
            frames.get("p95"),
            "ms",
            mode="up",
            note=f"p50 {frames.get('p50')} ms; {result['events_streamed']} events",
        ),
        row(f"dashboard canvas redraw p95 ({n})", redraw.get("p95"), "ms", mode="up"),
        row(f"dashboard key press to frame p95 ({n})", keys.get("p95"), "ms", mode="up"),
    ]


async def measure_up(n: int, width: int, screenshot: Path | None, *, server: str = SERVER) -> dict[str, Any]:
    """Measure against a fresh `converge up` on a scratch database of `server`."""
    name = f"converge_bench_dash_{uuid.uuid4().hex[:8]}"
    url = await create_database(server, name)
    try:
        with tempfile.TemporaryDirectory() as data:
            up = await start_up(Path(data), url, latency=0.1)
            try:
                return await measure(up.base, up.token, n, width, screenshot)
            finally:
                await up.process.stop()
    finally:
        await drop_database(server, name)


async def measure(base: str, token: str, n: int, width: int, screenshot: Path | None) -> dict[str, Any]:
    headers = {"X-Auth-Token": token}
    template = layered_none(n, width)
    async with async_playwright() as p, aiohttp.ClientSession(headers=headers) as http:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = await browser.new_page(viewport={"width": 1600, "height": 1000})
        await page.add_init_script(
            PROBE
            + f"sessionStorage.setItem('converge.token', {json.dumps(token)});"
            + "sessionStorage.setItem('converge.project', 'demo');"
        )
        async with http.post(f"{base}/v1/demo/stacks", json={"stack_name": "big", "template": template}) as r:
            assert r.status == 201, await r.text()
            stack_id = (await r.json())["stack"]["id"]
        created = time.monotonic()
        await page.goto(f"{base}/#/stacks/big/{stack_id}")
        await page.evaluate("() => { window.__bench.recording = true; }")
        await page.wait_for_function(
            "() => window.convergeDashboard?.graph?.metrics.firstDrawAt !== null", timeout=120_000
        )
        first = await page.evaluate(
            """() => {
                const m = window.convergeDashboard.graph.metrics;
                const g = performance.getEntriesByType('resource').find(e => e.name.endsWith('/graph'));
                return { first: m.firstDrawAt, layout: m.layoutMs, graph: g ? g.duration : null,
                         nodes: window.convergeDashboard.graph.nodes.size,
                         edges: window.convergeDashboard.graph.edges.length };
            }"""
        )
        # Interact while the events stream: zoom in and out, walk the graph.
        keys: list[float] = []
        for key in ("+", "ArrowRight", "-", "ArrowDown", "+", "0"):
            keys.append(await key_to_frame(page, key))
        if screenshot is not None:
            await page.screenshot(path=screenshot)
        await page.wait_for_function(
            "() => document.getElementById('stack-status')?.textContent === 'CREATE COMPLETE'",
            timeout=600_000,
        )
        converged = time.monotonic() - created
        await page.wait_for_function(
            f"() => window.convergeDashboard.graph.counts().complete === {n}", timeout=60_000
        )
        stats = await page.evaluate(
            """() => ({ frames: window.__bench.frames, longTasks: window.__bench.longTasks,
                        draws: window.convergeDashboard.graph.metrics.drawMs,
                        events: window.convergeDashboard.graph.metrics.events })"""
        )
        await browser.close()
    return {
        "benchmark": "dashboard",
        "resources": first["nodes"],
        "edges": first["edges"],
        "time_to_first_render_ms": round(first["first"], 1),
        "graph_call_ms": round(first["graph"], 1) if first["graph"] is not None else None,
        "layout_ms": round(first["layout"], 1),
        "converge_seconds": round(converged, 1),
        "events_streamed": stats["events"],
        "frame_interval_ms": summary(stats["frames"]),
        "redraw_ms": summary(stats["draws"]),
        "key_to_frame_ms": summary(keys),
        "long_tasks_ms": summary(stats["longTasks"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resources", type=int, default=RESOURCES)
    parser.add_argument("--width", type=int, default=WIDTH, help="resources per layer of the template")
    parser.add_argument("--screenshot", type=Path, help="save the page mid-convergence here")
    args = parser.parse_args()
    result = asyncio.run(measure_up(args.resources, args.width, args.screenshot))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
