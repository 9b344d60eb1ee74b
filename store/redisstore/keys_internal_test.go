package redisstore

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// times the key encoding must order and round-trip: around the epoch,
// nanoseconds apart, and at the ends of what deadlines and nows can be.
var keyTimes = []time.Time{
	time.Time{}.Add(time.Nanosecond),
	time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
	time.Unix(0, 0),
	time.Unix(0, 1),
	time.Unix(1, 0),
	time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC),
	time.Date(2031, 3, 14, 15, 9, 26, 535897933, time.UTC),
	time.Date(2199, 12, 31, 23, 59, 59, 999999999, time.UTC),
	time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
}

func TestDeadlineKeyRoundTrip(t *testing.T) {
	for _, tm := range keyTimes {
		k := deadlineKey(tm)
		if len(k) != deadlineKeyLen {
			t.Fatalf("deadlineKey(%v) = %q, length %d, want %d", tm, k, len(k), deadlineKeyLen)
		}
		got, ok := parseDeadlineKey(k)
		if !ok || !got.Equal(tm) {
			t.Errorf("parseDeadlineKey(deadlineKey(%v)) = %v, %v; want %v, true", tm, got, ok, tm)
		}
	}
}

// TestDeadlineKeyOrder checks that byte order of keys is the order of
// instants, which is what makes the due index exact.
func TestDeadlineKeyOrder(t *testing.T) {
	times := append([]time.Time(nil), keyTimes...)
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		sec := r.Int64N(1<<40) - 1<<39
		times = append(times, time.Unix(sec, r.Int64N(1e9)), time.Unix(sec, r.Int64N(1e9)))
	}
	for i, a := range times {
		for _, b := range times[max(0, i-3) : i+1] {
			ka, kb := deadlineKey(a), deadlineKey(b)
			if (ka < kb) != a.Before(b) || (ka == kb) != a.Equal(b) {
				t.Fatalf("order of %v and %v: keys %q, %q disagree", a, b, ka, kb)
			}
		}
	}
}

func TestAfterKey(t *testing.T) {
	for _, tm := range keyTimes {
		k, ok := afterKey(tm)
		if !ok {
			t.Fatalf("afterKey(%v) = _, false; want a key", tm)
		}
		if want := deadlineKey(tm.Add(time.Nanosecond)); k != want {
			t.Errorf("afterKey(%v) = %q, want %q", tm, k, want)
		}
		// Every member with deadline tm sorts before the bound, every member
		// a nanosecond later after it.
		if m := deadlineKey(tm) + strings.Repeat("\xff", 128); m >= k {
			t.Errorf("member %q of deadline %v does not sort before bound %q", m, tm, k)
		}
	}
	if _, ok := afterKey(time.Unix(math.MaxInt64, 999999999)); ok {
		t.Error("afterKey(last instant) = _, true; want false")
	}
}

func TestParseDeadlineKeyRejects(t *testing.T) {
	for _, k := range []string{"", "zz", strings.Repeat("0", 23), strings.Repeat("g", 24), "8000000000000000" + "3b9aca00"} {
		if got, ok := parseDeadlineKey(k); ok {
			t.Errorf("parseDeadlineKey(%q) = %v, true; want false", k, got)
		}
	}
}

func TestShardIndex(t *testing.T) {
	counts := make([]int, 8)
	for i := range 8000 {
		id := "lobby-" + string(rune('a'+i%26)) + time.Duration(i).String()
		k := shardIndex(id, 8)
		if k2 := shardIndex(id, 8); k2 != k {
			t.Fatalf("shardIndex(%q) not stable: %d then %d", id, k, k2)
		}
		counts[k]++
	}
	for k, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d got %d of 8000 IDs, want about 1000 (all: %v)", k, n, counts)
		}
	}
	if got := shardIndex("anything", 1); got != 0 {
		t.Errorf("shardIndex with one shard = %d, want 0", got)
	}
}

// TestAgeMemberOrder checks that byte order of age index members is
// (time, position) order, with positions compared as numbers, and that a
// member gives back its time and ID, whatever the ID holds.
func TestAgeMemberOrder(t *testing.T) {
	type entry struct {
		at  time.Time
		pos uint64
		id  string
	}
	ids := []string{"a", "z{}:", "\x00nul", "0"}
	positions := []uint64{1, 2, 9, 10, 99, 100, 1 << 53, 1<<53 + 1, math.MaxUint64 - 1, math.MaxUint64}
	var es []entry
	for _, at := range keyTimes {
		for _, pos := range positions {
			es = append(es, entry{at, pos, ids[int(pos%uint64(len(ids)))]})
		}
	}
	rand.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
	for _, a := range es {
		ma := ageMember(a.at, a.pos, a.id)
		at, id, ok := parseAgeMember(ma)
		if !ok || !at.Equal(a.at) || id != a.id {
			t.Fatalf("parseAgeMember(ageMember(%v, %d, %q)) = %v, %q, %v", a.at, a.pos, a.id, at, id, ok)
		}
		for _, b := range es {
			mb := ageMember(b.at, b.pos, b.id)
			before := a.at.Before(b.at) || a.at.Equal(b.at) && a.pos < b.pos
			if before && strings.Compare(ma, mb) >= 0 {
				t.Fatalf("ageMember(%v, %d) = %q does not sort before ageMember(%v, %d) = %q", a.at, a.pos, ma, b.at, b.pos, mb)
			}
		}
	}
}
