---- burnpoller: contract ----
-- Contract: retires every release before schema 26, the first whose
-- writers declare the schema they write (SET LOCAL
-- burnpoller.writer_schema, with their BEGIN). A contract step runs only
-- once no replica of an older release lives (see migrations.OlderReplicas),
-- or when an operator forces it (poller migrate --contract --force).
--
-- The step is the row the migrator records for it in schema_contracts,
-- with the release that ran it: from its commit on,
-- burnpoller_commit_ledger() (migration 25) refuses every commit of a
-- burnpoller session that declares a schema below 26, the whole
-- transaction with it: a forgotten replica of an older release records no
-- payment, event, pending row or head, and each such attempt fails with
-- one error naming the release to roll to. Nothing here takes a lock.

SELECT 1;

---- create above / drop below ----

DELETE FROM schema_contracts WHERE version = 26;
