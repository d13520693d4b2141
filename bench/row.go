package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A Row holds the figures of one contender with N masters under one
// condition. Rows of the contention measurement have Clients > 0 and the
// condition "contention-<clients>"; their figures are per acquisition.
type Row struct {
	Contender string `json:"contender"`
	N         int    `json:"n"`
	Condition string `json:"condition"`
	// Cycles counts the measured lock+unlock cycles that succeeded (under
	// contention: the acquisitions); Errors those that failed (Err is the
	// first failure).
	Cycles int `json:"cycles"`
	Errors int `json:"errors"`
	// Latency of one successful lock+unlock cycle, in milliseconds (under
	// contention: the wait, from the moment a client wants the lock, i.e.
	// its previous Unlock returned, to its Lock returning).
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// CyclesPerSec is Cycles over the time spent in the contender's
	// slices of rounds (one goroutine: the inverse of the mean latency).
	CyclesPerSec float64 `json:"cycles_per_sec"`
	// AllocsPerCycle and BytesPerCycle are the process's heap allocations
	// (runtime.MemStats Mallocs and TotalAlloc) during the contender's
	// slices, background goroutines of its clients included, per cycle.
	AllocsPerCycle float64 `json:"allocs_per_cycle"`
	BytesPerCycle  float64 `json:"bytes_per_cycle"`
	// CPUPerCycleUs is the process's CPU time (getrusage: user + system,
	// every thread, the garbage collector included) during the
	// contender's slices, per cycle, in microseconds.
	CPUPerCycleUs float64 `json:"cpu_us_per_cycle"`
	// ServerCPUPerCycleUs is the CPU time of the masters' main threads
	// (INFO cpu), summed over the N masters, during the contender's
	// slices, per cycle, in microseconds: the servers' whole cost, their
	// network I/O included. ScriptUsPerCycle is the time the servers spent
	// in Lua scripts (INFO commandstats: eval, evalsha, fcall and their _ro
	// forms; the server's clock time, so on a loaded machine a descheduled
	// server inflates it, even beyond its CPU time), per cycle. Both are 0
	// when a master refused INFO.
	ServerCPUPerCycleUs float64 `json:"server_cpu_us_per_cycle"`
	ScriptUsPerCycle    float64 `json:"server_script_us_per_cycle"`
	// GoroutinesAfterLoop counts the contender's goroutines alive right
	// after its last slice (goroutines started while it opened or ran
	// carry its pprof label); GoroutinesAfterClose those still alive
	// 1.5s after Close returned (0 when they all ended sooner; go-redis's
	// dial probe after failed dials sleeps 1s before it sees its pool
	// closed).
	GoroutinesAfterLoop  int `json:"goroutines_after_loop"`
	GoroutinesAfterClose int `json:"goroutines_after_close"`
	// OrphanKeys counts the contender's lock keys left on the masters
	// after it was closed (after a faulted master returned and ran what it
	// was sent). GuardKeys counts quorumlock's release guards among the
	// keys left: short-lived keys that refuse a late acquire. Fencing
	// counters, kept without a TTL by design, are not counted.
	OrphanKeys int `json:"orphan_keys"`
	GuardKeys  int `json:"guard_keys"`
	// QueueKeys counts the waiting bookkeeping left: the fair queue's keys
	// ({name}:queue and {name}:queue:ttl), which expire with the queue's
	// last entry (a waiter that left keeps it for its entry TTL, 1s by
	// default), and the wake mark ({name}:wake), which a refused acquire
	// sets for the lock's TTL and the next release takes.
	QueueKeys int `json:"queue_keys"`
	// FirstLockMs is the duration of the first cycle after the first
	// master died (condition one-dead only; 0 elsewhere).
	FirstLockMs float64 `json:"first_lock_after_death_ms"`

	// Contention figures (Clients > 0 only): Clients lockers of the
	// contender, each with its own clients, cycle on one lock with no hold
	// (Lock, then Unlock at once).
	Clients int `json:"clients"`
	// AcquisitionsPerSec is the acquisitions of all clients per second.
	AcquisitionsPerSec float64 `json:"acquisitions_per_sec"`
	// SameClientShare is the share of acquisitions (after the first of a
	// slice) made by the client that held the lock just before.
	SameClientShare float64 `json:"same_client_share"`
	// Handoff to another client: from the holder calling Unlock to the
	// next holder's Lock returning, when the next holder is another client.
	HandoffP50Ms float64 `json:"handoff_p50_ms"`
	HandoffP99Ms float64 `json:"handoff_p99_ms"`
	// LongestWaitMs is the longest any client waited for the lock, a wait
	// still running when a slice ended included; MeanPeriodMs is the mean
	// time between two acquisitions (one hold-and-handoff period).
	LongestWaitMs float64 `json:"longest_wait_ms"`
	MeanPeriodMs  float64 `json:"mean_period_ms"`
	// FailedRetriesPerAcq is, per acquisition, the attempts of the Lock
	// calls that acquired that failed after their first (a wake-up that
	// did not get the lock); -1 when the contender does not report them
	// (only quorumlock's do, from its Observer).
	FailedRetriesPerAcq float64 `json:"failed_retries_per_acq"`
	// Overlaps counts acquisitions whose Lock returned before the previous
	// holder called Unlock: two holders at once (0 for a safe lock).
	Overlaps int `json:"overlaps"`

	// Err is the first cycle, close or fault error, if any.
	Err string `json:"error,omitempty"`
}

// WriteJSON writes rows as an indented JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// WriteMarkdown writes rows as markdown tables, one per condition in the
// order the rows give, each under a line naming the condition. The
// "p50 / floor" column is the row's p50 over the floor's p50 under the
// same condition (empty without a floor row); "vs healthy" is its p50 over
// the healthy row of the same contender and N. Contention rows get a table
// of their own figures.
func WriteMarkdown(w io.Writer, rows []Row) error {
	floor := map[string]float64{}
	healthy := map[string]float64{}
	var conds []string
	byCond := map[string][]Row{}
	for _, r := range rows {
		if r.Contender == "floor" && r.P50Ms > 0 {
			floor[r.Condition] = r.P50Ms
		}
		if r.Condition == Healthy.Name {
			healthy[fmt.Sprintf("%s/%d", r.Contender, r.N)] = r.P50Ms
		}
		if _, ok := byCond[r.Condition]; !ok {
			conds = append(conds, r.Condition)
		}
		byCond[r.Condition] = append(byCond[r.Condition], r)
	}
	var b strings.Builder
	for i, cond := range conds {
		if i > 0 {
			b.WriteString("\n")
		}
		rs := byCond[cond]
		if rs[0].Clients > 0 {
			fmt.Fprintf(&b, "Condition `%s` (%d clients, one lock, no hold; latency columns are the wait for the lock):\n\n", cond, rs[0].Clients)
			writeContention(&b, rs)
			continue
		}
		fmt.Fprintf(&b, "Condition `%s`:\n\n", cond)
		dead := strings.HasPrefix(cond, OneDead.Name)
		b.WriteString("| contender | N | cycles | errors | p50 ms | p90 ms | p99 ms | max ms | p50 / floor | vs healthy | cycles/s | allocs/cycle | B/cycle | CPU µs/cycle | server CPU µs/cycle | scripts µs/cycle | goroutines loop / close | orphan keys |")
		rule := "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
		if dead {
			b.WriteString(" first lock after death ms |")
			rule += "--:|"
		}
		b.WriteString("\n" + rule + "\n")
		for _, r := range rs {
			ratio, vs := "", ""
			if f := floor[r.Condition]; f > 0 && r.Cycles > 0 {
				ratio = fmt.Sprintf("%.2fx", r.P50Ms/f)
			}
			if h := healthy[fmt.Sprintf("%s/%d", r.Contender, r.N)]; h > 0 && r.Cycles > 0 && cond != Healthy.Name {
				vs = fmt.Sprintf("%.2fx", r.P50Ms/h)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %s | %s | %.0f | %.1f | %.0f | %.0f | %.0f | %.1f | %d / %d | %s |",
				r.Contender, r.N, r.Cycles, r.Errors,
				r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs, ratio, vs,
				r.CyclesPerSec, r.AllocsPerCycle, r.BytesPerCycle, r.CPUPerCycleUs, r.ServerCPUPerCycleUs, r.ScriptUsPerCycle,
				r.GoroutinesAfterLoop, r.GoroutinesAfterClose, orphans(r))
			if dead {
				fmt.Fprintf(&b, " %.3f |", r.FirstLockMs)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeContention(b *strings.Builder, rs []Row) {
	b.WriteString("| contender | N | acquisitions | errors | acq/s | same-client re-locks | handoff p50 ms | handoff p99 ms | wait p50 ms | wait p99 ms | longest wait ms | longest wait / period | failed retries/acq | CPU µs/acq | server CPU µs/acq | scripts µs/acq | allocs/acq | goroutines loop / close | orphan keys | overlaps |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		periods := ""
		if r.MeanPeriodMs > 0 {
			periods = fmt.Sprintf("%.1f", r.LongestWaitMs/r.MeanPeriodMs)
		}
		retries := ""
		if r.FailedRetriesPerAcq >= 0 {
			retries = fmt.Sprintf("%.2f", r.FailedRetriesPerAcq)
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | %.0f | %.0f%% | %.3f | %.3f | %.3f | %.3f | %.1f | %s | %s | %.0f | %.0f | %.1f | %.1f | %d / %d | %s | %d |\n",
			r.Contender, r.N, r.Cycles, r.Errors, r.AcquisitionsPerSec, 100*r.SameClientShare,
			r.HandoffP50Ms, r.HandoffP99Ms, r.P50Ms, r.P99Ms, r.LongestWaitMs, periods, retries,
			r.CPUPerCycleUs, r.ServerCPUPerCycleUs, r.ScriptUsPerCycle, r.AllocsPerCycle, r.GoroutinesAfterLoop, r.GoroutinesAfterClose, orphans(r), r.Overlaps)
	}
}

// orphans shows a row's orphan keys, with its release guards and fair
// queue keys when any.
func orphans(r Row) string {
	s := fmt.Sprint(r.OrphanKeys)
	if r.GuardKeys > 0 {
		s += fmt.Sprintf(" (+%d guards)", r.GuardKeys)
	}
	if r.QueueKeys > 0 {
		s += fmt.Sprintf(" (+%d queue keys)", r.QueueKeys)
	}
	return s
}
