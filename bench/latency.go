package bench

import (
	"context"
	"net"
	"time"
)

// A Condition is the network the contenders run on.
type Condition struct {
	// Name identifies the condition in rows; it holds no ':'.
	Name string
	// Delay, when positive, is added in the client to every request on
	// every connection to every node: each Write to the socket starts
	// Delay later (time.Sleep in a net.Conn wrapper that the go-redis
	// Dialer and the rueidis DialCtxFn return). The kernel of the machine
	// this was written on has no netem, and a userspace proxy would burn
	// the measured cores. A go-redis client writes one
	// command (or one pipeline) per Write, rueidis one flush of its
	// pipeline; the server and its replies are not delayed.
	Delay time.Duration
}

// Healthy is loopback as it is.
var Healthy = Condition{Name: "healthy"}

// Delayed is loopback with d added in the client before every write to
// every node (see Condition.Delay).
func Delayed(d time.Duration) Condition {
	return Condition{Name: "delay-" + d.String(), Delay: d}
}

// Dialer returns the dial function of the condition: nil (the clients'
// own) when there is no delay.
func (c Condition) Dialer() DialFunc {
	if c.Delay <= 0 {
		return nil
	}
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &delayConn{Conn: conn, delay: c.Delay}, nil
	}
}

// delayConn holds every Write back by delay.
type delayConn struct {
	net.Conn
	delay time.Duration
}

func (c *delayConn) Write(p []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Write(p)
}
