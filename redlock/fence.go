package redlock

// Fence returns the lease's fencing token and true when its mutex was
// made with WithFencing, and 0 and false otherwise: a lease without fencing
// has no token, and a resource must not be handed one. With fencing the
// token is at least 1 and greater than the token of every lease of this lock
// granted before it (docs/algorithm.md, "Fencing tokens"). Pass it with every
// write to the protected resource, which must refuse a token lower than the
// highest it has seen (memnode.FencedStore is such a resource for tests).
func (l *Lease) Fence() (token int64, ok bool) {
	if !l.m.cfg.fencing {
		return 0, false
	}
	return l.fence, true
}
