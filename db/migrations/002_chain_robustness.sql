-- When the poller group last re-read the blocks below its cursor (RESCAN_DEPTH),
-- so that replicas share one rescan schedule.
ALTER TABLE block_cursors ADD COLUMN rescanned_at timestamptz;

-- Logs from the burn contract with the burn event's topic0 that do not decode
-- as LogBurnWithDigest. They are never credited; they are kept here so that
-- nothing the chain reported is dropped without a trace.

CREATE TABLE rejected_logs (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain_id     bigint      NOT NULL CHECK (chain_id > 0),
    contract     text        NOT NULL CHECK (contract ~ '^0x[0-9a-f]{40}$'),
    tx_hash      text        NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    log_index    integer     NOT NULL CHECK (log_index >= 0),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   text        NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
    raw          jsonb       NOT NULL,
    reason       text        NOT NULL,
    first_seen   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rejected_logs_tx_hash_log_index_key UNIQUE (tx_hash, log_index)
);

COMMENT ON TABLE rejected_logs IS 'Burn-event logs of the burn contract that did not decode; never credited.';

---- create above / drop below ----

DROP TABLE rejected_logs;
ALTER TABLE block_cursors DROP COLUMN rescanned_at;
