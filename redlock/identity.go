package redlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// One vote per server. A server listed under two addresses must not vote
// twice, and a restart between the first contacts of its two addresses
// gives them different run_ids. So a node joins the identified set (the
// nodes whose votes may count) only through passes that read every node's
// Info concurrently, each pass after the previous one ended, until two
// passes in a row agree for the node and every node already in the set:
// each of those servers then kept one run from its read in the first pass
// to its read in the second, so at the moment between the two passes all of
// them were live at once, and two addresses of one server would have shown
// one run_id. A node of the set whose read fails in a pass leaves the set
// (it joins again the same way), and no node joins in that pass: the unread
// node may be the joining node's server under another address, with a vote
// in flight that began while it was in the set (the simulator's aliases
// family found one server's two votes in one round, seed 374, with a
// dropped read). A run_id seen behind two nodes, at any time, proves
// them one server: the client is poisoned (ErrInvalidConfig) before the
// duplicate's first vote.

// identities is the client's side of it.
type identities struct {
	idSem  chan struct{} // one identification pass at a time
	idMu   sync.Mutex
	runIDs map[string]int // server run_id -> index of the member that reported it
	dupErr atomic.Pointer[error]
}

func newIdentities() identities {
	return identities{idSem: make(chan struct{}, 1), runIDs: map[string]int{}}
}

// memberIdentity is a node's side of it.
type memberIdentity struct {
	identified atomic.Bool // member of the identified set
	idFailed   atomic.Bool // its last identity read failed
	probeMu    sync.Mutex
	probing    chan struct{} // under probeMu; closed when the running probe ends
}

// maxPasses bounds the identification passes of one first contact; servers
// that keep restarting make it fail (and the call with it) instead.
const maxPasses = 3

// identify makes member i part of the identified set before its first vote.
// A node never read before, or whose last identification failed, is first
// read alone (one read at a time per node: calls that find one running wait
// for it), so that an unreachable node costs one call, not a pass over every
// node. Then passes run, one at a time for the whole client; a pass waits
// for every node believed reachable, so the first one usually takes in
// every node at once, and calls that waited for it find their node in the
// set. The runs recorded by earlier reads stand for the first pass.
func (c *Client) identify(ctx context.Context, i int, timeout time.Duration) error {
	m := c.members[i]
	if m.identified.Load() {
		return nil // the common case: no timer, no context
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	took := time.Duration(0)
	if m.runIDNow() == "" || m.idFailed.Load() {
		start := time.Now()
		if err := c.probe(ctx, i); err != nil {
			return err
		}
		took = time.Since(start)
	}
	if c.cfg.knobs.SingleIdentify { // test-only: the node alone, no passes
		m.identified.Store(true)
		return nil
	}
	select {
	case c.idSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("identifying the server: %w", ctx.Err())
	}
	defer func() { <-c.idSem }()
	if m.identified.Load() {
		return nil
	}
	if p := c.dupErr.Load(); p != nil {
		return *p
	}
	return c.passes(ctx, i, took)
}

// probe reads member i's identity alone and records it; calls that find a
// probe of i running wait for its outcome.
func (c *Client) probe(ctx context.Context, i int) error {
	m := c.members[i]
	m.probeMu.Lock()
	running := m.probing
	if running == nil {
		m.probing = make(chan struct{})
	}
	m.probeMu.Unlock()
	if running != nil {
		select {
		case <-running:
		case <-ctx.Done():
			return fmt.Errorf("identifying the server: %w", ctx.Err())
		}
		if m.idFailed.Load() {
			return fmt.Errorf("identifying the server: %w", ErrNoReply)
		}
		return nil
	}
	defer func() {
		m.probeMu.Lock()
		close(m.probing)
		m.probing = nil
		m.probeMu.Unlock()
	}()
	info, err := m.node.Info(ctx)
	m.idFailed.Store(err != nil)
	if err != nil {
		return fmt.Errorf("identifying the server: %w", err)
	}
	return c.observe(ctx, i, info)
}

// passes runs identification passes until member i and every identified
// member read the same run as in the pass before (the first time: as the
// last read recorded before it), see the comment at the top.
//
// Other nodes' first reads still running (first contacts made at the same
// moment) get a short wait, as long as i's own took: those that end by then
// stand for the first pass too, so that one pass takes in every node
// contacted at once. (Every read of a pass must start after every read it is
// compared with ended.)
func (c *Client) passes(ctx context.Context, i int, took time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, max(took, lateStart))
	for _, m := range c.members {
		m.probeMu.Lock()
		running := m.probing
		m.probeMu.Unlock()
		if running != nil {
			select {
			case <-running:
			case <-wctx.Done():
			}
		}
	}
	cancel()
	n := len(c.members)
	prev := make([]string, n)
	needed := make([]bool, n)
	inSet := make([]bool, n) // identified when the passes began: they may have votes in flight
	for j, m := range c.members {
		prev[j] = m.runIDNow()
		inSet[j] = m.identified.Load()
		needed[j] = j == i || inSet[j] || (prev[j] != "" && !m.idFailed.Load())
	}
	for range maxPasses {
		cur, infos := c.pass(ctx, needed)
		for j, id := range cur {
			if id == "" {
				if needed[j] {
					c.members[j].idFailed.Store(true)
				}
				continue
			}
			if err := c.observe(ctx, j, infos[j]); err != nil {
				return err
			}
		}
		if cur[i] == "" {
			return fmt.Errorf("identifying the server: %w", ctxErrOr(ctx, ErrNoReply))
		}
		settled := prev[i] == cur[i]
		var unread []string
		c.idMu.Lock() // the set changes under idMu (allIdentified)
		for j, m := range c.members {
			switch {
			case j == i || !inSet[j]:
			case cur[j] == "" && c.cfg.knobs.UnreadJoins: // test-only: the old rule
			case cur[j] == "":
				// Unread, j may be i's server under another address, with a
				// vote in flight that began while it was in the set: i
				// must not join now. j leaves the set (it joins again
				// through passes of its own), so the next attempt goes on
				// without it.
				m.identified.Store(false)
				unread = append(unread, m.addr)
			case cur[j] != prev[j]:
				settled = false // j restarted between the passes: once more
			}
		}
		c.idMu.Unlock()
		if len(unread) > 0 {
			return fmt.Errorf("identifying the server: %w from %s, already identified: no node joins while one of the set may have a vote in flight (it leaves the set; the next attempt goes on without it)", ctxErrOr(ctx, ErrNoReply), strings.Join(unread, ", "))
		}
		if settled {
			c.idMu.Lock()
			for j, m := range c.members {
				switch {
				case cur[j] != "" && cur[j] == prev[j]:
					m.idFailed.Store(false)
					m.identified.Store(true)
				case cur[j] == "" && needed[j]:
					m.identified.Store(false) // unreadable: joins again later
				}
			}
			c.idMu.Unlock()
			return nil
		}
		prev = cur
	}
	return fmt.Errorf("identifying the server: server identities kept changing over %d passes", maxPasses)
}

// pass reads every member's Info concurrently. It waits for the needed
// members (until ctx ends); the others count if they have answered by then. It returns each member's run_id ("" when not read) and
// info. Reads still running when it returns are cancelled.
func (c *Client) pass(ctx context.Context, needed []bool) ([]string, []ServerInfo) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := len(c.members)
	type read struct {
		j    int
		info ServerInfo
		err  error
	}
	reads := make(chan read, n)
	for j, m := range c.members {
		c.work.add()
		go func() {
			defer c.work.done()
			info, err := m.node.Info(ctx)
			reads <- read{j, info, err}
		}()
	}
	ids := make([]string, n)
	infos := make([]ServerInfo, n)
	need := 0
	for _, yes := range needed {
		if yes {
			need++
		}
	}
	take := func(r read) {
		if r.err == nil && r.info.RunID != "" {
			ids[r.j], infos[r.j] = r.info.RunID, r.info
		}
		if needed[r.j] {
			need--
		}
	}
	for got := 0; need > 0 && got < n; got++ {
		select {
		case r := <-reads:
			take(r)
		case <-ctx.Done():
			need = 0
			got = n
		}
	}
	for { // whatever else has answered by now
		select {
		case r := <-reads:
			take(r)
		default:
			return ids, infos
		}
	}
}

// observe records a run of member j's server: the restart quarantine's view
// of it, and the run_id index that finds one server behind two members.
func (c *Client) observe(ctx context.Context, j int, info ServerInfo) error {
	c.sawServer(ctx, j, info)
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if k, dup := c.runIDs[info.RunID]; dup && k != j {
		a, b := min(j, k), max(j, k)
		err := configError("nodes %d (%s) and %d (%s) are the same server (run_id %s): one server must not vote twice", a, c.members[a].addr, b, c.members[b].addr, info.RunID)
		c.dupErr.CompareAndSwap(nil, &err)
		return *c.dupErr.Load()
	}
	c.runIDs[info.RunID] = j
	return nil
}

// allIdentified reports whether every node i for which counted(i) holds is
// in the identified set at one moment (every change of the set is made
// under idMu): the nodes whose yes a round's decision counted, or whose
// hand-overs a waiter holds with (place.hold). Nodes of the set at one
// moment are distinct servers; nodes whose votes counted while each was in the set at
// different moments need not be: one may have left the set (its read
// failed in a pass) and the other, the same server under another address,
// joined in a later pass that no longer needed the first one read.
func (c *Client) allIdentified(counted func(i int) bool) bool {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	for i, m := range c.members {
		if counted(i) && !m.identified.Load() {
			return false
		}
	}
	return true
}

// ctxErrOr returns ctx.Err() when ctx has ended, else err.
func ctxErrOr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// runIDNow returns the last run recorded for m's server ("" if none).
func (m *member) runIDNow() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runID
}
