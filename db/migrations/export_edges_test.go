package migrations

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RunStep runs sql as the runner runs a migration's body (in a transaction,
// or statement by statement under tern's disable-tx marker) at version v,
// leaving the version at v: what a later release's migration would do.
func RunStep(ctx context.Context, conn *pgx.Conn, v int32, name, sql string) error {
	_, err := runner{conn: conn}.apply(ctx, v, v, name, sql, nil)
	return err
}
