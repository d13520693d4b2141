package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Outcome is the word a report's verdict is shown as, in WriteTable's
// verdict column and in the "verdict" field of the JSON form. It tells a
// reader what the run showed, not only whether it met its expectation: an
// unsafe scenario exists to show a violation, and "caught" says the checker
// found it.
type Outcome string

const (
	// OutcomeSafe: a safe scenario ran, and the checker found no violation
	// (the verdict is Pass).
	OutcomeSafe Outcome = "safe"
	// OutcomeCaught: an unsafe scenario's violation happened and the checker
	// found it (the verdict is Pass). RedLock alone cannot prevent it; its
	// protected twins show which mitigation does.
	OutcomeCaught Outcome = "caught"
	// OutcomeFail: the verdict is Fail: a safe scenario showed a violation,
	// an unsafe one showed none, nothing was locked, or the run did not
	// complete or left something behind. WriteTable says which.
	OutcomeFail Outcome = "FAIL"
)

// Outcome returns the word for r's verdict: OutcomeSafe or OutcomeCaught
// when r.Verdict is Pass (by r.Expect), OutcomeFail otherwise.
func (r Report) Outcome() Outcome {
	switch {
	case r.Verdict != Pass:
		return OutcomeFail
	case r.Expect == Unsafe:
		return OutcomeCaught
	}
	return OutcomeSafe
}

// MarshalJSON gives the report's JSON form (see WriteJSON): the fields with
// a JSON name, with verdict set to r.Outcome().
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report // no methods: no recursion
	return json.Marshal(struct {
		plain
		Verdict Outcome `json:"verdict"`
	}{plain(r), r.Outcome()})
}

// WriteTable writes the reports as an aligned table with the columns
// scenario, N (masters), expected, acquisitions, faults injected,
// violations, stale writes accepted, leaked keys and verdict (an Outcome:
// safe, caught or FAIL), followed by one line per report that failed (why),
// has an error or left something behind.
func WriteTable(w io.Writer, reps []Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tN\texpected\tacquisitions\tfaults injected\tviolations\tstale writes accepted\tleaked keys\tverdict\t")
	for _, r := range reps {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Name, r.Nodes, r.Expect, r.Acquisitions, r.Faults, r.Violations, r.StaleWritesAccepted, r.LeakedKeys, r.Outcome())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reps {
		if r.Outcome() == OutcomeFail {
			switch {
			case r.Acquisitions == 0:
				fmt.Fprintf(w, "%s: FAIL: nothing was locked, so no violation would prove nothing\n", r.Name)
			case r.Expect == Safe && r.Violations > 0:
				fmt.Fprintf(w, "%s: FAIL: %d violations in a scenario expected safe\n", r.Name, r.Violations)
			case r.Expect == Unsafe && r.Violations == 0:
				fmt.Fprintf(w, "%s: FAIL: no violation seen, but this unsafe scenario forces one: its fault missed every holder or the checker missed the violation (run it again, or longer with --duration)\n", r.Name)
			}
		}
		if r.Err != nil {
			fmt.Fprintf(w, "%s: error: %v\n", r.Name, r.Err)
		}
		persistent := map[string]bool{}
		for _, l := range r.PersistentLeaks {
			persistent[l] = true
		}
		for _, l := range r.Leaked {
			if !persistent[l] {
				fmt.Fprintf(w, "%s: leaked key (expires with its TTL): %s\n", r.Name, l)
			}
		}
		for _, l := range r.PersistentLeaks {
			fmt.Fprintf(w, "%s: leaked key still present a TTL later: %s\n", r.Name, l)
		}
		if r.ProcessesLeft > 0 {
			fmt.Fprintf(w, "%s: %d redis-server processes or containers left\n", r.Name, r.ProcessesLeft)
		}
		if r.GoroutinesLeft > 0 {
			fmt.Fprintf(w, "%s: %d goroutines left\n", r.Name, r.GoroutinesLeft)
		}
	}
	return nil
}

// WriteJSON writes the reports as a JSON array of objects with exactly the
// fields name, expect ("safe" or "unsafe"), acquisitions, faults,
// violations, stale_writes_accepted, leaked_keys and verdict, an Outcome:
// "safe" (a safe scenario, no violation), "caught" (an unsafe scenario whose
// violation the checker found) or "FAIL" (anything else).
func WriteJSON(w io.Writer, reps []Report) error {
	if reps == nil {
		reps = []Report{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(reps)
}
