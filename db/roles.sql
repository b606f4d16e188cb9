-- Three roles for burnpoller, run once by a superuser or the database owner:
--
--   psql -v db=burnpoller -v migrate_password="'...'" -v runtime_password="'...'" -f db/roles.sql
--
-- burnpoller_migrate owns the schema and runs `poller migrate` (DDL).
-- burnpoller_runtime is what the replicas use, with MIGRATE=false: it may read,
-- insert and update the ledger tables and NOTIFY, and nothing else (no DDL,
-- not even temporary tables; of payments it may update only orphaned_at, and
-- the consumers' tables it may not touch). Default privileges extend the
-- grants to tables later migrations create.
-- burnpoller_consumer is a group role (no login) for the services that
-- consume payment events (the Go package consume, or their own SQL): it may
-- read the tables, and write consumer offsets, each service only its own
-- (row-level security, migration 20). Give each service a login role of its
-- own and make it a member:
--
--   CREATE ROLE billing LOGIN PASSWORD '...' IN ROLE burnpoller_consumer;
--
-- (a service whose login roles rotate gets a group role instead, its
-- login roles members of it, and names it with consume.Owner).

CREATE ROLE burnpoller_migrate LOGIN PASSWORD :migrate_password;
CREATE ROLE burnpoller_runtime LOGIN PASSWORD :runtime_password;
CREATE ROLE burnpoller_consumer NOLOGIN;
-- Migrations find the consumer role by this comment, whatever its name.
COMMENT ON ROLE burnpoller_consumer IS 'burnpoller consumer role';

GRANT CONNECT, TEMPORARY ON DATABASE :"db" TO burnpoller_migrate;
GRANT CONNECT ON DATABASE :"db" TO burnpoller_runtime, burnpoller_consumer;

-- No temporary tables for the runtime role: a temporary table named
-- payments would shadow the real one for the rest of that session (pg_temp
-- comes first in the search path). Every database grants TEMPORARY to
-- PUBLIC by default, so take it from PUBLIC; a role of another application
-- sharing this database that needs temporary tables gets it back by name
-- (GRANT TEMPORARY ON DATABASE ... TO that_role).
REVOKE TEMPORARY ON DATABASE :"db" FROM PUBLIC;
REVOKE TEMPORARY ON DATABASE :"db" FROM burnpoller_runtime;

-- The migration role creates its tables in public; nobody else may. Nor
-- may a role not named here even name them: Postgres locks a table a
-- statement names while it parses it, before it checks privileges, so a
-- role that may name a table can hold ROW EXCLUSIVE there (a write it
-- prepares in a transaction left open), which holds back a migration
-- that alters it. Another application's role that needs the schema gets
-- USAGE back by name.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE USAGE ON SCHEMA public FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA public TO burnpoller_migrate;
GRANT USAGE ON SCHEMA public TO burnpoller_runtime, burnpoller_consumer;

-- Everything burnpoller_migrate creates from now on: read, insert, update; no
-- delete, no truncate, no DDL.
ALTER DEFAULT PRIVILEGES FOR ROLE burnpoller_migrate IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE ON TABLES TO burnpoller_runtime;
ALTER DEFAULT PRIVILEGES FOR ROLE burnpoller_migrate IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO burnpoller_runtime;
-- The consumers read; what they write, migration 20 grants (or the block
-- below, when the schema is migrated already).
ALTER DEFAULT PRIVILEGES FOR ROLE burnpoller_migrate IN SCHEMA public
    GRANT SELECT ON TABLES TO burnpoller_consumer;

-- Tables that exist already (the schema was migrated before the roles).
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO burnpoller_runtime;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO burnpoller_runtime;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO burnpoller_consumer;

-- The schema version is the migrations' to write. Pending payments (burns
-- seen above the finality target) are the one table rows leave: when they
-- are confirmed or retracted. The event log is only appended to. (Migration
-- 6 does the same when it runs after this file.)
DO $$
BEGIN
    IF to_regclass('public.burnpoller_schema_version') IS NOT NULL THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.burnpoller_schema_version FROM burnpoller_runtime;
    END IF;
    IF to_regclass('public.pending_payments') IS NOT NULL THEN
        GRANT DELETE ON public.pending_payments TO burnpoller_runtime;
        REVOKE UPDATE, DELETE, TRUNCATE ON public.payment_events FROM burnpoller_runtime;
    END IF;
    -- Events are staged by the writer and moved inside its COMMIT
    -- (migration 10): the writer deletes its own staged rows.
    IF to_regclass('public.webhook_endpoints_removed') IS NOT NULL THEN
        GRANT DELETE ON public.webhook_endpoints_removed TO burnpoller_runtime;
    END IF;
    -- A replica serving named groups removes its membership row at stop
    -- (migration 21).
    IF to_regclass('public.replica_members') IS NOT NULL THEN
        GRANT DELETE ON public.replica_members TO burnpoller_runtime;
    END IF;
    IF to_regclass('public.payment_events_staged') IS NOT NULL THEN
        GRANT SELECT, INSERT, DELETE ON public.payment_events_staged, public.ledger_commits TO burnpoller_runtime;
    END IF;
    -- Of the ledger the writers update only what the code updates: a
    -- payment's orphaned_at (a cursor reset), nothing of rejected_logs.
    -- The consumers' tables are not theirs at all; a consumer writes its
    -- own offsets' position and lease, their owner only when it inserts
    -- one (a role it is a member of), and deletes nothing (migration 20
    -- does the same when it runs after this file).
    IF to_regclass('public.consumer_names') IS NOT NULL
       AND EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_schema = 'public' AND table_name = 'consumer_offsets' AND column_name = 'owner') THEN
        REVOKE UPDATE ON public.payments, public.rejected_logs FROM burnpoller_runtime;
        GRANT UPDATE (orphaned_at) ON public.payments TO burnpoller_runtime;
        REVOKE ALL ON public.consumer_offsets, public.consumer_names FROM burnpoller_runtime;
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.consumer_offsets, public.consumer_names FROM burnpoller_consumer;
        GRANT SELECT, INSERT (name, last_seq, event_id, history_hash, owner),
              UPDATE (last_seq, event_id, history_hash, lease_owner, lease_until, updated_at)
            ON public.consumer_offsets TO burnpoller_consumer;
    END IF;
END $$;
