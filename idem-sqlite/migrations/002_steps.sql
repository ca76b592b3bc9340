-- idem: what operations of several steps keep (docs/steps.md).
--
-- steps holds the output of each step that ended, in order (RecordedStep::encode's bytes, one
-- after another), step_count how many; suspensions counts the times the operation stopped
-- before completing. A route the service resumes itself keeps its request (KeptRequest::encode)
-- and resume_after_us (microseconds) with the claim; resume_at is when the operation is due
-- for resumption if nobody holds it by then. Completion clears all but suspensions.
--
-- Run it in one transaction (BEGIN IMMEDIATE ... COMMIT) while the service serves: each
-- ADD COLUMN changes only the schema, and the index is built from the table as it is.
ALTER TABLE "idempotency_records" ADD COLUMN steps BLOB;
ALTER TABLE "idempotency_records" ADD COLUMN step_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "idempotency_records" ADD COLUMN suspensions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "idempotency_records" ADD COLUMN request BLOB;
ALTER TABLE "idempotency_records" ADD COLUMN resume_after_us INTEGER;
ALTER TABLE "idempotency_records" ADD COLUMN resume_at INTEGER;
CREATE INDEX IF NOT EXISTS "idempotency_records_resume_at" ON "idempotency_records" (resume_at);
