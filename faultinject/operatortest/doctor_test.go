package operatortest

import (
	"regexp"
	"testing"

	"github.com/quorumlock/quorumlock/faultinject"
)

// TestDoctorFindsAFullDisk: a master whose disk is full (its AOF write
// failed: it answers writes with MISCONF) is bad, check "disk", and
// doctor exits 1; once the disk is free the same check is ok.
func TestDoctorFindsAFullDisk(t *testing.T) {
	f := faultinject.DiskFull{Nodes: []int{0}}
	faultinject.RequireFault(t, f)
	c := faultinject.StartT(t, faultinject.Config{N: 1, Tmpfs: true, Persistence: []faultinject.Persistence{faultinject.AOFEverySec}})
	if err := f.Inject(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	code, out, _ := quorumlock(t, "doctor", "--nodes", c.ServerAddr(0))
	if code != exitFail || !regexp.MustCompile(`(?m)^`+c.ServerAddr(0)+` +bad +disk +the last write to the append-only file failed \(aof_last_write_status:err`).MatchString(out) {
		t.Errorf("a full disk: exit %d, want %d and a bad disk line:\n%s", code, exitFail, out)
	}
	if err := f.Undo(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	_, out, _ = quorumlock(t, "doctor", "--nodes", c.ServerAddr(0))
	if !regexp.MustCompile(`(?m)^` + c.ServerAddr(0) + ` +ok +disk +`).MatchString(out) {
		t.Errorf("a freed disk: no ok disk line:\n%s", out)
	}
}
