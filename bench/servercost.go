package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverMeter reads what the masters themselves spend, from a connection
// of its own to each master (outside any condition's link):
//
//   - CPU: the main thread's CPU time, INFO cpu used_cpu_sys_main_thread +
//     used_cpu_user_main_thread (the process's used_cpu_sys + used_cpu_user
//     where the server lacks them). This is the server's whole cost of a
//     cycle, its network I/O included: on a machine whose cores the
//     masters share with the client, the client's latency.
//   - scripts: the time the server spent running Lua, INFO commandstats'
//     usec of eval, evalsha, eval_ro, evalsha_ro and fcall, fcall_ro (a
//     script's usec include the commands it calls; commandstats also count
//     those commands again under their own names, so the other commands
//     are not summed).
//
// A master that refuses INFO (an ACL without +info) makes the figures
// unknown for every entry that uses it.
type serverMeter struct {
	clients []*redis.Client
}

func newServerMeter(ms []Master) *serverMeter {
	m := &serverMeter{}
	for _, ma := range ms {
		m.clients = append(m.clients, redis.NewClient(ma.GoRedisOptions(nil)))
	}
	return m
}

func (m *serverMeter) close() error {
	var err error
	for _, c := range m.clients {
		err = errors.Join(err, c.Close())
	}
	return err
}

// serverCost is what the first n masters had spent at a reading.
type serverCost struct {
	cpu, scripts time.Duration
}

// read sums the first n masters' readings.
func (m *serverMeter) read(ctx context.Context, n int) (serverCost, error) {
	var sum serverCost
	for _, c := range m.clients[:n] {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := c.Info(ctx, "cpu", "commandstats").Result()
		cancel()
		if err != nil {
			return serverCost{}, err
		}
		v := parseServerCost(s)
		sum.cpu += v.cpu
		sum.scripts += v.scripts
	}
	return sum, nil
}

// scriptCommands are the commandstats entries that run a script.
var scriptCommands = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// parseServerCost reads INFO cpu and commandstats (see serverMeter).
func parseServerCost(info string) serverCost {
	var v serverCost
	f := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if name, rest, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(name, "used_cpu_") {
			if x, err := strconv.ParseFloat(rest, 64); err == nil {
				f[name] = x
			}
			continue
		}
		stat, isStat := strings.CutPrefix(line, "cmdstat_")
		cmd, rest, ok := strings.Cut(stat, ":")
		if !isStat || !ok || !scriptCommands[cmd] {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if u, ok := strings.CutPrefix(kv, "usec="); ok {
				if x, err := strconv.ParseInt(u, 10, 64); err == nil {
					v.scripts += time.Duration(x) * time.Microsecond
				}
			}
		}
	}
	secs := f["used_cpu_sys_main_thread"] + f["used_cpu_user_main_thread"]
	if _, ok := f["used_cpu_sys_main_thread"]; !ok {
		secs = f["used_cpu_sys"] + f["used_cpu_user"]
	}
	v.cpu = time.Duration(secs * float64(time.Second))
	return v
}

// serverTally adds up an entry's server cost over its slices.
type serverTally struct {
	cost serverCost
	err  error // a reading failed: cost is unknown
}

// add adds what the first n masters spent since the reading before (taken
// before the slice, with its error err0).
func (t *serverTally) add(ctx context.Context, meter *serverMeter, n int, before serverCost, err0 error) {
	after, err := meter.read(ctx, n)
	if err = errors.Join(err0, err); err != nil {
		t.err = err
		return
	}
	t.cost.cpu += after.cpu - before.cpu
	t.cost.scripts += after.scripts - before.scripts
}

// fill sets r's server figures per cycle (cycles > 0), unless unknown.
func (t *serverTally) fill(r *Row, cycles int) {
	if t.err != nil || cycles <= 0 {
		return
	}
	r.ServerCPUPerCycleUs = float64(t.cost.cpu.Microseconds()) / float64(cycles)
	r.ScriptUsPerCycle = float64(t.cost.scripts.Microseconds()) / float64(cycles)
}
