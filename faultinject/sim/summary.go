package sim

import (
	"fmt"
	"strings"
)

// Summary aggregates results.
type Summary struct {
	Schedules, Passed, Classified, Failed int
	ClassifiedUnsafe                      int // classified schedules that showed a safety violation
	Known                                 int // schedules showing the open fencing bug
	KnownSeeds                            []uint64
	Holds, Attempts                       int
	MaxGoroutines                         int           // most goroutines seen in one process
	Coverage                              [numKinds]int // schedules that exercised each fault kind
	FailedSeeds                           []uint64
}

// Add counts r.
func (s *Summary) Add(r Result) {
	s.Schedules++
	switch r.Outcome {
	case Pass:
		s.Passed++
	case Classified:
		s.Classified++
		if len(r.Unsafe) > 0 {
			s.ClassifiedUnsafe++
		}
		if len(r.Known) > 0 {
			s.Known++
			if len(s.KnownSeeds) < 20 {
				s.KnownSeeds = append(s.KnownSeeds, r.Plan.Seed)
			}
		}
	case Fail:
		s.Failed++
		if len(s.FailedSeeds) < 100 {
			s.FailedSeeds = append(s.FailedSeeds, r.Plan.Seed)
		}
	}
	s.Holds += r.Holds
	s.Attempts += r.Attempts
	s.MaxGoroutines = max(s.MaxGoroutines, r.Goroutines)
	for k, n := range r.Coverage {
		if n > 0 {
			s.Coverage[k]++
		}
	}
}

// Line is a one-line summary.
func (s *Summary) Line() string {
	return fmt.Sprintf("%d schedules: %d passed, %d classified (%d unsafe, %d known fencing bug), %d FAILED; %d leases in %d attempts; max goroutines %d; kinds covered %d/%d",
		s.Schedules, s.Passed, s.Classified, s.ClassifiedUnsafe, s.Known, s.Failed, s.Holds, s.Attempts, s.MaxGoroutines, s.kindsCovered(), numKinds)
}

func (s *Summary) kindsCovered() int {
	n := 0
	for _, c := range s.Coverage {
		if c > 0 {
			n++
		}
	}
	return n
}

// CoverageLine lists the schedules per fault kind.
func (s *Summary) CoverageLine() string {
	var parts []string
	for k, c := range s.Coverage {
		parts = append(parts, fmt.Sprintf("%v=%d", FaultKind(k), c))
	}
	return strings.Join(parts, " ")
}

// Merge adds o's counts to s.
func (s *Summary) Merge(o Summary) {
	s.Schedules += o.Schedules
	s.Passed += o.Passed
	s.Classified += o.Classified
	s.ClassifiedUnsafe += o.ClassifiedUnsafe
	s.Known += o.Known
	s.Failed += o.Failed
	s.Holds += o.Holds
	s.Attempts += o.Attempts
	s.MaxGoroutines = max(s.MaxGoroutines, o.MaxGoroutines)
	for k := range s.Coverage {
		s.Coverage[k] += o.Coverage[k]
	}
	s.FailedSeeds = append(s.FailedSeeds, o.FailedSeeds...)
	s.KnownSeeds = append(s.KnownSeeds, o.KnownSeeds...)
}

// KindsCovered is the number of fault kinds exercised at least once.
func (s *Summary) KindsCovered() (covered, total int) { return s.kindsCovered(), int(numKinds) }
