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
