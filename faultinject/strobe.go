package faultinject

import (
	"context"
	"fmt"
	"time"
)

// ClockStrobe makes the masters' wall clocks flip between real time +
// Offset and real time - Offset every Period (at least 1 ms), as a clock
// fought over by two time sources does: a key set while the clock reads
// ahead and judged while it reads behind lives 2*Offset longer, one set
// behind and judged ahead 2*Offset shorter. The lock's drift allowance
// (TTL * drift factor + 2 ms) covers a strobe whose 2*Offset is below it.
// A goroutine per master rewrites the clock; Undo stops it and sets the
// clock back to real time, as HealAll and Close do; it also stops by itself
// after strobeLimit. Needs: on the process and docker backends,
// libfaketime (package clockskew), whose timestamp file is re-read on every
// clock read (FAKETIME_NO_CACHE=1).
type ClockStrobe struct {
	Nodes  []int
	Offset time.Duration
	Period time.Duration
}

// strobeLimit bounds a strobe that nobody undoes.
const strobeLimit = 10 * time.Minute

func (f ClockStrobe) Name() string {
	return name("clock-strobe", f.Nodes, fmt.Sprintf("(±%v/%v)", f.Offset, f.Period), "")
}
func (f ClockStrobe) String() string        { return f.Name() }
func (f ClockStrobe) On(nodes ...int) Fault { f.Nodes = nodes; return f }

// Needs says what the fault needs: libfaketime (on the process and docker
// backends).
func (f ClockStrobe) Needs() Needs { return Needs{Libfaketime: true} }

func (f ClockStrobe) Inject(ctx context.Context, c *Cluster) error {
	if f.Offset <= 0 || f.Offset > time.Hour {
		return named(f, "injecting", fmt.Errorf("faultinject: strobe offset %v must be in (0, 1h]", f.Offset))
	}
	if f.Period < time.Millisecond {
		return named(f, "injecting", fmt.Errorf("faultinject: strobe period %v must be at least 1ms", f.Period))
	}
	return named(f, "injecting", c.onMasters(f.Nodes, func(m *member) error {
		m.stopStrobe()
		// The first flip, here, says whether the clock can be set at all.
		if err := m.setClock(ctx, f.Offset, 1); err != nil {
			return err
		}
		m.strobe = startStrobe(m, f.Offset, f.Period)
		return nil
	}))
}

func (f ClockStrobe) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.onMasters(f.Nodes, func(m *member) error {
		if m.strobe == nil {
			return nil
		}
		m.stopStrobe()
		return m.setClock(ctx, 0, 1)
	}))
}

// strobe is one master's flipping clock.
type strobe struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startStrobe flips m's clock between -offset and +offset every period
// until stopped or strobeLimit passes; the clock reads +offset now. It does
// not take m.mu (a restart holding it does not stop the flips; stopping
// waits for the goroutine): the server's SetClock is safe for concurrent
// use.
func startStrobe(m *member, offset, period time.Duration) *strobe {
	ctx, cancel := context.WithTimeout(context.Background(), strobeLimit)
	s := &strobe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		sign := time.Duration(1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sign = -sign
			// An error (a server being replaced) skips one flip.
			_ = m.srv.SetClock(ctx, sign*offset, 1)
		}
	}()
	return s
}

// stopStrobe stops m's strobe, if any, and waits for its goroutine; the
// clock is left where the last flip put it. m.mu must be held.
func (m *member) stopStrobe() {
	if m.strobe == nil {
		return
	}
	m.strobe.cancel()
	<-m.strobe.done
	m.strobe = nil
}
