package redlock

import (
	"context"
	"errors"
	"log/slog"
)

// WithLogger has the client write log/slog records of what an operator
// needs to know, through l:
//
//   - Warn: a renewal failed (with its *QuorumError, which names every
//     node's result; not one that found its lease already unlocked), a
//     lease expired or was lost (how long it was held, and
//     the last renewal's error), a queued release was dropped or abandoned;
//   - Warn: also each "bad" finding of the client's check of a server's
//     settings at first contact (NodeStateEvent.Findings: an eviction
//     policy that can evict lock keys, a replica, ...);
//   - Warn: a node denied access (ErrNodeDenied: a wrong password, an ACL
//     user without a grant), once per node and server run (the run the
//     client last read from the node; not once per call), with the node's
//     error, which names what was refused; and each release a node refused
//     with an error reply (WRONGTYPE, ...), which is not retried;
//   - Info: a node's restart quarantine started, a fencing token started a
//     new epoch, a "warn" finding of that check (no AOF without the restart
//     quarantine, a master with replicas, ...);
//   - Debug: every operation's end (with its attempts), every node call
//     that failed, every backlog change.
//
// Every record has the attribute "lock" (the lock's name) or "node" (its
// Addr), and the message starts with "redlock: ". Records are written
// synchronously where the event happens (see Observer): give it a handler
// that does not block for long. WithLogger adds an Observer before those of
// WithObserver. Default: none (the library logs nothing). l must not be nil.
//
// go-redis writes its own log lines (failed dials, pool errors) through a
// process-wide logger of its own, not through this one:
// docs/observability.md shows how to route it to slog or silence it.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) {
		if l == nil {
			c.nilObserver = true
			return
		}
		c.logger = l
	}
}

// slogObserver is WithLogger's Observer.
type slogObserver struct {
	NopObserver
	log *slog.Logger
}

func (s *slogObserver) OpDone(ctx context.Context, e OpEvent) {
	if e.FenceEpoch && s.log.Enabled(ctx, slog.LevelInfo) {
		s.log.LogAttrs(ctx, slog.LevelInfo, "redlock: fencing epoch started", slog.String("lock", e.Lock.Name), slog.Int64("token", e.Fence))
	}
	level := slog.LevelDebug
	msg := "redlock: " + string(e.Op)
	outcome := outcomeOf(e.Err)
	if e.Op == OpExtend && e.Renewal && outcome != "ok" && outcome != "ended" { // ended: Unlock came first
		level, msg = slog.LevelWarn, "redlock: renewal failed"
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("lock", e.Lock.Name), slog.String("outcome", outcome), slog.Duration("took", e.Took)}
	if e.Op == OpAcquire {
		attrs = append(attrs, slog.Int("attempts", e.Attempts))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("err", e.Err))
	}
	s.log.LogAttrs(ctx, level, msg, attrs...)
}

func (s *slogObserver) NodeCall(ctx context.Context, e NodeEvent) {
	if e.Err == nil {
		return
	}
	level, msg := slog.LevelDebug, "redlock: node call failed"
	switch e.Op {
	case OpRelease, OpRollback, OpRetry:
		// A denial is logged once per node and run (noteDenied).
		if refusedRelease(e.Err, false) && !errors.Is(e.Err, ErrNodeDenied) {
			level, msg = slog.LevelWarn, "redlock: release refused by the node, not retried (the key expires with its TTL)"
		}
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	s.log.LogAttrs(ctx, level, msg, slog.String("lock", e.Lock.Name),
		slog.String("node", e.Node), slog.String("op", string(e.Op)), slog.String("vote", voteOf(e.Err)),
		slog.Duration("took", e.Took), slog.Any("err", e.Err))
}

func (s *slogObserver) LeaseEnd(ctx context.Context, e LeaseEndEvent) {
	level, msg := slog.LevelWarn, "redlock: lease lost"
	if e.Err == nil {
		level, msg = slog.LevelDebug, "redlock: lease released"
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("lock", e.Lock.Name), slog.String("end", leaseEndOf(e)), slog.Duration("held", e.Held)}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("err", e.Err))
	}
	s.log.LogAttrs(ctx, level, msg, attrs...)
}

func (s *slogObserver) NodeState(ctx context.Context, e NodeStateEvent) {
	if e.RunID == "" {
		s.backlog(ctx, e)
		return
	}
	if e.Quarantine > 0 && s.log.Enabled(ctx, slog.LevelInfo) {
		s.log.LogAttrs(ctx, slog.LevelInfo, "redlock: node quarantined", slog.String("node", e.Node),
			slog.String("run_id", e.RunID), slog.Bool("restart", e.Restart), slog.Duration("for", e.Quarantine))
	}
	for _, f := range e.Findings {
		level := slog.LevelInfo
		if f.Level == "bad" {
			level = slog.LevelWarn
		}
		if s.log.Enabled(ctx, level) {
			s.log.LogAttrs(ctx, level, "redlock: server check: "+f.Text, slog.String("node", e.Node),
				slog.String("check", f.Check), slog.String("level", f.Level), slog.String("run_id", e.RunID))
		}
	}
}

// backlog writes a release backlog change: at Warn when the release was
// given up (dropped or abandoned).
func (s *slogObserver) backlog(ctx context.Context, e NodeStateEvent) {
	level := slog.LevelDebug
	if e.Err != nil {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("lock", e.Lock.Name), slog.String("node", e.Node), slog.Int("len", e.Backlog)}
	if e.Err != nil {
		attrs = append(attrs, slog.Any("err", e.Err))
	}
	s.log.LogAttrs(ctx, level, "redlock: release backlog "+backlogChangeOf(e), attrs...)
}

// noteDenied tells the client's logger (WithLogger) at Warn that node i
// denied access when err says so (ErrNodeDenied), once per node and server
// run: the run the client last read from the node ("" before the first
// read, as when the node refuses INFO). Every call's error stays at Debug
// (slogObserver.NodeCall).
func (c *Client) noteDenied(ctx context.Context, i int, err error) {
	if err == nil || c.cfg.logger == nil || !errors.Is(err, ErrNodeDenied) {
		return
	}
	m := c.members[i]
	m.mu.Lock()
	run := m.runID
	first := !m.deniedLogged || m.deniedRun != run
	m.deniedLogged, m.deniedRun = true, run
	m.mu.Unlock()
	if first && c.cfg.logger.Enabled(ctx, slog.LevelWarn) {
		attrs := []slog.Attr{slog.String("node", m.addr)}
		if run != "" { // known once the node has answered INFO
			attrs = append(attrs, slog.String("run_id", run))
		}
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: node denied access", append(attrs, slog.Any("err", err))...)
	}
}
