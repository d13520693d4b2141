package fencetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/fence/fencetest/pgserver"
	"go.uber.org/goleak"
)

// pg is the PostgreSQL server this package's tests share (each test uses
// resource names and tables of its own).
var pg *pgserver.Server

// TestMain starts one PostgreSQL server for the package. Without
// PostgreSQL's binaries it fails under CI=true and otherwise skips the
// package, saying so.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if _, err := pgserver.BinDir(); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "%v; CI=true, so this is a failure\n", err)
			return 1
		}
		fmt.Printf("%v; skipping this package's tests (set CI=true to make this a failure)\n", err)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	s, err := pgserver.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pg = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// openT opens the shared server with the pgx driver and creates the table
// of fence.SQLSchema (if it is not there yet), emptied: no marks from an
// earlier test (or an earlier run of this one, with -count).
func openT(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, stmt := range []string{fence.SQLSchema, "TRUNCATE fence_tokens"} {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
