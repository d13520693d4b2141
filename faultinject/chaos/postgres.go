package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/fence/fencetest/pgserver"
)

// Postgres is a PostgreSQL server that scenarios whose Resource is
// PostgreSQL write to (package fence/fencetest/pgserver: a new cluster in a
// temporary directory, on a free 127.0.0.1 port). Starting one takes a few
// seconds: start it once with StartPostgres and pass it in
// Options.Postgres to share it between runs (each run writes a resource
// of its own); without one, Run starts and stops its own.
type Postgres struct {
	srv *pgserver.Server
}

// PostgresAvailable reports why a PostgreSQL server cannot be started here
// (its binaries are missing; Debian: apt-get install -y postgresql), or
// nil.
func PostgresAvailable() error {
	_, err := pgserver.BinDir()
	return err
}

// StartPostgres starts a PostgreSQL server for scenarios; Close stops it.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	srv, err := pgserver.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: starting PostgreSQL: %w", err)
	}
	return &Postgres{srv: srv}, nil
}

// DSN returns the server's connection URL.
func (p *Postgres) DSN() string { return p.srv.DSN() }

// Addr returns the server's TCP address, 127.0.0.1:PORT.
func (p *Postgres) Addr() string { return p.srv.Addr() }

// Close stops the server and removes its directory.
func (p *Postgres) Close() error { return p.srv.Stop() }

// writesSchema is the table the PostgreSQL resource keeps its writes in,
// next to fence.SQLSchema's marks: seq is the order of the inserts, each
// made after the fencing guard locked the resource's mark until its
// commit, so the order of the commits.
const writesSchema = `CREATE TABLE IF NOT EXISTS quorumlock_chaos_writes (
	seq bigserial PRIMARY KEY,
	resource text NOT NULL,
	client int NOT NULL,
	lease text NOT NULL,
	token bigint NOT NULL,
	at_ns bigint NOT NULL,
	value text NOT NULL
)`

// pgResource is the protected resource of a PostgreSQL scenario: a fenced
// write is a transaction that runs fence.GuardSQL (a conditional upsert of
// the resource's mark), then inserts the value, then commits. It records
// each decision in the history, timestamped while the transaction holds the
// mark's row lock (after the guard, before the commit), so that the
// timestamps order the decisions as PostgreSQL made them; after the run,
// Stored reads back what the database kept.
type pgResource struct {
	db       *sql.DB
	resource string
	clock    *history.RefClock
	h        *history.Recorder
	fail     func(error)

	mu   sync.Mutex
	errs int // writes that failed for another reason than the guard
}

// newPGResource opens dsn and creates the tables.
func newPGResource(ctx context.Context, dsn, resource string, c *history.RefClock, h *history.Recorder, fail func(error)) (*pgResource, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("chaos: opening PostgreSQL: %w", err)
	}
	for _, s := range []string{fence.SQLSchema, writesSchema} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, errors.Join(fmt.Errorf("chaos: creating PostgreSQL tables: %w", err), db.Close())
		}
	}
	return &pgResource{db: db, resource: resource, clock: c, h: h, fail: fail}, nil
}

// Write runs one fenced write (a lease of client with fencing token fence)
// and reports whether PostgreSQL kept it. A write without a token (fence
// 0) is refused by the guard as invalid: PostgreSQL scenarios are fenced.
func (p *pgResource) Write(client int, token string, fenceTok int64, until time.Duration, value string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, at, err := p.write(ctx, client, token, fenceTok, value)
	if err != nil {
		p.mu.Lock()
		p.errs++
		p.mu.Unlock()
		p.fail(fmt.Errorf("PostgreSQL write of client %d (lease %.8s, token %d): %w", client, token, fenceTok, err))
		return false
	}
	kind := history.WriteRejected
	if ok {
		kind = history.WriteAccepted
	}
	p.h.Add(history.Event{Client: client, Kind: kind, At: at, Token: token, Fence: fenceTok, Until: until})
	return ok
}

// write is Write's transaction: whether the write was kept, when the guard
// decided, or the error that left it unknown.
func (p *pgResource) write(ctx context.Context, client int, token string, fenceTok int64, value string) (bool, time.Duration, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return false, 0, err
	}
	defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, ignored
	gerr := fence.GuardSQL(ctx, tx, p.resource, fence.Token(fenceTok))
	at := p.clock.Now() // the mark's row is locked by this transaction
	switch {
	case errors.Is(gerr, fence.ErrStale):
		return false, at, nil
	case gerr != nil:
		return false, 0, gerr
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO quorumlock_chaos_writes (resource, client, lease, token, at_ns, value) VALUES ($1, $2, $3, $4, $5, $6)`,
		p.resource, client, token, fenceTok, int64(at), value); err != nil {
		return false, 0, err
	}
	if err := tx.Commit(); err != nil {
		return false, 0, err
	}
	return true, at, nil
}

// Stored reads back, in the database's commit order, every write it kept
// for the resource, as history.Stored events.
func (p *pgResource) Stored(ctx context.Context) ([]history.Event, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT seq, client, lease, token, at_ns FROM quorumlock_chaos_writes WHERE resource = $1 ORDER BY seq`, p.resource)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading back the PostgreSQL writes: %w", err)
	}
	defer rows.Close()
	var out []history.Event
	for rows.Next() {
		var e history.Event
		var at int64
		if err := rows.Scan(&e.Seq, &e.Client, &e.Token, &e.Fence, &at); err != nil {
			return nil, fmt.Errorf("chaos: reading back the PostgreSQL writes: %w", err)
		}
		e.Kind, e.At = history.Stored, time.Duration(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chaos: reading back the PostgreSQL writes: %w", err)
	}
	return out, nil
}

// Close closes the database handle.
func (p *pgResource) Close() error { return p.db.Close() }

// resourceName is a run's resource in PostgreSQL: the lock's name and the
// cluster's label, unique per run on a shared server.
func resourceName(lock, label string) string {
	return strings.Join([]string{lock, label}, ".")
}
