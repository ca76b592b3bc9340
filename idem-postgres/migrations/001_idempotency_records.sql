-- idem: the table of idempotency records kept by PostgresStore.
--
-- One row per store key. A row is 'in_flight' (claimed, under a lease) or 'completed' (the
-- stored response). A row whose expires_at has passed counts as absent: a claim replaces it,
-- and the sweeper (PostgresStore::sweep) deletes it.
CREATE TABLE IF NOT EXISTS "idempotency_records" (
    -- SHA-256 over scope, principal, method, route and Idempotency-Key (StoreKey).
    key              bytea       NOT NULL PRIMARY KEY CHECK (octet_length(key) = 32),
    -- The request fingerprint: one algorithm tag byte, then the SHA-256 digest.
    fingerprint      bytea       NOT NULL,
    state            text        NOT NULL CHECK (state IN ('in_flight', 'completed')),
    -- The holder of an in-flight record: a random 128-bit token, and when its lease lapses.
    lease_token      bytea       CHECK (octet_length(lease_token) = 16),
    lease_expires_at timestamptz,
    -- When the record is forgotten: max(ttl, lease) after the claim or the last renewal
    -- while in flight, ttl after the completion.
    expires_at       timestamptz NOT NULL,
    -- The stored response: StoredResponse::encode's bytes, in format response_format; its
    -- status code is repeated in response_status for queries of your own.
    response_status  smallint,
    response_format  smallint,
    response         bytea,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT in_flight_has_lease CHECK (
        state <> 'in_flight' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT completed_has_response CHECK (
        state <> 'completed'
        OR (response IS NOT NULL AND response_format IS NOT NULL AND response_status IS NOT NULL))
);

-- The sweeper deletes the oldest expired records first.
CREATE INDEX IF NOT EXISTS "idempotency_records_expires_at_idx" ON "idempotency_records" (expires_at);
