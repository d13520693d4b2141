package nodecheck

import (
	"errors"
	"testing"
)

// TestServer: each setting's judgement, from INFO alone (a client's first
// contact: conf nil) and with CONFIG GET values (doctor), and which
// findings the restart quarantine covers.
func TestServer(t *testing.T) {
	type want struct {
		level      string
		quarantine bool
	}
	for _, tc := range []struct {
		name  string
		in    map[string]string
		conf  map[string]string
		cerr  error
		check string
		want  want
	}{
		{"old server", map[string]string{"redis_version": "2.4.1"}, nil, nil, "version", want{Bad, false}},
		{"no TIME in scripts", map[string]string{"redis_version": "4.0.9"}, nil, nil, "version", want{Warn, false}},
		{"evicting with maxmemory", map[string]string{"maxmemory_policy": "volatile-lru", "maxmemory": "1000"}, nil, nil, "maxmemory-policy", want{Bad, false}},
		{"evicting, no maxmemory yet", map[string]string{"maxmemory_policy": "allkeys-lfu", "maxmemory": "0"}, nil, nil, "maxmemory-policy", want{Warn, false}},
		{"noeviction", map[string]string{"maxmemory_policy": "noeviction"}, nil, nil, "maxmemory-policy", want{OK, false}},
		{"policy unknown", map[string]string{}, nil, nil, "maxmemory-policy", want{Info, false}},
		{"no AOF", map[string]string{"aof_enabled": "0"}, nil, nil, "persistence", want{Warn, true}},
		{"no AOF, RDB", map[string]string{"aof_enabled": "0"}, map[string]string{"save": "900 1"}, nil, "persistence", want{Bad, false}},
		{"AOF, fsync not read", map[string]string{"aof_enabled": "1"}, nil, nil, "persistence", want{Info, true}},
		{"AOF, CONFIG refused", map[string]string{"aof_enabled": "1"}, map[string]string{}, errors.New("NOPERM"), "persistence", want{Unknown, true}},
		{"no AOF, CONFIG refused", map[string]string{"aof_enabled": "0"}, map[string]string{}, errors.New("NOPERM"), "persistence", want{Unknown, true}},
		{"no AOF, save read, a later CONFIG GET refused", map[string]string{"aof_enabled": "0"}, map[string]string{"appendfsync": "everysec", "save": ""}, errors.New("NOPERM"), "persistence", want{Warn, true}},
		{"AOF write failed", map[string]string{"aof_enabled": "1", "aof_last_write_status": "err", "rdb_last_bgsave_status": "ok"}, nil, nil, "disk", want{Bad, false}},
		{"snapshot failed", map[string]string{"aof_enabled": "0", "aof_last_write_status": "ok", "rdb_last_bgsave_status": "err"}, nil, nil, "disk", want{Bad, false}},
		{"disk takes writes", map[string]string{"aof_enabled": "1", "aof_last_write_status": "ok", "rdb_last_bgsave_status": "ok"}, nil, nil, "disk", want{OK, false}},
		{"AOF everysec", map[string]string{"aof_enabled": "1"}, map[string]string{"appendfsync": "everysec"}, nil, "persistence", want{Warn, true}},
		{"AOF always", map[string]string{"aof_enabled": "1"}, map[string]string{"appendfsync": "always"}, nil, "persistence", want{OK, false}},
		{"replica", map[string]string{"role": "slave", "master_host": "h", "master_port": "1"}, nil, nil, "role", want{Bad, false}},
		{"master with replicas", map[string]string{"role": "master", "connected_slaves": "2"}, nil, nil, "role", want{Warn, true}},
		{"promoted", map[string]string{"role": "master", "connected_slaves": "0", "master_replid2": "5d4b2e9a1c3f00000000000000000000000000ff"}, nil, nil, "role", want{Warn, true}},
		{"lone master", map[string]string{"role": "master", "connected_slaves": "0", "master_replid2": NoReplID}, nil, nil, "role", want{OK, false}},
		{"cluster", map[string]string{"cluster_enabled": "1"}, nil, nil, "cluster", want{Warn, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Finding
			for _, f := range Server(tc.in, tc.conf, tc.cerr) {
				if f.Check == tc.check {
					got = append(got, f)
				}
			}
			if len(got) != 1 || got[0].Level != tc.want.level || got[0].Quarantine != tc.want.quarantine || got[0].Text == "" {
				t.Fatalf("%s: %+v, want one finding at %s (quarantine covers it: %v)", tc.check, got, tc.want.level, tc.want.quarantine)
			}
		})
	}
	// Nothing known, nothing judged but "does not say".
	for _, f := range Server(nil, nil, nil) {
		if f.Level != Info {
			t.Errorf("no INFO fields: %+v", f)
		}
	}
}

// TestPersistenceIsTheOneRule: Server's persistence finding is
// Persistence's, for every combination of the settings it reads (doctor
// and the first-contact check both go through Server), and a CONFIG GET
// that was refused never gives a milder level than Unknown where the value
// it did not read decides.
func TestPersistenceIsTheOneRule(t *testing.T) {
	refused := errors.New("NOPERM")
	for _, aof := range []string{"", "0", "1"} {
		for _, conf := range []map[string]string{nil, {}, {"appendfsync": "always", "save": ""}, {"appendfsync": "everysec", "save": "900 1"}} {
			for _, cerr := range []error{nil, refused} {
				in := map[string]string{"aof_enabled": aof}
				want := Persistence(in, conf, cerr)
				var got []Finding
				for _, f := range Server(in, conf, cerr) {
					if f.Check == "persistence" {
						got = append(got, f)
					}
				}
				if len(got) != 1 || got[0] != want {
					t.Errorf("aof %q conf %v err %v: Server gives %+v, Persistence %+v", aof, conf, cerr, got, want)
				}
				if _, read := conf["appendfsync"]; aof == "1" && !read && cerr != nil && want.Level != Unknown {
					t.Errorf("aof on, appendfsync refused: %s, want unknown", want.Level)
				}
				if _, read := conf["save"]; aof == "0" && !read && cerr != nil && want.Level != Unknown {
					t.Errorf("aof off, save refused: %s, want unknown", want.Level)
				}
			}
		}
	}
}
