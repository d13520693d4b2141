package faultinject

import (
	"context"
	"errors"
	"fmt"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// ClockStepAfterRestart restarts the masters (killed, started again at once
// with Persistence) and steps their wall clocks Step forward as they come
// up, as chrony's makestep does when a host boots with its clock behind:
// the new run's INFO uptime_in_seconds (its wall clock's now less its wall
// clock's start) reads Step too old, while its main thread's CPU time does
// not. The master's shared proxy refuses connections from the kill until
// the step is made, so no command reaches the new run on its clock before
// the step. The clock then reads real time + Step (an earlier skew is
// replaced); Undo, and Cluster.HealAll, reboot the masters with their
// clocks at real time.
//
// With NoPersistence the new run holds no key the step could expire early;
// with an append-only file the keys it loads (their expiry times absolute)
// expire Step early, as after a ClockJump: a documented unsafe condition.
// Needs: on the process and docker backends, libfaketime (package
// clockskew).
type ClockStepAfterRestart struct {
	Nodes       []int
	Step        time.Duration
	Persistence Persistence
}

func (f ClockStepAfterRestart) Name() string {
	return name("clock-step-after-restart", f.Nodes, fmt.Sprintf("(%s,%s)", signed(f.Step), f.Persistence), "")
}
func (f ClockStepAfterRestart) String() string        { return f.Name() }
func (f ClockStepAfterRestart) On(nodes ...int) Fault { f.Nodes = nodes; return f }

// Needs says what the fault needs: libfaketime (on the process and docker
// backends).
func (f ClockStepAfterRestart) Needs() Needs { return Needs{Libfaketime: true} }

func (f ClockStepAfterRestart) Inject(ctx context.Context, c *Cluster) error {
	if !f.Persistence.known() {
		return named(f, "injecting", fmt.Errorf("faultinject: persistence %d is not a known Persistence", int(f.Persistence)))
	}
	return named(f, "injecting", c.onMasters(f.Nodes, func(m *member) error { return m.reboot(ctx, f.Persistence, f.Step) }))
}

// Undo reboots the masters again, with their clocks right. Setting a
// running master's clock back would make every key it wrote while stepped
// live Step longer than its TTL: a key whose holder's lease had ended (a
// stalled holder) would stay for Step, a leak of the harness's own making.
func (f ClockStepAfterRestart) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.onMasters(f.Nodes, func(m *member) error { return m.reboot(ctx, f.Persistence, 0) }))
}

// reboot kills m and starts it again with persistence p, its clock set to
// real time + step before its shared proxy lets any command through.
func (m *member) reboot(ctx context.Context, p Persistence, step time.Duration) error {
	was, err := m.hop.suspend()
	if err != nil {
		return err
	}
	err = m.kill(ctx)
	if err == nil {
		err = m.start(ctx, p)
	}
	if err == nil {
		err = m.setClock(ctx, step, 1)
	}
	if err == nil {
		m.stepped = step != 0
	}
	return errors.Join(err, m.hop.resume(was))
}

// suspend stops the proxy (connections refused, open ones closed) and
// reports whether it was listening; resume(true) starts it again with the
// toxics it had.
func (h *hop) suspend() (bool, error) {
	var was bool
	err := h.do(func() error {
		h.p.Lock()
		was = h.p.Enabled
		h.p.Unlock()
		if was {
			h.p.Stop()
		}
		return nil
	})
	return was, err
}

func (h *hop) resume(was bool) error {
	if !was {
		return nil
	}
	return h.do(func() error {
		if err := h.p.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return fmt.Errorf("restarting proxy %s on %s: %w", h.p.Name, h.addr, err)
		}
		return nil
	})
}
