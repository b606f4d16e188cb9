-- Payments of a branch the chain later dropped stay in the ledger (they may
-- have been credited already) but are marked when an operator resets the
-- cursor below them (poller cursor reset). Unmarked rows must match the
-- canonical chain: every writer checks them against it before recording.
-- Migration 5 makes the unique key cover unmarked rows only, so that a burn
-- the new branch re-includes under the same key is recorded (and credited)
-- as every other burn of the canonical chain.
ALTER TABLE payments ADD COLUMN orphaned_at timestamptz;

COMMENT ON COLUMN payments.orphaned_at IS 'Set by poller cursor reset when the payment''s block is no longer on the canonical chain; the row stays (it may have been credited) for the business to reverse.';

-- The PAYMENT_HOOK_SQL the payments of one contract on one chain are
-- credited with. A payment is inserted once, by whichever writer gets there
-- first, and only that writer's hook runs for it: every writer of the
-- contract (replicas of any group, backfills) must run the same hook.
CREATE TABLE ledger_hooks (
    chain_id    bigint      NOT NULL CHECK (chain_id > 0),
    contract    text        NOT NULL CHECK (contract ~ '^0x[0-9a-f]{40}$'),
    -- sha256 of PAYMENT_HOOK_SQL as given, lowercase hex; '' for no hook.
    hook_sha256 text        NOT NULL CHECK (hook_sha256 = '' OR hook_sha256 ~ '^[0-9a-f]{64}$'),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, contract)
);

COMMENT ON TABLE ledger_hooks IS 'The payment hook the writers of each contract agreed on; a writer with another hook is refused.';

---- create above / drop below ----

DROP TABLE ledger_hooks;
ALTER TABLE payments DROP COLUMN orphaned_at;
