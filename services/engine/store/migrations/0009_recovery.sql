-- Recovery of work in flight that nothing is moving (services/engine/recovery.py).

-- The job in flight on this row whose worker answered "in progress" and that an
-- observer now watches (set when the engine records that answer, cleared with the
-- other job columns). Sending that job again would only be answered with the same
-- in-progress result, which the engine's inbox drops, so recovery asks an observer
-- instead. It counts only while it equals current_job.
ALTER TABLE resources ADD COLUMN observing_job text;

-- When an engine last sent a stack's work in flight again: a stack is recovered at
-- most once per stall time, whatever its status.
CREATE TABLE stack_recoveries (
    stack_id      uuid PRIMARY KEY REFERENCES stacks (stack_id) ON DELETE CASCADE,
    recovered_at  timestamptz NOT NULL DEFAULT now()
);
