-- Tenant boundaries: stack trees are counted and bounded, and a resource
-- adopted through external_id remembers that it is not managed by its stack.

-- The top of each stack's tree (itself for a top-level stack), so a tree's
-- size is read with one indexed query and a stack that is adopted or
-- released moves its whole subtree with one UPDATE.
ALTER TABLE stacks ADD COLUMN root_stack_id uuid;

WITH RECURSIVE tree (stack_id, root) AS (
    SELECT stack_id, stack_id FROM stacks WHERE owner_stack_id IS NULL
    UNION ALL
    SELECT s.stack_id, t.root FROM stacks s JOIN tree t ON s.owner_stack_id = t.stack_id
)
UPDATE stacks s SET root_stack_id = tree.root FROM tree WHERE s.stack_id = tree.stack_id;

UPDATE stacks SET root_stack_id = stack_id WHERE root_stack_id IS NULL;
ALTER TABLE stacks ALTER COLUMN root_stack_id SET NOT NULL;
CREATE INDEX stacks_root ON stacks (root_stack_id) WHERE deleted_at IS NULL;

-- How many resources the stack's current goal holds, set whenever a goal is
-- stored; a tree's size is the sum over its live stacks (one row per stack,
-- not per resource, to read while a child's goal is being stored).
ALTER TABLE stacks ADD COLUMN goal_resources integer NOT NULL DEFAULT 0;
UPDATE stacks s SET goal_resources = (
    SELECT count(*) FROM resources r WHERE r.stack_id = s.stack_id AND r.replaced_by IS NULL
) WHERE s.deleted_at IS NULL;

-- Set when a resource is adopted through `external_id` (Heat: "not managed by
-- Heat"): the stack never deletes it, it only lets go of it (forgets the row;
-- a nested stack is released, a top-level stack of its project again).
-- Resources adopted through adopt_stack_data are managed and keep false.
ALTER TABLE resources ADD COLUMN external boolean NOT NULL DEFAULT false;
