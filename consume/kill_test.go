package consume_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// childEnv carries the database URL to the consumer process of
// TestRunKilledBeforeCommit.
const childEnv = "CONSUME_TEST_CHILD_DATABASE_URL"

func childURL() string { return os.Getenv(childEnv) }

// TestRunKilledBeforeCommit: a consumer process killed (SIGKILL) after its
// handlers credited a batch and its offset moved, just before COMMIT,
// leaves nothing; the next consumer credits every event exactly once.
func TestRunKilledBeforeCommit(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	ledger(t, pool)
	evs := burns(t, pool, 1, 5, payments.KindConfirmed)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConsumerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+dbURL)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("consumer process: %v, want killed by SIGKILL; output:\n%s", err, out)
	}
	// The killed session's transaction is rolled back by the server.
	if got := credited(t, pool); len(got) != 0 {
		t.Fatalf("credited %v after the kill, want nothing", got)
	}
	if got := offset(t, pool, "svc"); got != (consume.Position{}) {
		t.Fatalf("offset %+v after the kill, want the zero position", got)
	}

	r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", credit("second"), quick()...) })
	waitOffset(t, pool, "svc", 5)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := credited(t, pool), seqs(evs); !slices.Equal(got, want) {
		t.Fatalf("credited %v, want %v", got, want)
	}
	if got, want := balances(t, pool), wantBalances(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("balances %v, want %v", got, want)
	}
}

// TestConsumerProcess is the consumer process TestRunKilledBeforeCommit
// starts: it credits a batch and kills itself just before COMMIT.
func TestConsumerProcess(t *testing.T) {
	if childURL() == "" {
		t.Skip("run by TestRunKilledBeforeCommit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, childURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	kill := consume.BeforeCommit(func(tx pgx.Tx) {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM credits`).Scan(&n); err != nil || n != 5 {
			t.Errorf("before COMMIT: %d credits written (%v), want 5", n, err)
			return
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process
	})
	err = consume.Run(ctx, pool, "svc", credit("killed"), quick(kill)...)
	t.Fatalf("Run returned %v; the process should have been killed", err)
}
