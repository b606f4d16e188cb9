---- burnpoller: contract ----
-- Contract: retires every release before schema 26, the first that
-- declares the schema it writes (SET LOCAL burnpoller.writer_schema, with
-- its BEGIN). A contract step runs only once no replica of an older
-- release lives (see migrations.OlderReplicas), or when an operator forces
-- it (poller migrate --contract --force).
--
-- From here on, a burnpoller session (application_name 'burnpoller…') that
-- writes the ledger without declaring schema 26 or later is refused, the
-- whole transaction with it: one forgotten replica of an older release
-- records nothing, and its every poll fails with one error naming the
-- release to roll to (schema_contracts.release, which the migrator records
-- with this step). Sessions of other programs (psql, a service's own SQL)
-- are not burnpoller's and are left alone. The guard is a statement
-- trigger on every table the writers write: a few microseconds a
-- statement, nothing a row.

SET LOCAL lock_timeout = '500ms';

-- Every table at once, in the order the writers first write them. A
-- writer queued behind this step waits at most the lock timeout (half a
-- second); a step that cannot get its locks within it (writers in the
-- way) fails and is tried again.
LOCK TABLE payments, payment_events_staged, pending_payments, rejected_logs, ledger_commits, block_cursors
    IN SHARE ROW EXCLUSIVE MODE;

CREATE FUNCTION burnpoller_refuse_retired() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    speaks text := current_setting('burnpoller.writer_schema', true);
    roll_to text;
BEGIN
    IF current_setting('application_name') NOT LIKE 'burnpoller%'
       OR (speaks ~ '^[0-9]{1,9}$' AND speaks::integer >= 26) THEN
        RETURN NULL;
    END IF;
    SELECT release INTO roll_to FROM schema_contracts WHERE version = 26;
    RAISE EXCEPTION 'this burnpoller release is retired: the database''s schema contract step 26 refuses writers of releases before schema 26 (%, on %); roll this replica to burnpoller % or later',
        TG_OP, TG_TABLE_NAME, coalesce(roll_to, 'of schema 26')
        USING ERRCODE = 'BP026',
              HINT = 'poller version names a replica''s release; see docs/operations/runbook.md, "A release retired by a contract step"';
END $$;

CREATE TRIGGER burnpoller_refuse_retired BEFORE INSERT OR UPDATE ON payments
    FOR EACH STATEMENT EXECUTE FUNCTION burnpoller_refuse_retired();
CREATE TRIGGER burnpoller_refuse_retired BEFORE UPDATE ON block_cursors
    FOR EACH STATEMENT EXECUTE FUNCTION burnpoller_refuse_retired();
CREATE TRIGGER burnpoller_refuse_retired BEFORE INSERT OR UPDATE OR DELETE ON pending_payments
    FOR EACH STATEMENT EXECUTE FUNCTION burnpoller_refuse_retired();
CREATE TRIGGER burnpoller_refuse_retired BEFORE INSERT ON payment_events_staged
    FOR EACH STATEMENT EXECUTE FUNCTION burnpoller_refuse_retired();
CREATE TRIGGER burnpoller_refuse_retired BEFORE INSERT ON ledger_commits
    FOR EACH STATEMENT EXECUTE FUNCTION burnpoller_refuse_retired();
CREATE TRIGGER burnpoller_refuse_retired BEFORE INSERT ON rejected_logs
    FOR EACH STATEMENT EXECUTE FUNCTION burnpoller_refuse_retired();

---- create above / drop below ----

DROP TRIGGER burnpoller_refuse_retired ON payments;
DROP TRIGGER burnpoller_refuse_retired ON block_cursors;
DROP TRIGGER burnpoller_refuse_retired ON pending_payments;
DROP TRIGGER burnpoller_refuse_retired ON payment_events_staged;
DROP TRIGGER burnpoller_refuse_retired ON ledger_commits;
DROP TRIGGER burnpoller_refuse_retired ON rejected_logs;
DROP FUNCTION burnpoller_refuse_retired();
DELETE FROM schema_contracts WHERE version = 26;
