-- A kept row's cleanup node finishes with its forward node instead of after
-- the cleanups of every row that required it (`core.graph.kept_cleanups`), so
-- an update no longer ends with a backward wave of no-op cleanups through its
-- layers. A traversal then counts down more than its sinks: `counted` marks the
-- nodes it counts (`core.graph.counted_nodes`). Rows stored before this are not
-- counted (a sink is counted whatever the flag says) and their traversals
-- finish their cleanups in order, as they were stored to.
ALTER TABLE traversal_nodes ADD COLUMN counted boolean NOT NULL DEFAULT false;
