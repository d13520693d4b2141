package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Names of the contenders and conditions the goals compare.
const (
	goalOurs     = "quorumlock"
	goalFair     = "quorumlock-fair"
	goalPeer     = "redsync"
	goalFailFast = "redsync-failfast"
	goalRueidis  = "rueidislock"
	goalN        = 5
	goalJitter   = "jitter-0-2ms"
	goalDelay    = "delay-1ms"
)

// WriteTargets writes, as a markdown table, each performance goal of the
// lock against the rows: healthy N=5 p50 at most 0.85x redsync's and at
// most redsync-failfast's, client CPU per cycle at most 0.85x redsync's;
// healthy N=1 p50 and client CPU at most redsync's; healthy N=5 server CPU
// (the masters' main threads) and time in scripts per cycle at most 1.3x
// redsync's; allocations per cycle at most redsync's at every N; N=5 p50
// under 0-2ms jitter at most 0.8x redsync's, N=5/N=1 with 1ms added at
// most redsync's, N=5 p50 with one master 20ms slow, hung or dead at most
// 1.25x healthy with its goroutines and no orphan key; under contention
// (N=5) acquisitions/s at least 0.8x redsync's with at least 75% of
// handoffs to another client and client CPU per acquisition at most 1.3x
// redsync's, and fewer than 1.5 woken attempts that fail per acquisition
// (Row.FailedRetriesPerAcq); the fair-mode goals (every handoff to another client, handoff
// p99 at most rueidislock's in the same run, no wait longer than 8
// hold-and-handoff periods), which only a contender named
// "quorumlock-fair" can meet, and its healthy N=5 p50 at most 1.15x the
// plain lock's. A goal without the rows it needs says "not measured".
func WriteTargets(w io.Writer, rows []Row) error {
	find := func(c string, n int, cond string) (Row, bool) {
		for _, r := range rows {
			if r.Contender == c && r.N == n && r.Condition == cond && r.Cycles > 0 {
				return r, true
			}
		}
		return Row{}, false
	}
	var b strings.Builder
	b.WriteString("| target | measured | verdict |\n|---|---|---|\n")
	line := func(goal, measured string, ok, known bool) {
		v := "not measured"
		switch {
		case known && ok:
			v = "met"
		case known:
			v = "missed"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", goal, measured, v)
	}
	versus := func(goal, peer string, n int, cond string, limit float64, fig func(Row) float64, unit string) {
		q, ok1 := find(goalOurs, n, cond)
		p, ok2 := find(peer, n, cond)
		if !ok1 || !ok2 || fig(p) == 0 {
			line(goal, "", false, false)
			return
		}
		x := fig(q) / fig(p)
		line(goal, fmt.Sprintf("%.2fx (%.3g vs %.3g %s)", x, fig(q), fig(p), unit), x <= limit, true)
	}
	ratio := func(goal, cond string, limit float64, fig func(Row) float64, unit string) {
		versus(goal, goalPeer, goalN, cond, limit, fig, unit)
	}
	p50 := func(r Row) float64 { return r.P50Ms }
	cpu := func(r Row) float64 { return r.CPUPerCycleUs }
	ratio("healthy N=5 p50 <= 0.85x redsync", Healthy.Name, 0.85, p50, "ms")
	versus("healthy N=5 p50 <= 1.0x redsync-failfast", goalFailFast, goalN, Healthy.Name, 1, p50, "ms")
	ratio("healthy N=5 client CPU per cycle <= 0.85x redsync", Healthy.Name, 0.85, cpu, "µs")
	versus("healthy N=1 p50 <= 1.0x redsync", goalPeer, 1, Healthy.Name, 1, p50, "ms")
	versus("healthy N=1 client CPU per cycle <= 1.0x redsync", goalPeer, 1, Healthy.Name, 1, cpu, "µs")
	ratio("healthy N=5 server CPU per cycle (the masters' main threads) <= 1.3x redsync", Healthy.Name, 1.3, func(r Row) float64 { return r.ServerCPUPerCycleUs }, "µs")
	ratio("healthy N=5 time in scripts per cycle <= 1.3x redsync", Healthy.Name, 1.3, func(r Row) float64 { return r.ScriptUsPerCycle }, "µs")

	var parts []string
	all, seen := true, false
	for _, r := range rows {
		if r.Contender != goalOurs || r.Condition != Healthy.Name {
			continue
		}
		p, ok := find(goalPeer, r.N, Healthy.Name)
		if !ok {
			continue
		}
		seen = true
		all = all && r.AllocsPerCycle <= p.AllocsPerCycle
		parts = append(parts, fmt.Sprintf("N=%d %.0f vs %.0f", r.N, r.AllocsPerCycle, p.AllocsPerCycle))
	}
	line("allocations per cycle <= redsync's at every N (healthy)", strings.Join(parts, ", "), all, seen)

	ratio("every node 0-2ms jitter: N=5 p50 <= 0.8x redsync", goalJitter, 0.8, func(r Row) float64 { return r.P50Ms }, "ms")

	q5, ok1 := find(goalOurs, goalN, goalDelay)
	q1, ok2 := find(goalOurs, 1, goalDelay)
	p5, ok3 := find(goalPeer, goalN, goalDelay)
	p1, ok4 := find(goalPeer, 1, goalDelay)
	if ok1 && ok2 && ok3 && ok4 {
		x, y := q5.P50Ms/q1.P50Ms, p5.P50Ms/p1.P50Ms
		line("every node +1ms: N=5/N=1 <= redsync's", fmt.Sprintf("%.2fx vs %.2fx", x, y), x <= y, true)
	} else {
		line("every node +1ms: N=5/N=1 <= redsync's", "", false, false)
	}

	h, okh := find(goalOurs, goalN, Healthy.Name)
	for _, cond := range []string{OneSlow(20 * time.Millisecond).Name, OneHung.Name, OneDead.Name} {
		goal := fmt.Sprintf("%s, N=5: p50 <= 1.25x healthy, goroutines bounded, 0 orphan keys", cond)
		r, ok := find(goalOurs, goalN, cond)
		if !ok || !okh {
			line(goal, "", false, false)
			continue
		}
		x := r.P50Ms / h.P50Ms
		m := fmt.Sprintf("%.2fx; %d goroutines after the loop, %d after Close; %s orphan keys", x, r.GoroutinesAfterLoop, r.GoroutinesAfterClose, orphans(r))
		line(goal, m, x <= 1.25 && r.OrphanKeys == 0 && r.GoroutinesAfterClose == 0, true)
	}

	var cq, cp, fair, rue Row
	var okq, okp, okf, okr bool
	for _, r := range rows {
		if r.Clients == 0 || r.N != goalN {
			continue
		}
		switch r.Contender {
		case goalOurs:
			cq, okq = r, true
		case goalPeer:
			cp, okp = r, true
		case goalFair:
			fair, okf = r, true
		case goalRueidis:
			rue, okr = r, true
		}
	}
	periods := func(r Row) float64 {
		if r.MeanPeriodMs > 0 {
			return r.LongestWaitMs / r.MeanPeriodMs
		}
		return 0
	}
	contGoal := "contention, N=5: acquisitions/s >= 0.8x redsync, >= 75% of handoffs to another client, client CPU per acquisition <= 1.3x redsync's"
	if okq && okp && cp.AcquisitionsPerSec > 0 && cp.CPUPerCycleUs > 0 {
		x := cq.AcquisitionsPerSec / cp.AcquisitionsPerSec
		cpu := cq.CPUPerCycleUs / cp.CPUPerCycleUs
		other := 1 - cq.SameClientShare
		line(contGoal, fmt.Sprintf("%.2fx (%.0f vs %.0f/s), %.0f%%, %.2fx (%.0f vs %.0f µs)", x, cq.AcquisitionsPerSec, cp.AcquisitionsPerSec, 100*other, cpu, cq.CPUPerCycleUs, cp.CPUPerCycleUs),
			x >= 0.8 && other >= 0.75 && cpu <= 1.3, true)
	} else {
		line(contGoal, "", false, false)
	}
	wakeGoal := "contention, N=5: woken attempts that fail per acquisition < 1.5"
	if okq && cq.FailedRetriesPerAcq >= 0 {
		line(wakeGoal, fmt.Sprintf("%.2f", cq.FailedRetriesPerAcq), cq.FailedRetriesPerAcq < 1.5, true)
	} else {
		line(wakeGoal, "", false, false)
	}
	fairGoal := "fair mode, N=5: 100% of handoffs to another client, handoff p99 <= rueidislock's, longest wait <= 8 periods"
	if okf && okr {
		line(fairGoal, fmt.Sprintf("%.0f%%, %.3f vs %.3f ms, %.1f periods", 100*(1-fair.SameClientShare), fair.HandoffP99Ms, rue.HandoffP99Ms, periods(fair)),
			fair.SameClientShare == 0 && fair.HandoffP99Ms <= rue.HandoffP99Ms && periods(fair) <= 8, true)
	} else {
		line(fairGoal, "", false, false)
	}
	uncontended := "fair mode uncontended: healthy N=5 p50 <= 1.15x the plain lock's"
	hf, ok1 := find(goalFair, goalN, "healthy")
	hq, ok2 := find(goalOurs, goalN, "healthy")
	if ok1 && ok2 && hq.P50Ms > 0 {
		x := hf.P50Ms / hq.P50Ms
		line(uncontended, fmt.Sprintf("%.2fx (%.3f vs %.3f ms)", x, hf.P50Ms, hq.P50Ms), x <= 1.15, true)
	} else {
		line(uncontended, "", false, false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
