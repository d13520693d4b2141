package chaos

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
)

func TestBuiltinScenarios(t *testing.T) {
	want := map[string]Expect{
		"healthy": Safe, "minority-killed": Safe, "minority-paused": Safe, "minority-partitioned": Safe,
		"slow-node": Safe, "clock-drift": Safe, "restart-delayed": Safe, "restart-aof": Safe,
		"replies-delayed": Safe, "work-overrun": Safe, "split-quorums": Safe, "rolling-restart-aof": Safe,
		"rw-minority-killed": Safe, "semaphore-node-paused": Safe, "reentrant-minority-paused": Safe, "election-restart-quarantined": Safe,
		"fair-paused-killed":  Safe,
		"replace-two-of-five": Safe, "replace-two-of-five-joint": Safe, "replace-two-of-five-swap": Unsafe, "recover-after-every-master-restarts": Safe,
		"restart-no-persistence": Unsafe, "restart-no-persistence-quarantined": Safe, "restart-no-persistence-fenced": Safe,
		"failover-no-key": Unsafe, "failover-no-key-quarantined": Safe,
		"clock-jump": Unsafe, "clock-jump-fenced": Safe,
		"client-pause": Unsafe, "client-pause-fenced": Safe, "client-pause-renewed": Safe,
		"aof-tail-loss-pg": Safe, "aof-tail-loss-pg-no-run-stamp": Unsafe,
		"aof-tail-loss-pg-n5": Safe, "aof-tail-loss-pg-n5-no-run-stamp": Unsafe,
		"clock-step-after-restart-pg": Safe, "clock-strobe-pg": Safe, "disk-full-pg": Safe, "one-way-partition-pg": Safe,
	}
	scs := Scenarios()
	if len(scs) != len(want) {
		t.Errorf("%d scenarios, want %d", len(scs), len(want))
	}
	for _, s := range scs {
		if e, ok := want[s.Name]; !ok || e != s.Expect {
			t.Errorf("scenario %s expects %s; want %q", s.Name, s.Expect, e)
		}
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
		if s.Duration < 30*time.Second || s.ShortDuration > 5*time.Second {
			t.Errorf("%s: durations %v / %v short; want >= 30s and <= 5s", s.Name, s.Duration, s.ShortDuration)
		}
	}
	// Scenarios returns copies.
	scs[0].Schedule = append(scs[0].Schedule, Step{})
	scs[1].Schedule[0].At = time.Hour
	if again := Scenarios(); len(again[0].Schedule) != 0 || again[1].Schedule[0].At == time.Hour {
		t.Error("Scenarios shares state between calls")
	}
}

func TestLookup(t *testing.T) {
	got, err := Lookup("clock-jump", "healthy")
	if err != nil || len(got) != 2 || got[0].Name != "clock-jump" || got[1].Name != "healthy" {
		t.Fatalf("Lookup = %v, %v", got, err)
	}
	_, err = Lookup("healthy", "no-such")
	if err == nil {
		t.Fatal("Lookup of an unknown name succeeded")
	}
	for _, s := range []string{`"no-such"`, "healthy", "restart-aof", "client-pause"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
}

func TestTargetNodes(t *testing.T) {
	cases := []struct {
		t    Target
		n    int
		want []int
	}{
		{Minority, 5, []int{3, 4}}, {Minority, 3, []int{2}}, {Minority, 7, []int{4, 5, 6}},
		{LastNode, 5, []int{4}}, {Pivot, 3, []int{1}}, {Pivot, 5, []int{2}},
		{All, 3, []int{0, 1, 2}}, {All, 1, []int{0}},
	}
	for _, c := range cases {
		got, err := c.t.Nodes(c.n)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s.Nodes(%d) = %v, %v; want %v", c.t, c.n, got, err, c.want)
		}
	}
	for _, c := range []struct {
		t Target
		n int
	}{{Minority, 1}, {Minority, 2}, {"bogus", 3}, {LastNode, 0}} {
		if _, err := c.t.Nodes(c.n); err == nil || !strings.Contains(err.Error(), string(c.t)) {
			t.Errorf("%q.Nodes(%d) error = %v; want one naming the target", c.t, c.n, err)
		}
	}
}

func TestValidateNamesBadValues(t *testing.T) {
	base := Scenario{Name: "x", Expect: Safe, Nodes: 3, TTL: time.Second, Clients: 2, Duration: time.Second, ShortDuration: time.Second}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(s *Scenario){
		`expect "maybe"`:       func(s *Scenario) { s.Expect = "maybe" },
		"nodes 0":              func(s *Scenario) { s.Nodes = 0 },
		"TTL -1s":              func(s *Scenario) { s.TTL = -time.Second },
		"clients 0":            func(s *Scenario) { s.Clients = 0 },
		"hold 1s":              func(s *Scenario) { s.Hold = time.Second },
		"node timeout 1s":      func(s *Scenario) { s.NodeTimeout = time.Second },
		"odd number of nodes":  func(s *Scenario) { s.Split, s.Nodes = true, 4 },
		"at least 2 clients":   func(s *Scenario) { s.Split, s.Clients = true, 1 },
		"neither a fault kind": func(s *Scenario) { s.Schedule = []Step{{At: 1}} },
		`unknown target "nowhere"`: func(s *Scenario) {
			s.Schedule = []Step{{Fault: faultinject.Kill{}, Target: "nowhere"}}
		},
		"negative duration":         func(s *Scenario) { s.Schedule = []Step{{At: -1, Pause: time.Millisecond}} },
		"must be below the TTL 1s":  func(s *Scenario) { s.Schedule = []Step{{Hold: 2 * time.Second, Pause: 1}} },
		"durations 0s / 1s (short)": func(s *Scenario) { s.Duration = 0 },
		"guarded by fencing tokens": func(s *Scenario) { s.Resource = PostgreSQL },
		`resource "mysql"`:          func(s *Scenario) { s.Resource = "mysql" },
		`knob "NoSuchKnob"`:         func(s *Scenario) { s.Knob = "NoSuchKnob" },
		"persistence [aof-everysec], not none": func(s *Scenario) {
			s.Schedule = []Step{{Fault: faultinject.AOFTailLoss{}, Target: LastNode}}
		},
		"needs Hold": func(s *Scenario) {
			s.Schedule = []Step{{Pause: time.Millisecond, Fault: faultinject.Kill{}, Target: LastNode}}
		},
	}
	for want, mod := range cases {
		s := base
		mod(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("Validate() = %v; want an error naming the scenario and containing %q", err, want)
		}
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	sc := Scenarios()[0]
	if _, err := Run(context.Background(), sc, Options{Nodes: -1}); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("Run with Nodes -1: %v", err)
	}
	if _, err := Run(context.Background(), sc, Options{Duration: -time.Second}); err == nil || !strings.Contains(err.Error(), "-1s") {
		t.Errorf("Run with Duration -1s: %v", err)
	}
	split, _ := Lookup("clock-jump")
	if _, err := Run(context.Background(), split[0], Options{Nodes: 4}); err == nil || !strings.Contains(err.Error(), "odd") {
		t.Errorf("Run of a split scenario on 4 nodes: %v", err)
	}
}

func TestStepName(t *testing.T) {
	s := Scenarios()
	var names []string
	for _, sc := range s {
		for _, st := range sc.Schedule {
			names = append(names, st.Name())
		}
	}
	joined := strings.Join(names, "\n")
	for _, want := range []string{"kill@minority for 1.5s every 300ms", "restart(delay=0s,none)@pivot while held(1.8s)", "client-pause(validity+300ms)", "clock-jump(+4s)@pivot", "work-overrun(validity+300ms)", "restart(delay=0s,aof-always)@rolling every 400ms",
		"aof-tail-loss(delay=0s)@pivot during client-pause(validity+700ms) while held(1ms) every 1.5s", "disk-full@last for 500ms every 300ms",
		"one-way-partition(downstream)@last for 800ms every 300ms", "clock-strobe(±3ms/10ms)@all", "clock-step-after-restart(+2m0s,none)@minority every 1.5s"} {
		if !strings.Contains(joined, want) {
			t.Errorf("step names %q lack %q", joined, want)
		}
	}
}
