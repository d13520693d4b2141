package fence

import (
	"fmt"
	"net/http"
)

// Header is the HTTP header that carries a token ("Quorumlock-Fence: 42").
const Header = "Quorumlock-Fence"

// SetHeader sets the token header, replacing any value it had:
// fence.SetHeader(req.Header, token) on an outgoing request.
func SetHeader(h http.Header, t Token) { h.Set(Header, t.String()) }

// FromHeader reads the token header: fence.FromHeader(req.Header) in a
// handler. No header is ErrNoToken; several values, or one that Parse
// refuses, are ErrInvalid.
func FromHeader(h http.Header) (Token, error) {
	vs := h.Values(Header)
	switch len(vs) {
	case 0:
		return 0, fmt.Errorf("%w: no %s header", ErrNoToken, Header)
	case 1:
		return parse(Header, vs[0])
	default:
		return 0, fmt.Errorf("%w: %d %s headers, want one", ErrInvalid, len(vs), Header)
	}
}
