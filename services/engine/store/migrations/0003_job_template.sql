-- The template a job converges its row to; the row adopts it only when the
-- job succeeds, so a row whose update turned into a replacement still
-- belongs to the template it was converged under (rollback restores it).
ALTER TABLE resources ADD COLUMN job_template_id uuid;
