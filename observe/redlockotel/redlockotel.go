// Package redlockotel records a redlock.Client's events as OpenTelemetry
// spans and metrics. It is a module of its own, so that the library does
// not depend on OpenTelemetry.
//
//	obs, err := redlockotel.New() // the global TracerProvider and MeterProvider
//	client, err := redlock.New(nodes, redlock.WithObserver(obs))
//
// # Spans
//
// Every lock operation is a span: quorumlock.acquire (Lock, TryLock, Do's
// wait, Campaign: the whole wait, every attempt included), quorumlock.extend
// (Extend and renewals) and quorumlock.release (Unlock, Resign). Their
// attributes are quorumlock.lock.name, quorumlock.lock.shape,
// quorumlock.outcome, and quorumlock.attempts, quorumlock.fence.token and
// quorumlock.renewal where they apply; a failed operation records its error
// and has status Error. Each node's answer (quorumlock.node.call), a
// fencing token that started a new epoch (quorumlock.fence.epoch on the
// acquire span) and the lease's end are span events or attributes. The node calls run under the operation's context, so the spans
// of the node's own client become the operation's children: add go-redis's
// redisotel tracing hook to the clients you give redisnode.New (the
// package Example shows it). There are no per-command metrics here:
// redisotel has those.
//
// # Metrics
//
// Instrument names, units and attributes (no OpenTelemetry convention for
// locks exists; docs/observability.md lists them with a dashboard query):
//
//	quorumlock.lock.wait.duration     s          histogram  quorumlock.lock.shape, quorumlock.outcome
//	quorumlock.lock.attempts          {attempt}  histogram  quorumlock.lock.shape, quorumlock.outcome
//	quorumlock.lock.extend.duration   s          histogram  quorumlock.lock.shape, quorumlock.outcome, quorumlock.renewal
//	quorumlock.lock.release.duration  s          histogram  quorumlock.lock.shape, quorumlock.outcome
//	quorumlock.lease.hold.duration    s          histogram  quorumlock.lock.shape, quorumlock.lease.end
//	quorumlock.node.calls             {call}     counter    quorumlock.node, quorumlock.node.op, quorumlock.vote
//	quorumlock.node.quarantines       {quarantine} counter  quorumlock.node, quorumlock.quarantine.restart
//	quorumlock.fence.epochs           {epoch}    counter    quorumlock.lock.shape
//	quorumlock.release.backlog        {release}  updown     quorumlock.node
//	quorumlock.release.backlog.changes {change}  counter    quorumlock.node, quorumlock.backlog.change
//	quorumlock.server.findings        {finding}  counter    quorumlock.node, quorumlock.check, quorumlock.check.level
//
// Attribute values are a few each: node addresses, redlock.Op values,
// redlock.LockInfo.Shape, and what each event's Err means, derived in one
// place, the labels redlock.WithLogger writes too: quorumlock.outcome (ok,
// contended, no_quorum, too_late, lost, ended, canceled, closed, denied,
// invalid), quorumlock.vote (yes, taken, not_held, quarantined, busy,
// timeout, refused, denied, canceled, error), quorumlock.lease.end
// (released, expired, lost) and quorumlock.backlog.change (queued, done,
// dropped, abandoned). Lock names go on spans only; WithLockClass adds
// quorumlock.lock.class to the metrics about a lock.
package redlockotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/internal/obslabel"
	"github.com/quorumlock/quorumlock/redlock"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/quorumlock/quorumlock/observe/redlockotel"

// Span names.
const (
	SpanAcquire = "quorumlock.acquire"
	SpanExtend  = "quorumlock.extend"
	SpanRelease = "quorumlock.release"
)

// Attribute keys.
const (
	AttrLockName   = attribute.Key("quorumlock.lock.name")
	AttrLockShape  = attribute.Key("quorumlock.lock.shape")
	AttrLockClass  = attribute.Key("quorumlock.lock.class")
	AttrOutcome    = attribute.Key("quorumlock.outcome")
	AttrAttempts   = attribute.Key("quorumlock.attempts")
	AttrRenewal    = attribute.Key("quorumlock.renewal")
	AttrFenceToken = attribute.Key("quorumlock.fence.token")
	AttrFenceEpoch = attribute.Key("quorumlock.fence.epoch")
	AttrLeaseEnd   = attribute.Key("quorumlock.lease.end")
	AttrNode       = attribute.Key("quorumlock.node")
	AttrNodeOp     = attribute.Key("quorumlock.node.op")
	AttrVote       = attribute.Key("quorumlock.vote")
	AttrRestart    = attribute.Key("quorumlock.quarantine.restart")
	AttrChange     = attribute.Key("quorumlock.backlog.change")
	AttrCheck      = attribute.Key("quorumlock.check")
	AttrCheckLevel = attribute.Key("quorumlock.check.level")
)

// Observer is a redlock.Observer that records spans and metrics. Create it
// with New and give it to redlock.New with redlock.WithObserver; one
// Observer may serve several clients. It is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	class  func(string) string

	wait, extend, release, held         metric.Float64Histogram
	attempts                            metric.Int64Histogram
	calls, quarantines, epochs, changes metric.Int64Counter
	findings                            metric.Int64Counter
	backlog                             metric.Int64UpDownCounter
}

var _ redlock.Observer = (*Observer)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	class func(string) string
}

// WithTracerProvider sets the TracerProvider. Default: otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the MeterProvider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithLockClass adds the attribute quorumlock.lock.class, class(lock name),
// to every metric about a lock: map names to a few classes ("invoices:42" to
// "invoices"), never return the name itself. Default: none.
func WithLockClass(class func(name string) string) Option {
	return func(c *config) { c.class = class }
}

// Histogram bucket boundaries, in seconds: operations from 0.5 ms to a
// minute, holds from 10 ms to 6 hours.
var (
	opBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets = []float64{.01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600}
	// attemptBuckets are the boundaries of quorumlock.lock.attempts.
	attemptBuckets = []float64{1, 2, 3, 5, 10, 20, 50, 100, 1000}
)

// New returns an Observer. Its error comes from the MeterProvider, which
// refused an instrument.
func New(opts ...Option) (*Observer, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	m := cfg.mp.Meter(ScopeName)
	o := &Observer{tracer: cfg.tp.Tracer(ScopeName), class: cfg.class}
	var errs []error
	hist := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.wait = hist("quorumlock.lock.wait.duration", "Time to acquire a lock (Lock, TryLock, Do's wait, Campaign), every attempt and the backoff between them included.", opBuckets)
	var err error
	o.attempts, err = m.Int64Histogram("quorumlock.lock.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts of one acquisition (one round over the nodes each)."), metric.WithExplicitBucketBoundaries(attemptBuckets...))
	errs = append(errs, err)
	o.extend = hist("quorumlock.lock.extend.duration", "Time of an Extend or automatic renewal.", opBuckets)
	o.release = hist("quorumlock.lock.release.duration", "Time of an Unlock or Resign.", opBuckets)
	o.held = hist("quorumlock.lease.hold.duration", "Time from a lease's acquisition to its end (released, expired or lost).", holdBuckets)
	o.calls = counter("quorumlock.node.calls", "{call}", "Calls on one node, by operation and answer.")
	o.quarantines = counter("quorumlock.node.quarantines", "{quarantine}", "Restart quarantines started on a node.")
	o.epochs = counter("quorumlock.fence.epochs", "{epoch}", "Fencing tokens that started a new epoch from the clock.")
	o.findings = counter("quorumlock.server.findings", "{finding}", "Findings (warn, bad) of the clients' checks of a server's settings, made once per run of the server at first contact.")
	o.changes = counter("quorumlock.release.backlog.changes", "{change}", "Changes of a node's release backlog: queued, done, dropped, abandoned.")
	o.backlog, err = m.Int64UpDownCounter("quorumlock.release.backlog", metric.WithUnit("{release}"), metric.WithDescription("Releases waiting on a node for a retry."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("redlockotel: %w", err)
		}
	}
	return o, nil
}

// lockAttrs returns the metric attributes of an event about lock l.
func (o *Observer) lockAttrs(l redlock.LockInfo, kv ...attribute.KeyValue) metric.MeasurementOption {
	kv = append(kv, AttrLockShape.String(l.Shape))
	if o.class != nil {
		kv = append(kv, AttrLockClass.String(o.class(l.Name)))
	}
	return metric.WithAttributes(kv...)
}

// OpStart implements redlock.Observer: it starts the operation's span.
func (o *Observer) OpStart(ctx context.Context, e redlock.OpEvent) context.Context {
	attrs := []attribute.KeyValue{AttrLockName.String(e.Lock.Name), AttrLockShape.String(e.Lock.Shape)}
	if e.Op == redlock.OpExtend {
		attrs = append(attrs, AttrRenewal.Bool(e.Renewal))
	}
	ctx, _ = o.tracer.Start(ctx, "quorumlock."+string(e.Op), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx
}

// OpDone implements redlock.Observer: it ends the operation's span and
// records its duration.
func (o *Observer) OpDone(ctx context.Context, e redlock.OpEvent) {
	s := e.Took.Seconds()
	label := obslabel.Outcome(e.Err)
	outcome := AttrOutcome.String(label)
	switch e.Op {
	case redlock.OpAcquire:
		o.wait.Record(ctx, s, o.lockAttrs(e.Lock, outcome))
		o.attempts.Record(ctx, int64(e.Attempts), o.lockAttrs(e.Lock, outcome))
		if e.FenceEpoch {
			o.epochs.Add(ctx, 1, o.lockAttrs(e.Lock))
		}
	case redlock.OpExtend:
		o.extend.Record(ctx, s, o.lockAttrs(e.Lock, outcome, AttrRenewal.Bool(e.Renewal)))
	case redlock.OpRelease:
		o.release.Record(ctx, s, o.lockAttrs(e.Lock, outcome))
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(outcome)
	if e.Op == redlock.OpAcquire {
		span.SetAttributes(AttrAttempts.Int(e.Attempts))
	}
	if e.Fence != 0 {
		span.SetAttributes(AttrFenceToken.Int64(e.Fence))
		if e.Op == redlock.OpAcquire {
			span.SetAttributes(AttrFenceEpoch.Bool(e.FenceEpoch))
		}
	}
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, label)
	}
	span.End()
}

// NodeCall implements redlock.Observer.
func (o *Observer) NodeCall(ctx context.Context, e redlock.NodeEvent) {
	vote := AttrVote.String(obslabel.Vote(e.Err))
	o.calls.Add(ctx, 1, o.lockAttrs(e.Lock, AttrNode.String(e.Node), AttrNodeOp.String(string(e.Op)), vote))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{AttrNode.String(e.Node), AttrNodeOp.String(string(e.Op)), vote,
			attribute.Float64("quorumlock.took_ms", float64(e.Took.Microseconds())/1000)}
		if e.Err != nil {
			attrs = append(attrs, attribute.String("error.message", e.Err.Error()))
		}
		span.AddEvent("quorumlock.node.call", trace.WithAttributes(attrs...))
	}
}

// LeaseEnd implements redlock.Observer.
func (o *Observer) LeaseEnd(ctx context.Context, e redlock.LeaseEndEvent) {
	end := AttrLeaseEnd.String(obslabel.LeaseEnd(e.Err, e.Expired))
	o.held.Record(ctx, e.Held.Seconds(), o.lockAttrs(e.Lock, end))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("quorumlock.lease.end", trace.WithAttributes(end, attribute.Float64("quorumlock.held_s", e.Held.Seconds())))
	}
}

// NodeState implements redlock.Observer: a server run met (its quarantine,
// and one count per finding, each also a span event when ctx has a
// recording span), or a backlog change.
func (o *Observer) NodeState(ctx context.Context, e redlock.NodeStateEvent) {
	if e.RunID == "" {
		if e.Delta != 0 {
			o.backlog.Add(ctx, int64(e.Delta), metric.WithAttributes(AttrNode.String(e.Node)))
		}
		o.changes.Add(ctx, 1, o.lockAttrs(e.Lock, AttrNode.String(e.Node), AttrChange.String(obslabel.BacklogChange(e.Err, e.Delta))))
		return
	}
	span := trace.SpanFromContext(ctx)
	if e.Quarantine > 0 {
		o.quarantines.Add(ctx, 1, metric.WithAttributes(AttrNode.String(e.Node), AttrRestart.Bool(e.Restart)))
		if span.IsRecording() {
			span.AddEvent("quorumlock.quarantine", trace.WithAttributes(AttrNode.String(e.Node), AttrRestart.Bool(e.Restart),
				attribute.Float64("quorumlock.quarantine_s", e.Quarantine.Seconds())))
		}
	}
	for _, f := range e.Findings {
		o.findings.Add(ctx, 1, metric.WithAttributes(AttrNode.String(e.Node), AttrCheck.String(f.Check), AttrCheckLevel.String(f.Level)))
		if span.IsRecording() {
			span.AddEvent("quorumlock.server_check", trace.WithAttributes(AttrNode.String(e.Node), AttrCheck.String(f.Check),
				AttrCheckLevel.String(f.Level), attribute.String("quorumlock.check.text", f.Text)))
		}
	}
}
