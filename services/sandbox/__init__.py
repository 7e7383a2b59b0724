"""The sandbox cloud: a small simulated IaaS for demos, tests and benchmarks.

    Sandbox::* types (provider.py) --HTTP--> converge-sandbox (app.py)
        -> SandboxService (service.py: clock, timers, metrics)
        -> Cloud (model.py: state, rules, transitions; pure, no I/O)
        -> Notifier (notify.py) --ProviderNotification--> `notifications.sandbox`

`specs.py` holds the property schemas and update rules shared by the cloud
and the resource types, so both agree on what changes in place and what
forces replacement. `converge-sandbox` runs it as its own process;
`converge up` mounts the same application under `/sandbox` on its API port.
"""
