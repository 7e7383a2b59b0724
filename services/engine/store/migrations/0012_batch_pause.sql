-- ResourceGroup update_policy (issue 19 item 5): a member of a batch after the first
-- waits `pause_time` at its `pause` gate (`gate_waiting = 'pause'`) until `gate_until`
-- (seconds since the epoch); the engine's timer passes the gates that are due and sends
-- their checks again. NULL: no pause pending.
ALTER TABLE resources ADD COLUMN gate_until double precision;
CREATE INDEX resources_gate_until ON resources (gate_until) WHERE gate_until IS NOT NULL;
