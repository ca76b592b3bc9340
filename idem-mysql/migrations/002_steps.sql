-- idem: what operations of several steps keep (docs/steps.md).
--
-- steps holds the output of each step that ended, in order (RecordedStep::encode's bytes, one
-- after another), step_count how many; suspensions counts the times the operation stopped
-- before completing. A route the service resumes itself keeps its request (KeptRequest::encode)
-- and resume_after_us (microseconds) with the claim; resume_at is when the operation is due
-- for resumption if nobody holds it by then. Completion clears all but suspensions.
--
-- Both statements run while the service serves: the columns change only the data dictionary,
-- and the index is built with claims and completions going on.
ALTER TABLE `idempotency_records`
    ADD COLUMN steps           LONGBLOB,
    ADD COLUMN step_count      INT    NOT NULL DEFAULT 0,
    ADD COLUMN suspensions     INT    NOT NULL DEFAULT 0,
    ADD COLUMN request         LONGBLOB,
    ADD COLUMN resume_after_us BIGINT,
    ADD COLUMN resume_at       DATETIME(6),
    ALGORITHM = INSTANT;

ALTER TABLE `idempotency_records` ADD INDEX resume_at_idx (resume_at), ALGORITHM = INPLACE, LOCK = NONE;
