-- Each outbox row names the engine that wrote it, so a live engine's relay can
-- publish a dead engine's rows at once (its lease, a session advisory lock,
-- is gone with its connection) instead of waiting for them to turn stale.
-- claimed_by / claimed_at (from 0001) were never used.

ALTER TABLE outbox
    DROP COLUMN claimed_by,
    DROP COLUMN claimed_at,
    ADD COLUMN engine_id uuid;

CREATE INDEX outbox_engine ON outbox (engine_id) WHERE engine_id IS NOT NULL;
