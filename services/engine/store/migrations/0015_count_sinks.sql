-- A traversal counts down its sinks (nodes nothing depends on) instead of every node
-- (issue 18 item 3: node completions of one stack no longer all lock the traversal's
-- row). Traversals stored before this counted every node: they now count the sinks
-- not done yet, which ends them exactly when the old count would have.
UPDATE traversals t SET remaining = (
    SELECT count(*) FROM traversal_nodes n
    WHERE n.traversal_id = t.traversal_id AND NOT n.done
      AND cardinality(n.direct) = 0 AND cardinality(n.synced) = 0
);
