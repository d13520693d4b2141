package nodecheck

import "fmt"

// The one rule for a master's persistence, which quorumlock doctor and the
// client's check at first contact (redlock's NodeStateEvent.Findings) share. What
// each setting means for the lock:
//
//	setting                          mutual exclusion            fencing tokens
//	appendonly yes, appendfsync      safe: keys survive a crash  safe
//	  always
//	appendonly yes, everysec or no   a host crash loses the      safe: a counter that comes
//	                                 last second's keys: the     back old is stamped with the
//	                                 restart quarantine covers   old run and read as lost, and
//	                                 it                          the token starts a new epoch
//	appendonly no, no snapshots      a restart loses every key:  safe (as above: every counter
//	                                 the quarantine covers it    is lost)
//	appendonly no, RDB snapshots     a restart loads an older    safe (the counters it loads
//	                                 snapshot: bad               are stamped with the old run)
//
// Fencing keeps its tokens monotonic under every setting (the run stamp
// and the epoch); mutual exclusion needs appendfsync always, or the
// restart quarantine. A failing disk is judged apart (Disk).

// Persistence judges a master's persistence from INFO's aof_enabled and
// the CONFIG GET values appendfsync and save (conf nil: not read; confErr:
// CONFIG GET refused, which makes a finding that rests on them Unknown).
// Quarantine is set when the restart quarantine covers what it warns of.
func Persistence(in, conf map[string]string, confErr error) Finding {
	f := func(level string, quarantine bool, format string, args ...any) Finding {
		return Finding{Level: level, Check: "persistence", Quarantine: quarantine, Text: fmt.Sprintf(format, args...)}
	}
	fsync, fsyncRead := conf["appendfsync"]
	save, saveRead := conf["save"]
	switch aof := in["aof_enabled"]; {
	case aof == "":
		return f(Info, false, "INFO persistence does not say whether appendonly is on")
	case aof == "1" && fsync == "always":
		return f(OK, false, "appendonly yes, appendfsync always: lock keys and fencing counters survive a crash; the restart quarantine may exempt this master (durable)")
	case aof == "1" && !fsyncRead && confErr != nil:
		return f(Unknown, true, "appendonly yes, appendfsync could not be read (CONFIG GET refused: %v): unless it is always, a crash loses the last writes (use the restart quarantine); grant +config|get to check", confErr)
	case aof == "1" && !fsyncRead:
		return f(Info, true, "appendonly yes, appendfsync not read: unless it is always, a crash loses the last writes: use the restart quarantine")
	case aof == "1":
		return f(Warn, true, "appendonly yes but appendfsync %s: a crash loses the last writes (a lock just taken; a fencing counter just raised comes back old and reads as lost, so tokens stay monotonic): set appendfsync always, or use the restart quarantine (quorumlock run --quarantine, redlock.WithRestartQuarantine)", fsync)
	case !saveRead && confErr != nil:
		return f(Unknown, true, "appendonly no, and whether RDB snapshots are on could not be read (CONFIG GET save refused: %v): with snapshots this is bad (a restart loads an older snapshot: lock keys lost, fencing counters go back), without them a warn (a restart loses the lock keys: use the restart quarantine); grant +config|get to check", confErr)
	case save != "":
		return f(Bad, false, "appendonly no with RDB snapshots (save %q): a restart loads an older snapshot, so lock keys taken since are lost (fencing counters come back old and read as lost): use appendonly yes with appendfsync always, or no persistence with the restart quarantine", save)
	}
	return f(Warn, true, "appendonly no: a restarted master comes back without the lock keys it granted, and another client can take a held lock: use the restart quarantine (at least the TTL), or appendonly yes with appendfsync always")
}

// Disk judges whether the master's last writes to its disk succeeded, from
// INFO persistence: aof_last_write_status (with appendonly yes) and
// rdb_last_bgsave_status. Either at "err" (a full or failing disk) is Bad:
// Redis then answers writes, the lock's scripts among them, with MISCONF
// (with appendfsync always it exits instead), so the master grants and
// releases nothing until its disk takes writes again; the lock reports its
// votes and releases as node errors and retries the releases. ok is false
// when INFO says neither.
func Disk(in map[string]string) (Finding, bool) {
	aof, rdb := in["aof_last_write_status"], in["rdb_last_bgsave_status"]
	if aof == "" && rdb == "" {
		return Finding{}, false
	}
	f := func(level, format string, args ...any) (Finding, bool) {
		return Finding{Level: level, Check: "disk", Text: fmt.Sprintf(format, args...)}, true
	}
	switch {
	case aof == "err" && in["aof_enabled"] != "0":
		return f(Bad, "the last write to the append-only file failed (aof_last_write_status:err: a full or failing disk): Redis refuses writes with MISCONF, so this master grants and releases no lock until its disk takes writes again; free the disk")
	case rdb == "err":
		return f(Bad, "the last RDB snapshot failed (rdb_last_bgsave_status:err: a full or failing disk): with stop-writes-on-bgsave-error yes (the default) Redis refuses writes with MISCONF, so this master grants and releases no lock; free the disk")
	}
	return f(OK, "the last writes to disk succeeded (aof_last_write_status %s, rdb_last_bgsave_status %s)", or(aof, "not reported"), or(rdb, "not reported"))
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
