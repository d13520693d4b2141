package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/faultinject/history"
)

// leakedKeys records, as events of kind k (history.Leftover or
// history.Outlived), the lock keys still present on any master (through
// the shared proxies, healed by then), and returns them.
func (r *run) leakedKeys(ctx context.Context, k history.Kind) ([]history.Event, error) {
	var out []history.Event
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
			e := history.Event{Kind: k, At: r.clock.Now(), Lock: r.lock, Node: i, Token: h.Value,
				Note: fmt.Sprintf("%s = %.40s (TTL %v)", r.lock, h.Value, h.TTL)}
			r.hist.Add(e)
			out = append(out, e)
		}
	}
	return out, errors.Join(errs...)
}

// describeLeaks describes leftover events for a report.
func describeLeaks(evs []history.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("master %d: %s", e.Node, e.Note))
	}
	return out
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
