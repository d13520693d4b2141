package fencetest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/fence"
)

// guardAndWrite runs one fenced write: GuardSQL and an insert into table in
// one transaction, committed when the guard accepts and rolled back when
// it refuses.
func guardAndWrite(ctx context.Context, db *sql.DB, table, resource string, token fence.Token) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: ErrTxDone
	if err := fence.GuardSQL(ctx, tx, resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (token) VALUES ($1)", token); err != nil {
		return err
	}
	return tx.Commit()
}

// writesT creates a table of fenced writes, in the order they were made.
func writesT(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	for _, stmt := range []string{"DROP TABLE IF EXISTS " + table, "CREATE TABLE " + table + " (seq bigserial PRIMARY KEY, token bigint NOT NULL)"} {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
}

// written returns the tokens of table's rows in the order they were made.
func written(t *testing.T, db *sql.DB, table string) []fence.Token {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT token FROM "+table+" ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fence.Token
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		out = append(out, fence.Token(tok))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mark returns resource's high-water mark (0: no row).
func mark(t *testing.T, db *sql.DB, resource string) fence.Token {
	t.Helper()
	var m int64
	err := db.QueryRowContext(t.Context(), "SELECT token FROM fence_tokens WHERE resource = $1", resource).Scan(&m)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return fence.Token(m)
}

// TestGuardSQL: one writer after another on a real PostgreSQL. A new
// resource takes any token, an equal token is accepted, a higher one
// raises the mark, a lower one is refused naming both tokens and its data
// write rolled back, a token below 1 is refused before the database is
// asked.
func TestGuardSQL(t *testing.T) {
	db := openT(t)
	writesT(t, db, "guard_basic")
	ctx := t.Context()
	const res = "invoices:42"
	for _, tok := range []fence.Token{5, 5, 7} {
		if err := guardAndWrite(ctx, db, "guard_basic", res, tok); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := guardAndWrite(ctx, db, "guard_basic", res, 6)
	var stale *fence.StaleError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) || stale.Token != 6 || stale.Highest != 7 || stale.Resource != res {
		t.Fatalf("token 6 after 7: %v, want a StaleError 6 < 7", err)
	}
	if want := `fence: stale token 6 for "invoices:42": the resource has seen 7`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	for _, tok := range []fence.Token{0, -3} {
		if err := guardAndWrite(ctx, db, "guard_basic", res, tok); !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), tok.String()) {
			t.Errorf("token %d: %v, want ErrInvalid naming it", tok, err)
		}
	}
	if got, want := written(t, db, "guard_basic"), []fence.Token{5, 5, 7}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	if m := mark(t, db, res); m != 7 {
		t.Errorf("mark %d, want 7", m)
	}
	// A database error comes back wrapped, naming the resource.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, "DROP TABLE fence_tokens"); err != nil {
		t.Fatal(err)
	}
	if err := fence.GuardSQL(ctx, tx, res, 8); err == nil || errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), `fence: guarding "invoices:42" with token 8: `) {
		t.Errorf("without the table: %v", err)
	}
}

// waitBlocked waits until the backend pid waits for a lock (bounded).
func waitBlocked(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var wait sql.NullString
		if err := db.QueryRowContext(t.Context(), "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid).Scan(&wait); err != nil {
			t.Fatal(err)
		}
		if wait.String == "Lock" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d never waited for a lock (wait_event_type %q)", pid, wait.String)
		}
		<-tick.C
	}
}

// TestGuardSQLWaiterRechecks: a writer whose guard waits for another
// writer's transaction (the row is locked from the guard to the commit)
// decides on what that transaction left. Writer A guards token 10 and
// holds its transaction open; writer B's guard is seen waiting for the
// lock (pg_stat_activity); then A commits or rolls back, on a resource
// that had no mark (A inserts it) and on one that had. With A committed,
// B's 9 is refused (naming 10) and 11 accepted; with A rolled back, B's 9
// is accepted. The check-then-write variant, a SELECT and an UPDATE, lets
// B's 9 through in the same schedule: the single statement is what makes
// the guard hold.
func TestGuardSQLWaiterRechecks(t *testing.T) {
	db := openT(t)
	db.SetMaxOpenConns(4)
	type step struct {
		name     string
		existing bool // the resource has a mark (1) before: A updates; else A inserts
		commit   bool
		token    fence.Token
		want     fence.Token // the mark after both; 0: B is refused, mark 10
	}
	var cases []step
	for _, existing := range []bool{false, true} {
		prefix := "new row, "
		if existing {
			prefix = "existing row, "
		}
		cases = append(cases,
			step{prefix + "A commits, B lower", existing, true, 9, 0},
			step{prefix + "A commits, B higher", existing, true, 11, 11},
			step{prefix + "A rolls back, B lower", existing, false, 9, 9})
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			res := fmt.Sprintf("waiter:%d", i)
			if c.existing {
				if _, err := db.ExecContext(ctx, "INSERT INTO fence_tokens VALUES ($1, 1)", res); err != nil {
					t.Fatal(err)
				}
			}
			a, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Rollback() //nolint:errcheck
			if err := fence.GuardSQL(ctx, a, res, 10); err != nil {
				t.Fatal(err)
			}
			b, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Rollback() //nolint:errcheck
			var pid int
			if err := b.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- fence.GuardSQL(ctx, b, res, c.token) }()
			waitBlocked(t, db, pid)
			if c.commit {
				err = a.Commit()
			} else {
				err = a.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			err = <-done
			if c.want == 0 {
				var stale *fence.StaleError
				if !errors.As(err, &stale) || stale.Token != c.token || stale.Highest != 10 {
					t.Fatalf("B's guard: %v, want a StaleError %d < 10", err, c.token)
				}
			} else if err != nil {
				t.Fatalf("B's guard: %v", err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == 0 {
				want = 10
			}
			if m := mark(t, db, res); m != want {
				t.Errorf("mark %d, want %d", m, want)
			}
		})
	}

	t.Run("check then write", func(t *testing.T) {
		ctx := t.Context()
		const res = "waiter:naive"
		if _, err := db.ExecContext(ctx, "INSERT INTO fence_tokens VALUES ($1, 1)", res); err != nil {
			t.Fatal(err)
		}
		b, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Rollback() //nolint:errcheck
		var seen int64
		if err := b.QueryRowContext(ctx, "SELECT token FROM fence_tokens WHERE resource = $1", res).Scan(&seen); err != nil || seen > 9 {
			t.Fatalf("B reads %d, %v", seen, err)
		}
		a, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Rollback() //nolint:errcheck
		if err := fence.GuardSQL(ctx, a, res, 10); err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ExecContext(ctx, "UPDATE fence_tokens SET token = 9 WHERE resource = $1", res); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if m := mark(t, db, res); m != 9 {
			t.Errorf("mark %d; the check-then-write was expected to let 9 overwrite 10", m)
		}
	})
}

// TestGuardSQLConcurrentWriters: 8 writers race on one resource through
// the pool, 200 transactions with the tokens 1..200 dealt round the
// writers (writer w has w+1, w+9, ...: each one's tokens grow, as a
// holder's successive leases' do, and neighbours race). The
// writes that committed are in strictly increasing token order (writers of
// one resource take turns from the guard to the commit, so the order of
// the serial column is the commit order), the mark is the last of them,
// and every refusal named a higher mark.
func TestGuardSQLConcurrentWriters(t *testing.T) {
	db := openT(t)
	db.SetMaxOpenConns(8)
	writesT(t, db, "guard_race")
	const res, writers, total = "race:1", 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted, refused int
	var errs []error
	for w := range writers {
		wg.Go(func() {
			for i := w; i < total; i += writers {
				tok := fence.Token(i + 1)
				err := guardAndWrite(t.Context(), db, "guard_race", res, tok)
				var stale *fence.StaleError
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &stale) && stale.Token == tok && stale.Highest > tok:
					refused++
				default:
					errs = append(errs, fmt.Errorf("token %d: %w", tok, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := written(t, db, "guard_race")
	if len(got) != accepted || accepted+refused != total || accepted == 0 {
		t.Fatalf("%d writes, %d accepted, %d refused of %d", len(got), accepted, refused, total)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("write %d has token %d after %d: %v", i, got[i], got[i-1], got)
		}
	}
	if m := mark(t, db, res); m != got[len(got)-1] || m != total {
		t.Errorf("mark %d, last write %d, want both %d", m, got[len(got)-1], total)
	}
	t.Logf("%d writers, %d transactions: %d accepted, %d refused", writers, total, accepted, refused)
}
