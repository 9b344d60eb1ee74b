package server

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendState appends the JSON of the lobby.state message m, byte for byte
// what encoding/json makes of it (field order, omitempty, escaping), without
// reflection: every lobby change is encoded once per room that follows it,
// and this is most of what the encoding costs.
func appendState(b []byte, m *stateMsg) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, m.Type)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, m.Version, 10)
	b = append(b, `,"hostId":`...)
	if m.HostID == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *m.HostID)
	}
	b = append(b, `,"playerIds":`...)
	if m.PlayerIDs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, p := range m.PlayerIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p)
		}
		b = append(b, ']')
	}
	b = append(b, `,"roomId":`...)
	b = appendJSONString(b, m.RoomID)
	b = append(b, `,"term":`...)
	b = strconv.AppendUint(b, m.Term, 10)
	b = append(b, `,"locked":`...)
	b = strconv.AppendBool(b, m.Locked)
	b = append(b, `,"overrides":`...)
	o, _ := m.Overrides.MarshalJSON() // never fails
	b = append(b, o...)
	b = append(b, `,"members":`...)
	if m.Members == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range m.Members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMember(b, &m.Members[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, m.Reason)
	if len(m.SubjectID) > 0 {
		b = append(b, `,"subjectId":`...)
		b = append(b, m.SubjectID...)
	}
	if len(m.PreviousHostID) > 0 {
		b = append(b, `,"previousHostId":`...)
		b = append(b, m.PreviousHostID...)
	}
	if m.At != "" {
		b = append(b, `,"at":`...)
		b = appendJSONString(b, m.At)
	}
	b = append(b, `,"serverTime":`...)
	b = appendJSONString(b, m.ServerTime)
	return append(b, '}')
}

func appendMember(b []byte, m *memberMsg) []byte {
	b = append(b, `{"userId":`...)
	b = appendJSONString(b, m.UserID)
	b = append(b, `,"joinSeq":`...)
	b = strconv.AppendUint(b, m.JoinSeq, 10)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, m.Status)
	b = append(b, `,"host":`...)
	b = strconv.AppendBool(b, m.Host)
	if m.ReconnectBy != "" {
		b = append(b, `,"reconnectBy":`...)
		b = appendJSONString(b, m.ReconnectBy)
	}
	if len(m.Attrs) > 0 {
		b = append(b, `,"attrs":{`...)
		keys := make([]string, 0, len(m.Attrs))
		for k := range m.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, m.Attrs[k])
		}
		b = append(b, '}')
	}
	if m.ReconnectDeadline != "" {
		b = append(b, `,"reconnect_deadline":`...)
		b = appendJSONString(b, m.ReconnectDeadline)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json does
// by default: HTML-significant characters, control characters, U+2028 and
// U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// stateSize guesses the length of a lobby.state of n members, to allocate
// its buffer once.
func stateSize(n int) int { return 320 + 160*n }
