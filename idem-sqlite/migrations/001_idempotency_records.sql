-- idem: the table of idempotency records kept by SqliteStore (SQLite 3.42 or later).
--
-- One row per store key. A row is 'in_flight' (claimed, under a lease) or 'completed' (the
-- stored response). A row whose expires_at has passed counts as absent: a claim replaces it,
-- and the sweeper (SqliteStore::sweep) deletes it. Times are microseconds since the Unix
-- epoch, UTC, read from SQLite's clock by every statement. STRICT: a value of another type
-- is refused rather than stored.
CREATE TABLE IF NOT EXISTS "idempotency_records" (
    -- SHA-256 over scope, principal, method, route and Idempotency-Key (StoreKey): 32 bytes.
    store_key        BLOB    NOT NULL PRIMARY KEY,
    -- The request fingerprint: one algorithm tag byte, then the SHA-256 digest.
    fingerprint      BLOB    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('in_flight', 'completed')),
    -- The holder of an in-flight record: a random 128-bit token, and when its lease lapses.
    lease_token      BLOB,
    lease_expires_at INTEGER,
    -- When the record is forgotten: max(ttl, lease) after the claim or the last renewal
    -- while in flight, ttl after the completion.
    expires_at       INTEGER NOT NULL,
    -- The stored response: StoredResponse::as_bytes, in format response_format; its status
    -- code is repeated in response_status for queries of your own.
    response_status  INTEGER,
    response_format  INTEGER,
    response         BLOB,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    CHECK (state <> 'in_flight' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state <> 'completed'
           OR (response IS NOT NULL AND response_format IS NOT NULL AND response_status IS NOT NULL))
) STRICT;

-- The sweeper deletes the oldest expired records first.
CREATE INDEX IF NOT EXISTS "idempotency_records_expires_at" ON "idempotency_records" (expires_at);
