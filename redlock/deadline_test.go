package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeadlineCtxEndsAtItsDeadline(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	var c deadlineCtx
	c.init(parent, time.Now().Add(time.Millisecond))
	if d, ok := c.Deadline(); !ok || d.IsZero() {
		t.Fatalf("Deadline() = %v, %v", d, ok)
	}
	if c.Value(key{}) != "v" {
		t.Fatal("Value does not reach the parent's values")
	}
	child, cancel := context.WithCancel(&c)
	defer cancel()
	<-c.Done()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", c.Err())
	}
	<-child.Done() // propagated through AfterFunc
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("child Err() = %v", child.Err())
	}
	c.stop() // after the end: no effect
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() after stop = %v, want DeadlineExceeded still", c.Err())
	}
}

func TestDeadlineCtxStop(t *testing.T) {
	var c deadlineCtx
	c.init(context.Background(), time.Now().Add(time.Hour))
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	ran := make(chan struct{})
	unregister := c.AfterFunc(func() { t.Error("unregistered func ran") })
	c.AfterFunc(func() { close(ran) })
	if !unregister() {
		t.Fatal("AfterFunc's stop before the end returned false")
	}
	child, cancel := context.WithTimeout(&c, time.Hour)
	defer cancel()
	c.stop()
	<-c.Done()
	<-ran
	<-child.Done()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err() = %v, want Canceled", c.Err())
	}
	if unregister() {
		t.Fatal("stop after the end returned true")
	}
	done := make(chan struct{})
	c.AfterFunc(func() { close(done) }) // registered after the end: runs at once
	<-done
}

func TestDeadlineCtxKeepsAnEarlierParentDeadline(t *testing.T) {
	early := time.Now().Add(time.Minute)
	var c deadlineCtx
	c.init(noDoneDeadline{early}, time.Now().Add(time.Hour))
	defer c.stop()
	if d, _ := c.Deadline(); !d.Equal(early) {
		t.Fatalf("Deadline() = %v, want the parent's %v", d, early)
	}
}

// noDoneDeadline is a context with a deadline it never enforces.
type noDoneDeadline struct{ d time.Time }

func (n noDoneDeadline) Deadline() (time.Time, bool) { return n.d, true }
func (noDoneDeadline) Done() <-chan struct{}         { return nil }
func (noDoneDeadline) Err() error                    { return nil }
func (noDoneDeadline) Value(any) any                 { return nil }
