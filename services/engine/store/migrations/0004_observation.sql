-- Continuous observation (drift detection and healing) of whole stacks.

-- One row per stack under observation, set through the control API. The
-- engines' schedulers take due rows (SKIP LOCKED) and ask observers to look
-- at every settled resource of the stack; `cycle` numbers those rounds.
CREATE TABLE observations (
    stack_id       uuid PRIMARY KEY REFERENCES stacks (stack_id) ON DELETE CASCADE,
    enabled        boolean NOT NULL,
    interval_secs  double precision NOT NULL CHECK (interval_secs >= 1),
    heal           boolean NOT NULL,
    cycle          bigint NOT NULL DEFAULT 0,
    next_cycle_at  timestamptz NOT NULL DEFAULT now(),
    last_cycle_at  timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX observations_due ON observations (next_cycle_at) WHERE enabled;

-- The drift that exists now, one row per drifted resource; the history is in
-- the events. A row goes when an observation finds the resource in line again
-- (or with its resource row).
CREATE TABLE drift (
    resource_id    bigint PRIMARY KEY REFERENCES resources (resource_id) ON DELETE CASCADE,
    stack_id       uuid NOT NULL REFERENCES stacks (stack_id) ON DELETE CASCADE,
    resource_name  text NOT NULL,
    physical_id    text,
    reason         text NOT NULL,
    differences    jsonb NOT NULL DEFAULT '{}',
    cycle          bigint NOT NULL,  -- the round that saw it
    detected_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX drift_stack ON drift (stack_id);

-- Provider notifications name resources by physical id only.
CREATE INDEX resources_physical_id ON resources (physical_id) WHERE physical_id IS NOT NULL;
