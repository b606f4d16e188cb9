-- Webhook delivery state: which events each endpoint is owed, and where
-- each delivery stands. Every replica delivers; rows are claimed with
-- FOR UPDATE SKIP LOCKED, and the state lives here so that a crash or a
-- restart loses nothing.

-- One row per configured endpoint. endpoint is a label (scheme, host, port
-- and a short hash of the whole URL), never the URL: URLs carry tokens.
CREATE TABLE webhook_endpoints (
    endpoint     text        PRIMARY KEY CHECK (endpoint <> '' AND length(endpoint) <= 300),
    -- The kinds of event the endpoint receives (WEBHOOK_EVENTS).
    events       text[]      NOT NULL CHECK (events <@ ARRAY['seen', 'retracted', 'confirmed']),
    -- Every event up to this seq has been looked at for the endpoint: a
    -- delivery row exists for each of the subscribed kinds.
    enqueued_seq bigint      NOT NULL CHECK (enqueued_seq >= 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE webhook_endpoints IS 'Webhook endpoints (by label, never the URL) and how far their deliveries are enqueued.';

CREATE TABLE webhook_deliveries (
    endpoint        text        NOT NULL REFERENCES webhook_endpoints (endpoint) ON DELETE CASCADE,
    seq             bigint      NOT NULL REFERENCES payment_events (seq),
    -- The delivery's Burnpoller-Event-Id, for the operator's eyes.
    event_id        text        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When retrying started (enqueued, or re-armed by poller webhooks
    -- retry): dead-lettered WEBHOOK_MAX_AGE after it.
    armed_at        timestamptz NOT NULL DEFAULT now(),
    -- Due from then on; while an attempt runs, the end of its lease.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text        CHECK (length(last_error) <= 500),
    delivered_at    timestamptz,
    dead_at         timestamptz,
    PRIMARY KEY (endpoint, seq)
);

COMMENT ON TABLE webhook_deliveries IS 'One row per endpoint and event owed to it: attempts, next attempt, last outcome, delivered or dead-lettered.';

CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (endpoint, next_attempt_at)
    WHERE delivered_at IS NULL AND dead_at IS NULL;
CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (endpoint)
    WHERE dead_at IS NOT NULL AND delivered_at IS NULL;

---- create above / drop below ----

DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
