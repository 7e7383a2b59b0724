-- A traversal's count of counted nodes split over shard rows (issue 18 item 3):
-- a batch counts down one shard no other transaction holds (SKIP LOCKED), so
-- batches of several engines no longer queue on the traversal's row. For a
-- `sharded` traversal, `traversals.remaining` counts its shards not yet at zero;
-- the transaction that brings it to zero ends the traversal. Traversals stored
-- before this are not sharded and count their nodes on `remaining` as before.
CREATE TABLE traversal_counts (
    traversal_id  uuid NOT NULL REFERENCES traversals (traversal_id) ON DELETE CASCADE,
    shard         integer NOT NULL,
    remaining     integer NOT NULL CHECK (remaining >= 0),
    PRIMARY KEY (traversal_id, shard)
);
ALTER TABLE traversals ADD COLUMN sharded boolean NOT NULL DEFAULT false;
