package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the reports as an aligned table with the columns
// scenario, N (masters), expected, acquisitions, faults injected, violations, stale writes
// accepted, leaked keys and verdict, followed by one line per report that has
// an error or leftovers.
func WriteTable(w io.Writer, reps []Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tN\texpected\tacquisitions\tfaults injected\tviolations\tstale writes accepted\tleaked keys\tverdict\t")
	for _, r := range reps {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Name, r.Nodes, r.Expect, r.Acquisitions, r.Faults, r.Violations, r.StaleWritesAccepted, r.LeakedKeys, r.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range reps {
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
// fields name, expect, acquisitions, faults, violations,
// stale_writes_accepted, leaked_keys and verdict.
func WriteJSON(w io.Writer, reps []Report) error {
	if reps == nil {
		reps = []Report{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(reps)
}
