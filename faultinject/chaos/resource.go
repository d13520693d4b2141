package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// resource is the protected resource the clients write to: the
// in-process history.Register, or a PostgreSQL table (pgResource). Write
// records the decision in the run's history and reports it.
type resource interface {
	Write(client int, token string, fence int64, until time.Duration, value string) bool
}

// openPostgres connects the run to its PostgreSQL server (Options.Postgres,
// or one it starts and stops with the run), on a resource of its own.
func (r *run) openPostgres(ctx context.Context, label string) (*pgResource, error) {
	pg := r.opt.Postgres
	if pg == nil {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		own, err := StartPostgres(sctx)
		if err != nil {
			return nil, err
		}
		pg = own
		r.closers = append(r.closers, own.Close)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := newPGResource(octx, pg.DSN(), resourceName(r.lock, label), r.clock, r.hist, r.fail)
	if err != nil {
		return nil, fmt.Errorf("chaos: %s: %w", r.sc.Name, err)
	}
	return res, nil
}

// closeAll runs the run's closers (a PostgreSQL server it started).
func (r *run) closeAll() error {
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
