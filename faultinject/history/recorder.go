package history

import "sync"

// Recorder collects the events of one run, in recording order. It is safe
// for concurrent use; the zero value is ready to use.
type Recorder struct {
	mu     sync.Mutex
	events []Event
	acq    int
}

// Add appends e.
func (h *Recorder) Add(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	if e.Kind == Acquired {
		h.acq++
	}
}

// Acquisitions returns how many Acquired events were added.
func (h *Recorder) Acquisitions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acq
}

// Events returns a copy of the events.
func (h *Recorder) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}
