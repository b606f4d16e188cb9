package database

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bound is a setting of a transaction's own (SET LOCAL): a limit in
// milliseconds (lock_timeout, statement_timeout,
// idle_in_transaction_session_timeout) or, when Value is set, that text (a
// declaration such as the schema a writer speaks).
type Bound struct {
	Setting string
	Limit   time.Duration
	Value   string
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
		name := pgx.Identifier(strings.Split(b.Setting, ".")).Sanitize()
		if b.Value != "" {
			fmt.Fprintf(&q, "; SET LOCAL %s = '%s'", name, strings.ReplaceAll(b.Value, "'", "''"))
			continue
		}
		fmt.Fprintf(&q, "; SET LOCAL %s = %d", name, b.Limit.Milliseconds())
	}
	return pgx.TxOptions{BeginQuery: q.String()}
}
