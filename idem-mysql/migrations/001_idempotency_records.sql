-- idem: the table of idempotency records kept by MySqlStore (MySQL 8.0, MariaDB 10.6 or later).
--
-- One row per store key. A row is 'in_flight' (claimed, under a lease) or 'completed' (the
-- stored response). A row whose expires_at has passed counts as absent: a claim replaces it,
-- and the sweeper (MySqlStore::sweep) deletes it. Every column the store reads is binary or
-- ASCII, so neither the connection's character set nor the table's changes a byte of a
-- record; every time is UTC, written and compared by the server (UTC_TIMESTAMP(6)), so
-- neither time_zone nor daylight saving moves a lease.
CREATE TABLE IF NOT EXISTS `idempotency_records` (
    -- SHA-256 over scope, principal, method, route and Idempotency-Key (StoreKey).
    store_key        BINARY(32)    NOT NULL,
    -- The request fingerprint: one algorithm tag byte, then the SHA-256 digest.
    fingerprint      VARBINARY(64) NOT NULL,
    state            VARCHAR(9) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    -- The holder of an in-flight record: a random 128-bit token, and when its lease lapses.
    lease_token      BINARY(16),
    lease_expires_at DATETIME(6),
    -- When the record is forgotten: max(ttl, lease) after the claim or the last renewal
    -- while in flight, ttl after the completion.
    expires_at       DATETIME(6)   NOT NULL,
    -- The stored response: StoredResponse::as_bytes, in format response_format; its status
    -- code is repeated in response_status for queries of your own.
    response_status  SMALLINT UNSIGNED,
    response_format  SMALLINT,
    response         LONGBLOB,
    created_at       DATETIME(6)   NOT NULL,
    updated_at       DATETIME(6)   NOT NULL,
    PRIMARY KEY (store_key),
    -- The sweeper deletes the oldest expired records first.
    KEY expires_at_idx (expires_at),
    CHECK (state IN ('in_flight', 'completed')),
    CHECK (state <> 'in_flight' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state <> 'completed'
           OR (response IS NOT NULL AND response_format IS NOT NULL AND response_status IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
