package wire

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A mutex's lock key holds its value: the acquisition's token, then its
// owner's metadata as a URL query, "<token>?host=...&label=...&pid=...&at=..."
// (at: when the acquisition's attempt began, in Unix milliseconds), and for
// an election's candidate "&candidate=..." (CandidateSuffix). A
// shared lock's hold has the same value as its id. Release, extend and the
// release guard compare the whole value; people read the metadata
// (quorumlock status).

// NewToken returns a fresh 128-bit token from crypto/rand: 32 lowercase
// hexadecimal digits.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: Go 1.24+ crashes the program instead
	return hex.EncodeToString(b[:])
}

// IsToken reports whether s has NewToken's form.
func IsToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Owner is a lock value's owner metadata.
type Owner struct {
	// Token is the acquisition's token (the whole value when the value is
	// not quorumlock's).
	Token string
	// Host, PID and Label are the holder's metadata, empty or zero when
	// absent.
	Host  string
	PID   int
	Label string
	// Since is when the acquisition that stored the value began (its
	// attempt), zero when the value does not say.
	Since time.Time
	// Candidate is an election candidate's value, "" when the value is
	// not a candidate's.
	Candidate string
}

// ValueToken returns the token of a stored value, the part before its
// '?'; ok is false for a value without one (not a value quorumlock
// wrote).
func ValueToken(value string) (token string, ok bool) {
	token, _, ok = strings.Cut(value, "?")
	return token, ok
}

// CandidateSuffix is what an election's candidate appends to its values:
// "&candidate=" and value, URL-encoded (Owner.Candidate).
func CandidateSuffix(value string) string {
	return "&candidate=" + url.QueryEscape(value)
}

// OwnerSuffix is the part of the values of a client that does not change:
// "?" and the URL-encoded query of host (when not empty), label (when not
// empty) and pid. Value appends the attempt's start.
func OwnerSuffix(host string, pid int, label string) string {
	q := url.Values{}
	if host != "" {
		q.Set("host", host)
	}
	q.Set("pid", strconv.Itoa(pid))
	if label != "" {
		q.Set("label", label)
	}
	return "?" + q.Encode()
}

// Value is the value an attempt stores: token, the client's OwnerSuffix and
// "&at=" and at in Unix milliseconds, in one allocation.
func Value(token, ownerSuffix string, at time.Time) string {
	var v strings.Builder
	v.Grow(len(token) + len(ownerSuffix) + len("&at=") + 20)
	v.WriteString(token)
	v.WriteString(ownerSuffix)
	v.WriteString("&at=")
	var num [20]byte
	v.Write(strconv.AppendInt(num[:0], at.UnixMilli(), 10))
	return v.String()
}

// ParseOwner decodes a stored lock value (or a hold's id). A value without
// '?' or whose query does not parse gives an Owner whose Token is the part
// before '?' or the whole value, respectively.
func ParseOwner(value string) Owner {
	tok, meta, ok := strings.Cut(value, "?")
	if !ok {
		return Owner{Token: value}
	}
	q, err := url.ParseQuery(meta)
	if err != nil {
		return Owner{Token: value}
	}
	o := Owner{Token: tok, Host: q.Get("host"), Label: q.Get("label"), Candidate: q.Get("candidate")}
	o.PID, _ = strconv.Atoi(q.Get("pid"))
	if ms, err := strconv.ParseInt(q.Get("at"), 10, 64); err == nil && ms > 0 {
		o.Since = time.UnixMilli(ms)
	}
	return o
}
