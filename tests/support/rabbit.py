"""Broker-side operations for tests: what only an operator could do.

`rabbitmqctl` closes connections from the server side and sets policies; a
plain aio-pika connection deletes a run's queues and exchanges afterwards.
Talks to CONVERGE_TEST_RABBIT_NODE when `make test` started a private node.
"""

from __future__ import annotations

import asyncio
import os
import subprocess

import aio_pika


def rabbitmqctl(*args: str) -> str:
    node = os.environ.get("CONVERGE_TEST_RABBIT_NODE")
    command = ["rabbitmqctl", *(["-n", node] if node else []), "-q", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout


def close_connections(name_contains: str) -> int:
    """Close, from the broker's side, every connection whose name matches."""
    closed = 0
    for line in rabbitmqctl("list_connections", "pid", "client_properties").splitlines():
        if name_contains in line:
            pid = line.split()[0]
            rabbitmqctl("close_connection", pid, "closed by test")
            closed += 1
    return closed


async def purge_queue(amqp_url: str, name: str) -> int:
    """Drop every ready message of a queue (messages lost, as an operator's purge or a broker
    that lost its disk would) and say how many there were. Over AMQP, not `rabbitmqctl`: the
    purge takes milliseconds, where starting `rabbitmqctl` takes a second or more."""
    connection = await aio_pika.connect(amqp_url, timeout=10)
    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(name, ensure=True)
        purged = await queue.purge()
        return int(purged.message_count or 0)


def set_policy(name: str, pattern: str, definition: str) -> None:
    rabbitmqctl("set_policy", "--apply-to", "queues", "--priority", "100", name, pattern, definition)


def clear_policy(name: str) -> None:
    rabbitmqctl("clear_policy", name)


def delete_by_prefix(amqp_url: str, prefix: str) -> None:
    queues = [
        line.split("\t")[0]
        for line in rabbitmqctl("list_queues", "name").splitlines()
        if line.startswith(prefix)
    ]
    exchanges = [
        line.split("\t")[0]
        for line in rabbitmqctl("list_exchanges", "name").splitlines()
        if line.startswith(prefix)
    ]

    async def delete() -> None:
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            for queue in queues:
                await channel.queue_delete(queue)
            for exchange in exchanges:
                await channel.exchange_delete(exchange)

    if queues or exchanges:
        asyncio.run(delete())


#: The queues a bus declares under its prefix (`shared.bus.amqp`: `P.<name>` and `P.<name>.dead`).
BUS_QUEUES = ("engine", "jobs", "observe", "results", "replies", "q", "notifications.sandbox")


def delete_test_queues(amqp_url: str, prefix: str) -> None:
    """Delete one test's queues and its dead-letter exchange as soon as the test ends: quorum
    queues left for the end of the run pile up in the hundreds and slow the broker until it
    stops answering. Deleting a queue that was never declared is a no-op."""

    async def delete() -> None:
        connection = await aio_pika.connect(amqp_url, timeout=10)
        async with connection:
            channel = await connection.channel()
            for name in BUS_QUEUES:
                await channel.queue_delete(f"{prefix}.{name}")
                await channel.queue_delete(f"{prefix}.{name}.dead")
            await channel.exchange_delete(f"{prefix}.dead-letter")

    asyncio.run(asyncio.wait_for(delete(), 30))
