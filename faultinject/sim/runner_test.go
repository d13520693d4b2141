package sim

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
)

// runOne runs one schedule in its own bubble.
func runOne(t *testing.T, seed uint64, fam Family) Result {
	return runPlan(t, NewPlan(seed, fam))
}

// runPlan runs plan (a drawn plan, perhaps edited) in its own bubble.
func runPlan(t *testing.T, plan Plan) Result {
	var res Result
	synctest.Test(t, func(*testing.T) { res = Run(plan) })
	return res
}

// runSeeds runs the seeds from next() on GOMAXPROCS workers, each running
// its schedules one after another in fresh bubbles, and hands every result
// to onResult (serialised). next returns false when no seed is left.
func runSeeds(t *testing.T, fam Family, next func() (uint64, bool), onResult func(Result)) {
	runSeedsFam(t, func() (uint64, Family, bool) {
		s, ok := next()
		return s, fam, ok
	}, onResult)
}

// runSeedsFam is runSeeds with a family per seed.
func runSeedsFam(t *testing.T, next func() (uint64, Family, bool), onResult func(Result)) {
	runPlans(t, func() (Plan, bool) {
		seed, fam, ok := next()
		if !ok {
			return Plan{}, false
		}
		return NewPlan(seed, fam), true
	}, onResult)
}

// runPlans is runSeeds over plans: next returns false when none is left.
func runPlans(t *testing.T, next func() (Plan, bool), onResult func(Result)) {
	var mu, nmu sync.Mutex
	t.Run("workers", func(t *testing.T) {
		for i := range runtime.GOMAXPROCS(0) {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				for {
					nmu.Lock()
					plan, ok := next()
					nmu.Unlock()
					if !ok {
						return
					}
					res := runPlan(t, plan)
					mu.Lock()
					onResult(res)
					mu.Unlock()
				}
			})
		}
	})
}

// seq returns a next function over [from, from+n).
func seq(from, n uint64) func() (uint64, bool) {
	i := from
	return func() (uint64, bool) {
		if i >= from+n {
			return 0, false
		}
		i++
		return i - 1, true
	}
}

func replayCmd(seed uint64, fam Family, knob string) string {
	return fmt.Sprintf("cd faultinject && go test ./sim -run 'TestReplay$' -v -args -seed %d -family %s -knob %s", seed, fam, knob)
}
