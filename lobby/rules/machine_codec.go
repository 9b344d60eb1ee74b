package rules

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/lobbyhost/lobbyhost/lease"
)

// Encoded lobbies and events start with a three-byte magic and a format
// number, so a store can hold them as opaque bytes and a later version of
// this package can still read what an earlier one wrote.
//
// The layout is a sequence of unsigned varints (counters), length-prefixed
// strings, and optional times (a presence byte, then the signed varint of
// nanoseconds since 1970 UTC). Decoding checks every length against the
// bytes that remain and every value against the lobby invariants, so
// corrupted or hostile input yields ErrCorrupt, never a panic or a huge
// allocation. Every value has exactly one encoding (no overlong varints), so
// equal states encode to equal bytes.
const (
	stateMagic = "LHS"
	eventMagic = "LHE"
	// formatV1 has no host term; formatV2 adds it after the host; formatV3
	// adds the lock, the overrides and the blocks to a lobby, and the lock,
	// the overrides, each member's attributes and reconnect deadline, and
	// the newer reasons to an event; formatV4 adds to a lobby who set its
	// lock, and to the overrides of both the bound on blocks (an event is
	// otherwise laid out as in formatV3); formatV5 adds to each connection
	// of a lobby the session that holds it (an event is laid out as in
	// formatV4). All decode (what an older format lacks is zero: a lock
	// read from formatV3 counts as the server's, so it keeps the rule it
	// was set under and stays until it is unlocked; a connection read from
	// formatV4 or older is held by no session); AppendState and AppendEvent
	// write the newest.
	formatV1      = 1
	formatV2      = 2
	formatV3      = 3
	formatV4      = 4
	formatV5      = 5
	formatCurrent = formatV5
	maxDecodeID   = MaxIDLen
)

// AppendState appends the encoding of s to dst and returns the extended
// slice.
func AppendState(dst []byte, s *State) []byte {
	return appendState(dst, s, formatCurrent)
}

// appendState appends s in the given format, formatV4 or newer; a format
// older than formatV5 drops the connections' sessions (tests write older
// records with it).
func appendState(dst []byte, s *State, format byte) []byte {
	dst = append(dst, stateMagic...)
	dst = append(dst, format)
	dst = appendString(dst, s.ID)
	dst = binary.AppendUvarint(dst, s.Revision)
	dst = binary.AppendUvarint(dst, s.NextJoinSeq)
	dst = binary.AppendUvarint(dst, s.NextGen)
	dst = appendTime(dst, s.Updated)
	dst = appendString(dst, s.Host)
	dst = binary.AppendUvarint(dst, s.Term)
	dst = appendBool(dst, s.Locked)
	dst = appendString(dst, s.LockedBy)
	dst = appendOverrides(dst, s.Overrides)
	dst = s.Blocks.appendTo(dst)
	dst = binary.AppendUvarint(dst, uint64(len(s.Members)))
	for i := range s.Members {
		m := &s.Members[i]
		dst = appendString(dst, m.Player)
		dst = binary.AppendUvarint(dst, m.JoinSeq)
		dst = binary.AppendUvarint(dst, m.LastGen)
		dst = appendTime(dst, m.ReconnectBy)
		dst = appendAttrs(dst, m.Attrs)
		dst = binary.AppendUvarint(dst, uint64(len(m.Conns)))
		for _, c := range m.Conns {
			dst = binary.AppendUvarint(dst, c.Gen)
			dst = appendTime(dst, c.Deadline)
			if format >= formatV5 {
				dst = appendString(dst, c.Session)
			}
		}
	}
	return dst
}

// EncodeState returns the encoding of s.
func EncodeState(s *State) []byte { return AppendState(nil, s) }

// DecodeState decodes a lobby encoded by AppendState and checks its
// invariants. Malformed input, or a lobby that breaks an invariant (members
// out of order, a generation issued twice, a host who is not a member, ...),
// yields an error wrapping ErrCorrupt. The result shares no memory with
// data.
func DecodeState(data []byte) (*State, error) {
	d := decoder{buf: data}
	format := d.magic(stateMagic)
	s := &State{}
	s.ID = d.str(maxDecodeID)
	s.Revision = d.uvarint()
	s.NextJoinSeq = d.uvarint()
	s.NextGen = d.uvarint()
	s.Updated = d.time()
	s.Host = d.str(maxDecodeID)
	if format >= formatV2 {
		s.Term = d.uvarint()
	}
	if format >= formatV3 {
		s.Locked = d.bool()
		if format >= formatV4 {
			s.LockedBy = d.str(maxDecodeID)
		}
		s.Overrides = d.overrides(format)
		// A block takes at least 4 bytes (an ID and a time).
		if nb := d.count(4); nb > 0 {
			list := make([]Block, nb)
			for j := 0; j < nb && d.err == nil; j++ {
				list[j] = Block{Player: d.str(maxDecodeID), Until: d.time()}
				if j > 0 && list[j].Player <= list[j-1].Player {
					d.fail("blocks out of order")
				}
			}
			if d.err == nil {
				s.Blocks = makeBlocks(list)
			}
		}
	}
	// Every member takes at least 7 bytes; a count beyond what the input
	// could hold is corrupt, and capping it avoids a hostile allocation.
	n := d.count(7)
	if n > 0 {
		s.Members = make([]Member, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		m := &s.Members[i]
		m.Player = d.str(maxDecodeID)
		m.JoinSeq = d.uvarint()
		m.LastGen = d.uvarint()
		m.ReconnectBy = d.time()
		m.Attrs = d.attrs()
		// A connection takes at least 2 bytes (a generation and a time),
		// 3 with its session.
		connSize := 2
		if format >= formatV5 {
			connSize = 3
		}
		if nc := d.count(connSize); nc > 0 {
			m.Conns = make([]Conn, nc)
			for j := 0; j < nc && d.err == nil; j++ {
				m.Conns[j] = Conn{Gen: d.uvarint(), Deadline: d.time()}
				if format >= formatV5 {
					m.Conns[j].Session = d.str(maxDecodeID)
				}
			}
		}
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks the structural invariants of s: valid IDs, members in
// strictly increasing join-sequence order with unique players, generations
// unique, increasing per member and below NextGen, online members without a
// reconnect deadline and reconnecting members with one, every pending
// deadline after Updated, session-held connections with a valid session ID
// and no stored heartbeat deadline, a host who is a member, a member's lock only on a
// locked lobby that has members, overrides that validate, and blocks of
// valid non-member IDs that end after Updated. The error wraps ErrCorrupt.
//
// It cannot check what depends on the policy (whether an empty host seat
// could be filled), since the policy is not part of the state.
func (s *State) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: lobby %q: %s", ErrCorrupt, s.ID, fmt.Sprintf(format, args...))
	}
	if err := ValidateID(s.ID); err != nil {
		return fmt.Errorf("%w: lobby ID: %w", ErrCorrupt, err)
	}
	if s.NextJoinSeq == 0 || s.NextGen == 0 {
		return bad("counters start at 1")
	}
	if !s.Updated.IsZero() && (s.Updated.Before(minTime) || s.Updated.After(maxTime)) {
		return bad("last transition time %v out of range", s.Updated)
	}
	if len(s.Members) > 0 && s.Updated.IsZero() {
		return bad("members but no transition time")
	}
	hostFound := s.Host == ""
	var prevSeq uint64
	var gens []uint64
	for i := range s.Members {
		m := &s.Members[i]
		if err := ValidateID(m.Player); err != nil {
			return fmt.Errorf("%w: lobby %q: member %d: %w", ErrCorrupt, s.ID, i, err)
		}
		if m.JoinSeq <= prevSeq || m.JoinSeq >= s.NextJoinSeq {
			return bad("member %d: join sequence %d out of order or not yet issued", i, m.JoinSeq)
		}
		prevSeq = m.JoinSeq
		for j := range i {
			if s.Members[j].Player == m.Player {
				return bad("members %d and %d are one player", j, i)
			}
		}
		if m.Player == s.Host {
			hostFound = true
		}
		if err := validateAttrs(m.Attrs); err != nil {
			return fmt.Errorf("%w: lobby %q: member %d: %w", ErrCorrupt, s.ID, i, err)
		}
		if m.LastGen == 0 || m.LastGen >= s.NextGen {
			return bad("member %d: last generation %d not issued", i, m.LastGen)
		}
		online := len(m.Conns) > 0
		if online == !m.ReconnectBy.IsZero() {
			return bad("member %d: online exactly when it has no reconnect deadline", i)
		}
		if !online && !m.ReconnectBy.After(s.Updated) {
			return bad("member %d: reconnect deadline %v not after the last transition", i, m.ReconnectBy)
		}
		var prevGen uint64
		for _, c := range m.Conns {
			if c.Gen <= prevGen || c.Gen > m.LastGen {
				return bad("member %d: generation %d out of order", i, c.Gen)
			}
			prevGen = c.Gen
			if !c.Deadline.IsZero() && !c.Deadline.After(s.Updated) {
				return bad("member %d: heartbeat deadline %v not after the last transition", i, c.Deadline)
			}
			if c.Session != "" {
				if err := ValidateID(c.Session); err != nil {
					return fmt.Errorf("%w: lobby %q: member %d: generation %d: session: %w", ErrCorrupt, s.ID, i, c.Gen, err)
				}
				if !c.Deadline.IsZero() {
					return bad("member %d: generation %d held by a session has a stored heartbeat deadline", i, c.Gen)
				}
			}
			gens = append(gens, c.Gen)
		}
	}
	if s.Term > s.Revision {
		return bad("host term %d above revision %d", s.Term, s.Revision)
	}
	if s.LockedBy != "" {
		if err := ValidateID(s.LockedBy); err != nil {
			return fmt.Errorf("%w: lobby %q: locked by: %w", ErrCorrupt, s.ID, err)
		}
		if !s.Locked || len(s.Members) == 0 {
			return bad("a member's lock on a lobby that is unlocked or empty")
		}
	}
	if err := s.Overrides.Validate(); err != nil {
		return fmt.Errorf("%w: lobby %q: overrides: %w", ErrCorrupt, s.ID, err)
	}
	if s.Overrides != s.Overrides.normalized() {
		return bad("a value for a setting that is not overridden")
	}
	for b := range s.Blocks.All() {
		if err := ValidateID(b.Player); err != nil {
			return fmt.Errorf("%w: lobby %q: block: %w", ErrCorrupt, s.ID, err)
		}
		if !b.Until.After(s.Updated) || b.Until.After(maxTime.Add(MaxBlock)) {
			return bad("a block ending at %v, not after the last transition or out of range", b.Until)
		}
	}
	for i := range s.Members {
		if _, blocked := s.Blocks.Until(s.Members[i].Player); blocked {
			return bad("a member is blocked")
		}
	}
	if !hostFound {
		return bad("the host is not a member")
	}
	slices.Sort(gens)
	for i := 1; i < len(gens); i++ {
		if gens[i] == gens[i-1] {
			return bad("generation %d held twice", gens[i])
		}
	}
	return nil
}

// AppendEvent appends the encoding of e to dst and returns the extended
// slice.
func AppendEvent(dst []byte, e *Event) []byte {
	code, _ := reasonCode(e.Reason)
	dst = append(dst, eventMagic...)
	dst = append(dst, formatCurrent)
	dst = appendString(dst, e.Lobby)
	dst = binary.AppendUvarint(dst, e.Revision)
	dst = appendString(dst, e.Host)
	dst = appendString(dst, e.PrevHost)
	dst = binary.AppendUvarint(dst, e.Term)
	dst = append(dst, code)
	dst = appendString(dst, e.Subject)
	dst = appendTime(dst, e.At)
	dst = appendBool(dst, e.Locked)
	dst = appendOverrides(dst, e.Overrides)
	dst = binary.AppendUvarint(dst, uint64(len(e.Members)))
	for _, m := range e.Members {
		dst = appendString(dst, m.Player)
		dst = binary.AppendUvarint(dst, m.JoinSeq)
		dst = append(dst, byte(m.Status))
		dst = appendAttrs(dst, m.Attrs)
		dst = appendTime(dst, m.ReconnectDeadline)
	}
	return dst
}

// EncodeEvent returns the encoding of e.
func EncodeEvent(e *Event) []byte { return AppendEvent(nil, e) }

// DecodeEvent decodes an event encoded by AppendEvent. Malformed input
// yields an error wrapping ErrCorrupt.
func DecodeEvent(data []byte) (Event, error) {
	d := decoder{buf: data}
	format := d.magic(eventMagic)
	var e Event
	e.Lobby = d.str(maxDecodeID)
	e.Revision = d.uvarint()
	e.Host = d.str(maxDecodeID)
	e.PrevHost = d.str(maxDecodeID)
	if format >= formatV2 {
		e.Term = d.uvarint()
	}
	code := d.byte()
	if int(code) >= len(reasons) || code == 0 || (format < formatV3 && code >= firstV3Reason) {
		d.fail("unknown reason")
	} else {
		e.Reason = reasons[code]
	}
	e.Subject = d.str(maxDecodeID)
	e.At = d.time()
	if format >= formatV3 {
		e.Locked = d.bool()
		e.Overrides = d.overrides(format)
	}
	n := d.count(3)
	if n > 0 {
		e.Members = make([]MemberView, n)
	}
	var prev uint64
	for i := 0; i < n && d.err == nil; i++ {
		v := MemberView{Player: d.str(maxDecodeID), JoinSeq: d.uvarint(), Status: Status(d.byte())}
		if format >= formatV3 {
			v.Attrs = d.attrs()
			v.ReconnectDeadline = d.time()
			if (v.Status == StatusReconnecting) == v.ReconnectDeadline.IsZero() {
				d.fail("a reconnect deadline exactly for reconnecting members")
			}
			if validateAttrs(v.Attrs) != nil {
				d.fail("member attributes")
			}
		}
		if v.Status != StatusOnline && v.Status != StatusReconnecting {
			d.fail("unknown status")
		}
		if v.JoinSeq <= prev {
			d.fail("members out of order")
		}
		if err := ValidateID(v.Player); err != nil && d.err == nil {
			d.fail("member ID")
		}
		prev = v.JoinSeq
		e.Members[i] = v
	}
	if err := d.finish(); err != nil {
		return Event{}, err
	}
	switch {
	case ValidateID(e.Lobby) != nil, ValidateID(e.Subject) != nil && !(e.Subject == "" && e.Reason.subjectOptional()):
		return Event{}, fmt.Errorf("%w: event IDs", ErrCorrupt)
	case e.Overrides.Validate() != nil, e.Overrides != e.Overrides.normalized():
		return Event{}, fmt.Errorf("%w: event overrides", ErrCorrupt)
	case e.Revision == 0, e.At.IsZero():
		return Event{}, fmt.Errorf("%w: event without revision or time", ErrCorrupt)
	case e.Term > e.Revision:
		return Event{}, fmt.Errorf("%w: event host term %d above its revision %d", ErrCorrupt, e.Term, e.Revision)
	}
	return e, nil
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// appendAttrs appends a count and the pairs in key order.
func appendAttrs(dst []byte, attrs map[string]string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(attrs)))
	if len(attrs) > 0 {
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			dst = appendString(dst, k)
			dst = appendString(dst, attrs[k])
		}
	}
	return dst
}

// appendOverrides appends the set bits, then the value of each setting set,
// in bit order: durations as nanoseconds, caps as counts.
func appendOverrides(dst []byte, o Overrides) []byte {
	dst = append(dst, byte(o.Set))
	if o.Has(OverrideGrace) {
		dst = binary.AppendUvarint(dst, uint64(o.Grace))
	}
	if o.Has(OverrideHeartbeatTTL) {
		dst = binary.AppendUvarint(dst, uint64(o.HeartbeatTTL))
	}
	if o.Has(OverrideMaxMembers) {
		dst = binary.AppendUvarint(dst, uint64(o.MaxMembers))
	}
	if o.Has(OverrideMaxConnectionsPerPlayer) {
		dst = binary.AppendUvarint(dst, uint64(o.MaxConnectionsPerPlayer))
	}
	if o.Has(OverrideMaxBlocks) {
		dst = binary.AppendUvarint(dst, uint64(o.MaxBlocks))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	return binary.AppendVarint(dst, t.UnixNano())
}

// decoder reads the encoding; the first failure sticks and every later read
// returns zero values.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

// magic reads the magic m and the format number, and returns the format.
func (d *decoder) magic(m string) byte {
	if len(d.buf) < len(m)+1 || string(d.buf[:len(m)]) != m {
		d.fail("not an encoded lobby value")
		return 0
	}
	v := d.buf[len(m)]
	if v < formatV1 || v > formatCurrent {
		d.err = fmt.Errorf("%w: unknown format %d", ErrCorrupt, v)
		return 0
	}
	d.buf = d.buf[len(m)+1:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) == 0 {
		d.fail("truncated")
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad boolean")
	return false
}

// attrs reads what appendAttrs wrote; none is nil.
func (d *decoder) attrs() map[string]string {
	na := d.count(2)
	if na == 0 {
		return nil
	}
	attrs := make(map[string]string, na)
	prev := ""
	for j := 0; j < na && d.err == nil; j++ {
		k, v := d.str(MaxAttrLen), d.str(MaxAttrLen)
		if j > 0 && k <= prev {
			d.fail("attribute keys out of order")
		}
		attrs[k], prev = v, k
	}
	return attrs
}

// overrides reads what appendOverrides wrote in the given format. Values
// are range-checked by Validate; here they only have to fit their types.
func (d *decoder) overrides(format byte) Overrides {
	known := overrideAll
	if format < formatV4 {
		known = overrideV3
	}
	o := Overrides{Set: OverrideField(d.byte())}
	if o.Set&^known != 0 {
		d.fail("unknown overrides")
		return Overrides{}
	}
	dur := func() time.Duration {
		v := d.uvarint()
		if v > uint64(lease.MaxDuration) {
			d.fail("override duration out of range")
			return 0
		}
		return time.Duration(v)
	}
	count := func() int {
		v := d.uvarint()
		if v > 1<<31-1 {
			d.fail("override cap out of range")
			return 0
		}
		return int(v)
	}
	if o.Has(OverrideGrace) {
		o.Grace = dur()
	}
	if o.Has(OverrideHeartbeatTTL) {
		o.HeartbeatTTL = dur()
	}
	if o.Has(OverrideMaxMembers) {
		o.MaxMembers = count()
	}
	if o.Has(OverrideMaxConnectionsPerPlayer) {
		o.MaxConnectionsPerPlayer = count()
	}
	if o.Has(OverrideMaxBlocks) {
		o.MaxBlocks = count()
	}
	return o
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 || (n > 1 && d.buf[n-1] == 0) { // overflow, truncation or an overlong form
		d.fail("bad varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// count reads a length whose elements take at least minSize bytes each.
func (d *decoder) count(minSize int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.buf)/minSize) {
		d.fail("count exceeds input")
		return 0
	}
	return int(v)
}

func (d *decoder) str(maxLen int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(maxLen) || n > uint64(len(d.buf)) {
		d.fail("string too long")
		return ""
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	if !utf8.Valid(b) {
		d.fail("string not UTF-8")
		return ""
	}
	return string(b)
}

func (d *decoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
	default:
		d.fail("bad time")
		return time.Time{}
	}
	if d.err != nil {
		return time.Time{}
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 || (n > 1 && d.buf[n-1] == 0) {
		d.fail("bad time")
		return time.Time{}
	}
	d.buf = d.buf[n:]
	t := time.Unix(0, v).UTC()
	if t.Before(minTime) || t.After(maxTime.Add(2*366*24*time.Hour)) {
		d.fail("time out of range")
		return time.Time{}
	}
	return t
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.buf) > 0 {
		d.fail("trailing bytes")
	}
	return d.err
}
