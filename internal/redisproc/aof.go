package redisproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNoCheckAOF is returned when redis-check-aof is not installed.
var ErrNoCheckAOF = errors.New("redisproc: redis-check-aof not found in PATH (Debian: apt-get install -y redis-tools)")

// LookCheckAOF returns the redis-check-aof binary path or ErrNoCheckAOF.
func LookCheckAOF() (string, error) {
	p, err := exec.LookPath("redis-check-aof")
	if err != nil {
		return "", ErrNoCheckAOF
	}
	return p, nil
}

// LastIncrAOF returns the path of the newest incremental AOF file of a
// Redis 7 server whose directory is dir: the last file of type "i" in
// dir/appendonlydir's manifest. The error names what is missing.
func LastIncrAOF(dir string) (string, error) {
	aofDir := filepath.Join(dir, "appendonlydir")
	manifests, _ := filepath.Glob(filepath.Join(aofDir, "*.manifest"))
	if len(manifests) != 1 {
		return "", fmt.Errorf("redisproc: want one AOF manifest in %s, found %d (is appendonly on, on Redis 7 or later?)", aofDir, len(manifests))
	}
	b, err := os.ReadFile(manifests[0])
	if err != nil {
		return "", fmt.Errorf("redisproc: reading the AOF manifest: %w", err)
	}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "file appendonly.aof.1.incr.aof seq 1 type i"
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "file" {
			continue
		}
		for k := 2; k+1 < len(f); k += 2 {
			if f[k] == "type" && f[k+1] == "i" {
				last = f[1]
			}
		}
	}
	if last == "" {
		return "", fmt.Errorf("redisproc: the AOF manifest %s lists no incremental file", manifests[0])
	}
	return filepath.Join(aofDir, filepath.Base(last)), nil
}

// TruncateAOF cuts the newest incremental AOF file of the server whose
// directory is dir (LastIncrAOF) at its first "#TS:" annotation later than
// unix (redis-check-aof --truncate-to-timestamp): the commands the server
// logged after the second unix are gone, as a host crash loses what
// appendfsync everysec had not synced. The server must be stopped and must
// have run with aof-timestamp-enabled yes (Config.AOFTimestamps); without
// annotations past unix nothing is cut. When the file's first annotation is
// already past unix (everything in it was logged in the lost second), the
// tool refuses ("has nothing before timestamp"), and the file is emptied
// instead. The error carries the tool's output.
func TruncateAOF(ctx context.Context, dir string, unix int64) error {
	tool, err := LookCheckAOF()
	if err != nil {
		return err
	}
	file, err := LastIncrAOF(dir)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, tool, "--truncate-to-timestamp", strconv.FormatInt(unix, 10), file).CombinedOutput()
	if err != nil && bytes.Contains(out, []byte("has nothing before timestamp")) {
		if err := os.Truncate(file, 0); err != nil {
			return fmt.Errorf("redisproc: emptying %s, all of it after %d: %w", file, unix, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("redisproc: redis-check-aof --truncate-to-timestamp %d %s: %w\n%s", unix, file, err, tail(out, 2000))
	}
	return nil
}
