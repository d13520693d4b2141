package pgserver_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/quorumlock/quorumlock/fence/fencetest/pgserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartStop: a server answers on its DSN as user postgres (not root:
// PostgreSQL refuses it), listens on 127.0.0.1 only, and Stop ends its
// process, frees its port and removes its directory; a second Stop is a
// no-op. Two servers run side by side on ports of their own.
func TestStartStop(t *testing.T) {
	a := pgserver.StartT(t)
	b := pgserver.StartT(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers on %s", a.Addr())
	}
	db, err := sql.Open("pgx", a.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var who, version, listen, dir string
	err = db.QueryRowContext(t.Context(), "SELECT current_user, current_setting('server_version_num'), current_setting('listen_addresses'), current_setting('data_directory')").Scan(&who, &version, &listen, &dir)
	if err != nil {
		t.Fatal(err)
	}
	if who != "postgres" || listen != "127.0.0.1" {
		t.Errorf("user %q, listen_addresses %q", who, listen)
	}
	t.Logf("server_version_num %s, data in %s", version, dir)
	db.Close()

	pid := a.PID()
	if pid == 0 {
		t.Fatal("no pid")
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if a.PID() != 0 {
		t.Errorf("PID %d after Stop", a.PID())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Stop: kill 0 gave %v", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s after Stop: %v", dir, err)
	}
	if c, err := net.DialTimeout("tcp", a.Addr(), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", a.Addr())
	}

	// b is untouched by a's Stop.
	db, err = sql.Open("pgx", b.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("the other server: %v", err)
	}
}
