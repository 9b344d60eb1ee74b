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
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidID, len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidID)
	}
	return nil
}

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
