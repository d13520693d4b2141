package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A link is one locker's way to one master under a condition: it dials the
// master and wraps every connection so that writes are delayed, held (the
// master hung) or refused (the master dead) as the condition says.
type link struct {
	m      Master
	delay  time.Duration
	jitter time.Duration
	fault  Fault // what start switches on

	state atomic.Int32 // the Fault now in effect

	mu      sync.Mutex
	conns   map[*faultConn]struct{}
	orphans []held // writes held on connections closed while hung
	seq     int    // connection numbers, to keep each one's writes together
}

// held is one write a hung master did not take, with when it was made.
type held struct {
	at   time.Time
	conn int
	b    []byte
}

// links builds the links of one locker: one per master, the first one
// faulted when the condition says so. It returns nil (the clients' own
// dialers) when the condition adds nothing.
func links(c Condition, ms []Master) []*link {
	if !c.wraps() {
		return nil
	}
	ls := make([]*link, len(ms))
	for i, m := range ms {
		ls[i] = &link{m: m, delay: c.Delay, jitter: c.Jitter, conns: map[*faultConn]struct{}{}}
		if i == 0 {
			ls[i].delay += c.Slow
			ls[i].fault = c.Fault
		}
	}
	return ls
}

// dialFuncs returns the links' dial functions (nil for no links).
func dialFuncs(ls []*link) []DialFunc {
	if ls == nil {
		return nil
	}
	ds := make([]DialFunc, len(ls))
	for i, l := range ls {
		ds[i] = l.dial
	}
	return ds
}

// errRefused is what dialing a dead master returns, as the kernel would.
func errRefused(addr string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED), Addr: fakeAddr(addr)}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

func (l *link) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if Fault(l.state.Load()) == Dead {
		return nil, errRefused(l.m.Addr)
	}
	conn, err := l.m.baseDial(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if Fault(l.state.Load()) == Dead { // died while dialing
		conn.Close()
		return nil, errRefused(l.m.Addr)
	}
	l.seq++
	c := &faultConn{Conn: conn, l: l, id: l.seq}
	l.conns[c] = struct{}{}
	return c, nil
}

// wait returns how long the next write waits.
func (l *link) wait() time.Duration {
	d := l.delay
	if l.jitter > 0 {
		lo := max(d-l.jitter, 0)
		d = lo + time.Duration(mrand.Int64N(int64(d+l.jitter-lo)+1))
	}
	return d
}

// start puts the link's fault in effect: a dead master's open connections
// are reset.
func (l *link) start() {
	if l.fault == NoFault {
		return
	}
	l.mu.Lock()
	l.state.Store(int32(l.fault))
	var open []*faultConn
	for c := range l.conns {
		open = append(open, c)
	}
	l.mu.Unlock()
	if l.fault == Dead {
		for _, c := range open {
			c.reset.Store(true)
			c.Conn.Close() // the server sees the connection end
		}
	}
}

// stop ends the fault: the master returns. A hung master runs what it was
// sent: first the writes of the connections closed meanwhile (on a fresh
// connection, in the order they were made), then those held on the
// connections still open (on them, so that their clients read the
// replies).
func (l *link) stop(ctx context.Context) error {
	if Fault(l.state.Load()) == NoFault {
		return nil
	}
	l.mu.Lock()
	was := Fault(l.state.Swap(int32(NoFault)))
	orphans := l.orphans
	l.orphans = nil
	var open []*faultConn
	for c := range l.conns {
		open = append(open, c)
	}
	l.mu.Unlock()
	if was != Hung {
		return nil
	}
	err := l.replay(ctx, orphans)
	for _, c := range open {
		c.mu.Lock()
		if ferr := c.flushLocked(); ferr != nil && !errors.Is(ferr, net.ErrClosed) {
			err = errors.Join(err, ferr)
		}
		c.mu.Unlock()
	}
	return err
}

// replay sends the commands of the held writes to the master on a fresh
// connection (authenticated and on the db of the master's URL), one
// connection's writes kept together, in the order they were made, and
// waits until the master has run them all.
func (l *link) replay(ctx context.Context, hs []held) error {
	if len(hs) == 0 {
		return nil
	}
	type cmd struct {
		at time.Time
		b  []byte
	}
	var cmds []cmd
	byConn := map[int][]held{}
	var order []int
	for _, h := range hs {
		if _, ok := byConn[h.conn]; !ok {
			order = append(order, h.conn)
		}
		byConn[h.conn] = append(byConn[h.conn], h)
	}
	for _, id := range order {
		var buf []byte
		var starts []int // offset of each write in buf
		for _, h := range byConn[id] {
			starts = append(starts, len(buf))
			buf = append(buf, h.b...)
		}
		for _, r := range splitCommands(buf) {
			k, _ := slices.BinarySearch(starts, r[0]+1)
			cmds = append(cmds, cmd{at: byConn[id][k-1].at, b: buf[r[0]:r[1]]})
		}
	}
	slices.SortStableFunc(cmds, func(a, b cmd) int { return a.at.Compare(b.at) })

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := l.m.baseDial(ctx)
	if err != nil {
		return fmt.Errorf("bench: replaying the hung master's writes to %s: %w", l.m.Addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var marker [8]byte
	rand.Read(marker[:])
	end := "qlbench-replayed-" + hex.EncodeToString(marker[:])
	var out bytes.Buffer
	if o := l.m.opt; o.Password != "" {
		if o.Username != "" {
			out.Write(resp("AUTH", o.Username, o.Password))
		} else {
			out.Write(resp("AUTH", o.Password))
		}
	}
	if l.m.opt.DB != 0 {
		out.Write(resp("SELECT", strconv.Itoa(l.m.opt.DB)))
	}
	for _, c := range cmds {
		out.Write(c.b)
	}
	out.Write(resp("ECHO", end))
	if _, err := conn.Write(out.Bytes()); err != nil {
		return fmt.Errorf("bench: replaying the hung master's writes to %s: %w", l.m.Addr, err)
	}
	if err := readUntil(conn, []byte(end)); err != nil {
		return fmt.Errorf("bench: replaying the hung master's writes to %s: %w", l.m.Addr, err)
	}
	return nil
}

// readUntil reads r until it has seen marker.
func readUntil(r io.Reader, marker []byte) error {
	br := bufio.NewReader(r)
	var tail []byte
	buf := make([]byte, 4096)
	for {
		n, err := br.Read(buf)
		tail = append(tail, buf[:n]...)
		if bytes.Contains(tail, marker) {
			return nil
		}
		if len(tail) > len(marker) {
			tail = tail[len(tail)-len(marker):]
		}
		if err != nil {
			return err
		}
	}
}

// resp encodes a command as a RESP array of bulk strings.
func resp(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// splitCommands returns the [start, end) offsets of the whole RESP
// commands (arrays of bulk strings) at the start of b; an incomplete or
// unreadable rest is left out.
func splitCommands(b []byte) [][2]int {
	var out [][2]int
	i := 0
	line := func() (int, bool) { // reads "<c><int>\r\n" at i
		j := bytes.Index(b[i:], []byte("\r\n"))
		if j < 2 {
			return 0, false
		}
		n, err := strconv.Atoi(string(b[i+1 : i+j]))
		if err != nil || n < 0 {
			return 0, false
		}
		i += j + 2
		return n, true
	}
	for i < len(b) {
		start := i
		if b[i] != '*' {
			return out
		}
		n, ok := line()
		if !ok {
			return out
		}
		for range n {
			if i >= len(b) || b[i] != '$' {
				return out
			}
			size, ok := line()
			if !ok || i+size+2 > len(b) {
				return out
			}
			i += size + 2
		}
		out = append(out, [2]int{start, i})
	}
	return out
}

// faultConn is a connection to a master through a link.
type faultConn struct {
	net.Conn
	l     *link
	id    int
	reset atomic.Bool // the master died while this was open

	mu   sync.Mutex
	held []held // writes a hung master has not taken yet
}

// errReset is what writing to a dead master's connection returns.
var errReset = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}

func (c *faultConn) Write(p []byte) (int, error) {
	if d := c.l.wait(); d > 0 {
		time.Sleep(d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reset.Load() {
		return 0, errReset
	}
	switch Fault(c.l.state.Load()) {
	case Hung:
		c.held = append(c.held, held{at: time.Now(), conn: c.id, b: slices.Clone(p)})
		return len(p), nil
	case Dead:
		return 0, errReset
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// flushLocked writes the held writes to the connection, in order.
func (c *faultConn) flushLocked() error {
	for len(c.held) > 0 {
		if _, err := c.Conn.Write(c.held[0].b); err != nil {
			return err
		}
		c.held = c.held[1:]
	}
	c.held = nil
	return nil
}

func (c *faultConn) Read(p []byte) (int, error) {
	if c.reset.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.reset.Load() {
		return n, io.EOF
	}
	return n, err
}

// SetDeadline, SetReadDeadline and SetWriteDeadline do nothing on a
// connection the master's death reset (its socket is still the client's).
func (c *faultConn) SetDeadline(t time.Time) error {
	if c.reset.Load() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *faultConn) SetReadDeadline(t time.Time) error {
	if c.reset.Load() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *faultConn) SetWriteDeadline(t time.Time) error {
	if c.reset.Load() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection; the writes a hung master has not taken are
// kept for when it returns (or delivered first, when it has returned).
func (c *faultConn) Close() error {
	c.mu.Lock()
	c.l.mu.Lock()
	delete(c.l.conns, c)
	if Fault(c.l.state.Load()) == Hung {
		c.l.orphans = append(c.l.orphans, c.held...)
		c.held = nil
	}
	c.l.mu.Unlock()
	_ = c.flushLocked() // the master returned while this closed: it still gets them
	c.mu.Unlock()
	return c.Conn.Close()
}
