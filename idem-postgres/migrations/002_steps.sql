-- idem: what operations of several steps keep (docs/steps.md).
--
-- steps holds the output of each step that ended, in order (RecordedStep::encode's bytes, one
-- after another), step_count how many; suspensions counts the times the operation stopped
-- before completing. A route the service resumes itself keeps its request (KeptRequest::encode)
-- and resume_after with the claim; resume_at is when the operation is due for resumption if
-- nobody holds it by then. Completion clears all but suspensions.
ALTER TABLE "idempotency_records"
    ADD COLUMN IF NOT EXISTS steps        bytea,
    ADD COLUMN IF NOT EXISTS step_count   integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS suspensions  integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS request      bytea,
    ADD COLUMN IF NOT EXISTS resume_after interval,
    ADD COLUMN IF NOT EXISTS resume_at    timestamptz;

-- The resumer reads the operations due first; only resumable ones are in this index.
CREATE INDEX IF NOT EXISTS "idempotency_records_resume_at_idx" ON "idempotency_records" (resume_at) WHERE resume_at IS NOT NULL;
