package redlock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Owner describes who holds a lock. It is stored next to the token in the
// lock's value so that an operator running Inspect can tell who holds it.
type Owner struct {
	// Token is the 128-bit random token of one acquisition, hex encoded.
	Token string
	// Host and PID identify the process (empty/zero when WithOwnerInfo(false)).
	Host string
	PID  int
	// Label is the caller's label (WithOwnerLabel).
	Label string
}

// newToken returns 128 bits from crypto/rand, hex encoded.
func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read never returns an error on supported platforms
		// (Go 1.24+ documents that it crashes the program instead).
		panic(fmt.Sprintf("redlock: crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// value encodes the owner as stored in Redis: the token, then, when any
// metadata is set, "?" and URL-encoded fields (host, pid, label).
func (o Owner) value() string {
	q := url.Values{}
	if o.Host != "" {
		q.Set("host", o.Host)
	}
	if o.PID != 0 {
		q.Set("pid", strconv.Itoa(o.PID))
	}
	if o.Label != "" {
		q.Set("label", o.Label)
	}
	if len(q) == 0 {
		return o.Token
	}
	return o.Token + "?" + q.Encode()
}

// ParseOwner decodes a stored lock value (as returned by Inspect). Values
// written by other libraries parse to an Owner whose Token is the whole value.
func ParseOwner(value string) Owner {
	tok, meta, ok := strings.Cut(value, "?")
	o := Owner{Token: tok}
	if !ok {
		return o
	}
	q, err := url.ParseQuery(meta)
	if err != nil {
		return Owner{Token: value}
	}
	o.Host = q.Get("host")
	o.PID, _ = strconv.Atoi(q.Get("pid"))
	o.Label = q.Get("label")
	return o
}
