package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SQLSchema creates the table that holds each resource's high-water mark,
// in PostgreSQL syntax (tested on PostgreSQL 15). Run it once, before
// GuardSQL, as a migration or with db.ExecContext(ctx, fence.SQLSchema).
const SQLSchema = `CREATE TABLE IF NOT EXISTS fence_tokens (
	resource text PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0)
)`

// guardSQL raises the resource's mark to $2 unless it is above $2, and
// returns the new mark; no row when it is above. On a conflict PostgreSQL
// locks the row whether or not the WHERE holds, and a writer that waited
// for that lock re-checks the WHERE on the row the other committed.
const guardSQL = `INSERT INTO fence_tokens (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token
WHERE fence_tokens.token <= EXCLUDED.token
RETURNING token`

// highestSQL reads the mark that refused a token.
const highestSQL = `SELECT token FROM fence_tokens WHERE resource = $1`

// Querier is what GuardSQL needs from a database: *sql.Tx (the one to pass:
// the transaction of the data write), *sql.Conn or *sql.DB.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// GuardSQL records token as resource's high-water mark in the table of
// SQLSchema, in one statement, unless the mark is above it: then it returns
// a *StaleError (ErrStale) naming both tokens. Call it in the transaction
// that writes the data, before the data write, and roll back on any error:
//
//	tx, err := db.BeginTx(ctx, nil)
//	...
//	if err := fence.GuardSQL(ctx, tx, "invoices:42", token); err != nil {
//		tx.Rollback()
//		return err
//	}
//	// the data write, in tx; then tx.Commit()
//
// The statement is an INSERT ... ON CONFLICT DO UPDATE ... WHERE mark <=
// token (PostgreSQL syntax). It locks the resource's row until the
// transaction ends, so writers of one resource take turns from the guard to
// the commit, and a writer that waited re-checks the mark the other
// committed (Read Committed, PostgreSQL's default): a lower token cannot
// slip in between the check and the write. Under Repeatable Read or
// Serializable the waiter fails with a serialization error instead
// (SQLSTATE 40001); retrying the transaction then refuses the token. A token
// equal to the mark is accepted (the same lease writing again); a token
// below 1 is ErrInvalid. Errors of the database are returned wrapped.
func GuardSQL(ctx context.Context, q Querier, resource string, token Token) error {
	if err := token.check(); err != nil {
		return err
	}
	var mark int64
	err := q.QueryRowContext(ctx, guardSQL, resource, int64(token)).Scan(&mark)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fence: guarding %s with token %d: %w", shown(resource), token, err)
	}
	// Refused. The row is ours to read until the transaction ends (the
	// upsert locked it), so this is the mark that refused the token.
	if err := q.QueryRowContext(ctx, highestSQL, resource).Scan(&mark); err != nil {
		return fmt.Errorf("%w (token %d for %s; reading the mark: %v)", ErrStale, token, shown(resource), err)
	}
	return &StaleError{Resource: resource, Token: token, Highest: Token(mark)}
}
