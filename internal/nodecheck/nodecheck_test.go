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
		{"AOF, CONFIG refused", map[string]string{"aof_enabled": "1"}, map[string]string{}, errors.New("NOPERM"), "persistence", want{Info, true}},
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
