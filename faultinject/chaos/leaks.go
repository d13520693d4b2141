package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
)

// leakedKeys lists the lock keys still present on any master (through the
// shared proxies, healed by then).
func (r *run) leakedKeys(ctx context.Context) ([]string, error) {
	var out []string
	var errs []error
	for i := range r.cluster.N() {
		nd := r.cluster.Node(i)
		var h faultinject.Holder
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			h, err = nd.Inspect(cctx, r.lock)
			cancel()
			if err == nil || !sleep(ctx, 100*time.Millisecond) {
				break
			}
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("scanning master %d for leaked keys: %w", i, err))
		case h.Exists:
			out = append(out, fmt.Sprintf("master %d: %s = %.40s (TTL %v)", i, r.lock, h.Value, h.TTL))
		}
	}
	return out, errors.Join(errs...)
}

// processesLeft counts what is left of the cluster labelled label after
// Close (faultinject.Leftovers: processes, containers, temp dirs); the
// verdict fails on any. Containers found are then removed, so that a failed
// run does not leave them running.
func processesLeft(ctx context.Context, kind faultinject.BackendKind, label string) int {
	n, _ := faultinject.Leftovers(ctx, label)
	if n > 0 && kind == faultinject.Docker {
		_, _ = faultinject.RemoveDockerLeftovers(ctx, label)
	}
	return n
}
