-- The ledger: one row per burn log, and one cursor row per poller group.
-- Hashes and addresses are lowercase 0x-prefixed hex; amounts are exact uint256.

CREATE TABLE block_cursors (
    id                   text        PRIMARY KEY CHECK (id <> '' AND length(id) <= 200),
    last_processed_block bigint      NOT NULL CHECK (last_processed_block >= -1),
    last_processed_hash  text        CHECK (last_processed_hash ~ '^0x[0-9a-f]{64}$'),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE block_cursors IS 'Highest block whose burns are all in payments, per poller group; the row lock serialises replicas.';

CREATE TABLE payments (
    id           bigint        GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain_id     bigint        NOT NULL CHECK (chain_id > 0),
    contract     text          NOT NULL CHECK (contract ~ '^0x[0-9a-f]{40}$'),
    tx_hash      text          NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    log_index    integer       NOT NULL CHECK (log_index >= 0),
    block_number bigint        NOT NULL CHECK (block_number >= 0),
    block_hash   text          NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
    payer        text          NOT NULL CHECK (payer ~ '^0x[0-9a-f]{40}$'),
    digest       text          NOT NULL CHECK (digest ~ '^0x[0-9a-f]{64}$'),
    -- uint256: 0 .. 2^256-1, exact.
    amount       numeric(78,0) NOT NULL CHECK (amount >= 0 AND amount <= 115792089237316195423570985008687907853269984665640564039457584007913129639935),
    burned_at    timestamptz   NOT NULL,
    created_at   timestamptz   NOT NULL DEFAULT now(),
    -- The transaction-hash uniqueness, widened by log_index so that one
    -- transaction carrying several burns keeps them all.
    CONSTRAINT payments_tx_hash_log_index_key UNIQUE (tx_hash, log_index)
);

COMMENT ON TABLE payments IS 'One row per LogBurnWithDigest log, inserted exactly once by burnpoller.';

CREATE INDEX payments_payer_idx ON payments (payer);
CREATE INDEX payments_digest_idx ON payments (digest);
CREATE INDEX payments_block_number_idx ON payments (block_number);

---- create above / drop below ----

DROP TABLE payments;
DROP TABLE block_cursors;
