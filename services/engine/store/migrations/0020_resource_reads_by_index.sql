-- A page of a stack's resources and the rows that require some resources are read
-- through indexes, whatever the stack's size (the API's reads while a large stack
-- converges, issue 18):
-- * resources_page walks one stack's rows in the list's own order (name, then id),
--   so a page stops after its rows instead of sorting the stack's; it serves every
--   lookup by (stack, name) that resources_stack_name served.
-- * resources_requires finds the rows whose `requires` names any of some resource
--   ids (resource ids are unique across stacks): a page's `required_by`, or one
--   resource's, reads the rows that require it, not every row of the stack. Without
--   fastupdate an insert goes straight into the index, so a read never scans a
--   pending list that grew during a large create.
CREATE INDEX resources_page ON resources (stack_id, name, resource_id);
DROP INDEX resources_stack_name;
CREATE INDEX resources_requires ON resources USING gin (requires) WITH (fastupdate = off);
