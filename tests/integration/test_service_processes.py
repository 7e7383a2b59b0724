"""The engine and observer processes start, serve health and metrics, and drain on signals.

Real: the console scripts as processes, PostgreSQL, RabbitMQ, HTTP.
(The worker's process behaviour is proved in test_worker_process.)
"""

from __future__ import annotations

import signal

import aiohttp
import asyncpg
import pytest

from tests.support.ports import free_port
from tests.support.processes import ServiceProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_engine_serves_health_registers_itself_and_exits_0_on_sigterm(
    amqp_url: str, queue_prefix: str, database_url: str, db: asyncpg.Connection
) -> None:
    port = free_port()
    engine = await ServiceProcess(
        ["converge-engine"],
        {
            "CONVERGE_DATABASE_URL": database_url,
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": queue_prefix,
            "CONVERGE_API_PORT": str(port),
        },
    ).start()
    try:
        ready = await engine.wait_for_event("ready")
        assert ready["service"] == "engine"
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            for path in ("/healthz", "/readyz", "/metrics"):
                async with http.get(path) as response:
                    assert response.status == 200, path
        rows = await db.fetch("SELECT engine_id::text FROM engines")
        assert [r["engine_id"] for r in rows] == [ready["engine_id"]]
        engine.signal(signal.SIGTERM)
        assert await engine.wait() == 0
        assert await db.fetchval("SELECT count(*) FROM engines") == 0
    finally:
        await engine.stop()


async def test_observer_serves_health_and_exits_0_on_sigint(amqp_url: str, queue_prefix: str) -> None:
    port = free_port()
    observer = await ServiceProcess(
        ["converge-observer"],
        {
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": queue_prefix,
            "CONVERGE_HEALTH_PORT": str(port),
        },
    ).start()
    try:
        await observer.wait_for_event("ready")
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.get("/healthz") as response:
                assert response.status == 200
            async with http.get("/metrics") as response:
                assert response.status == 200
        observer.signal(signal.SIGINT)
        assert await observer.wait() == 0
        assert any(e.get("event") == "stopped" for e in observer.events)
    finally:
        await observer.stop()


async def test_every_log_line_is_json_bound_to_its_service(amqp_url: str, queue_prefix: str) -> None:
    observer = await ServiceProcess(
        ["converge-observer"],
        {
            "CONVERGE_AMQP_URL": amqp_url,
            "CONVERGE_QUEUE_PREFIX": queue_prefix,
            "CONVERGE_HEALTH_PORT": str(free_port()),
        },
    ).start()
    try:
        await observer.wait_for_event("ready")
        observer.signal(signal.SIGTERM)
        await observer.wait()
        await eventually(lambda: len(observer.lines) > 0)
        assert len(observer.events) == len(observer.lines), observer.output()
        assert all(e.get("service") == "observer" for e in observer.events)
    finally:
        await observer.stop()
