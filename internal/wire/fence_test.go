package wire

import (
	"errors"
	"math"
	"testing"
)

// TestParseLegacy: a counter written before counters carried their run (or
// a key that holds a number) is read as Redis's scripts read it, tonumber and
// then the integer reply, with no run. The expectations were measured on
// redis-server 7.0.15 with
// EVAL "return {1, tonumber(redis.call('GET', KEYS[1]))}" 1 x
// (a reply of [1] alone: no number). The node suite (package nodetest)
// checks a few of them on real servers.
func TestParseLegacy(t *testing.T) {
	const none = int64(math.MaxInt64) // no number
	for _, tc := range []struct {
		s    string
		want int64
	}{
		{"7", 7}, {"+7", 7}, {"12.7", 12}, {"-3.5", -3}, {".5", 0}, {"5.", 5},
		{"1e3", 1000}, {"1E+2", 100}, {"  42  ", 42}, {"12\x00ab", 12},
		{" 0x1A", 26}, {"0X10", 16}, {"0x1p4", 16},
		{"9007199254740991", 9007199254740991}, {"-9007199254740991", -9007199254740991},
		// Past 2^53 a double no longer counts by one: no counter.
		{"9007199254740992", none}, {"9007199254740993", none}, {"99999999999999999999:ab", none},
		{"infinity", none}, {"-inf", none}, {"nan", none}, {"1e400", none},
		{"", none}, {"x", none}, {"1_000", none}, {"0x", none}, {"--7", none}, {"1e", none}, {"7 x", none},
		{"7:", none}, {":ab", none}, {"7:xyz", none}, {"-7:ab", none},
	} {
		got := none
		n, run, err := ParseFence(tc.s)
		switch {
		case err == nil && run != "":
			t.Errorf("ParseFence(%q) gave run %q, want none", tc.s, run)
		case err == nil:
			got = n
		case !errors.Is(err, ErrNoCounter):
			t.Errorf("ParseFence(%q) = %v, want ErrNoCounter", tc.s, err)
		}
		if got != tc.want {
			t.Errorf("ParseFence(%q) = %d, want %d (%d: no counter)", tc.s, got, tc.want, none)
		}
	}
}

// TestReadByRun: an acquire reads a counter written by the server's current
// run, and reads any other (another run's, or one with no run) as lost.
func TestReadByRun(t *testing.T) {
	const run, old = "3dd8ab0a848c", "77aa01"
	for _, tc := range []struct {
		s     string
		found bool
		want  int64
	}{
		{"", false, 0},
		{FormatFence(42, run), true, 42},
		{FormatFence(42, old), true, 0},
		{"42", true, 0},
		{FormatFence(1764300000123456, run), true, 1764300000123456},
	} {
		got, err := ReadFence(tc.s, tc.found, run, false)
		if err != nil || got != tc.want {
			t.Errorf("ReadFence(%q, %v, %q) = %d, %v; want %d", tc.s, tc.found, run, got, err, tc.want)
		}
	}
	if _, err := ReadFence("x", true, run, false); !errors.Is(err, ErrNoCounter) {
		t.Errorf("ReadFence(\"x\") = %v, want ErrNoCounter", err)
	}
	if got, err := ReadFence(FormatFence(42, old), true, run, true); got != 42 || err != nil {
		t.Errorf("ReadFence of another run's counter with anyRun = %d, %v; want 42", got, err)
	}
	n, r, err := ParseFence(FormatFence(9, run))
	if n != 9 || r != run || err != nil {
		t.Errorf("ParseFence(FormatFence(9, %q)) = %d, %q, %v", run, n, r, err)
	}
}

// TestParseEpochStamp: a counter raised by a client with a configuration
// record carries its epoch; ParseFence reads the number and run of either
// form, and a malformed stamp is no counter.
func TestParseEpochStamp(t *testing.T) {
	for _, tc := range []struct {
		s         string
		n, epoch  int64
		run       string
		noCounter bool
	}{
		{s: "7:ab", n: 7, run: "ab"},
		{s: "7:ab:3", n: 7, run: "ab", epoch: 3},
		{s: "7:ab:", noCounter: true},
		{s: "7:ab:x", noCounter: true},
		{s: "7:ab:3:4", noCounter: true},
		{s: "7::3", noCounter: true},
		{s: "7:ab:99999999999999999999", noCounter: true},
	} {
		n, run, epoch, err := ParseFenceEpoch(tc.s)
		if tc.noCounter {
			if !errors.Is(err, ErrNoCounter) {
				t.Errorf("ParseFenceEpoch(%q) = %d, %q, %d, %v; want ErrNoCounter", tc.s, n, run, epoch, err)
			}
			continue
		}
		if err != nil || n != tc.n || run != tc.run || epoch != tc.epoch {
			t.Errorf("ParseFenceEpoch(%q) = %d, %q, %d, %v; want %d, %q, %d", tc.s, n, run, epoch, err, tc.n, tc.run, tc.epoch)
		}
		if n2, run2, err := ParseFence(tc.s); err != nil || n2 != tc.n || run2 != tc.run {
			t.Errorf("ParseFence(%q) = %d, %q, %v", tc.s, n2, run2, err)
		}
	}
}
