package operatortest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Exit statuses of quorumlock status and doctor.
const (
	exitOK   = 0
	exitFail = 1
)

// commandDir is the cmd/quorumlock module, seen from this package's
// directory.
var commandDir = filepath.Join("..", "..", "cmd", "quorumlock")

var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "quorumlock-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// quorumlockBin builds the quorumlock command of this checkout with go
// build (once per test binary) and returns its path.
func quorumlockBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		p := filepath.Join(binDir, "quorumlock")
		build := exec.Command("go", "build", "-o", p, ".")
		build.Dir = commandDir
		if out, err := build.CombinedOutput(); err != nil {
			binError = fmt.Errorf("go build in %s: %v\n%s", commandDir, err, out)
			return
		}
		binPath = p
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// quorumlock runs the command with args and returns its exit status and
// output.
func quorumlock(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(quorumlockBin(t), args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("quorumlock %q: %v", args, err)
	}
	return code, o.String(), e.String()
}
