// Package redisinfo reads a server's identity from Redis's INFO text, the
// way the coordinator's restart quarantine needs it (redlock.ServerInfo).
// redisnode parses real servers' replies with it, and memnode renders its
// own state as the same text, so that both report uptime as Redis does.
package redisinfo

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/nodecheck"
	"github.com/quorumlock/quorumlock/redlock"
)

// Parse reads the identity of the server that wrote text, the INFO server
// and replication sections (addr names it in errors). RunID is run_id.
// Uptime is uptime_in_seconds less one second, because Redis counts it from
// its start time truncated to the second (the real uptime may be up to 1s
// less, and the restart quarantine must never think a server older than it
// is), and 0 on a master promoted from a replica (master_replid2 set): it
// may lack keys written on the old master until its promotion, at a time
// INFO does not give. Settings holds the fields of nodecheck.Fields that
// text has (nil when it has none).
func Parse(addr, text string) (redlock.ServerInfo, error) {
	var si redlock.ServerInfo
	promoted := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		if slices.Contains(nodecheck.Fields, k) {
			if si.Settings == nil {
				si.Settings = make(map[string]string, len(nodecheck.Fields))
			}
			si.Settings[k] = v
		}
		switch k {
		case "run_id":
			si.RunID = v
		case "uptime_in_seconds":
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return si, fmt.Errorf("%s: bad uptime_in_seconds %q in INFO server", addr, v)
			}
			// Redis counts it from its start time truncated to the
			// second: the real uptime may be up to 1s less.
			if !knobs.RawUptime.Load() { // test-only: INFO's figure as it is
				s = max(s-1, 0)
			}
			si.Uptime = time.Duration(s) * time.Second
		case "master_replid2":
			promoted = v != "" && v != nodecheck.NoReplID
		}
	}
	if promoted {
		si.Uptime = 0
	}
	if si.RunID == "" {
		return si, fmt.Errorf("%s: INFO server has no run_id", addr)
	}
	return si, nil
}
