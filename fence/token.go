package fence

import (
	"database/sql/driver"
	"fmt"
	"math"
	"strconv"
)

// Token is a fencing token: the int64 of redlock.Lease.Fence, from 1 up.
// Its text form is the decimal integer; as a database/sql parameter it is an
// int64 (bigint).
type Token int64

// String returns the decimal form, as Parse reads it.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// Value makes a Token a database/sql parameter: its int64.
func (t Token) Value() (driver.Value, error) { return int64(t), nil }

// Parse reads a token in decimal (digits only: no sign, no space) from 1 to
// 2^63-1. Anything else is refused with an error that wraps ErrInvalid and
// quotes the text (its first 64 bytes).
func Parse(s string) (Token, error) { return parse("", s) }

// parse is Parse with the text's source (an environment variable's or a
// header's name) for the error.
func parse(source, s string) (Token, error) {
	what := shown(s)
	if source != "" {
		what = source + "=" + what
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %s: not a decimal integer from 1 to %d", ErrInvalid, what, int64(math.MaxInt64))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s: not a decimal integer from 1 to %d", ErrInvalid, what, int64(math.MaxInt64))
	}
	return Token(n), nil
}

// check refuses a token below 1 before a guard writes it.
func (t Token) check() error {
	if t < 1 {
		return fmt.Errorf("%w: %d is not a fencing token (they start at 1; a lease without redlock.WithFencing carries 0)", ErrInvalid, int64(t))
	}
	return nil
}
