-- Heat parity (issue 19 items 3, 4, 6, 8): resource metadata, gates a node's
-- check waits at (hooks, and the observation of `converge: true` updates),
-- the converge flag of an operation, and stack snapshots.

-- What the template's `metadata` of the resource resolved to when its forward
-- check last ran (NULL: never checked since, or none). A replacement gets it
-- from the check that replaced the row.
ALTER TABLE resources ADD COLUMN metadata jsonb;

-- The gates of one node (`gate_traversal`, `gate_node`) of this row: the one
-- its check waits at now (`gate_waiting`: a hook such as 'pre-create', or
-- 'observe'), and those it has passed (`gate_passed`). A check of another
-- node or traversal starts afresh; a check sent again (recovery, a duplicate)
-- finds the same gate still waiting and does nothing, so a paused node stays
-- paused until its hook is cleared.
ALTER TABLE resources
    ADD COLUMN gate_traversal uuid,
    ADD COLUMN gate_node      bigint,
    ADD COLUMN gate_waiting   text,
    ADD COLUMN gate_passed    text[] NOT NULL DEFAULT '{}';
CREATE INDEX resources_gate_waiting ON resources (stack_id) WHERE gate_waiting IS NOT NULL;

-- An update with `converge: true`: each existing resource is observed before
-- its forward check decides.
ALTER TABLE traversals ADD COLUMN converge boolean NOT NULL DEFAULT false;

-- Stack snapshots. The snapshot's id is also the traversal id of the SNAPSHOT
-- action that takes it; `data` holds the stack's template, environment,
-- files, parameters and resources as they were.
CREATE TABLE snapshots (
    snapshot_id    uuid PRIMARY KEY,
    stack_id       uuid NOT NULL REFERENCES stacks (stack_id) ON DELETE CASCADE,
    name           text,
    status         text NOT NULL,
    status_reason  text NOT NULL DEFAULT '',
    data           jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX snapshots_stack ON snapshots (stack_id, created_at);

-- What a resource type's own snapshot gave for one resource (plugins that
-- support snapshots), recorded as each job of the SNAPSHOT action ends.
CREATE TABLE snapshot_resources (
    snapshot_id  uuid NOT NULL REFERENCES snapshots (snapshot_id) ON DELETE CASCADE,
    name         text NOT NULL,
    data         jsonb NOT NULL,
    PRIMARY KEY (snapshot_id, name)
);
