package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/db/migrations"
)

// A test binary migrates one template database and NewPool copies it for
// each test. Test binaries of several packages run at once against one
// server, each with its own template: the name is random, so a binary never
// clones a template built by another binary from other migrations.
//
// The binary holds an idle session on the admin database for as long as it
// runs, named ownerPrefix + the template's name: the template's owner.
// Main drops the template at the end; one whose owner is gone (the binary
// crashed, timed out or has no TestMain calling Main) is dropped by the next
// binary that builds a template.
const (
	templatePrefix = "burnpoller_template_"
	ownerPrefix    = "pgtest owner "
)

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
	// owner is the session that marks templateName as in use; dropTemplate
	// closes it.
	owner *pgx.Conn
)

// templateFor returns the name of this binary's template database on the
// server at admin, building it on first use.
func templateFor(t testing.TB, admin *url.URL) string {
	t.Helper()
	templateOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		owner, templateName, templateErr = buildTemplate(ctx, admin)
	})
	if templateErr != nil {
		t.Fatalf("pgtest: template database: %v", templateErr)
	}
	return templateName
}

// buildTemplate opens the owner session, drops ownerless templates, then
// creates a template database and migrates it. On success nothing but the
// owner session (on the admin database) stays connected.
func buildTemplate(ctx context.Context, admin *url.URL) (*pgx.Conn, string, error) {
	name := templatePrefix + randomHex(6)
	cfg, err := pgx.ParseConfig(admin.String())
	if err != nil {
		return nil, "", fmt.Errorf("parsing %s: %w", admin.Redacted(), err)
	}
	cfg.RuntimeParams["application_name"] = ownerPrefix + name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("connecting to %s: %w", admin.Redacted(), err)
	}
	if err := build(ctx, conn, admin, name); err != nil {
		// Drop what was built; the owner session goes, so if dropping fails
		// the next binary's sweep does it.
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = conn.Close(ctx)
		return nil, "", err
	}
	return conn, name, nil
}

func build(ctx context.Context, owner *pgx.Conn, admin *url.URL, name string) error {
	if err := sweep(ctx, owner); err != nil {
		return err
	}
	if _, err := owner.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	u := *admin
	u.Path = "/" + name
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", name, err)
	}
	_, err = migrations.Migrate(ctx, conn)
	if err == nil {
		err = migrations.Check(ctx, conn)
	}
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("migrating %s: %w", name, err)
	}
	// CREATE DATABASE … TEMPLATE fails while anyone is connected to the
	// template: refuse new sessions, and wait for the migrating session's
	// backend, which exits after its client has closed, to be gone.
	if _, err := owner.Exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("closing %s to sessions: %w", name, err)
	}
	for {
		var n int
		if err := owner.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name).Scan(&n); err != nil {
			return fmt.Errorf("counting sessions on %s: %w", name, err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d sessions still on %s: %w", n, name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sweep drops the templates whose owner session is gone.
func sweep(ctx context.Context, conn *pgx.Conn) error {
	// Templates first, owners second: a template's owner connects before
	// creating it, so every template listed whose binary is alive has its
	// owner in the second list.
	templates, err := column(ctx, conn, `SELECT datname FROM pg_database WHERE datname LIKE $1`,
		strings.ReplaceAll(templatePrefix, "_", `\_`)+"%")
	if err != nil {
		return fmt.Errorf("listing template databases: %w", err)
	}
	owners, err := column(ctx, conn, `SELECT application_name FROM pg_stat_activity WHERE application_name LIKE $1`,
		ownerPrefix+"%")
	if err != nil {
		return fmt.Errorf("listing template owners: %w", err)
	}
	for _, name := range templates {
		if slices.Contains(owners, ownerPrefix+name) {
			continue
		}
		// Another binary may be dropping it too; either way it goes.
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	return nil
}

// dropTemplate drops this binary's template, if it built one, and ends the
// owner session.
func dropTemplate() error {
	if owner == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := owner.Exec(ctx, "DROP DATABASE IF EXISTS "+templateName+" WITH (FORCE)")
	if cerr := owner.Close(ctx); err == nil {
		err = cerr
	}
	owner = nil
	if err != nil {
		return fmt.Errorf("dropping template database %s: %w", templateName, err)
	}
	return nil
}

// column returns the single text column of sql's rows.
func column(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
