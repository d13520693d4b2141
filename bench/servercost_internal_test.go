package bench

import (
	"testing"
	"time"
)

// TestParseServerCost reads the main thread's CPU time (falling back to
// the process's) and sums only the commands that run scripts: the commands
// a script calls are counted by commandstats again and are not summed.
func TestParseServerCost(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:9.5\r\nused_cpu_user:9.5\r\nused_cpu_sys_main_thread:1.25\r\nused_cpu_user_main_thread:0.5\r\n" +
		"# Commandstats\r\ncmdstat_evalsha:calls=10,usec=300,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=10,usec=7,usec_per_call=0.70,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall_ro:calls=1,usec=20,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_set:calls=10,usec=11,usec_per_call=1.10,rejected_calls=0,failed_calls=0\r\n"
	got := parseServerCost(info)
	want := serverCost{cpu: 1750 * time.Millisecond, scripts: 320 * time.Microsecond}
	if got != want {
		t.Errorf("parseServerCost = %+v, want %+v", got, want)
	}
	old := parseServerCost("used_cpu_sys:1.5\r\nused_cpu_user:0.25\r\n")
	if old.cpu != 1750*time.Millisecond || old.scripts != 0 {
		t.Errorf("without the main thread's figures: %+v, want cpu 1.75s, no scripts", old)
	}
}
