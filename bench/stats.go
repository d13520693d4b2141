package bench

import (
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, or 0 when it is empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := (len(sorted)*p + 99) / 100 // ceil(n*p/100)
	return sorted[max(k, 1)-1]
}

// summarise fills r's latency and throughput figures from the cycle
// latencies and the time spent in the cycles.
func summarise(r *Row, lat []time.Duration, busy time.Duration) {
	s := slices.Clone(lat)
	slices.Sort(s)
	r.P50Ms = ms(percentile(s, 50))
	r.P90Ms = ms(percentile(s, 90))
	r.P99Ms = ms(percentile(s, 99))
	r.MaxMs = ms(percentile(s, 100))
	if busy > 0 {
		r.CyclesPerSec = float64(len(s)) / busy.Seconds()
	}
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
