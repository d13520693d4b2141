package bench

import (
	"bufio"
	"bytes"
	"context"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// labelKey is the pprof label every goroutine of an entry carries: the
// goroutines a locker starts inherit it from the goroutine that opened it
// or ran its cycles, which is how they are counted apart from the other
// entries' that run at the same time.
const labelKey = "qlbench-entry"

// labelled returns ctx with the entry's label.
func labelled(ctx context.Context, id string) context.Context {
	return pprof.WithLabels(ctx, pprof.Labels(labelKey, id))
}

// goroutinesByLabel counts the live goroutines per entry label.
func goroutinesByLabel() map[string]int {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return nil
	}
	counts := map[string]int{}
	prefix := `"` + labelKey + `":`
	n := 0
	sc := bufio.NewScanner(&b)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if count, _, ok := strings.Cut(line, " @ "); ok {
			n, _ = strconv.Atoi(count)
			continue
		}
		rest, ok := strings.CutPrefix(line, "# labels: ")
		if !ok {
			continue
		}
		i := strings.Index(rest, prefix)
		if i < 0 {
			continue
		}
		id, err := strconv.QuotedPrefix(rest[i+len(prefix):])
		if err != nil {
			continue
		}
		if id, err = strconv.Unquote(id); err == nil {
			counts[id] += n
		}
	}
	return counts
}

// settledGoroutines waits up to limit for the entry's goroutines to end and
// returns how many are left.
func settledGoroutines(id string, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		n := goroutinesByLabel()[id]
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
