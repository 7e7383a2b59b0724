"""What the benchmark modules share: options, systems under test, templates.

`options` holds what a run measures (sizes, modes, shapes, limits), `system`
starts Converge the way operators run it (`converge up`, or separate engine,
worker and observer processes over RabbitMQ) on a scratch database and queue
prefix and removes both afterwards, `templates` builds the stacks.
"""
