package rules

import (
	"encoding/binary"
	"fmt"
)

// Effects is what one commit means outside the store: the visible events it
// committed, in revision order, and the connection generations it ended, in
// the order they ended. The Service writes them to the lobby's effects log
// in the commit's atomic write, and every process that follows the lobby
// reads them back from there (or, for its own commits, gets them at once).
type Effects struct {
	Events []Event
	Ended  []Ended
}

// Empty reports whether the commit had no effect worth logging.
func (e *Effects) Empty() bool { return len(e.Events) == 0 && len(e.Ended) == 0 }

// effectsMagic starts an encoded Effects. Its format number is separate from
// the state's and the events': the events inside keep their own magic and
// format, so the two evolve independently.
const (
	effectsMagic    = "LHX"
	effectsFormatV1 = 1
)

// AppendEffects appends the encoding of e to dst and returns the extended
// slice: the magic and format, the events (each length-prefixed, in the
// event encoding of AppendEvent), then the ended generations.
func AppendEffects(dst []byte, e *Effects) []byte {
	dst = append(dst, effectsMagic...)
	dst = append(dst, effectsFormatV1)
	dst = binary.AppendUvarint(dst, uint64(len(e.Events)))
	for i := range e.Events {
		// Reserve the longest varint, then move the event down if its
		// length needs fewer bytes: one pass, no temporary buffer.
		start := len(dst)
		dst = append(dst, make([]byte, binary.MaxVarintLen64)...)
		dst = AppendEvent(dst, &e.Events[i])
		n := len(dst) - start - binary.MaxVarintLen64
		var lenBuf [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(lenBuf[:], uint64(n))
		copy(dst[start:], lenBuf[:k])
		copy(dst[start+k:], dst[start+binary.MaxVarintLen64:])
		dst = dst[:start+k+n]
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Ended)))
	for _, x := range e.Ended {
		dst = appendString(dst, x.Player)
		dst = binary.AppendUvarint(dst, x.Gen)
		dst = append(dst, byte(x.Cause))
		dst = appendTime(dst, x.At)
	}
	return dst
}

// DecodeEffects decodes what AppendEffects wrote. Malformed input yields an
// error wrapping ErrCorrupt, never a panic.
func DecodeEffects(data []byte) (Effects, error) {
	var e Effects
	if len(data) < len(effectsMagic)+1 || string(data[:len(effectsMagic)]) != effectsMagic {
		return e, fmt.Errorf("%w: not encoded effects", ErrCorrupt)
	}
	if v := data[len(effectsMagic)]; v != effectsFormatV1 {
		return e, fmt.Errorf("%w: unknown effects format %d", ErrCorrupt, v)
	}
	d := decoder{buf: data[len(effectsMagic)+1:]}
	n := d.count(5)
	if n > 0 {
		e.Events = make([]Event, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		size := d.uvarint()
		if d.err != nil {
			break
		}
		if size > uint64(len(d.buf)) {
			d.fail("event length exceeds input")
			break
		}
		ev, err := DecodeEvent(d.buf[:size])
		if err != nil {
			return Effects{}, err
		}
		if len(e.Events) > 0 && ev.Revision != e.Events[len(e.Events)-1].Revision+1 {
			d.fail("events out of revision order")
		}
		e.Events = append(e.Events, ev)
		d.buf = d.buf[size:]
	}
	m := d.count(4)
	if m > 0 && d.err == nil {
		e.Ended = make([]Ended, m)
	}
	for i := 0; i < m && d.err == nil; i++ {
		x := Ended{Player: d.str(maxDecodeID), Gen: d.uvarint(), Cause: EndCause(d.byte()), At: d.time()}
		if d.err == nil && (ValidateID(x.Player) != nil || x.Gen == 0 || x.Cause == 0 || x.Cause.String() == "EndCause(?)" || x.At.IsZero()) {
			d.fail("ended connection")
		}
		e.Ended[i] = x
	}
	if err := d.finish(); err != nil {
		return Effects{}, err
	}
	return e, nil
}
