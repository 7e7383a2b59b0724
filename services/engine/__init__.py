"""converge-engine: HTTP API, templates, convergence logic; the only DB writer."""
