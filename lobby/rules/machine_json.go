package rules

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lobbyhost/lobbyhost/lease"
)

// The JSON form of events, for clients and for consumers that do not link
// this package. It is part of the API: field names and value spellings do
// not change within a major version. An event looks like this:
//
//	{
//	  "lobby": "lobby-1",
//	  "revision": 7,
//	  "term": 2,
//	  "host": "p-23",
//	  "previous_host": "p-17",
//	  "reason": "kicked",
//	  "subject": "p-17",
//	  "at": "2026-11-29T12:00:03.5Z",
//	  "locked": false,
//	  "overrides": {"grace_ms": 2000, "max_members": 8},
//	  "members": [
//	    {"player": "p-23", "join_seq": 2, "status": "online", "attrs": {"role": "captain"}},
//	    {"player": "p-41", "join_seq": 3, "status": "reconnecting", "reconnect_deadline": "2026-11-29T12:00:09Z"}
//	  ]
//	}
//
// Every field is always present except these: a member's attrs are left
// out when it has none and its reconnect_deadline while it is online; an
// override is left out when the lobby does not override that setting (so
// "overrides" is {} for a lobby that follows the Service's policy).
// "host" and "previous_host" are "" for no host, never null; "subject" is
// "" for what the server did to the lobby itself (locked, unlocked,
// configured); "members" is [] for an empty lobby, never null. Reasons and
// statuses are the lower-case strings of [Reason] and [Status]. Times are
// RFC 3339 in UTC with as many fractional digits as the nanoseconds need.
// Durations are milliseconds, with a decimal fraction only when the
// duration is not a whole number of them ("grace_ms": 1500.25), so nothing
// is rounded away.
//
// Decoding accepts the same form, ignores fields it does not know, and
// refuses unknown reasons and statuses and out-of-range overrides; it does
// not check the lobby rules (use the binary codec, DecodeEvent, for
// records a program trusts).
//
// A type that embeds members or overrides (a snapshot, say) gets the same
// spelling by holding []MemberView and Overrides values: both marshal and
// unmarshal themselves.

// MarshalJSON encodes e in the JSON form described above.
func (e Event) MarshalJSON() ([]byte, error) {
	if _, ok := reasonCode(e.Reason); !ok {
		return nil, fmt.Errorf("lobby: event with unknown reason %q", string(e.Reason))
	}
	b := make([]byte, 0, 256+96*len(e.Members))
	b = append(b, `{"lobby":`...)
	b = appendJSONString(b, e.Lobby)
	b = append(b, `,"revision":`...)
	b = strconv.AppendUint(b, e.Revision, 10)
	b = append(b, `,"term":`...)
	b = strconv.AppendUint(b, e.Term, 10)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, e.Host)
	b = append(b, `,"previous_host":`...)
	b = appendJSONString(b, e.PrevHost)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, string(e.Reason))
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, e.Subject)
	b = append(b, `,"at":`...)
	b, err := appendJSONTime(b, e.At)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"locked":`...)
	b = strconv.AppendBool(b, e.Locked)
	b = append(b, `,"overrides":`...)
	b = e.Overrides.appendJSON(b)
	b = append(b, `,"members":[`...)
	for i := range e.Members {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = e.Members[i].appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// MarshalJSON encodes v as one element of an event's "members".
func (v MemberView) MarshalJSON() ([]byte, error) { return v.appendJSON(nil) }

func (v MemberView) appendJSON(b []byte) ([]byte, error) {
	status, err := v.Status.MarshalText()
	if err != nil {
		return nil, err
	}
	b = append(b, `{"player":`...)
	b = appendJSONString(b, v.Player)
	b = append(b, `,"join_seq":`...)
	b = strconv.AppendUint(b, v.JoinSeq, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, '"')
	if len(v.Attrs) > 0 {
		b = append(b, `,"attrs":{`...)
		for i, k := range slices.Sorted(maps.Keys(v.Attrs)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, v.Attrs[k])
		}
		b = append(b, '}')
	}
	if !v.ReconnectDeadline.IsZero() {
		b = append(b, `,"reconnect_deadline":`...)
		if b, err = appendJSONTime(b, v.ReconnectDeadline); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// MarshalText spells s as in the JSON form: "online" or "reconnecting".
func (s Status) MarshalText() ([]byte, error) {
	switch s {
	case StatusOnline, StatusReconnecting:
		return []byte(s.String()), nil
	}
	return nil, fmt.Errorf("lobby: unknown status %d", uint8(s))
}

// UnmarshalText reads what MarshalText writes.
func (s *Status) UnmarshalText(text []byte) error {
	switch string(text) {
	case "online":
		*s = StatusOnline
	case "reconnecting":
		*s = StatusReconnecting
	default:
		return fmt.Errorf("lobby: unknown status %q", text)
	}
	return nil
}

// UnmarshalText accepts the spelling of a known reason only.
func (r *Reason) UnmarshalText(text []byte) error {
	if _, ok := reasonCode(Reason(text)); !ok {
		return fmt.Errorf("lobby: unknown reason %q", text)
	}
	*r = Reason(text)
	return nil
}

// The names of the overrides in the JSON form, in bit order.
var overrideJSONNames = [...]string{"grace_ms", "heartbeat_ttl_ms", "max_members", "max_conns_per_player", "max_blocks"}

// MarshalJSON encodes the settings o overrides, and only those.
func (o Overrides) MarshalJSON() ([]byte, error) { return o.appendJSON(nil), nil }

func (o Overrides) appendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	if o.Has(OverrideGrace) {
		field(overrideJSONNames[0])
		b = appendMillis(b, o.Grace)
	}
	if o.Has(OverrideHeartbeatTTL) {
		field(overrideJSONNames[1])
		b = appendMillis(b, o.HeartbeatTTL)
	}
	if o.Has(OverrideMaxMembers) {
		field(overrideJSONNames[2])
		b = strconv.AppendInt(b, int64(o.MaxMembers), 10)
	}
	if o.Has(OverrideMaxConnectionsPerPlayer) {
		field(overrideJSONNames[3])
		b = strconv.AppendInt(b, int64(o.MaxConnectionsPerPlayer), 10)
	}
	if o.Has(OverrideMaxBlocks) {
		field(overrideJSONNames[4])
		b = strconv.AppendInt(b, int64(o.MaxBlocks), 10)
	}
	return append(b, '}')
}

// UnmarshalJSON reads what MarshalJSON writes (or null, for none). Unknown
// fields and values out of range are refused; the error for the latter
// wraps ErrInvalidPolicy.
func (o *Overrides) UnmarshalJSON(data []byte) error {
	p := jsonScanner{buf: data}
	var got Overrides
	p.space()
	if p.literal("null") {
		p.space()
		if !p.done() {
			return errJSON
		}
		*o = Overrides{}
		return nil
	}
	if !p.char('{') {
		return errJSON
	}
	if !p.char('}') {
		for {
			key, ok := p.key()
			if !ok || !p.char(':') {
				return errJSON
			}
			num, ok := p.number()
			if !ok {
				return fmt.Errorf("lobby: overrides: %q is not a number", key)
			}
			var err error
			switch key {
			case overrideJSONNames[0]:
				got.Grace, err = parseMillis(num)
				got.Set |= OverrideGrace
			case overrideJSONNames[1]:
				got.HeartbeatTTL, err = parseMillis(num)
				got.Set |= OverrideHeartbeatTTL
			case overrideJSONNames[2]:
				got.MaxMembers, err = strconv.Atoi(num)
				got.Set |= OverrideMaxMembers
			case overrideJSONNames[3]:
				got.MaxConnectionsPerPlayer, err = strconv.Atoi(num)
				got.Set |= OverrideMaxConnectionsPerPlayer
			case overrideJSONNames[4]:
				got.MaxBlocks, err = strconv.Atoi(num)
				got.Set |= OverrideMaxBlocks
			default:
				return fmt.Errorf("lobby: overrides: unknown field %q", key)
			}
			if err != nil {
				return fmt.Errorf("lobby: overrides: %s: %w", key, err)
			}
			if p.char('}') {
				break
			}
			if !p.char(',') {
				return errJSON
			}
		}
	}
	p.space()
	if !p.done() {
		return errJSON
	}
	if err := got.Validate(); err != nil {
		return err
	}
	*o = got
	return nil
}

var errJSON = errors.New("lobby: overrides: malformed JSON")

// appendMillis writes d in milliseconds: an integer when d is a whole number
// of them, else with the fraction (up to six digits) that makes it exact.
func appendMillis(b []byte, d time.Duration) []byte {
	if d < 0 {
		b = append(b, '-')
		if d == -1<<63 {
			// Cannot be negated; never a valid override anyway.
			return append(b, "9223372036854.775808"...)
		}
		d = -d
	}
	b = strconv.AppendInt(b, int64(d/time.Millisecond), 10)
	if frac := int64(d % time.Millisecond); frac != 0 {
		digits := strconv.AppendInt(nil, 1_000_000+frac, 10)[1:] // six digits, zero-padded
		b = append(b, '.')
		b = append(b, strings.TrimRight(string(digits), "0")...)
	}
	return b
}

// parseMillis reads what appendMillis writes: digits, then an optional
// fraction of at most six digits. Exponents are refused.
func parseMillis(s string) (time.Duration, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || strings.ContainsAny(s, "eE+-") || (hasFrac && (frac == "" || len(frac) > 6)) {
		return 0, fmt.Errorf("bad milliseconds %q", s)
	}
	ms, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || ms > int64(lease.MaxDuration/time.Millisecond) {
		return 0, fmt.Errorf("milliseconds %q out of range", s)
	}
	d := time.Duration(ms) * time.Millisecond
	if hasFrac {
		f, err := strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("bad milliseconds %q", s)
		}
		d += time.Duration(f)
	}
	if neg {
		d = -d
	}
	return d, nil
}

// jsonScanner reads the small flat objects of the overrides.
type jsonScanner struct {
	buf []byte
	i   int
}

func (p *jsonScanner) space() {
	for p.i < len(p.buf) && strings.IndexByte(" \t\r\n", p.buf[p.i]) >= 0 {
		p.i++
	}
}

func (p *jsonScanner) done() bool { return p.i == len(p.buf) }

// char skips space and then c, if c is next.
func (p *jsonScanner) char(c byte) bool {
	p.space()
	if p.i < len(p.buf) && p.buf[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonScanner) literal(s string) bool {
	if strings.HasPrefix(string(p.buf[p.i:]), s) {
		p.i += len(s)
		return true
	}
	return false
}

// key reads a string without escapes (every known key is one; a key with
// an escape is unknown anyway and refused by the caller).
func (p *jsonScanner) key() (string, bool) {
	if !p.char('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.buf) && p.buf[p.i] != '"' {
		p.i++
	}
	if p.i == len(p.buf) {
		return "", false
	}
	key := string(p.buf[start:p.i])
	p.i++
	return key, true
}

// number reads the characters a JSON number may hold.
func (p *jsonScanner) number() (string, bool) {
	p.space()
	start := p.i
	for p.i < len(p.buf) && strings.IndexByte("-+.eE0123456789", p.buf[p.i]) >= 0 {
		p.i++
	}
	return string(p.buf[start:p.i]), p.i > start
}

// appendJSONString writes s as a JSON string. Control characters, quotes and
// backslashes are escaped; so are U+2028 and U+2029, which some JavaScript
// parsers take for line ends; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// appendJSONTime writes t in UTC; like time.Time's own MarshalJSON it
// refuses years RFC 3339 cannot write.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("lobby: time %v outside the years RFC 3339 can write", t)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}
