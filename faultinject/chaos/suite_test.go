package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/node"
)

func TestMain(m *testing.M) {
	node.DiscardClientLog()
	goleak.VerifyTestMain(m)
}

// TestShortSuite runs every scenario's short variant on each backend and
// requires every verdict to be pass: the safe scenarios show no violation and
// the unsafe ones, built to cause one, show at least one, so the checker is
// seen to catch real violations on real servers. Backends and scenarios run
// one after the other: in parallel they halve the wall time but load the
// 2-core machines this runs on enough to disturb the timing-sensitive fault
// tests of other packages that go test runs at the same time.
//
// The docker and process backends are skipped with a message when they
// cannot run here, and fail instead when CI=true.
func TestShortSuite(t *testing.T) {
	for _, kind := range []faultinject.BackendKind{faultinject.Process, faultinject.Docker, faultinject.Memory} {
		t.Run(string(kind), func(t *testing.T) {
			faultinject.RequireBackend(t, kind)
			start := time.Now()
			var reps []Report
			for _, sc := range Scenarios() {
				var log syncBuffer
				rep, err := Run(context.Background(), sc, Options{Backend: kind, Short: true, Progress: &log})
				if err != nil {
					t.Fatalf("%s: %v", sc.Name, err)
				}
				reps = append(reps, rep)
				if rep.Backend != kind {
					t.Errorf("%s ran on %s, want %s", sc.Name, rep.Backend, kind)
				}
				if rep.Verdict != Pass {
					t.Errorf("%s on %s: verdict %s (expect %s, %d violations, err %v); log:\n%s", sc.Name, kind, rep.Verdict, sc.Expect, rep.Violations, rep.Err, log.String())
				}
				// Split scenarios count their two set-up link cuts as faults:
				// the schedule ran only if there is more than that.
				setup := 0
				if sc.Split {
					setup = 2
				}
				if rep.Acquisitions == 0 || rep.Faults <= setup && len(sc.Schedule) > 0 {
					t.Errorf("%s on %s: %d acquisitions, %d faults: the workload or the schedule did not run", sc.Name, kind, rep.Acquisitions, rep.Faults)
				}
			}
			var tab bytes.Buffer
			_ = WriteTable(&tab, reps)
			t.Logf("short suite on %s in %v:\n%s", kind, time.Since(start).Round(time.Millisecond), tab.String())
		})
	}
}

// TestCheckerCatchesForcedViolation looks at one unsafe run's history in
// detail: the overlap it reports involves the two split clients, the ones the
// fault set against each other.
func TestCheckerCatchesForcedViolation(t *testing.T) {
	sc, _ := Lookup("restart-no-persistence")
	rep, err := Run(context.Background(), sc[0], Options{Backend: faultinject.Memory, Short: true, KeepHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Err != nil || len(rep.Findings.Overlaps) == 0 {
		t.Fatalf("no overlap found (err %v)", rep.Err)
	}
	o := rep.Findings.Overlaps[0]
	if o.A.Client == o.B.Client || o.A.Client > 1 || o.B.Client > 1 {
		t.Errorf("overlap between clients %d and %d; want the split clients 0 and 1", o.A.Client, o.B.Client)
	}
}

func TestReportJSONFields(t *testing.T) {
	var b bytes.Buffer
	reps := []Report{{Name: "x", Expect: Unsafe, Acquisitions: 3, Faults: 2, Violations: 1, StaleWritesAccepted: 1, LeakedKeys: 0, Verdict: Pass,
		Backend: faultinject.Process, Elapsed: time.Second, Leaked: []string{"k"}}}
	if err := WriteJSON(&b, reps); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"name", "expect", "acquisitions", "faults", "violations", "stale_writes_accepted", "leaked_keys", "verdict"}
	if len(got) != 1 || len(got[0]) != len(want) {
		t.Fatalf("JSON %s; want one object with exactly %v", b.String(), want)
	}
	for _, k := range want {
		if _, ok := got[0][k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
	b.Reset()
	_ = WriteJSON(&b, nil)
	if strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("WriteJSON(nil) = %q, want []", b.String())
	}
	b.Reset()
	_ = WriteTable(&b, reps)
	for _, s := range []string{"scenario", "stale writes accepted", "leaked keys", "verdict", "pass", "leaked key (expires with its TTL): k"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}

func TestVerdict(t *testing.T) {
	cases := []struct {
		r    Report
		want Verdict
	}{
		{Report{Expect: Safe}, Pass},
		{Report{Expect: Safe, Violations: 1}, Fail},
		{Report{Expect: Unsafe, Violations: 1}, Pass},
		{Report{Expect: Unsafe}, Fail},
		{Report{Expect: Safe, LeakedKeys: 2, Leaked: []string{"a", "b"}}, Pass},
		{Report{Expect: Safe, LeakedKeys: 1, PersistentLeaks: []string{"a"}}, Fail},
		{Report{Expect: Unsafe, Violations: 1, ProcessesLeft: 1}, Fail},
		{Report{Expect: Unsafe, Violations: 1, GoroutinesLeft: 1}, Fail},
		{Report{Expect: Safe, Err: os.ErrDeadlineExceeded}, Fail},
	}
	for i, c := range cases {
		if got := verdict(c.r); got != c.want {
			t.Errorf("case %d %+v: verdict %s, want %s", i, c.r, got, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
