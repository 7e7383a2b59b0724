-- Nested stacks: a child stack is an ordinary stack that knows its parent.
-- owner_stack_id / owner_resource_id (from 0001) name the parent stack and the
-- resource that owns the child; the child's operations are started by the
-- parent resource's jobs, and the end of each is answered to the job that
-- started it.

ALTER TABLE stacks
    -- The parent's job the current operation answers; cleared once answered,
    -- so an operation is answered once and only the latest job is answered.
    ADD COLUMN owner_job_id  text,
    -- 0 for a top-level stack, parent's depth + 1 for a child.
    ADD COLUMN nested_depth  integer NOT NULL DEFAULT 0;
