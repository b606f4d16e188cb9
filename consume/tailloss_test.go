package consume_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// TestTailLoss: the table loses its tail after seq 3, as on a standby
// promoted without the last commits, and its writers number other events
// at 4 and 5. An offset stored in the same database is at or below 3 after
// such a failover, and the consumer goes on with the new events; an offset
// from another moment (at 5: ahead of the table, or naming another event)
// stops the consumer with one error, nothing handed over.
func TestTailLoss(t *testing.T) {
	t.Parallel()
	type run func(ctx context.Context, pool *pgxpool.Pool, handled *atomic.Int64) error
	modes := map[string]run{
		"exactly once": func(ctx context.Context, pool *pgxpool.Pool, handled *atomic.Int64) error {
			return consume.Run(ctx, pool, "svc", func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
				handled.Add(1)
				return credit("svc")(ctx, tx, e)
			}, quick()...)
		},
		"at least once": func(ctx context.Context, pool *pgxpool.Pool, handled *atomic.Int64) error {
			return consume.RunAtLeastOnce(ctx, pool, "svc", func(ctx context.Context, e payments.Event) error {
				handled.Add(1)
				_, err := pool.Exec(ctx, `INSERT INTO credits (seq, event_id, consumer) VALUES ($1, $2, 'svc')`, e.Seq, e.EventID)
				return err
			}, quick()...)
		},
	}
	tests := []struct {
		name string
		// offset is where the consumer stood; renumber records new
		// events at 4 and 5 after the loss.
		offset   int64
		renumber bool
		want     string // the error; "" when the consumer goes on
	}{
		{name: "offset ahead of the table", offset: 5,
			want: `consumer "svc": its position, seq 5, is ahead of payment_events, whose last seq is 3: the table lost events after the position was stored (a failover or restore); refusing to skip — see the consume package doc, "Tail loss"`},
		{name: "another event at the offset", offset: 5, renumber: true,
			want: `consumer "svc": payment_events seq 5 is event 1:0x0000000000000000000000000000000000000000000000000000000000000015:0:confirmed:0x00000000000000000000000000000000000000000000000000000000000f4255, not 1:0x0000000000000000000000000000000000000000000000000000000000000005:0:confirmed:0x00000000000000000000000000000000000000000000000000000000000f4245 as recorded with the position: the events were numbered again after the position was stored (a failover or restore); refusing to skip — see the consume package doc, "Tail loss"`},
		{name: "offset within what survived", offset: 3, renumber: true},
	}
	for mode, runner := range modes {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				pool, _ := pgtest.NewPool(t)
				ledger(t, pool)
				burns(t, pool, 1, 5, payments.KindConfirmed)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := consume.Reset(ctx, pool, "svc", tt.offset); err != nil {
					t.Fatal(err)
				}
				loseTail(t, pool, 3)
				var fresh []payments.Event
				if tt.renumber {
					fresh = burns(t, pool, 20, 2, payments.KindConfirmed) // seqs 4, 5
				}
				var handled atomic.Int64
				r := start(t, func(ctx context.Context) error { return runner(ctx, pool, &handled) })
				if tt.want == "" {
					waitOffset(t, pool, "svc", 5)
					if err := r.stop(t); err != nil {
						t.Fatal(err)
					}
					if got, want := credited(t, pool), seqs(fresh); !slices.Equal(got, want) {
						t.Fatalf("credited %v, want the new events %v", got, want)
					}
					return
				}
				err := r.wait(t)
				tableLast := int64(3 + len(fresh))
				if !errors.Is(err, consume.ErrDiverged) || err.Error() != tt.want {
					t.Fatalf("Run = %v\nwant %s", err, tt.want)
				}
				if d, ok := isDiverged(err); !ok || d.Name != "svc" || d.At.Seq != tt.offset || d.Last != tableLast {
					t.Fatalf("DivergedError %+v", d)
				}
				if handled.Load() != 0 || len(credited(t, pool)) != 0 {
					t.Fatalf("%d events handed over, credits %v; want none", handled.Load(), credited(t, pool))
				}
				if got := offset(t, pool, "svc"); got.Seq != tt.offset {
					t.Fatalf("offset moved to %+v", got)
				}
			})
		}
	}
}

// TestSchemaRefused: a database without the schema, or older than the
// package needs, stops a consumer with one line saying what to run.
func TestSchemaRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		version int32 // migrated to; 0 for an empty database
		// want are the errors of Run, RunAtLeastOnce and Follower.Start.
		wantRun, wantFollower string
	}{
		{name: "empty database", version: 0,
			wantRun:      `consumer "svc": database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 0, consumers need 20 or later)`,
			wantFollower: `database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 0, consumers need 18 or later)`},
		{name: "before the event log", version: 5,
			wantRun:      `consumer "svc": database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 5, consumers need 20 or later)`,
			wantFollower: `database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 5, consumers need 18 or later)`},
		{name: "before the events' history", version: 17,
			wantRun:      `consumer "svc": database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 17, consumers need 20 or later)`,
			wantFollower: `database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 17, consumers need 18 or later)`},
		{name: "before consumer names", version: 18,
			wantRun: `consumer "svc": database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 18, consumers need 20 or later)`},
		{name: "before the consumers' roles", version: 19,
			wantRun: `consumer "svc": database schema is behind this binary; run ` + "`poller migrate`" + ` (database at version 19, consumers need 20 or later)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDatabase(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tt.version > 0 {
				conn, err := pgx.Connect(ctx, dbURL)
				if err != nil {
					t.Fatal(err)
				}
				_, err = migrations.MigrateTo(ctx, conn, tt.version)
				conn.Close(ctx)
				if err != nil {
					t.Fatal(err)
				}
			}
			pool, err := pgxpool.New(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			never := func(context.Context, pgx.Tx, payments.Event) error { t.Error("handler called"); return nil }
			errs := map[string]error{
				"Run": consume.Run(ctx, pool, "svc", never, quick()...),
				"RunAtLeastOnce": consume.RunAtLeastOnce(ctx, pool, "svc", func(context.Context, payments.Event) error {
					t.Error("handler called")
					return nil
				}, quick()...),
			}
			for name, err := range errs {
				if !errors.Is(err, migrations.ErrPending) || err.Error() != tt.wantRun {
					t.Errorf("%s = %v\nwant %s", name, err, tt.wantRun)
				}
			}
			f, err := consume.NewFollower(pool, consume.Position{}, consume.NoListen())
			if err != nil {
				t.Fatal(err)
			}
			defer f.Stop()
			err = f.Start(ctx)
			if tt.wantFollower == "" {
				if err != nil {
					t.Errorf("Follower.Start = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, migrations.ErrPending) || err.Error() != tt.wantFollower {
				t.Errorf("Follower.Start = %v\nwant %s", err, tt.wantFollower)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Follower.Start: %q is not one line", err)
			}
		})
	}
}
