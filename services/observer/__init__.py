"""converge-observer: finds out what real resources look like; reports to the engine."""
