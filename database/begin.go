package database

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bound is a setting of a transaction's own, in milliseconds (SET LOCAL):
// lock_timeout, statement_timeout, idle_in_transaction_session_timeout.
type Bound struct {
	Setting string
	Limit   time.Duration
}

// BeginBounded is the options of a read-committed transaction whose bounds
// hold from its BEGIN on: BEGIN and the SET LOCALs go as one simple query,
// one round trip. Set by a statement after BEGIN, they leave a moment in
// which the session is idle in a transaction that Postgres would never end:
// a client frozen there (stopped, partitioned) would keep the session for
// as long as its connection lives. bounds' settings are the caller's
// constants; their limits are whole milliseconds.
func BeginBounded(bounds ...Bound) pgx.TxOptions {
	var q strings.Builder
	q.WriteString("BEGIN ISOLATION LEVEL READ COMMITTED")
	for _, b := range bounds {
		fmt.Fprintf(&q, "; SET LOCAL %s = %d", pgx.Identifier{b.Setting}.Sanitize(), b.Limit.Milliseconds())
	}
	return pgx.TxOptions{BeginQuery: q.String()}
}
