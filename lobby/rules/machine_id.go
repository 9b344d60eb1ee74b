package rules

import (
	"fmt"
	"unicode/utf8"
)

// Limits on identifiers and attributes.
const (
	// MaxIDLen is the longest lobby or player ID, in bytes.
	MaxIDLen = 128
	// MaxAttrs is the most attributes a member may carry.
	MaxAttrs = 16
	// MaxAttrLen is the longest attribute key or value, in bytes.
	MaxAttrLen = 256
)

// ValidateID reports whether id is usable as a lobby or player ID: 1 to
// MaxIDLen bytes of valid UTF-8. IDs are opaque otherwise: compared byte for
// byte and never normalised. The error wraps ErrInvalidID.
func ValidateID(id string) error { return CheckID("ID", id) }

// CheckID is ValidateID for an ID that the error names, so that it reads
// once: CheckID("lobby ID", "") reports "lobby: invalid lobby ID: empty".
// The error wraps ErrInvalidID.
func CheckID(name, id string) error {
	var problem string
	switch {
	case id == "":
		problem = "empty"
	case len(id) > MaxIDLen:
		problem = fmt.Sprintf("%d bytes, the limit is %d", len(id), MaxIDLen)
	case !utf8.ValidString(id):
		problem = "not valid UTF-8"
	default:
		return nil
	}
	return &idError{name: name, problem: problem}
}

// idError is CheckID's error.
type idError struct{ name, problem string }

func (e *idError) Error() string { return "lobby: invalid " + e.name + ": " + e.problem }

// Unwrap makes errors.Is(err, ErrInvalidID) true.
func (e *idError) Unwrap() error { return ErrInvalidID }

// validateAttrs checks join attributes against the limits.
func validateAttrs(attrs map[string]string) error {
	if len(attrs) > MaxAttrs {
		return fmt.Errorf("%w: %d attributes, the limit is %d", ErrInvalidAttrs, len(attrs), MaxAttrs)
	}
	for k, v := range attrs {
		if k == "" || len(k) > MaxAttrLen || len(v) > MaxAttrLen {
			return fmt.Errorf("%w: an empty key, or a key or value longer than %d bytes", ErrInvalidAttrs, MaxAttrLen)
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: not valid UTF-8", ErrInvalidAttrs)
		}
	}
	return nil
}
