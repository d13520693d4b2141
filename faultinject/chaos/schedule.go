package chaos

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
)

// step runs one schedule step until ctx ends.
func (r *run) step(ctx context.Context, st Step) {
	if !sleep(ctx, st.At) {
		return
	}
	// Injections and undos run to completion even when the run ends
	// meanwhile (a restart is not left half done), within a bound.
	bg := context.WithoutCancel(ctx)
	client := st.Fault == nil // a client's fault (a pause, an overrun), not a node's
	var f faultinject.Fault
	var nodes []int
	if !client {
		var err error
		if nodes, err = st.Target.Nodes(r.sc.Nodes); err != nil {
			r.fail(err)
			return
		}
		f = st.Fault.On(nodes...)
	}
	for i := 0; ; i++ {
		if st.Target == Rolling && !client {
			f = st.Fault.On(nodes[i%len(nodes)])
		}
		req := &request{}
		switch {
		case st.Hold > 0:
			// A fault in a holder's lease; with Pause, during its stall.
			req.hold, req.held, req.pause = st.Hold, make(chan struct{}), st.Pause
		case st.Pause > 0:
			req.pause = st.Pause
		case st.Overrun > 0:
			req.overrun = st.Overrun
		default:
			req = nil
		}
		if req != nil {
			select {
			case r.reqs <- req:
			case <-ctx.Done():
				return
			}
			if req.held != nil {
				<-req.held // closed right after the receive
			}
		}
		if client {
			r.faults.Add(1)
		} else {
			ictx, cancel := context.WithTimeout(bg, time.Minute)
			err := f.Inject(ictx, r.cluster)
			cancel()
			if err != nil {
				r.fail(err)
				return
			}
			r.faults.Add(1)
			if st.For > 0 {
				sleep(ctx, st.For)
				uctx, cancel := context.WithTimeout(bg, time.Minute)
				err := f.Undo(uctx, r.cluster)
				cancel()
				if err != nil {
					r.fail(err)
					return
				}
			}
		}
		if st.Every == 0 || !sleep(ctx, st.Every) {
			return
		}
	}
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
