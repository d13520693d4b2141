package redisnode

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oldInfoServer is a stand-in for a Redis 6 server as far as INFO goes: it
// refuses INFO with two sections (wrong arity, as Redis before 7.0 does) and
// answers INFO without arguments with its default sections. It records the
// INFO commands it got.
type oldInfoServer struct {
	ln   net.Listener
	mu   sync.Mutex
	asks []string
	wg   sync.WaitGroup
}

func startOldInfoServer(t *testing.T) *oldInfoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &oldInfoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

// serve answers RESP2 commands on c until it closes.
func (s *oldInfoServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		reply := "+OK\r\n"
		if strings.EqualFold(args[0], "HELLO") { // a RESP2 map: a flat array
			reply = "*2\r\n$6\r\nserver\r\n$5\r\nredis\r\n"
		}
		if strings.EqualFold(args[0], "INFO") {
			s.mu.Lock()
			s.asks = append(s.asks, strings.Join(args, " "))
			s.mu.Unlock()
			if len(args) > 2 {
				reply = "-ERR wrong number of arguments for 'info' command\r\n"
			} else {
				text := "# Server\r\nredis_version:6.2.14\r\nrun_id:0123456789abcdef\r\nuptime_in_seconds:100\r\n\r\n# Replication\r\nrole:master\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n\r\n# CPU\r\nused_cpu_sys_main_thread:40.250000\r\nused_cpu_user_main_thread:9.750000\r\n"
				reply = fmt.Sprintf("$%d\r\n%s\r\n", len(text), text)
			}
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		if _, err := r.ReadString('\n'); err != nil { // $len
			return nil, err
		}
		v, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		args[i] = strings.TrimSuffix(v, "\r\n")
	}
	return args, nil
}

// A server that takes one INFO section per command (Redis before 7.0) is
// still identified: the wrong-arity reply to INFO server replication is
// followed by a plain INFO.
func TestInfoOnAServerWithOneSectionPerInfo(t *testing.T) {
	s := startOldInfoServer(t)
	n, err := Dial(s.ln.Addr().String())
	require.NoError(t, err)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := n.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef", info.RunID)
	assert.Equal(t, 50*time.Second, info.Uptime, "the main thread's CPU time (below uptime_in_seconds less one second)")
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Equal(t, []string{"info server replication memory persistence cpu", "info"}, s.asks)
}
