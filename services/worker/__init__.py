"""converge-worker: runs resource-plugin actions from the jobs queue. Stateless."""
