"""Converge's common package: what every service shares.

Messages (`messages`), the transport (`bus`), configuration (`settings`),
logging (`logging`), the error tree (`errors`), background-task supervision
(`tasks`), the health/metrics HTTP surface (`health`) and the resource plugin
interface (`plugins`). Nothing here imports a service.
"""
