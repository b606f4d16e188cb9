package integration

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// TestARuntimeReplicaStartsWhileOnlyTheContractStepIsPending: issue 39
// says a binary runs against the schema without its own contract steps
// (docs/schema.md: migrations.Compatible), and the runbook leaves step 26
// pending after the rollout until someone runs `poller migrate --contract`
// or the next upgrade's Job. A replica under the runtime role with
// MIGRATE=true (the setting's default; the previous release started so
// against an up-to-date schema, whose migration only read the version)
// starts, in that window, once no replica of an older release lives: its
// start-up migration then tries the contract step, which its role may not
// take (EXCLUSIVE on the version table: 42501), and the refusal is
// permanent, so the replica exits instead of recording. What should hold:
// with only the contract step pending, a replica whose role cannot run it
// starts and records every burn, the step left pending.
func TestARuntimeReplicaStartsWhileOnlyTheContractStepIsPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	u, _ := url.Parse(dbURL)
	rl := applyAllRoles(t, dbURL, strings.TrimPrefix(u.Path, "/"))
	mig, err := pgx.Connect(ctx, asRole(t, dbURL, rl.migrate, "migrate-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close(ctx)
	if _, err := migrations.MigrateTo(ctx, mig, migrations.Compatible()); err != nil {
		t.Fatal(err)
	}
	if older, err := migrations.OlderReplicas(ctx, mig, migrations.Latest()); err != nil || len(older) != 0 {
		t.Fatalf("OlderReplicas = %q, %v; want none (the rollout is over)", older, err)
	}

	fr := newFaultRun(t, 1)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	fr.pool, fr.dbURL = pool, asRole(t, dbURL, rl.runtime, "runtime-pw")
	fr.startPoller("MIGRATE=true")
	waitFor(t, 2*time.Minute, "the runtime replica recording every burn, or exiting", func() bool {
		select {
		case <-fr.poller.done:
			return true
		default:
		}
		return cursorBlock(t, pool) >= int64(fr.lastBurn)
	})
	select {
	case <-fr.poller.done:
		t.Fatalf("the runtime replica with MIGRATE=true exited at start with only the contract step pending:\n%s",
			tail(grepLines(fr.poller.out.String(), "start-up failed"), 5))
	default:
	}
	fr.finish(time.Minute)
	if v, err := migrations.Current(ctx, pool); err != nil || v != migrations.Compatible() {
		t.Fatalf("schema at %d (%v), want the contract step still pending at %d", v, err, migrations.Compatible())
	}
}
