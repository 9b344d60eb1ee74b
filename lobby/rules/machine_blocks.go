package rules

import (
	"encoding/binary"
	"iter"
	"slices"
	"strings"
	"time"
)

// Block is one kicked player's block: its joins are refused while their
// effective time is before Until.
type Block struct {
	Player string
	Until  time.Time
}

// Blocks is a lobby's set of blocks, at most one per player. The zero Blocks
// holds none.
//
// A Blocks value never changes once built: copies share it, and the
// Machine puts a new value in place of the old one when a kick adds a block
// or when blocks end. So a command that touches no block costs the same
// whatever the number of blocks: cloning a State copies one pointer, a
// write checks one cached instant to learn that no block has ended, and
// encoding copies bytes kept from when the set was built, without sorting.
// The cost of a set proportional to its size is paid only when it is built:
// by the kick that adds a block, by the first write after a block ended
// (which drops every block ended by then), and by decoding.
type Blocks struct {
	set *blockSet
}

type blockSet struct {
	list  []Block   // by player, in byte order; no two for one player
	first time.Time // the earliest Until in list
	last  time.Time // the latest Until in list
	enc   []byte    // the encoding of list, as AppendState writes it
}

// NewBlocks returns the set of the given blocks; a later block of a player
// replaces an earlier one. It does not judge them: [State.Validate] does
// (valid IDs, ends after the lobby's last transition, no member blocked).
func NewBlocks(blocks ...Block) Blocks {
	list := slices.Clone(blocks)
	// A stable sort keeps a player's blocks in the order given; keep the
	// last of each run.
	slices.SortStableFunc(list, func(a, b Block) int { return strings.Compare(a.Player, b.Player) })
	out := list[:0]
	for i, b := range list {
		if i+1 < len(list) && list[i+1].Player == b.Player {
			continue
		}
		b.Until = b.Until.Round(0).UTC()
		out = append(out, b)
	}
	return makeBlocks(out)
}

// makeBlocks builds the set over list, which must be in player order with no
// player twice, and which the set then owns.
func makeBlocks(list []Block) Blocks {
	if len(list) == 0 {
		return Blocks{}
	}
	set := &blockSet{list: list, first: list[0].Until, last: list[0].Until}
	for _, b := range list[1:] {
		if b.Until.Before(set.first) {
			set.first = b.Until
		}
		if b.Until.After(set.last) {
			set.last = b.Until
		}
	}
	set.enc = appendBlockList(nil, list)
	return Blocks{set: set}
}

// appendBlockList appends the count and each block in order.
func appendBlockList(dst []byte, list []Block) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(list)))
	for _, b := range list {
		dst = appendString(dst, b.Player)
		dst = appendTime(dst, b.Until)
	}
	return dst
}

// appendTo appends the encoding of the set.
func (b Blocks) appendTo(dst []byte) []byte {
	if b.set == nil {
		return append(dst, 0)
	}
	return append(dst, b.set.enc...)
}

// Len returns the number of blocks in the set, ended or not.
func (b Blocks) Len() int {
	if b.set == nil {
		return 0
	}
	return len(b.set.list)
}

// Until returns the end of player's block, and whether the set holds one
// (it may have ended already: compare the end with the time that matters).
func (b Blocks) Until(player string) (time.Time, bool) {
	if b.set == nil {
		return time.Time{}, false
	}
	i, ok := b.set.find(player)
	if !ok {
		return time.Time{}, false
	}
	return b.set.list[i].Until, true
}

func (s *blockSet) find(player string) (int, bool) {
	return slices.BinarySearchFunc(s.list, player, func(b Block, p string) int { return strings.Compare(b.Player, p) })
}

// Last returns the latest end among the blocks, or the zero time if there
// are none: from then on no block of the set refuses anyone.
func (b Blocks) Last() time.Time {
	if b.set == nil {
		return time.Time{}
	}
	return b.set.last
}

// All yields the blocks in player order (byte order).
func (b Blocks) All() iter.Seq[Block] {
	return func(yield func(Block) bool) {
		if b.set == nil {
			return
		}
		for _, x := range b.set.list {
			if !yield(x) {
				return
			}
		}
	}
}

// Equal reports whether b and o hold the same blocks.
func (b Blocks) Equal(o Blocks) bool {
	if b.set == o.set {
		return true
	}
	if b.Len() != o.Len() {
		return false
	}
	for i, x := range b.set.list {
		y := o.set.list[i]
		if x.Player != y.Player || !x.Until.Equal(y.Until) {
			return false
		}
	}
	return true
}

// String lists the blocks, for debugging.
func (b Blocks) String() string {
	var sb strings.Builder
	sb.WriteByte('[')
	for x := range b.All() {
		if sb.Len() > 1 {
			sb.WriteByte(' ')
		}
		sb.WriteString(x.Player + ":" + x.Until.Format(time.RFC3339Nano))
	}
	sb.WriteByte(']')
	return sb.String()
}

// inForce returns the number of blocks still in force at t (ending after t).
// It counts one by one only when some block has ended by t.
func (b Blocks) inForce(t time.Time) int {
	if b.set == nil {
		return 0
	}
	if b.set.first.After(t) {
		return len(b.set.list)
	}
	n := 0
	for _, x := range b.set.list {
		if x.Until.After(t) {
			n++
		}
	}
	return n
}

// endedBy returns the set without the blocks ended at t (ending at or before
// t). It is b itself, at no cost, while none has.
func (b Blocks) endedBy(t time.Time) Blocks {
	if b.set == nil || b.set.first.After(t) {
		return b
	}
	var list []Block
	for _, x := range b.set.list {
		if x.Until.After(t) {
			list = append(list, x)
		}
	}
	return makeBlocks(list)
}

// with returns the set with player blocked until until (replacing its block
// if it had one) and without the blocks ended at now.
func (b Blocks) with(player string, until, now time.Time) Blocks {
	list := make([]Block, 0, b.Len()+1)
	added := false
	for x := range b.All() {
		if !added && x.Player >= player {
			list = append(list, Block{Player: player, Until: until})
			added = true
		}
		if x.Player != player && x.Until.After(now) {
			list = append(list, x)
		}
	}
	if !added {
		list = append(list, Block{Player: player, Until: until})
	}
	return makeBlocks(list)
}
