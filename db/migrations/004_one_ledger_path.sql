-- Payments of a branch the chain later dropped stay in the ledger (they may
-- have been credited already) but are marked when an operator resets the
-- cursor below them (poller cursor reset). Unmarked rows must match the
-- canonical chain: every writer checks them against it before recording.
ALTER TABLE payments ADD COLUMN orphaned_at timestamptz;

COMMENT ON COLUMN payments.orphaned_at IS 'Set by poller cursor reset when the payment''s block is no longer on the canonical chain; the row stays (it may have been credited) for the business to reconcile.';

-- The PAYMENT_HOOK_SQL a poller group credits with. Every writer of the group
-- (replicas and backfills) must run the same hook, or a payment recorded by
-- one would never get the other's side effect.
CREATE TABLE group_hooks (
    group_id    text        PRIMARY KEY CHECK (group_id <> '' AND length(group_id) <= 200),
    -- sha256 of PAYMENT_HOOK_SQL as given, lowercase hex; '' when the group runs no hook.
    hook_sha256 text        NOT NULL CHECK (hook_sha256 = '' OR hook_sha256 ~ '^[0-9a-f]{64}$'),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE group_hooks IS 'The payment hook each poller group agreed on; writers with another hook are refused.';

---- create above / drop below ----

DROP TABLE group_hooks;
ALTER TABLE payments DROP COLUMN orphaned_at;
