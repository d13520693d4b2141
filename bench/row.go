package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A Row holds the figures of one contender with N masters under one
// condition.
type Row struct {
	Contender string `json:"contender"`
	N         int    `json:"n"`
	Condition string `json:"condition"`
	// Cycles counts the measured lock+unlock cycles that succeeded;
	// Errors those that failed (Err is the first failure).
	Cycles int `json:"cycles"`
	Errors int `json:"errors"`
	// Latency of one successful lock+unlock cycle, in milliseconds.
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
	// OrphanKeys counts the contender's keys left on the servers after it
	// was closed: lock keys and release guards (quorumlock's fencing
	// counters, kept without a TTL by design, are not counted).
	OrphanKeys int `json:"orphan_keys"`
	// Err is the first cycle or close error, if any.
	Err string `json:"error,omitempty"`
}

// WriteJSON writes rows as an indented JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// WriteMarkdown writes rows as a markdown table, in the order given. The
// "p50 / floor" column is the row's p50 over the floor's p50 under the same
// condition (empty without a floor row).
func WriteMarkdown(w io.Writer, rows []Row) error {
	floor := map[string]float64{}
	for _, r := range rows {
		if r.Contender == "floor" && r.P50Ms > 0 {
			floor[r.Condition] = r.P50Ms
		}
	}
	var b strings.Builder
	b.WriteString("| contender | N | condition | cycles | errors | p50 ms | p90 ms | p99 ms | max ms | p50 / floor | cycles/s | allocs/cycle | B/cycle | orphan keys |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		ratio := ""
		if f := floor[r.Condition]; f > 0 && r.Cycles > 0 {
			ratio = fmt.Sprintf("%.2fx", r.P50Ms/f)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %s | %.0f | %.1f | %.0f | %d |\n",
			r.Contender, r.N, r.Condition, r.Cycles, r.Errors,
			r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs, ratio,
			r.CyclesPerSec, r.AllocsPerCycle, r.BytesPerCycle, r.OrphanKeys)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
