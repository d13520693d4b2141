// Package obslabel gives the observe modules (observe/redlockprometheus,
// observe/redlockotel) the labels that package redlock's own logger
// (WithLogger) derives from its events' errors, so that logs and metrics
// classify every event in one place: redlock's observer.go, which sets
// these functions when it is initialised (any program that receives
// redlock's events has imported it). They are safe for concurrent use.
package obslabel

// The labels, each a few values (a metric label):
var (
	// Outcome labels an operation's error (OpEvent.Err): "ok", "canceled",
	// "closed", "invalid", "ended", "lost", "too_late", "denied",
	// "contended" or "no_quorum".
	Outcome func(err error) string
	// Vote labels one node's result (NodeEvent.Err): "yes", "taken",
	// "not_held", "quarantined", "busy", "denied", "timeout", "canceled",
	// "refused" or "error".
	Vote func(err error) string
	// LeaseEnd labels a lease's end (LeaseEndEvent.Err and Expired):
	// "released", "expired" or "lost".
	LeaseEnd func(err error, expired bool) string
	// BacklogChange labels a release backlog change (NodeStateEvent.Err
	// and Delta): "queued", "done", "dropped" or "abandoned".
	BacklogChange func(err error, delta int) string
)
