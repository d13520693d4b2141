package fence_test

import (
	"database/sql/driver"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/quorumlock/fence"
)

// TestParse: digits from 1 to 2^63-1 and nothing else; a refusal wraps
// ErrInvalid and quotes the text, cut to 64 bytes.
func TestParse(t *testing.T) {
	for s, want := range map[string]fence.Token{
		"1":                   1,
		"42":                  42,
		"007":                 7,
		"1795598639662539":    1795598639662539,
		"9223372036854775807": math.MaxInt64,
	} {
		if got, err := fence.Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", s, got, err, want)
		}
		if got := want.String(); strings.TrimLeft(s, "0") != got {
			t.Errorf("%d.String() = %q", want, got)
		}
	}
	for _, s := range []string{"", "0", "000", "-1", "+1", " 1", "1 ", "1\n", "1.5", "1e3", "0x10", "abc",
		"9223372036854775808", "99999999999999999999999", "١٢"} {
		_, err := fence.Parse(s)
		if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), strconv.Quote(s)) {
			t.Errorf("Parse(%q): %v; want ErrInvalid quoting it", s, err)
		}
	}
	long := strings.Repeat("7", 60) + strings.Repeat("x", 1000)
	_, err := fence.Parse(long)
	if !errors.Is(err, fence.ErrInvalid) || len(err.Error()) > 200 || !strings.Contains(err.Error(), "(1060 bytes)") {
		t.Errorf("a long value: %v", err)
	}
}

// TestTokenIsASQLParameter: a Token is a driver.Valuer giving its int64,
// which every database/sql driver takes for a bigint.
func TestTokenIsASQLParameter(t *testing.T) {
	var v driver.Valuer = fence.Token(42)
	got, err := v.Value()
	if err != nil || got != int64(42) {
		t.Fatalf("Value() = %#v, %v", got, err)
	}
	if got, err := driver.DefaultParameterConverter.ConvertValue(fence.Token(42)); err != nil || got != int64(42) {
		t.Fatalf("ConvertValue = %#v, %v", got, err)
	}
}

// TestFromEnv: the token as quorumlock run --fencing sets it
// (strconv.FormatInt of the lease's token, cmd/quorumlock/run.go);
// unset is ErrNoToken, a bad value ErrInvalid naming the variable.
func TestFromEnv(t *testing.T) {
	t.Setenv(fence.EnvVar, strconv.FormatInt(1795598639662539, 10))
	if got, err := fence.FromEnv(); err != nil || got != 1795598639662539 {
		t.Fatalf("FromEnv() = %d, %v", got, err)
	}
	for _, v := range []string{"", "0", "12ab", "-5"} {
		t.Setenv(fence.EnvVar, v)
		_, err := fence.FromEnv()
		if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "QUORUMLOCK_FENCE="+strconv.Quote(v)) {
			t.Errorf("QUORUMLOCK_FENCE=%q: %v", v, err)
		}
	}
	if err := os.Unsetenv(fence.EnvVar); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
	if _, err := fence.FromEnv(); !errors.Is(err, fence.ErrNoToken) || !strings.Contains(err.Error(), "QUORUMLOCK_FENCE is not set") {
		t.Errorf("unset: %v", err)
	}
}

// TestHeader: the token over a real HTTP round trip; a request without the
// header is ErrNoToken, with two values or a bad one ErrInvalid.
func TestHeader(t *testing.T) {
	got := make(chan error, 1)
	var token fence.Token
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		token, err = fence.FromHeader(r.Header)
		got <- err
	}))
	defer srv.Close()
	send := func(set func(http.Header)) error {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		set(req.Header)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-got
	}
	if err := send(func(h http.Header) { fence.SetHeader(h, 1795598639662539) }); err != nil || token != 1795598639662539 {
		t.Fatalf("round trip: %d, %v", token, err)
	}
	if err := send(func(h http.Header) { h["quorumlock-fence"] = []string{"9"} }); err != nil || token != 9 {
		t.Errorf("a lower-case header name: %d, %v", token, err)
	}
	if err := send(func(http.Header) {}); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("no header: %v", err)
	}
	if err := send(func(h http.Header) { h.Add(fence.Header, "5"); h.Add(fence.Header, "6") }); !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "2 Quorumlock-Fence headers") {
		t.Errorf("two headers: %v", err)
	}
	if err := send(func(h http.Header) { h.Set(fence.Header, "5, 6") }); !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), `Quorumlock-Fence="5, 6"`) {
		t.Errorf("a list: %v", err)
	}
	h := http.Header{}
	fence.SetHeader(h, 3)
	fence.SetHeader(h, 4)
	if vs := h.Values(fence.Header); len(vs) != 1 || vs[0] != "4" {
		t.Errorf("SetHeader twice: %q", vs)
	}
}
