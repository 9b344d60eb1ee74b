package redisstore

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"
)

// This file holds the key layout and the encodings the scripts rely on.
//
// With prefix P and N shards, lobby ID L lives in shard k = fnv1a32(L) mod N,
// and shard k owns these keys, all sharing the hash tag {P:k} so that a
// Redis Cluster puts them in one slot:
//
//	{P:k}:r:L     hash: v (version or floor), d (data, absent in a
//	              tombstone), t (deadline key, absent when none),
//	              c (claimed-until key of a due claim), f (in a tombstone:
//	              the deleted record's data), x (the highest log position
//	              trimmed, absent while none was), a (in a tombstone: the
//	              deadline key of Deletion.At), k (in a tombstone: the
//	              deadline key of Deletion.Keep, absent without one or once
//	              it came while the log still had entries), g (the age key
//	              of the newest entry appended, which the next one's is
//	              at least), s (Write.Sessions of the last write, each ID
//	              as its length, ':' and its bytes; absent for none)
//	{P:k}:l:L     stream, the lobby's effects log: entry ID "<position>-0",
//	              fields a (deadline key of Write.At), g (the age key: the
//	              latest of a and the previous entry's g, as a deadline
//	              key) and d (the entry)
//	{P:k}:due     sorted set, every score 0, members deadlineKey+L, so that
//	              byte order of members is (deadline, ID) order
//	{P:k}:age     sorted set, every score 0, members age key + 20-digit
//	              position + L: every log entry of the shard by age
//	{P:k}:floor   string, the shard's floor: the highest floor of a
//	              tombstone that went away (absent while none did)
//	{P:k}:floorat string, the deadline key of the latest At of a tombstone
//	              that went away (absent while none did)
//	{P:k}:keep    sorted set, every score 0, members deadlineKey(Keep)+L:
//	              the tombstones of the shard with a Keep, by Keep
//	{P:k}:names   set, the registered consumer names
//	{P:k}:c:N     hash per consumer name N, L -> "<cursor>", or
//	              "<cursor> <queue key>" while L is queued, for every lobby
//	              of the shard that had an entry since N registered
//	{P:k}:q:N     sorted set per consumer name N, every score 0, members
//	              queue key + L (see consumers.go)
//	{P:k}:sl:S    sorted set per session S, every score 0, members the
//	              shard's lobby IDs whose last write listed S (the record's
//	              field s keeps that list)
//	{P:k}:sh      hash, S -> how many lobbies of the shard list session S
//	{P:0}:s:S     hash per session S, in the home shard whatever S is: d
//	              (deadline key), e ("1" once ended)
//	{P:0}:sdue    sorted set, every score 0, members deadlineKey+S: the
//	              known sessions by (deadline, S)
//
// Writes with a log entry also publish "<position>:L" on the channel
// {P}:notify (not a key). Stores of earlier versions left {P:k}:out and
// {P:k}:ix (the outbox); nothing here reads or removes them.

// deadlineKeyLen is the length of a deadline key: 16 hex digits of the Unix
// seconds with the sign bit flipped, then 8 hex digits of the nanoseconds.
const deadlineKeyLen = 24

// deadlineKey encodes t as a fixed-width string whose byte order is the
// order of instants. It is exact to the nanosecond for every time.Time whose
// Unix seconds fit an int64, which is all of them in practice; location and
// monotonic reading are dropped.
func deadlineKey(t time.Time) string {
	return appendDeadlineKey(make([]byte, 0, deadlineKeyLen), t.Unix(), int64(t.Nanosecond()))
}

func appendDeadlineKey(b []byte, sec, nsec int64) string {
	var raw [12]byte
	u := uint64(sec) ^ (1 << 63)
	for i := 7; i >= 0; i-- {
		raw[i] = byte(u)
		u >>= 8
	}
	n := uint32(nsec)
	raw[8], raw[9], raw[10], raw[11] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	b = hex.AppendEncode(b, raw[:])
	return string(b)
}

// afterKey returns the smallest deadline key that sorts after every member
// whose deadline is at or before t, for use as an exclusive upper bound, and
// false if no such key exists (t is the last representable instant).
func afterKey(t time.Time) (string, bool) {
	sec, nsec := t.Unix(), int64(t.Nanosecond())+1
	if nsec == 1e9 {
		if sec == math.MaxInt64 {
			return "", false
		}
		sec, nsec = sec+1, 0
	}
	return appendDeadlineKey(make([]byte, 0, deadlineKeyLen), sec, nsec), true
}

// parseDeadlineKey is the inverse of deadlineKey. It returns the instant in
// UTC and false if k is not a deadline key.
func parseDeadlineKey(k string) (time.Time, bool) {
	if len(k) != deadlineKeyLen {
		return time.Time{}, false
	}
	u, err := strconv.ParseUint(k[:16], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	n, err := strconv.ParseUint(k[16:], 16, 32)
	if err != nil || n >= 1e9 {
		return time.Time{}, false
	}
	return time.Unix(int64(u^(1<<63)), int64(n)).UTC(), true
}

// shard is the key names of one shard.
type shard struct {
	tag     string // "{P:k}:", which every key of the shard starts with
	rec     string // record key prefix: append the lobby ID
	log     string // log key prefix: append the lobby ID
	due     string
	age     string
	floor   string
	floorAt string
	keep    string
	names   string
}

func newShard(prefix string, k int) shard {
	tag := "{" + prefix + ":" + strconv.Itoa(k) + "}:"
	return shard{
		tag:     tag,
		rec:     tag + "r:",
		log:     tag + "l:",
		due:     tag + "due",
		age:     tag + "age",
		floor:   tag + "floor",
		floorAt: tag + "floorat",
		keep:    tag + "keep",
		names:   tag + "names",
	}
}

// consumerKeys returns the keys of consumer name in the shard: its cursors
// and its queue.
func (sh *shard) consumerKeys(name string) (cursors, queue string) {
	return sh.tag + "c:" + name, sh.tag + "q:" + name
}

// shardIndex maps a lobby ID to its shard. It must never change for a
// dataset: a lobby found in another shard would look absent.
func shardIndex(id string, n int) int {
	if n == 1 {
		return 0
	}
	// FNV-1a, 32 bits.
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// posLen is the width of a log position in an age index member: 20
// decimal digits, zero-padded, hold every uint64.
const posLen = 20

// ageMember is the age index member of lobby id's entry at position pos
// written at at. The scripts build the same string (see agePad in
// scripts.go).
func ageMember(at time.Time, pos uint64, id string) string {
	p := strconv.FormatUint(pos, 10)
	return deadlineKey(at) + strings.Repeat("0", posLen-len(p)) + p + id
}

// parseAgeMember splits an age index member into its key (the deadline
// key of the entry's time followed by the padded position, which is what
// orders members) and the lobby ID.
func parseAgeMember(m string) (at time.Time, id string, ok bool) {
	if len(m) <= deadlineKeyLen+posLen {
		return time.Time{}, "", false
	}
	at, ok = parseDeadlineKey(m[:deadlineKeyLen])
	return at, m[deadlineKeyLen+posLen:], ok
}

// validPrefix reports whether p can be used as a key prefix: braces would
// move the hash tag.
func validPrefix(p string) bool {
	return p != "" && !strings.ContainsAny(p, "{}")
}
