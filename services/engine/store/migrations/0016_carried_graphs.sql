-- A traversal stores only the nodes of its graph that differ from a base
-- traversal's (issue 18 item 5): `base` names that traversal, whose rows give
-- the nodes this one has no row of its own for (not done, nothing satisfied:
-- a carried node's own row is written the first time its state changes). A
-- node of the base this graph does not have gets a row of its own, done. A
-- base stores its whole graph (its own base is NULL), and is kept while a
-- traversal names it.
ALTER TABLE traversals ADD COLUMN base uuid REFERENCES traversals (traversal_id);
CREATE INDEX traversals_base ON traversals (base) WHERE base IS NOT NULL;
