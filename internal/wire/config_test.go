package wire

import (
	"strings"
	"testing"
	"time"
)

// TestConfigCheckRefuses: a configuration that cannot work is refused with
// the bad value named, but never a value that may hold a password.
func TestConfigCheckRefuses(t *testing.T) {
	good := Config{Epoch: 1, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, Quorum: 2, MaxKeyTTL: time.Minute, DriftFactor: 0.01}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"a key life past the bound", func(c *Config) { c.MaxKeyTTL = 2000000 * time.Hour }, "longest key life 2000000h0m0s"},
		{"a URL with a password", func(c *Config) { c.Masters[0] = "redis://admin:hunter2@10.0.0.9:6379" }, `master 1 "(not shown`},
		{"a master twice", func(c *Config) { c.Masters[1] = c.Masters[0] }, `master "10.0.0.1:6379" listed twice`},
		{"an epoch past what the scripts count", func(c *Config) { c.Epoch = MaxEpoch + 1 }, "epoch 9007199254740991: want 1 to 9007199254740990"},
	} {
		cfg := good
		cfg.Masters = append([]string(nil), good.Masters...)
		c.change(&cfg)
		err := cfg.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want an error containing %q and no password", c.name, err, c.want)
		}
	}
}

// TestParseConfigRefuses: a file's line that cannot be read back is
// refused, the number of milliseconds included (it would wrap a
// time.Duration), and a line with a password is not quoted.
func TestParseConfigRefuses(t *testing.T) {
	text := Config{Epoch: 3, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, Quorum: 2, MaxKeyTTL: time.Minute, DriftFactor: 0.01}.Text()
	if _, err := ParseConfig(text); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"a wrapping key life", "maxkeyttl 60000", "maxkeyttl 288230376151711745", "want 1 to"},
		{"a URL", "master 10.0.0.1:6379", "master redis://u:hunter2@10.0.0.1:6379", "not shown"},
		{"an unknown line with a URL", "quorum 2", "quorum 2\nsecret redis://u:hunter2@h:1", "not shown"},
	} {
		_, err := ParseConfig(strings.Replace(text, c.old, c.new, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want an error containing %q and no password", c.name, err, c.want)
		}
	}
	if _, _, err := ParseRecord("3 single 288230376151711745 0123456789abcdef01234567"); err == nil {
		t.Error("ParseRecord took a key life that wraps a time.Duration")
	}
}

// TestJointConfig: a joint configuration reads back as written, its record
// names the mode and its hash covers the old set (in any order), and its
// sets, union and quorum test are both sets'.
func TestJointConfig(t *testing.T) {
	j := Config{Epoch: 4, Masters: []string{"h:1", "h:2", "h:4"}, Quorum: 2, Old: []string{"h:3", "h:1", "h:2"}, OldQuorum: 2, MaxKeyTTL: time.Second, DriftFactor: 0.01}
	if err := j.Check(); err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(j.Text())
	if err != nil || back.Record() != j.Record() || back.Text() != j.Text() {
		t.Fatalf("read back: %v, %+v", err, back)
	}
	if !strings.HasPrefix(j.Record(), "4 joint 1000 ") || !strings.HasPrefix(j.Removed(), "4 removed 1000 ") {
		t.Errorf("record %q, removed %q", j.Record(), j.Removed())
	}
	if _, _, err := ParseRecord(j.Record()); err != nil {
		t.Error(err)
	}
	reordered := j
	reordered.Old = []string{"h:1", "h:2", "h:3"}
	other := j
	other.Old = []string{"h:1", "h:2", "h:5"}
	single := j
	single.Old, single.OldQuorum = nil, 0
	if reordered.Record() != j.Record() || other.Record() == j.Record() || single.Record() == j.Record() {
		t.Error("the hash must cover the old set, not its order")
	}
	if got := strings.Join(j.All(), " "); got != "h:1 h:2 h:4 h:3" {
		t.Errorf("All: %s", got)
	}
	in := func(set ...string) func(string) bool {
		return func(a string) bool { return strings.Contains(" "+strings.Join(set, " ")+" ", " "+a+" ") }
	}
	switch {
	case !j.Reached(in("h:1", "h:2")):
		t.Error("h:1 and h:2 are a quorum of both sets")
	case !j.Reached(in("h:2", "h:3", "h:4")):
		t.Error("h:2, h:3, h:4: 2 of each")
	case j.Reached(in("h:1", "h:3")):
		t.Error("h:1 and h:3: 1 of the new set")
	case j.Reached(in("h:1", "h:4")):
		t.Error("h:1 and h:4: 1 of the old set")
	}
	if got := j.Summary(); got != "joint: 3 masters, quorum 2, and the old 3, quorum 2 (4 in all)" {
		t.Errorf("Summary: %s", got)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.OldQuorum = 1 }, "old quorum 1 of 3 old masters"},
		{func(c *Config) { c.Old, c.OldQuorum = nil, 2 }, "old quorum 2 without an old set"},
		{func(c *Config) { c.Old = []string{"h:1", "h:1", "h:3"} }, `old master "h:1" listed twice`},
		{func(c *Config) { c.Old = []string{"h:1", "x", "h:3"} }, `old master 2 "x": want host:port`},
	} {
		cfg := j
		c.change(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
	for _, c := range []struct{ text, want string }{
		{strings.Replace(j.Text(), "mode joint", "mode single", 1), "mode single with 3 old masters"},
		{strings.Replace(single.Text(), "mode single", "mode joint", 1), "mode joint with 0 old masters"},
		{strings.Replace(j.Text(), "mode joint", "mode triple", 1), "want single or joint"},
	} {
		if _, err := ParseConfig(c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}
