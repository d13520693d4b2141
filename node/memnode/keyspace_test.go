package memnode

import (
	"math"
	"testing"
)

// TestLuaNumber: a fencing counter's key read as Redis's scripts read it,
// tonumber and then the integer reply. The expectations were measured on
// redis-server 7.0.15 with
// EVAL "return {1, tonumber(redis.call('GET', KEYS[1]))}" 1 x
// (a reply of [1] alone: no number). The suite (package nodetest) checks a
// few of them on real servers; miniredis differs on "1e3", "inf" and "nan".
func TestLuaNumber(t *testing.T) {
	const none = int64(math.MaxInt64) // no number
	for _, tc := range []struct {
		s    string
		want int64
	}{
		{"7", 7}, {"+7", 7}, {"12.7", 12}, {"-3.5", -3}, {".5", 0}, {"5.", 5},
		{"1e3", 1000}, {"1E+2", 100}, {"  42  ", 42}, {"12\x00ab", 12},
		{" 0x1A", 26}, {"0X10", 16}, {"0x1p4", 16},
		{"9007199254740993", 9007199254740992},
		{"infinity", math.MinInt64}, {"-inf", math.MinInt64}, {"nan", math.MinInt64}, {"1e400", math.MinInt64},
		{"", none}, {"x", none}, {"1_000", none}, {"0x", none}, {"--7", none}, {"1e", none}, {"7 x", none},
	} {
		got := none
		if f, ok := luaNumber(tc.s); ok {
			got = luaInteger(f)
		}
		if got != tc.want {
			t.Errorf("luaNumber(%q) read as a Redis integer = %d, want %d (%d: no number)", tc.s, got, tc.want, none)
		}
	}
}
