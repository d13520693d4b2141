// Package nodecheck judges a Redis server's settings against the lock's
// assumptions: the checks of quorumlock doctor that INFO (and, when it can
// be read, CONFIG GET) can tell, written once for doctor and for the
// library's check at a client's first contact with a server.
package nodecheck

import (
	"fmt"
	"strconv"
	"strings"
)

// Levels of a finding, from sound to broken.
const (
	OK   = "ok"
	Info = "info"
	Warn = "warn"
	Bad  = "bad"
	// Unknown: a check could not read what it needs (CONFIG GET refused)
	// and what it did not read could make it bad; quorumlock doctor counts
	// it as bad.
	Unknown = "unknown"
)

// Finding is one judgement on one setting.
type Finding struct {
	// Level is OK, Info, Warn or Bad.
	Level string
	// Check names the setting: version, maxmemory-policy, persistence,
	// disk, role, cluster, tcp-backlog.
	Check string
	// Text is the finding and its advice, one line.
	Text string
	// Quarantine: the restart quarantine covers what Text warns of (a
	// restart or a failover that loses lock keys).
	Quarantine bool
}

// Fields lists the INFO fields Server reads (sections server, memory,
// persistence, replication, cluster).
var Fields = []string{
	"redis_version", "valkey_version", "server_name",
	"maxmemory", "maxmemory_human", "maxmemory_policy",
	"aof_enabled", "aof_last_write_status", "rdb_last_bgsave_status",
	"role", "master_host", "master_port", "connected_slaves", "master_replid2",
	"cluster_enabled",
}

// NoReplID is master_replid2 of a master that was never promoted.
const NoReplID = "0000000000000000000000000000000000000000"

// Server judges one server from its INFO fields (in) and the CONFIG GET
// values read (conf: appendfsync, save, tcp-backlog; nil when CONFIG GET
// was not tried, confErr when it was refused). A check whose fields are
// absent from in is judged Info ("does not say") or left out; one that
// rests on a CONFIG GET value that was refused is Unknown.
func Server(in, conf map[string]string, confErr error) []Finding {
	var out []Finding
	add := func(level, check string, quarantine bool, format string, args ...any) {
		out = append(out, Finding{Level: level, Check: check, Text: fmt.Sprintf(format, args...), Quarantine: quarantine})
	}

	// Version.
	if in["redis_version"] != "" {
		ver := Version(in)
		major, minor := versionNumbers(in["redis_version"])
		switch {
		case major < 2 || major == 2 && minor < 6:
			add(Bad, "version", false, "%s has no Lua scripting (EVAL came in 2.6): the lock cannot run here", ver)
		case major < 5:
			add(Warn, "version", false, "%s: the read-write lock's and semaphore's scripts read TIME before writing, which Redis refuses before 5.0 (mutexes work); upgrade", ver)
		default:
			add(OK, "version", false, "%s", ver)
		}
	}

	// Eviction.
	policy := in["maxmemory_policy"]
	maxmem, _ := strconv.ParseInt(in["maxmemory"], 10, 64)
	switch {
	case policy == "":
		add(Info, "maxmemory-policy", false, "INFO memory does not say: check that maxmemory-policy is noeviction (keys with a TTL, as lock keys are, must not be evicted)")
	case Evicting(policy) && maxmem > 0:
		add(Bad, "maxmemory-policy", false, "%s with maxmemory %s evicts keys with a TTL, lock keys among them: a held lock can vanish from this master; set maxmemory-policy noeviction", policy, in["maxmemory_human"])
	case Evicting(policy):
		add(Warn, "maxmemory-policy", false, "%s evicts keys with a TTL (lock keys among them) as soon as a maxmemory is set (none is now): set maxmemory-policy noeviction", policy)
	default:
		add(OK, "maxmemory-policy", false, "%s: lock keys are never evicted (when memory is full, writes fail and the lock reports it)", policy)
	}

	// Persistence, and whether the disk takes the writes.
	out = append(out, Persistence(in, conf, confErr))
	if f, ok := Disk(in); ok {
		out = append(out, f)
	}

	// Role.
	switch role := in["role"]; {
	case role == "":
	case role == "slave":
		add(Bad, "role", false, "a replica of %s:%s: it refuses writes (READONLY) and is not an independent master: list masters only", in["master_host"], in["master_port"])
	case in["connected_slaves"] != "" && in["connected_slaves"] != "0":
		n, _ := strconv.Atoi(in["connected_slaves"])
		add(Warn, "role", true, "a master with %s: a failover (Sentinel, an operator) promotes a replica that may lack lock keys, as a restart without persistence would: use the restart quarantine (a promotion changes the run_id)", plural(n, "replica"))
	case in["master_replid2"] != "" && in["master_replid2"] != NoReplID:
		add(Warn, "role", true, "a master promoted from a replica: it may lack lock keys the old master granted; the restart quarantine treats it as new")
	default:
		add(OK, "role", false, "a master without replicas")
	}

	// Cluster mode.
	if in["cluster_enabled"] == "1" {
		add(Warn, "cluster", false, "cluster mode: one server answers MOVED for keys of other slots, and a whole cluster is one vote; quorumlock's commands take standalone masters (for a cluster use the library with redisnode.New and a ClusterClient)")
	}

	// Accept queue.
	if b, ok := conf["tcp-backlog"]; ok {
		add(Info, "tcp-backlog", false, "%s: a paused server still accepts up to %s connections and runs what they sent when it resumes: a late acquire after its release is refused (the release guard), but one of a waiter that left the line can put it back in, and a key a release then hands it lasts until its TTL (docs/handoff.md)", b, b)
	}
	return out
}

// Evicting reports whether a maxmemory-policy can evict a key with a TTL.
func Evicting(policy string) bool {
	return strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-")
}

// Version names the server and its version: "redis 7.0.15", "valkey 8.0.1".
func Version(in map[string]string) string {
	if v := in["valkey_version"]; v != "" {
		return "valkey " + v
	}
	name := in["server_name"]
	if name == "" {
		name = "redis"
	}
	return name + " " + in["redis_version"]
}

// versionNumbers returns the major and minor of "7.0.15".
func versionNumbers(v string) (int, int) {
	parts := strings.SplitN(v, ".", 3)
	major, _ := strconv.Atoi(parts[0])
	minor := 0
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor
}

// plural is "1 replica", "2 replicas".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
