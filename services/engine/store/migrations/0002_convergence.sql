-- Convergence core: the stored traversal graph and per-row job tracking.

-- Each node row of a traversal is its own sync point; the separate table of
-- the initial sketch is not needed.
DROP TABLE sync_points;

-- One row per operation (traversal); `remaining` counts nodes not yet done,
-- so the stack completes without scanning its graph.
CREATE TABLE traversals (
    traversal_id  uuid PRIMARY KEY,
    stack_id      uuid NOT NULL REFERENCES stacks (stack_id) ON DELETE CASCADE,
    remaining     integer NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX traversals_stack ON traversals (stack_id);

-- The graph of one traversal. node = resource_id * 2 + 1 for the forward
-- (update) node of a row, resource_id * 2 for its cleanup node.
CREATE TABLE traversal_nodes (
    traversal_id    uuid NOT NULL REFERENCES traversals (traversal_id) ON DELETE CASCADE,
    node            bigint NOT NULL,
    requires_count  integer NOT NULL,
    satisfied       bigint[] NOT NULL DEFAULT '{}',
    -- Dependents with this node as their only predecessor are triggered at
    -- once; the others are sync points that count their reports.
    direct          bigint[] NOT NULL DEFAULT '{}',
    synced          bigint[] NOT NULL DEFAULT '{}',
    done            boolean NOT NULL DEFAULT false,
    PRIMARY KEY (traversal_id, node)
);

ALTER TABLE resources
    ADD COLUMN deletion_policy  text NOT NULL DEFAULT 'Delete',
    -- The job in flight on this row (at most one), what it was sent with,
    -- and what to record when it succeeds.
    ADD COLUMN current_job      text,
    ADD COLUMN job_node         bigint,
    ADD COLUMN job_properties   jsonb,
    ADD COLUMN job_requires     bigint[],
    -- A check of a newer traversal that found a job in flight waits here and
    -- is triggered again when that job's outcome is recorded.
    ADD COLUMN waiting_traversal uuid,
    ADD COLUMN waiting_node      bigint;
CREATE INDEX resources_current_job ON resources (current_job) WHERE current_job IS NOT NULL;
