-- An update preempts in one short transaction: it makes a new traversal the
-- stack's and reserves its row, and the graph is stored after (by the engine
-- that answered, or by whichever engine the `StartTraversal` that transaction
-- queued reaches: `services.engine.traversal`). Until then `remaining` is
-- NULL: the traversal is the stack's, its graph not stored yet.
ALTER TABLE traversals ALTER COLUMN remaining DROP NOT NULL;
