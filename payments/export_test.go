package payments

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueryRowForTest lets tests look inside a transaction.
func (t *Tx) QueryRowForTest(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

// BackendPIDForTest is the server process of the transaction's session.
func (t *Tx) BackendPIDForTest() uint32 { return t.tx.Conn().PgConn().PID() }
