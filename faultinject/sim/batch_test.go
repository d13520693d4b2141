package sim

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

var (
	flagSchedules = flag.Uint64("schedules", 0, "TestBatch: how many schedules (cmd/simulate sets it)")
	flagShard     = flag.Uint64("shard", 0, "TestBatch: this process's shard")
	flagShards    = flag.Uint64("shards", 1, "TestBatch: how many processes share the seeds")
)

// batchReport is what TestBatch prints, one JSON object per line after a
// tag, for cmd/simulate to aggregate.
type batchReport struct {
	Summary Summary
	Elapsed time.Duration
	Fails   []batchFail `json:",omitempty"`
	Done    bool
}

type batchFail struct {
	Seed       uint64
	Family     Family
	Violations []string
	Replay     string
}

// TestBatch runs the schedules -seed, -seed+1, ... (-schedules of them,
// this process taking those congruent to -shard modulo -shards), in
// -family (or "all": the families in turn, by seed), with -knob switched
// off. It is what cmd/simulate runs; it prints SIMPROGRESS and SIMDONE
// lines on stdout.
func TestBatch(t *testing.T) {
	if *flagSchedules == 0 {
		t.Skip("run by cmd/simulate: -args -schedules N -seed S [-family F|all] [-knob K] [-shard i -shards n]")
	}
	defer stackBallast()()
	defer setKnob(t, *flagKnob)()
	StrictFencing.Store(*flagStrict)
	defer StrictFencing.Store(true)
	start := time.Now()
	var rep batchReport
	emit := func(tag string) {
		rep.Elapsed = time.Since(start)
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stdout, "%s %s\n", tag, b)
		rep.Fails = nil
	}
	first, n := *flagSeed, *flagSchedules
	next := first + *flagShard
	last := time.Now()
	familyOf := func(seed uint64) Family {
		if *flagFamily == "all" {
			return Families[seed%uint64(len(Families))]
		}
		return Family(*flagFamily)
	}
	runSeedsFam(t, func() (uint64, Family, bool) {
		if next >= first+n {
			return 0, "", false
		}
		s := next
		next += *flagShards
		return s, familyOf(s), true
	}, func(r Result) {
		rep.Summary.Add(r)
		if r.Outcome == Fail {
			rep.Fails = append(rep.Fails, batchFail{r.Plan.Seed, r.Plan.Family, r.Violations, replayCmd(r.Plan.Seed, r.Plan.Family, *flagKnob)})
		}
		if time.Since(last) > 2*time.Second || len(rep.Fails) > 0 {
			last = time.Now()
			emit("SIMPROGRESS")
		}
	})
	rep.Done = true
	emit("SIMDONE")
}
