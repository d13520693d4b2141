// Package redlockprometheus records a redlock.Client's events as Prometheus
// metrics (client_golang). It is a module of its own, so that the library
// does not depend on Prometheus.
//
//	obs := redlockprometheus.New()
//	prometheus.MustRegister(obs) // or your own registry
//	client, err := redlock.New(nodes, redlock.WithObserver(obs))
//
// The metrics (docs/observability.md lists them with a dashboard query):
//
//	quorumlock_lock_wait_seconds{shape,outcome}          histogram: Lock, TryLock, Do's wait, Campaign, every attempt and backoff included
//	quorumlock_lock_attempts{shape,outcome}              histogram: the attempts of one acquisition (one round over the nodes each)
//	quorumlock_lock_extend_seconds{shape,outcome,renewal} histogram: Extend and renewals
//	quorumlock_lock_release_seconds{shape,outcome}       histogram: Unlock, Resign
//	quorumlock_lease_held_seconds{shape,end}             histogram: from acquisition to the lease's end (released, expired, lost)
//	quorumlock_node_calls_total{node,op,vote}            counter: every node call and its answer (yes, taken, timeout, ...)
//	quorumlock_node_quarantines_total{node,restart}      counter: restart quarantines started
//	quorumlock_fence_epochs_total{shape}                 counter: fencing tokens that started a new epoch
//	quorumlock_release_backlog{node}                     gauge: releases waiting for a retry
//	quorumlock_release_backlog_changes_total{node,change} counter: queued, done, dropped, abandoned
//	quorumlock_server_findings_total{node,check,level}    counter: findings of the checks of a server's settings at first contact
//
// Label values are a few each: node addresses, redlock.Op values,
// redlock.LockInfo.Shape, and what each event's Err means, derived in one
// place, the labels redlock.WithLogger writes too: outcome (ok, contended,
// no_quorum, too_late, lost, ended, canceled, closed, denied, invalid),
// vote (yes, taken, not_held, quarantined, busy, timeout, refused, denied,
// canceled, error), end (released, expired, lost) and change (queued, done,
// dropped, abandoned). Lock names are not labels (there may be millions);
// WithLockClass adds a "class" label that maps each name to a class of your
// own.
package redlockprometheus

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorumlock/quorumlock/internal/obslabel"
	"github.com/quorumlock/quorumlock/redlock"
)

// Observer is a redlock.Observer and a prometheus.Collector. Create it with
// New, register it, and give it to redlock.New with redlock.WithObserver;
// one Observer may serve several clients. It is safe for concurrent use.
type Observer struct {
	class func(name string) string

	wait, attempts, extend, release, held *prometheus.HistogramVec
	calls, quarantines, epochs, changes   *prometheus.CounterVec
	findings                              *prometheus.CounterVec
	backlog                               *prometheus.GaugeVec
}

var _ redlock.Observer = (*Observer)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	class       func(string) string
	opBuckets   []float64
	holdBuckets []float64
}

// WithLockClass adds a "class" label to every metric about a lock, whose
// value is class(lock name): map names to a few classes ("invoices:42" to
// "invoices"), never return the name itself. Default: no class label.
func WithLockClass(class func(name string) string) Option {
	return func(c *config) { c.class = class }
}

// WithBuckets sets the histogram buckets, in seconds, of the operations
// (wait, extend, release) and of the hold durations. nil keeps a default:
// DefaultOpBuckets, DefaultHoldBuckets.
func WithBuckets(ops, holds []float64) Option {
	return func(c *config) {
		if ops != nil {
			c.opBuckets = ops
		}
		if holds != nil {
			c.holdBuckets = holds
		}
	}
}

// Default buckets, in seconds: operations from 0.5 ms (a lock on loopback)
// to a minute (a long wait); holds from 10 ms to 6 hours.
var (
	DefaultOpBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	DefaultHoldBuckets = []float64{.01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600}
)

// attemptBuckets are the buckets of lock_attempts.
var attemptBuckets = []float64{1, 2, 3, 5, 10, 20, 50, 100, 1000}

const namespace = "quorumlock"

// New returns an Observer with its metrics; register it with a
// prometheus.Registerer before use.
func New(opts ...Option) *Observer {
	cfg := config{opBuckets: DefaultOpBuckets, holdBuckets: DefaultHoldBuckets}
	for _, o := range opts {
		o(&cfg)
	}
	lock := func(labels ...string) []string {
		if cfg.class != nil {
			labels = append(labels, "class")
		}
		return labels
	}
	hist := func(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	return &Observer{
		class: cfg.class,
		wait: hist("lock_wait_seconds", "Time to acquire a lock (Lock, TryLock, Do's wait, Campaign), every attempt and the backoff between them included, by how it ended.",
			cfg.opBuckets, lock("shape", "outcome")),
		attempts: hist("lock_attempts", "Attempts of one acquisition (Lock, TryLock, Do's wait, Campaign: one round over the nodes each), by how it ended.",
			attemptBuckets, lock("shape", "outcome")),
		extend: hist("lock_extend_seconds", "Time of an Extend or automatic renewal, by how it ended.",
			cfg.opBuckets, lock("shape", "outcome", "renewal")),
		release: hist("lock_release_seconds", "Time of an Unlock (or Resign), by how it ended.",
			cfg.opBuckets, lock("shape", "outcome")),
		held: hist("lease_held_seconds", "Time from a lease's acquisition to its end, by how it ended: released, expired (its validity passed unrenewed) or lost.",
			cfg.holdBuckets, lock("shape", "end")),
		calls:       counter("node_calls_total", "Calls on one node, by operation and answer (yes, taken, not_held, quarantined, busy, timeout, refused, denied, canceled, error).", lock("node", "op", "vote")),
		quarantines: counter("node_quarantines_total", "Restart quarantines started on a node (restart: a new run of a known server, else a young server met for the first time).", []string{"node", "restart"}),
		epochs:      counter("fence_epochs_total", "Fencing tokens that started a new epoch from the clock (a new lock, or counters lost or cleaned up).", lock("shape")),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "release_backlog",
			Help: "Releases waiting on a node for a retry."}, []string{"node"}),
		findings: counter("server_findings_total", "Findings (warn, bad) of the clients' checks of a server's settings (eviction policy, persistence, role, version), made once per run of the server at first contact.", []string{"node", "check", "level"}),
		changes:  counter("release_backlog_changes_total", "Changes of a node's release backlog: queued, done, dropped (cap or denied), abandoned (Close gave up).", lock("node", "change")),
	}
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.wait, o.attempts, o.extend, o.release, o.held, o.calls, o.quarantines, o.epochs, o.backlog, o.changes, o.findings}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

// labels returns values plus the lock's class when WithLockClass is set.
func (o *Observer) labels(l redlock.LockInfo, values ...string) []string {
	if o.class != nil {
		values = append(values, o.class(l.Name))
	}
	return values
}

// OpStart implements redlock.Observer: nothing to record yet.
func (o *Observer) OpStart(ctx context.Context, _ redlock.OpEvent) context.Context { return ctx }

// OpDone implements redlock.Observer.
func (o *Observer) OpDone(_ context.Context, e redlock.OpEvent) {
	s := e.Took.Seconds()
	outcome := obslabel.Outcome(e.Err)
	switch e.Op {
	case redlock.OpAcquire:
		o.wait.WithLabelValues(o.labels(e.Lock, e.Lock.Shape, outcome)...).Observe(s)
		o.attempts.WithLabelValues(o.labels(e.Lock, e.Lock.Shape, outcome)...).Observe(float64(e.Attempts))
		if e.FenceEpoch {
			o.epochs.WithLabelValues(o.labels(e.Lock, e.Lock.Shape)...).Inc()
		}
	case redlock.OpExtend:
		o.extend.WithLabelValues(o.labels(e.Lock, e.Lock.Shape, outcome, strconv.FormatBool(e.Renewal))...).Observe(s)
	case redlock.OpRelease:
		o.release.WithLabelValues(o.labels(e.Lock, e.Lock.Shape, outcome)...).Observe(s)
	}
}

// NodeCall implements redlock.Observer.
func (o *Observer) NodeCall(_ context.Context, e redlock.NodeEvent) {
	o.calls.WithLabelValues(o.labels(e.Lock, e.Node, string(e.Op), obslabel.Vote(e.Err))...).Inc()
}

// LeaseEnd implements redlock.Observer.
func (o *Observer) LeaseEnd(_ context.Context, e redlock.LeaseEndEvent) {
	o.held.WithLabelValues(o.labels(e.Lock, e.Lock.Shape, obslabel.LeaseEnd(e.Err, e.Expired))...).Observe(e.Held.Seconds())
}

// NodeState implements redlock.Observer: a server run met (its quarantine,
// one count per finding), or a backlog change.
func (o *Observer) NodeState(_ context.Context, e redlock.NodeStateEvent) {
	if e.RunID != "" {
		if e.Quarantine > 0 {
			o.quarantines.WithLabelValues(e.Node, strconv.FormatBool(e.Restart)).Inc()
		}
		for _, f := range e.Findings {
			o.findings.WithLabelValues(e.Node, f.Check, f.Level).Inc()
		}
		return
	}
	o.backlog.WithLabelValues(e.Node).Add(float64(e.Delta)) // summed over the clients that share the Observer
	o.changes.WithLabelValues(o.labels(e.Lock, e.Node, obslabel.BacklogChange(e.Err, e.Delta))...).Inc()
}
