package consume

import "github.com/jackc/pgx/v5"

// BeforeCommit runs f in each batch of Run after the handlers and the
// offset update, just before COMMIT: where a crash must leave nothing.
func BeforeCommit(f func(pgx.Tx)) Option { return func(c *config) { c.beforeCommit = f } }
