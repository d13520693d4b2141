// Package clockskew skews the wall clock of one process at run time with
// libfaketime, so that a real redis-server expires keys early or late while
// every other process on the machine keeps the real time.
//
// How it works: the process is started with LD_PRELOAD naming a tiny malloc
// shim and libfaketime (see [Kit.Env]); libfaketime re-reads a timestamp file
// on every clock read (FAKETIME_NO_CACHE=1), and [WriteFile] or a [Clock]
// rewrites that file atomically. Only the wall clock (CLOCK_REALTIME,
// gettimeofday, time) is faked; the monotonic clocks stay real
// (FAKETIME_DONT_FAKE_MONOTONIC=1), so Redis's timers keep working after a
// backward jump. Redis key expiry reads the wall clock, so it follows the skew.
//
// The malloc shim exists because preloading libfaketime alone into a
// jemalloc-linked redis-server (Debian's) deadlocks at start-up; the C source,
// embedded in this package, says why in its header. [Prepare] compiles it
// with gcc at run time.
//
// Requirements: Linux, gcc on PATH, and libfaketime.so.1 (Debian/Ubuntu
// package libfaketime). [Available] says what is missing.
//
// This is test tooling: nothing in the lock library depends on it.
package clockskew

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ShimSource is the C source of the malloc shim (csrc/mallocshim.c). It is
// exported so that image builders (the docker backend, docker/Dockerfile)
// compile exactly the same code.
//
//go:embed csrc/mallocshim.c
var ShimSource []byte

// LibfaketimeEnv names an environment variable that, when set, is the path of
// libfaketime.so.1 to use instead of searching the usual library directories.
const LibfaketimeEnv = "QUORUMLOCK_LIBFAKETIME"

// libfaketimeCandidates are searched in order when LibfaketimeEnv is unset.
var libfaketimeCandidates = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/*/faketime/libfaketime.so.1",
	"/usr/lib64/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	"/usr/local/lib/faketime/libfaketime.so.1",
}

// FindLibfaketime returns the path of libfaketime.so.1: the value of
// LibfaketimeEnv when set (it must exist), else the first match among the
// usual Debian, Fedora and /usr/local locations. The error names the paths
// tried and the package to install.
func FindLibfaketime() (string, error) {
	if p := os.Getenv(LibfaketimeEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("clockskew: %s=%q: %w", LibfaketimeEnv, p, err)
		}
		return p, nil
	}
	for _, pattern := range libfaketimeCandidates {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && !st.IsDir() {
				return m, nil
			}
		}
	}
	return "", fmt.Errorf("clockskew: libfaketime.so.1 not found in %s (install it: apt-get install -y libfaketime, or set %s)",
		strings.Join(libfaketimeCandidates, ", "), LibfaketimeEnv)
}

// Available reports whether clock skew can be used here: nil when the OS is
// Linux, gcc is on PATH and libfaketime.so.1 is found; otherwise an error
// naming everything missing and the package to install.
func Available() error {
	var errs []error
	if runtime.GOOS != "linux" {
		errs = append(errs, fmt.Errorf("clockskew: needs Linux (LD_PRELOAD), this is %s", runtime.GOOS))
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		errs = append(errs, errors.New("clockskew: gcc not found in PATH (install it: apt-get install -y gcc)"))
	}
	if _, err := FindLibfaketime(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Kit is a compiled malloc shim plus the libfaketime it pairs with. A Kit is
// immutable and safe for concurrent use.
type Kit struct {
	shim     string
	faketime string
}

// ShimPath returns the absolute path of the compiled malloc shim.
func (k *Kit) ShimPath() string { return k.shim }

// LibfaketimePath returns the absolute path of libfaketime.so.1.
func (k *Kit) LibfaketimePath() string { return k.faketime }

// Env returns the environment variables that put a process started with
// them under the clock read from timestampFile; see [PreloadEnv].
func (k *Kit) Env(timestampFile string) []string {
	return PreloadEnv(k.shim, k.faketime, timestampFile)
}

// PreloadEnv returns the environment for a process whose wall clock follows
// timestampFile, given the shim and libfaketime paths as that process sees
// them (they differ from the host paths inside a container):
//
//	LD_PRELOAD=<shim>:<libfaketime>   (shim first: see mallocshim.c)
//	FAKETIME_TIMESTAMP_FILE=<file>    (the spec written by WriteFile)
//	FAKETIME_NO_CACHE=1               (re-read the file on every clock read)
//	FAKETIME_DONT_FAKE_MONOTONIC=1    (monotonic clocks stay real)
//
// Write the file before the process starts: while it is missing libfaketime
// falls back to $HOME/.faketimerc, then /etc/faketimerc, then real time. The
// process must not inherit a FAKETIME variable: it overrides the file.
func PreloadEnv(shimPath, libfaketimePath, timestampFile string) []string {
	return []string{
		"LD_PRELOAD=" + shimPath + ":" + libfaketimePath,
		"FAKETIME_TIMESTAMP_FILE=" + timestampFile,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// ShimHash returns a short content hash of the shim source, used in the
// compiled file's name (and by image builders in tags).
func ShimHash() string {
	h := sha256.New()
	h.Write(ShimSource)
	h.Write([]byte(runtime.GOOS + "/" + runtime.GOARCH))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// DefaultDir is where Prepare puts the shim when dir is empty:
// $TMPDIR/quorumlock-clockskew, shared by all runs so the build is cached.
func DefaultDir() string { return filepath.Join(os.TempDir(), "quorumlock-clockskew") }

var buildMu sync.Mutex

// Prepare compiles the malloc shim into dir (created if needed; "" means
// DefaultDir) and finds libfaketime. The shared object is named after the
// source's content hash and reused when it already exists, so only the first
// call on a machine runs gcc (about 0.1 s). Concurrent calls, also from
// several processes, are safe: the object is compiled to a temporary name and
// renamed into place. Errors name the missing tool (see Available) or carry
// gcc's output.
func Prepare(ctx context.Context, dir string) (*Kit, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	faketime, err := FindLibfaketime()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = DefaultDir()
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("clockskew: dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("clockskew: creating dir %q: %w", dir, err)
	}
	shim := filepath.Join(dir, "mallocshim-"+ShimHash()+".so")
	buildMu.Lock()
	defer buildMu.Unlock()
	if st, err := os.Stat(shim); err == nil && st.Size() > 0 {
		return &Kit{shim: shim, faketime: faketime}, nil
	}
	if err := CompileShim(ctx, shim); err != nil {
		return nil, err
	}
	return &Kit{shim: shim, faketime: faketime}, nil
}

// CompileShim compiles ShimSource with gcc into the shared object out,
// atomically (temporary file + rename). It does not use the cache.
func CompileShim(ctx context.Context, out string) error {
	dir := filepath.Dir(out)
	src, err := os.CreateTemp(dir, ".mallocshim-*.c")
	if err != nil {
		return fmt.Errorf("clockskew: writing shim source in %q: %w", dir, err)
	}
	defer os.Remove(src.Name())
	if _, err := src.Write(ShimSource); err != nil {
		src.Close()
		return fmt.Errorf("clockskew: writing %q: %w", src.Name(), err)
	}
	if err := src.Close(); err != nil {
		return fmt.Errorf("clockskew: writing %q: %w", src.Name(), err)
	}
	tmp := src.Name() + ".so"
	defer os.Remove(tmp)
	cmd := exec.CommandContext(ctx, "gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", tmp, src.Name(), "-ldl")
	var outBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clockskew: gcc compiling the malloc shim: %w\n%s", err, outBuf.String())
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("clockskew: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("clockskew: installing shim as %q: %w", out, err)
	}
	return nil
}

// Spec returns the libfaketime specification for offset and rate, in the
// form libfaketime 0.9.x accepts in FAKETIME and in a timestamp file:
//
//	"+30.000000 x1"    offset +30 s, normal speed
//	"-1.500000 x10"    offset -1.5 s, ten times faster
//
// The offset is in seconds with microsecond precision (libfaketime parses it
// with atof, so fractions work). The rate is always written, "x1" included:
// libfaketime keeps the last rate it parsed when a later spec has none.
//
// Meaning (read from libfaketime's source and checked by this package's
// tests): the faked wall clock is
//
//	fake(t) = S + offset + (t - S) * rate
//
// where t is the real time and S is the moment libfaketime initialised in
// that process (its start). Consequence: a new rate applies to the whole time
// since the process started, so writing a new rate makes the clock jump by
// (t - S) * (newRate - oldRate). [Clock] compensates for that.
//
// Errors: rate must be finite and > 0; offset and rate must be representable.
func Spec(offset time.Duration, rate float64) (string, error) {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		return "", fmt.Errorf("clockskew: rate %v: must be finite and > 0", rate)
	}
	return fmt.Sprintf("%+.6f x%s", offset.Seconds(), strconv.FormatFloat(rate, 'f', -1, 64)), nil
}

// WriteFile atomically replaces the timestamp file at path with Spec(offset,
// rate): the spec is written to a temporary file in the same directory, made
// world-readable (the reader may run as another user, in a container), and
// renamed over path. A process under [Kit.Env] with this file sees the new
// clock at its next clock read. Because the file is replaced, not rewritten,
// bind-mount its directory, not the file, into a container.
//
// Offset 0 and rate 1 mean real time. For the exact meaning of offset and
// rate, and the jump a rate change causes, see [Spec]; [Clock] gives "offset
// from now on, at rate" semantics without the jump.
func WriteFile(path string, offset time.Duration, rate float64) error {
	spec, err := Spec(offset, rate)
	if err != nil {
		return err
	}
	return writeSpec(path, spec)
}

func writeSpec(path, spec string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("clockskew: timestamp file %q: %w", path, err)
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.WriteString(spec + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("clockskew: writing %q: %w", f.Name(), err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("clockskew: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("clockskew: writing %q: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("clockskew: replacing timestamp file %q: %w", path, err)
	}
	return nil
}

// Clock drives the timestamp file of one process so that each Set means
// "from now on, the wall clock reads real + offset and runs at rate times
// real speed", with no extra jump when only the rate changes. It does so by
// folding the process's libfaketime start time S into the offset it writes
// (see [Spec]).
//
// S is only needed when a rate other than 1 is set: pass the real time just
// before the process was started to NewClock, and optionally refine it with
// [Clock.Calibrate] right after start (needed when start-up is slow, e.g. a
// container: an error e in S becomes a clock error of e*(rate-1)).
//
// A Clock is safe for concurrent use. The zero value is not usable.
type Clock struct {
	mu     sync.Mutex
	path   string
	start  time.Time     // S: libfaketime's start time in the process
	since  time.Time     // real time of the last Set
	offset time.Duration // fake - real at since
	rate   float64
}

// NewClock writes real time ("+0 x1") into the timestamp file at path and
// returns a Clock for the process that will read it. start is the real time
// just before that process was started (its libfaketime start time is a few
// milliseconds later); the zero time means now.
func NewClock(path string, start time.Time) (*Clock, error) {
	if start.IsZero() {
		start = time.Now()
	}
	c := &Clock{path: path, start: start, since: time.Now(), rate: 1}
	if err := WriteFile(path, 0, 1); err != nil {
		return nil, err
	}
	return c, nil
}

// Path returns the timestamp file's path.
func (c *Clock) Path() string { return c.path }

// Set makes the process's wall clock read real + offset now and run at rate
// times real speed from now on. Set(0, 1) restores real time. Errors: rate
// must be finite and > 0, and writing the file may fail.
func (c *Clock) Set(offset time.Duration, rate float64) error {
	if _, err := Spec(offset, rate); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setLocked(time.Now(), offset, rate)
}

// SetRate changes the rate from now on and keeps the current offset, so the
// clock does not jump.
func (c *Clock) SetRate(rate float64) error {
	if _, err := Spec(0, rate); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	return c.setLocked(now, c.offsetAtLocked(now), rate)
}

func (c *Clock) setLocked(now time.Time, offset time.Duration, rate float64) error {
	// fake(t) = S + o + (t-S)*rate must equal now + offset at t = now:
	// o = offset - (now-S)*(rate-1).
	age := now.Sub(c.start).Seconds()
	o := offset - time.Duration(age*(rate-1)*float64(time.Second))
	if err := WriteFile(c.path, o, rate); err != nil {
		return err
	}
	c.since, c.offset, c.rate = now, offset, rate
	return nil
}

// Restarted tells the Clock that its process was started again at start
// (the real time just before the new process was started; libfaketime starts
// anew in it) and rewrites the file so that the clock keeps the offset it has
// now and the rate last set: a skew survives a restart. Call it before
// starting the new process, and again with a better start time if one is
// known afterwards. Errors come from writing the file.
func (c *Clock) Restarted(start time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	offset := c.offsetAtLocked(now)
	c.start = start
	return c.setLocked(now, offset, c.rate)
}

// Offset returns how far the process's wall clock is ahead of real time at
// real time t (negative: behind), as last set.
func (c *Clock) Offset(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offsetAtLocked(t)
}

func (c *Clock) offsetAtLocked(t time.Time) time.Duration {
	return c.offset + time.Duration(t.Sub(c.since).Seconds()*(c.rate-1)*float64(time.Second))
}

// Rate returns the rate last set (1 initially).
func (c *Clock) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// calibrateTries bounds Calibrate's attempts.
const calibrateTries = 5

// Start returns the libfaketime start time the Clock assumes for the process.
func (c *Clock) Start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start
}

// Calibrate measures the process's libfaketime start time S, so that later
// rate changes are exact. now must return the process's own wall clock (for
// Redis: the TIME command). Calibrate briefly writes "+0 x2", under which the
// process reads 2t - S, asks it the time, computes S from the midpoint of the
// call, and writes the current setting back. During that one call the
// process's clock runs ahead by its age, so call Calibrate right after the
// process started, before it holds data. Errors come from now or from
// writing the file; on error the current setting is written back. A reading
// that puts the start after the call (a process younger than half the
// call's duration) is retried, up to calibrateTries times.
func (c *Clock) Calibrate(ctx context.Context, now func(context.Context) (time.Time, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := writeSpec(c.path, "+0 x2"); err != nil {
		return err
	}
	// The midpoint estimate is off by up to half the call's duration, so a
	// process younger than that (just started, on a loaded machine) can
	// compute a start time after the call: it is older at the next try.
	var err error
	for try := 0; try < calibrateTries; try++ {
		t1 := time.Now()
		var fake time.Time
		fake, err = now(ctx)
		t2 := time.Now()
		if err != nil {
			break
		}
		mid := t1.Add(t2.Sub(t1) / 2)
		// fake = S + 2(mid - S) = 2mid - S  =>  S = mid - (fake - mid)
		s := mid.Add(-fake.Sub(mid))
		if s.Before(t1) {
			c.start = s
			break
		}
		err = fmt.Errorf("clockskew: calibrating %q: computed start time %v is not before the call (%d tries); the process does not follow the file", c.path, s, try+1)
	}
	t := time.Now()
	if werr := c.setLocked(t, c.offsetAtLocked(t), c.rate); werr != nil && err == nil {
		err = werr
	}
	return err
}
