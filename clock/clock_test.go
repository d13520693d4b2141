package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/clock"
)

func TestRealIsMonotonic(t *testing.T) {
	c := clock.Real{}
	a := c.Now()
	b := c.Now()
	assert.False(t, b.Before(a))
	assert.GreaterOrEqual(t, c.Since(a), time.Duration(0))
	// The reading carries a monotonic component: stripping it changes the
	// string form ("m=+..." suffix disappears).
	assert.Contains(t, a.String(), "m=")
	select {
	case <-c.After(time.Millisecond):
	case <-time.After(5 * time.Second):
		t.Fatal("Real.After(1ms) did not fire within 5s")
	}
}

func TestFakeAdvanceFiresTimersInOrder(t *testing.T) {
	f := clock.NewFake(time.Time{})
	start := f.Now()
	late := f.After(20 * time.Millisecond)
	early := f.After(10 * time.Millisecond)
	now := f.After(0)
	assert.Equal(t, start, <-now)
	assert.Equal(t, 2, f.Waiters())

	f.Advance(9 * time.Millisecond)
	select {
	case <-early:
		t.Fatal("timer fired before its deadline")
	default:
	}
	f.Advance(time.Millisecond)
	assert.Equal(t, start.Add(10*time.Millisecond), <-early)
	assert.Equal(t, 1, f.Waiters())
	f.Set(start.Add(time.Second))
	assert.Equal(t, start.Add(time.Second), <-late)
	assert.Equal(t, time.Second, f.Since(start))
}

func TestFakeRejectsGoingBack(t *testing.T) {
	f := clock.NewFake(time.Time{})
	require.Panics(t, func() { f.Advance(-time.Second) })
	require.Panics(t, func() { f.Set(f.Now().Add(-time.Nanosecond)) })
}

func TestFakeBlockUntilWaiters(t *testing.T) {
	f := clock.NewFake(time.Time{})
	fired := make(chan time.Time)
	go func() { fired <- <-f.After(time.Hour) }()
	f.BlockUntilWaiters(1)
	f.Advance(time.Hour)
	select {
	case got := <-fired:
		assert.Equal(t, time.Hour, got.Sub(f.Now().Add(-time.Hour)))
	case <-time.After(5 * time.Second):
		t.Fatal("goroutine waiting on Fake.After was not woken by Advance")
	}
}
