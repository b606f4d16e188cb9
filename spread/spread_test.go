package spread_test

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	testharness "github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/spread"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var groups = []string{"1:0xa", "2:0xb", "3:0xc", "4:0xd"}

// start runs a member serving every group of groups while serving says so
// (nil: always), stopped with the test.
func start(t *testing.T, pool *pgxpool.Pool, serving func(string) bool) *spread.Members {
	t.Helper()
	m := spread.New(pool, spread.Config{Beat: 50 * time.Millisecond, TTL: 300 * time.Millisecond}, slog.New(slog.DiscardHandler))
	for _, g := range groups {
		m.Serve(g, func() bool { return serving == nil || serving(g) })
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// holding waits until m holds want groups among live replicas.
func holding(t *testing.T, m *spread.Members, want, live int) []string {
	t.Helper()
	var got []string
	testharness.Wait(t, 10*time.Second, "the groups spread", func() bool {
		var n int
		got, n = m.Holding()
		return len(got) == want && n == live
	})
	return got
}

// TestMembersSpreadTheGroupsAndTakeOverAGoneOnes: two replicas share four
// groups, two each, and agree on who holds which; one that stops (its row
// removed) or stops beating (its row expired) leaves its groups to the
// other; a group a replica no longer serves (its loop unhealthy) goes to
// the other; and rows of replicas gone for a day are removed.
func TestMembersSpreadTheGroupsAndTakeOverAGoneOnes(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO replica_members (id, groups, heartbeat_at) VALUES ('long-gone', '{1:0xa}', now() - interval '2 days')`); err != nil {
		t.Fatal(err)
	}
	var bServesA atomic.Bool
	bServesA.Store(true)
	a := start(t, pool, nil)
	b := start(t, pool, func(g string) bool { return g != groups[0] || bServesA.Load() })
	ha, hb := holding(t, a, 2, 2), holding(t, b, 2, 2)
	if all := slices.Sorted(slices.Values(append(slices.Clone(ha), hb...))); !slices.Equal(all, groups) {
		t.Fatalf("a holds %v and b %v: not each group once", ha, hb)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM replica_members WHERE id = 'long-gone'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the row of a replica gone for two days is still there (%d, %v)", n, err)
	}

	// b's loop of the first group is unhealthy: a takes that group.
	if slices.Contains(hb, groups[0]) {
		bServesA.Store(false)
		testharness.Wait(t, 10*time.Second, "a holding the group b left", func() bool {
			got, _ := a.Holding()
			return slices.Contains(got, groups[0])
		})
		bServesA.Store(true)
	}

	// A third replica stops beating (frozen): it counts until its row is
	// TTL old, then no more.
	if _, err := pool.Exec(ctx, `INSERT INTO replica_members (id, groups) VALUES ('frozen', $1)`, groups); err != nil {
		t.Fatal(err)
	}
	testharness.Wait(t, 10*time.Second, "the frozen replica counted", func() bool { _, live := a.Holding(); return live == 3 })
	holding(t, a, 2, 2)

	// b stops: its row goes at once, and a holds every group.
	b.Stop()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM replica_members WHERE id = $1`, b.ID()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("b's row after Stop: %d, %v", n, err)
	}
	if got := holding(t, a, 4, 1); !slices.Equal(got, groups) {
		t.Fatalf("a holds %v", got)
	}
}
