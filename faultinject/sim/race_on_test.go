//go:build race

package sim

// raceEnabled: the race detector slows schedules about tenfold, so the CI
// budgets shrink under it.
const raceEnabled = true
