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

// Parse reads the identity of the server that wrote text, the INFO server,
// replication and cpu sections (addr names it in errors). RunID is run_id.
//
// Uptime is a lower bound of how long the run has held its data that no
// clock step can inflate: the CPU time of the server's main thread
// (used_cpu_sys_main_thread + used_cpu_user_main_thread), which one thread
// cannot accumulate faster than real time passes, and which only grows.
// Redis's own uptime_in_seconds is its wall clock's now less its wall
// clock's start, so a clock stepped forward after the start (chrony's
// makestep at boot, when the hardware clock lags) inflates it without
// bound: a client meeting that run for the first time would end the
// restart quarantine at once (docs/algorithm.md, "Restart quarantine").
// Uptime is the smaller of the two (uptime_in_seconds less one second,
// because Redis counts it from its start time truncated to the second), 0
// without the main thread's CPU time (Redis before 6.2; builds without
// per-thread CPU accounting, such as macOS), and 0 on a master
// promoted from a replica (master_replid2 set): it may lack keys written on
// the old master until its promotion, at a time INFO does not give.
// Settings holds the fields of nodecheck.Fields that text has (nil when it
// has none).
func Parse(addr, text string) (redlock.ServerInfo, error) {
	var si redlock.ServerInfo
	promoted := false
	var wall, cpu time.Duration
	cpuFields := 0
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
				return si, fmt.Errorf("%s: bad uptime_in_seconds %q in INFO server", addr, bound(v))
			}
			// Redis counts it from its start time truncated to the
			// second: the real uptime may be up to 1s less.
			if !knobs.RawUptime.Load() { // test-only: INFO's figure as it is
				s = max(s-1, 0)
			}
			wall = time.Duration(s) * time.Second
		case "used_cpu_sys_main_thread", "used_cpu_user_main_thread":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0) || f > 1e12 {
				return si, fmt.Errorf("%s: bad %s %q in INFO cpu", addr, k, bound(v))
			}
			cpu += time.Duration(f * float64(time.Second))
			cpuFields++
		case "master_replid2":
			promoted = v != "" && v != nodecheck.NoReplID
		}
	}
	switch {
	case knobs.WallUptime.Load(): // test-only: the wall clock's uptime alone
		si.Uptime = wall
	case cpuFields == 2:
		si.Uptime = min(wall, cpu)
	}
	if promoted {
		si.Uptime = 0
	}
	if si.RunID == "" {
		return si, fmt.Errorf("%s: INFO server has no run_id", addr)
	}
	return si, nil
}

// bound keeps a value quoted in an error short.
func bound(v string) string {
	if len(v) > 32 {
		return v[:32] + "..."
	}
	return v
}
