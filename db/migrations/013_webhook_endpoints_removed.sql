-- Where delivery to a removed webhook endpoint stood. Deleting an endpoint's
-- row (the removal procedure) deletes its deliveries with it; a replica
-- that still lists the endpoint in WEBHOOK_URL, or one started again with
-- it, would otherwise register it afresh from the events committed after
-- that, and the events in between would never be sent. With this row it
-- registers the endpoint again from where delivery stood: the first event
-- not delivered (nor dead-lettered) when the row was deleted, or, with none,
-- the first not queued yet. To add an endpoint back from now on, delete its
-- row here too.
CREATE TABLE webhook_endpoints_removed (
    endpoint   text        PRIMARY KEY CHECK (endpoint <> '' AND length(endpoint) <= 300),
    -- Every event up to this seq was delivered, dead-lettered or not
    -- subscribed to when the endpoint's row was deleted.
    resume_seq bigint      NOT NULL CHECK (resume_seq >= 0),
    removed_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE webhook_endpoints_removed IS 'Webhook endpoints whose row was deleted, and the seq delivery to them stood at: a replica that registers one again resumes there.';

CREATE FUNCTION burnpoller_webhook_endpoint_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_endpoints_removed (endpoint, resume_seq)
    VALUES (OLD.endpoint, coalesce(
        (SELECT min(d.seq) - 1 FROM webhook_deliveries d
         WHERE d.endpoint = OLD.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL),
        OLD.enqueued_seq))
    ON CONFLICT (endpoint) DO UPDATE SET resume_seq = excluded.resume_seq, removed_at = now();
    RETURN OLD;
END $$;

CREATE TRIGGER webhook_endpoints_removed
    BEFORE DELETE ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION burnpoller_webhook_endpoint_removed();

-- Whoever may delete an endpoint's row records where it stood (and
-- registering it again removes that record).
DO $$
DECLARE
    writer name;
BEGIN
    FOR writer IN
        SELECT rolname FROM pg_roles
        WHERE NOT rolsuper AND rolname <> current_user
          AND has_table_privilege(oid, 'payments', 'INSERT')
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_endpoints_removed TO %I', writer);
    END LOOP;
END $$;

---- create above / drop below ----

DROP TRIGGER webhook_endpoints_removed ON webhook_endpoints;
DROP FUNCTION burnpoller_webhook_endpoint_removed();
DROP TABLE webhook_endpoints_removed;
