-- Healing per round, not per report: a round of observation is judged as a
-- whole once every look it sent has been answered (or its look deadline has
-- passed), so a heal marks every drifted resource at once and rebuilds them
-- in dependency order. A heal that fails is retried in a later round, after
-- a pause that grows with each failure.

ALTER TABLE observations
    ADD COLUMN round_looks     integer NOT NULL DEFAULT 0,    -- looks the current round sent
    ADD COLUMN round_reports   integer NOT NULL DEFAULT 0,    -- answers to them received
    ADD COLUMN round_deadline  timestamptz,                   -- when its looks are given up on
    ADD COLUMN round_closed    boolean NOT NULL DEFAULT true, -- judged as a whole already
    ADD COLUMN heal_traversal  uuid,                          -- the traversal of the last heal
    ADD COLUMN heal_attempts   integer NOT NULL DEFAULT 0,    -- heals in a row that failed, + 1
    ADD COLUMN heal_not_before timestamptz;                   -- no retry before (after a failure)

CREATE INDEX observations_open_rounds ON observations (round_deadline) WHERE NOT round_closed;
