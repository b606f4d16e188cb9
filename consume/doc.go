// Package consume hands burnpoller's payment events (the payment_events
// table) to a service's code in seq order, keeping the service's offset in
// Postgres under a name (consumer_offsets, migration 11). The service
// writes no code of its own for offsets, LISTEN, retries or shutdown.
//
// # Exactly once: Run
//
// Run calls the Handler with the transaction that also moves the offset
// past the event, so what the handler writes with it commits together with
// the offset or not at all. A service whose ledger is in the same database
// thereby credits each payment exactly once, across crashes, retries,
// restarts and replicas:
//
//	creditOrReverse := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
//		switch e.Kind {
//		case payments.KindConfirmed:
//			// Record the credit (chain, contract, tx, log index, block
//			// hash) and add it to the payer's balance.
//			return credit(ctx, tx, e)
//		case payments.KindRetracted:
//			// A retracted burn that was credited (the same chain,
//			// contract, tx, log index and block hash) takes its credit
//			// back; one never credited (only seen) changes nothing.
//			return reverse(ctx, tx, e)
//		}
//		return nil
//	}
//	err := consume.Run(ctx, pool, "balances", creditOrReverse,
//		consume.Kinds(payments.KindConfirmed, payments.KindRetracted))
//
// Credit on confirmed, never on seen: a seen burn is not final. And take
// the credit back on a retracted that follows a confirmed: a confirmed
// payment is final as far as the chain's finality holds, and when it does
// not, an operator's cursor reset orphans the payment and records a
// retracted for it; if the new branch holds the burn too, a new confirmed
// follows, which is credited again. A handler of confirmed alone would then
// credit the payment twice. The Example shows the whole program.
//
// # At least once: RunAtLeastOnce
//
// RunAtLeastOnce is for an EventHandler whose effects live elsewhere (an
// HTTP call, a queue). The offset is stored after the handler returned, so
// a crash in between hands the same events over again: make the effect
// idempotent on Event.EventID, which names one occurrence of one step of
// one burn (the same when the step is recorded again, a different id for
// a different occurrence). No transaction is open while the handler runs.
//
// # Batches, back-pressure, retries, stopping
//
// A consumer reads a window of at most BatchSize seqs after its offset,
// hands over its events one by one, stores the offset, and only then reads
// the next window: a slow handler slows the consumer and never grows its
// memory. A batch is bounded by BatchTimeout: Run's transaction gets it as
// the client's deadline and as the server's statement_timeout and
// idle_in_transaction_session_timeout (SET LOCAL in the query that begins
// it, so they hold from its start and end with it); no event is handed
// over once half of it has passed, and what was handled commits. A single
// event whose handler needs more than BatchTimeout fails every time: raise
// BatchTimeout.
//
// A handler error in Run rolls the whole batch back (nothing of the failing
// event, nor of the events before it in the batch, is committed) and the
// batch is retried after a back-off (100ms doubling to 30s): first the
// events before the failing one, then the failing one, never skipped. In
// RunAtLeastOnce the events handled before the failure have their offset
// stored, and the failing one is retried. Database failures are retried the
// same way. An error wrapped in Permanent stops the consumer.
//
// When ctx ends, Run rolls back the batch in flight (it is handed over
// again by the next run) and returns nil; RunAtLeastOnce stores the offset
// of the events already handled, gives up its lease and returns nil.
//
// # Waking up
//
// A consumer LISTENs on burnpoller_events, on a session taken out of its
// pool (or ListenOn's), and reads the table at each notification and every
// PollInterval. The payload ({"seq":N}) is never read: anyone who can
// connect may NOTIFY, and what is handed over always comes from the table.
// Through a transaction pooler notifications never arrive; give ListenOn a
// pool that reaches Postgres itself, or rely on PollInterval (NoListen).
//
// # Filters
//
// Kinds, Chains and Contracts select the events handed over. The offset
// moves past the others as past handled ones, and they never leave the
// server, except the last of a window, which carries the offset's new
// event_id.
//
// # Consumers sharing a name
//
// Several processes may run the same name: they share the work and never
// an event. With Run, a batch reads the name's offset and the events after
// it, then locks the name's row in consumer_offsets for its transaction,
// with SKIP LOCKED, and goes on only if the offset is still the one it read
// from. A consumer that finds the row locked does not queue for it: it
// reports Progress.Standby and tries again at its next wake-up. So
// replicas of a service take turns batch by batch, and one that dies
// leaves the row to the others as soon as its connection or its bounds end
// its transaction. With RunAtLeastOnce the handler runs outside a
// transaction, so the name is held by a lease in the row instead: the
// holder renews it with each batch, the others stand by until the holder
// gives it up (on return) or it runs out (2 × BatchTimeout after the
// holder's last batch began). A batch of Run also stands by while a lease
// is live, so mixing the two modes under one name does not hand an event to
// both; do not mix them all the same.
//
// A consumer reads payment_events with single statements, outside the
// handler's transaction, which holds nothing of burnpoller's but the
// name's offset row: nothing a writer of events (of any group) needs, and
// no lock on payment_events that a migration altering the table would
// queue behind. When nothing new is committed, a consumer opens no
// transaction at all.
//
// # Tail loss
//
// An asynchronous standby promoted after a failover may lack the primary's
// last commits: its payment_events ends below seqs a consumer had read, and
// its writers then number other events (or the same ones in another order)
// at those seqs. The offset lives in the same database, and is written by a
// later transaction than the events it names, so a standby that holds the
// offset holds those events too: after a failover the offset is back at or
// below the surviving events, and the consumer goes on from there. The
// events the failover lost are recorded again as the writers read the
// chain again, under new seqs and their old event_ids, and handed over
// again.
// With Run, the handler's effects of the lost batches were lost with them,
// so each payment is still credited exactly once; with RunAtLeastOnce the
// repeats carry the event_ids already seen.
//
// An offset the table does not hold as recorded therefore cannot come from a
// failover, only from a database put together from different moments
// (consumer_offsets restored apart from payment_events, rows deleted by
// hand). Before each batch the consumer checks that the event at its offset
// is there with the event_id and history_hash stored with the offset (the
// history_hash, migration 18, is the hash of the log up to that event's
// commit: equal means every event below is the same), and stops with a
// *DivergedError (ErrDiverged) when the table ends below the offset, holds
// another event at it, or holds the same event over other events. It never
// moves on by itself, forwards or back: only the service knows which events
// its effects already include. Once that is settled, move the offset with
// Reset.
//
// A Follower keeps its position in memory, outside the database, so a
// failover can move the table back under it. It checks the same way on
// every read and returns the same error, also when the event at its
// position came back under its old id while events below it were numbered
// again. Rewind, given the positions of the events it handed over
// (PositionOf), goes back to just before the oldest of them the table no
// longer holds as handed, and the events after it come again: deduplicate
// on event_id. When none of them is held as handed, Rewind refuses with
// ErrBeyondHanded rather than guess.
//
// # Offsets
//
// Every name that ever had an offset row is remembered (consumer_names,
// migration 19). A name whose row is gone stops with ErrNoOffset, while it
// runs and at every later start, until Reset sets its offset: starting it
// again from its start position would hand over every event again.
//
// # Schema, grants and poolers
//
// Run and RunAtLeastOnce need the schema of migration 20 or later, a
// Follower that of migration 18; an older database, or one without the
// schema, stops them with one line wrapping migrations.ErrPending: "database
// schema is behind this binary; run `poller migrate` (...)". Run a consumer
// under a role of its own, a member of db/roles.sql's burnpoller_consumer:
// it reads the tables and writes only its own offsets. Each name belongs to
// the role that created its offset row; row-level security hides it from
// every other role, and a name another role registered stops the consumer
// with ErrNotOwner. A missing grant stops it too.
//
// Through a transaction pooler (PgBouncer in transaction mode, say) the
// pool must send no named prepared statements: pgx's default statement
// cache stops a consumer at once with ErrPooler, which names the setting
// (default_query_exec_mode=cache_describe). LISTEN hears nothing there: the
// consumer polls, unless ListenOn gives it a pool that reaches Postgres
// itself.
//
// # Metrics
//
// With Metrics(reg), a consumer registers, labelled consumer=<name>:
// burnpoller_consumer_offset_seq and burnpoller_consumer_lag_events
// (gauges, as of its last read) and burnpoller_consumer_handled_total and
// burnpoller_consumer_failures_total (counters). OnProgress reports the
// same after each read.
package consume
