-- Consumers of payment_events (the consume package): how far each named
-- consumer has got. A consumer stores its offset in the same transaction as
-- what handling the events did, so the two commit together or not at all;
-- and since the offset is written after the events it names, a standby that
-- holds the offset holds those events too.
--
-- event_id is the id of the event at last_seq when the offset was stored:
-- a consumer checks it before reading on, so that an offset that no longer
-- names the same event (payment_events restored or edited apart from this
-- table) stops the consumer instead of skipping events.
--
-- lease_owner and lease_until are used by at-least-once consumers, whose
-- handlers run outside any transaction: the consumer of a name that holds an
-- unexpired lease is the only one handling its events.
--
-- No grants: a consumer runs under its service's own role, which needs
-- SELECT on payment_events and burnpoller_schema_version, and SELECT, INSERT
-- and UPDATE on this table (db/roles.sql's runtime role gets them through
-- its default privileges).

CREATE TABLE consumer_offsets (
    name        text        PRIMARY KEY CHECK (name <> ''),
    last_seq    bigint      NOT NULL CHECK (last_seq >= 0),
    event_id    text,
    lease_owner text,
    lease_until timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((last_seq = 0) = (event_id IS NULL)),
    CHECK ((lease_owner IS NULL) = (lease_until IS NULL))
);

COMMENT ON TABLE consumer_offsets IS 'Per named consumer of payment_events: the last seq handled and its event_id, stored with what handling did.';

---- create above / drop below ----

DROP TABLE consumer_offsets;
