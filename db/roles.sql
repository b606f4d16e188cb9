-- Two roles for burnpoller, run once by a superuser or the database owner:
--
--   psql -v db=burnpoller -v migrate_password="'...'" -v runtime_password="'...'" -f db/roles.sql
--
-- burnpoller_migrate owns the schema and runs `poller migrate` (DDL).
-- burnpoller_runtime is what the replicas use, with MIGRATE=false: it may read,
-- insert and update the ledger tables and NOTIFY, and nothing else (no DDL,
-- not even temporary tables). Default privileges extend the grants to tables
-- later migrations create.

CREATE ROLE burnpoller_migrate LOGIN PASSWORD :migrate_password;
CREATE ROLE burnpoller_runtime LOGIN PASSWORD :runtime_password;

GRANT CONNECT, TEMPORARY ON DATABASE :"db" TO burnpoller_migrate;
GRANT CONNECT ON DATABASE :"db" TO burnpoller_runtime;

-- No temporary tables for the runtime role: a temporary table named
-- payments would shadow the real one for the rest of that session (pg_temp
-- comes first in the search path). Every database grants TEMPORARY to
-- PUBLIC by default, so take it from PUBLIC; a role of another application
-- sharing this database that needs temporary tables gets it back by name
-- (GRANT TEMPORARY ON DATABASE ... TO that_role).
REVOKE TEMPORARY ON DATABASE :"db" FROM PUBLIC;
REVOKE TEMPORARY ON DATABASE :"db" FROM burnpoller_runtime;

-- The migration role creates its tables in public; nobody else may.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA public TO burnpoller_migrate;
GRANT USAGE ON SCHEMA public TO burnpoller_runtime;

-- Everything burnpoller_migrate creates from now on: read, insert, update; no
-- delete, no truncate, no DDL.
ALTER DEFAULT PRIVILEGES FOR ROLE burnpoller_migrate IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE ON TABLES TO burnpoller_runtime;
ALTER DEFAULT PRIVILEGES FOR ROLE burnpoller_migrate IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO burnpoller_runtime;

-- Tables that exist already (the schema was migrated before the roles).
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO burnpoller_runtime;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO burnpoller_runtime;

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
    IF to_regclass('public.payment_events_staged') IS NOT NULL THEN
        GRANT SELECT, INSERT, DELETE ON public.payment_events_staged, public.ledger_commits TO burnpoller_runtime;
    END IF;
END $$;
