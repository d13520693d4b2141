// The fencing counter's value, at FenceKey(name): the counter and the
// server run that last wrote it, "<counter>:<run>", followed by
// ":<epoch>" when a client with a configuration record raised it (the
// epoch of its record; docs/reconfig.md), where a Redis run is its
// run_id followed by its master_replid (a master demoted, resynced and
// promoted again keeps its run_id but not its replication ID); memnode's run
// is its RunID. The scripts of node/redisnode read and write it in Lua
// (acquire_fenced.lua, acquire_queued.lua, raise_fence.lua); memnode and the
// Go readers (Peek, quorumlock status) use the functions here, so that the
// rule is written once on each side of the wire.
//
// Why the run: a counter that a master brings back from its disk after a
// restart may be older than what it had handed out (appendfsync everysec
// loses the AOF's last second in a host crash; a snapshot is older still).
// A counter that exists but is old breaks the fencing argument, which needs
// a counter that either survived or is known lost (docs/algorithm.md,
// "Fencing tokens"). So an acquire reads a counter written by another run
// of the server as lost (0), and the coordinator's epoch rule covers it.

package wire

import (
	"errors"
	"strconv"
	"strings"
)

// ErrNoCounter is returned by ParseFence and ReadFence for a value that is no counter (a lock
// named like a counter key, for example).
var ErrNoCounter = errors.New("holds no fencing counter")

// ParseFence reads a counter value s as the scripts do: "<digits>:<hex run>"
// gives that number and run; a plain number (written before counters
// carried their run, read as Lua 5.1's tonumber reads it) gives its value
// truncated toward zero and run "", which is no server's run; anything
// else, and a number whose magnitude is 2^53 or more (where Lua's doubles
// stop counting by one; NaN, infinities), fails with ErrNoCounter.
func ParseFence(s string) (n int64, run string, err error) {
	n, run, _, err = ParseFenceEpoch(s)
	return n, run, err
}

// ParseFenceEpoch is ParseFence that also returns the configuration epoch
// the counter was written at: a counter raised by a client with a
// configuration record (docs/reconfig.md, "Fence tokens across the change")
// is "<counter>:<run>:<epoch>"; any other counter is of epoch 0.
func ParseFenceEpoch(s string) (n int64, run string, epoch int64, err error) {
	if num, r, ok := strings.Cut(s, ":"); ok && digits(num) {
		if r2, ep, ok := strings.Cut(r, ":"); ok {
			if !hexDigits(r2) || !digits(ep) {
				return 0, "", 0, ErrNoCounter
			}
			if epoch, err = strconv.ParseInt(ep, 10, 64); err != nil {
				return 0, "", 0, ErrNoCounter
			}
			r = r2
		}
		if hexDigits(r) {
			n, run, err := parseStamped(num, r)
			return n, run, epoch, err
		}
	}
	v, ok := luaNumber(s)
	if !ok || !exact(v) {
		return 0, "", 0, ErrNoCounter
	}
	return int64(v), "", 0, nil
}

// parseStamped reads a stamped counter's number and run.
func parseStamped(num, r string) (int64, string, error) {
	v, err := strconv.ParseFloat(num, 64) // Lua's tonumber: a double
	if err != nil || !exact(v) {
		return 0, "", ErrNoCounter
	}
	return int64(v), r, nil
}

// exact reports whether f is a number the scripts accept as a counter:
// below 2^53 in magnitude (not NaN).
func exact(f float64) bool { return f > -0x1p53 && f < 0x1p53 }

// ReadFence is what an acquire reads from a counter value s on a server
// whose current run is run: the counter when this run wrote it, else 0 (the
// counter counts as lost); with anyRun (knobs.NoRunStamp, test-only) a
// counter of any run counts. found is false when the key is absent.
func ReadFence(s string, found bool, run string, anyRun bool) (int64, error) {
	return ReadFenceAt(s, found, run, anyRun, 0, false)
}

// ReadFenceAt is ReadFence for a client at configuration epoch f (0:
// without a record), as acquire_fenced.lua reads: a counter stamped with
// an epoch below f - 1 (no stamp: epoch 0) also reads as lost; with
// anyEpoch (knobs.NoConfigStamp, test-only) the stamp is not read.
func ReadFenceAt(s string, found bool, run string, anyRun bool, f int64, anyEpoch bool) (int64, error) {
	if !found {
		return 0, nil
	}
	n, r, epoch, err := ParseFenceEpoch(s)
	if err != nil {
		return 0, err
	}
	if r != run && !anyRun || f > 0 && epoch < f-1 && !anyEpoch {
		return 0, nil
	}
	return n, nil
}

// FormatFence is the value raise_fence.lua writes: counter n of run run.
func FormatFence(n int64, run string) string {
	return strconv.FormatInt(n, 10) + ":" + run
}

// FormatFenceAt is FormatFence stamped with configuration epoch epoch,
// as raise_fence.lua writes it for a client with a record (0: no stamp).
func FormatFenceAt(n int64, run string, epoch int64) string {
	if epoch <= 0 {
		return FormatFence(n, run)
	}
	return FormatFence(n, run) + ":" + strconv.FormatInt(epoch, 10)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func hexDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// luaNumber is Lua 5.1's tonumber on a string, as Redis's scripts read a
// fencing counter: C's strtod of s up to its first NUL byte, with white
// space around it, also hexadecimal ("0x1A", "0x1.8p1"), "inf" and "nan";
// ok is false when s is no number.
func luaNumber(s string) (f float64, ok bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(s, " \t\n\v\f\r")
	if strings.ContainsRune(s, '_') { // ParseFloat takes digit separators; strtod does not
		return 0, false
	}
	body := strings.TrimLeft(s, "+-")
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') && !strings.ContainsAny(body, "pP") {
		s += "p0" // strtod takes a hexadecimal number without an exponent; ParseFloat wants one
	}
	f, err := strconv.ParseFloat(s, 64)
	var ne *strconv.NumError
	if err != nil && !(errors.As(err, &ne) && ne.Err == strconv.ErrRange) {
		return 0, false
	}
	return f, true
}
