package redisnode

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// blackhole is a TCP proxy whose current connections can be made to drop
// every byte without closing (a dead peer behind a silent network: no RST,
// no FIN); later connections pass.
type blackhole struct {
	ln    net.Listener
	up    string
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]*bool // -> dropping
}

func newBlackhole(t *testing.T, upstream string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackhole{ln: ln, up: upstream, conns: map[net.Conn]*bool{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *blackhole) Addr() string { return b.ln.Addr().String() }

func (b *blackhole) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", b.up)
		if err != nil {
			_ = c.Close()
			continue
		}
		drop := new(bool)
		b.mu.Lock()
		b.conns[c], b.conns[u] = drop, drop
		b.mu.Unlock()
		b.wg.Add(2)
		go b.pipe(c, u, drop)
		go b.pipe(u, c, drop)
	}
}

// pipe copies from src to dst until either closes, dropping the bytes
// while *drop is set.
func (b *blackhole) pipe(src, dst net.Conn, drop *bool) {
	defer b.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		b.mu.Lock()
		dropping := *drop
		b.mu.Unlock()
		if n > 0 && !dropping {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = src.Close()
			}
			return
		}
	}
}

// drop makes every current connection silent.
func (b *blackhole) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.conns {
		*d = true
	}
}

func (b *blackhole) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// A watch connection that goes silent (no RST, no FIN) does not wedge the
// reader: its health check gets no answer to a PING, drops the connection
// and subscribes again on a new one, so notifications come back.
func TestWatchSurvivesASilentConnection(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	bh := newBlackhole(t, srv.Addr())
	watcher := dialT(t, bh.Addr())
	locker := dialT(t, srv.Addr())
	got, _ := watchT(t, watcher, "locks:h")
	cycle := func() {
		t.Helper()
		handOverT(t, locker, "locks:h", "v")
		takeOverT(t, locker, "locks:h") // publishes nothing: nobody waits
	}
	cycle()
	require.Equal(t, "waiter\nwaiter", nextT(t, got))

	bh.drop()
	var heard []string
	for i := 0; i < 600 && len(heard) < 2; i++ { // until the reader subscribed again on a new connection
		cycle()
		select {
		case s := <-got:
			heard = append(heard, s)
		case <-time.After(50 * time.Millisecond):
		}
	}
	require.Len(t, heard, 2, "no notification after the watch connection went silent")
	assert.Equal(t, wire.Resync, heard[0], "what was published while the connection was silent is lost: the watcher hears so first")
	assert.Equal(t, "waiter\nwaiter", heard[1])
}

// When the watch connection breaks (here the server kills it), go-redis
// subscribes again on a new one, and every watcher of the Node hears
// wire.Resync: a release published in between reached nobody.
func TestWatchResyncsAfterAReconnect(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	admin := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	got, _ := watchT(t, n, "locks:r")
	other, _ := watchT(t, n, "locks:o")
	require.NoError(t, admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	assert.Equal(t, wire.Resync, nextT(t, got))
	assert.Equal(t, wire.Resync, nextT(t, other))

	// Subscribed again: releases are reported as before.
	handOverT(t, n, "locks:r", "v")
	assert.Equal(t, "waiter\nwaiter", nextT(t, got))
	requireNone(t, other, "nothing else for the other key")
}
