-- idem: autovacuum at the pace of the table's churn (docs/postgres.md, The sweeper).
--
-- Every keyed request leaves two dead row versions behind: its completion's UPDATE (never a
-- HOT update, as it changes the indexed expires_at) and the sweeper's DELETE once it expired.
-- With PostgreSQL's default scale factor (0.2), autovacuum waits for dead rows worth a fifth
-- of the table: on a table of 30 days of records, three days of churn whose space nothing
-- reuses meanwhile. At 0.02 it comes after a fiftieth (about seven hours of a 30-day window),
-- each vacuum has a tenth of the dead rows to clear, and new records fill the space of swept
-- ones: the table stays within a few percent of its live records.
--
-- Setting these takes a SHARE UPDATE EXCLUSIVE lock, which claims, completions and sweeps do
-- not conflict with. A table that has autovacuum settings of its own keeps them.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT FROM pg_class, unnest(reloptions) AS option
        WHERE pg_class.oid = '"idempotency_records"'::regclass AND option LIKE 'autovacuum%'
    ) THEN
        ALTER TABLE "idempotency_records" SET (
            autovacuum_vacuum_scale_factor = 0.02,
            autovacuum_vacuum_threshold = 1000);
    END IF;
END
$$;
