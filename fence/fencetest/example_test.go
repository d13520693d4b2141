package fencetest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/quorumlock/quorumlock/fence"
)

// The SQL guard in the transaction of the data write (fence.GuardSQL): the
// holder of token 42 updates an invoice, the holder of an earlier lease
// (41), paused past it, is refused and its transaction rolled back. The
// database is the PostgreSQL server this package's tests started, opened
// with pgx's database/sql driver.
func Example_guardSQL() {
	ctx := context.Background()
	db, err := sql.Open("pgx", pg.DSN())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	for _, stmt := range []string{
		fence.SQLSchema, // the marks' table, once
		"CREATE TABLE IF NOT EXISTS invoices (id bigint PRIMARY KEY, total numeric NOT NULL)",
		"INSERT INTO invoices VALUES (42, 0) ON CONFLICT (id) DO UPDATE SET total = 0",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			fmt.Println(err)
			return
		}
	}

	// setTotal writes an invoice's total, fenced by token, in one
	// transaction.
	setTotal := func(token fence.Token, total string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		if err := fence.GuardSQL(ctx, tx, "invoices:42", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE invoices SET total = $1 WHERE id = 42", total); err != nil {
			return err
		}
		return tx.Commit()
	}

	fmt.Println(setTotal(42, "1250.00"))
	err = setTotal(41, "990.00")
	fmt.Println(err)
	fmt.Println("stale:", errors.Is(err, fence.ErrStale))
	fmt.Println(setTotal(42, "1300.00")) // the same holder, again

	var total string
	if err := db.QueryRowContext(ctx, "SELECT total FROM invoices WHERE id = 42").Scan(&total); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("total:", total)
	// Output:
	// <nil>
	// fence: stale token 41 for "invoices:42": the resource has seen 42
	// stale: true
	// <nil>
	// total: 1300.00
}
