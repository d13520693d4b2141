package wire

import (
	"testing"
	"time"
)

func TestParseOwner(t *testing.T) {
	cases := []struct {
		in   string
		want Owner
	}{
		{"0123abcd?host=h.example&label=svc+a&pid=42", Owner{Token: "0123abcd", Host: "h.example", PID: 42, Label: "svc a"}},
		{"0123abcd?host=h", Owner{Token: "0123abcd", Host: "h"}},
		{"tok?host=h&pid=7&at=1795000000123", Owner{Token: "tok", Host: "h", PID: 7, Since: time.UnixMilli(1795000000123)}},
		{"tok?at=soon", Owner{Token: "tok"}},
		{"tok?at=-5", Owner{Token: "tok"}},
		{"0123abcd", Owner{Token: "0123abcd"}},
		{"tok?label=me", Owner{Token: "tok", Label: "me"}},
		{"tok?bad=%zz", Owner{Token: "tok?bad=%zz"}},
		{"", Owner{}},
	}
	for _, c := range cases {
		if got := ParseOwner(c.in); got != c.want {
			t.Errorf("ParseOwner(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// TestValueRoundTrip: what a client stores parses back to its token and
// metadata.
func TestValueRoundTrip(t *testing.T) {
	tok := NewToken()
	if !IsToken(tok) || IsToken(tok[1:]) || IsToken("0123456789ABCDEF0123456789ABCDEF") || NewToken() == tok {
		t.Errorf("NewToken = %q: 32 lowercase hex digits, fresh each time", tok)
	}
	at := time.UnixMilli(1795000000123)
	suffix := OwnerSuffix("h.example", 42, "svc a&b")
	if suffix != "?host=h.example&label=svc+a%26b&pid=42" {
		t.Errorf("OwnerSuffix = %q", suffix)
	}
	v := Value(tok, suffix, at)
	if v != tok+suffix+"&at=1795000000123" {
		t.Errorf("Value = %q", v)
	}
	want := Owner{Token: tok, Host: "h.example", PID: 42, Label: "svc a&b", Since: at}
	if got := ParseOwner(v); got != want {
		t.Errorf("ParseOwner(Value) = %+v, want %+v", got, want)
	}
	cv := v + CandidateSuffix("node a&b")
	if o := ParseOwner(cv); o.Candidate != "node a&b" || o.Token != tok || o.Label != "svc a&b" {
		t.Errorf("ParseOwner(a candidate's value) = %+v", o)
	}
	if tk, ok := ValueToken(cv); !ok || tk != tok {
		t.Errorf("ValueToken = %q, %v; want %q", tk, ok, tok)
	}
	if _, ok := ValueToken(tok); ok {
		t.Error("ValueToken of a value without '?': not quorumlock's")
	}
	if got := OwnerSuffix("", 7, ""); got != "?pid=7" {
		t.Errorf("OwnerSuffix without host and label = %q, want ?pid=7", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Value(tok, suffix, at) }); n != 1 {
		t.Errorf("Value: %v allocations, want 1", n)
	}
}
