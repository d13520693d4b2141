package operatortest

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// status --quarantine judges a server's age as the clients do: a master
// whose clock stepped forward after its start (+120 s here, as chrony's
// makestep does at boot) reports a large uptime_in_seconds, yet a client
// meeting it now would quarantine it almost the whole minute (its age is
// its main thread's CPU time). status used to show it out of quarantine.
func TestStatusQuarantineAfterAClockStepAtBoot(t *testing.T) {
	redisproc.Require(t)
	kit := clockskew.PrepareT(t)
	ts := filepath.Join(t.TempDir(), "faketime")
	clock, err := clockskew.NewClock(ts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := redisproc.StartT(t, redisproc.Config{Env: kit.Env(ts)})
	if err := clock.Set(120*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := quorumlock(t, "status", "--nodes", srv.Addr(), "--quarantine", "1m", "--json", "locks:x")
	if code != exitOK {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	var snap struct {
		Nodes []struct {
			UptimeS     float64 `json:"uptime_s"`
			QuarantineS float64 `json:"quarantine_left_s"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil || len(snap.Nodes) != 1 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	n := snap.Nodes[0]
	if n.UptimeS < 100 {
		t.Fatalf("uptime_s %v: the clock step did not reach the server", n.UptimeS)
	}
	if n.QuarantineS < 30 {
		t.Errorf("quarantine_left_s %v with uptime_s %v: the stepped wall clock ended the quarantine", n.QuarantineS, n.UptimeS)
	}
}
