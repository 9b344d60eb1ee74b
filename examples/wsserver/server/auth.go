package server

import (
	"errors"
	"net/http"
	"strings"
)

// ErrUnauthenticated is returned by an Authenticator that cannot tell who
// sent a request. The server answers 401.
var ErrUnauthenticated = errors.New("server: unauthenticated")

// Authenticator tells who sent a request to the ticket endpoint. It returns
// the user ID (which must pass lobby.ValidateID, else the server answers
// 400), or an error wrapping ErrUnauthenticated (401). Any other error is
// answered with 500.
//
// Real deployments check a session cookie or a bearer token here. The user
// ID it returns is the player ID the lobby sees.
type Authenticator interface {
	Authenticate(r *http.Request) (user string, err error)
}

// AuthenticatorFunc adapts a function to an Authenticator.
type AuthenticatorFunc func(r *http.Request) (string, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (string, error) { return f(r) }

// DemoUserHeader is the header HeaderAuthenticator reads by default.
const DemoUserHeader = "X-Authenticated-User"

// HeaderAuthenticator is a DEMO authenticator: it believes whatever user ID
// the request's header says, so anybody can be anybody. It stands in for
// the authenticating proxy or session check a real deployment puts in front
// of the ticket endpoint. Never expose it to untrusted clients.
type HeaderAuthenticator struct {
	// Header is the header to read; empty means DemoUserHeader.
	Header string
}

// Authenticate returns the header's value. A missing or blank header is
// ErrUnauthenticated. The value is not trimmed or normalised: IDs are
// opaque.
func (a HeaderAuthenticator) Authenticate(r *http.Request) (string, error) {
	h := a.Header
	if h == "" {
		h = DemoUserHeader
	}
	user := r.Header.Get(h)
	if strings.TrimSpace(user) == "" {
		return "", ErrUnauthenticated
	}
	return user, nil
}
