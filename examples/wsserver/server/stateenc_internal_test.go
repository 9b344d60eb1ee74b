package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// The hand-written lobby.state encoder writes exactly what encoding/json
// writes for the same message, for IDs, attributes and overrides full of
// characters JSON and HTML treat specially, invalid UTF-8 included.
func TestAppendStateMatchesEncodingJSON(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("LOBBYHOST_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (replay with LOBBYHOST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	alphabet := []string{"a", "Z", "0", " ", `"`, `\`, "/", "<", ">", "&", "'", "\x00", "\x01", "\b", "\f", "\n", "\r", "\t", "\x1f", "\x7f",
		"é", "ü", "\u2028", "\u2029", "\ufffd", "😀", "\xff", "\xc3", "\xe2\x80", "{}", "[", "]", ":", ","}
	str := func() string {
		var b bytes.Buffer
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 678900000, time.UTC)
	for i := range 2000 {
		var members []lobby.MemberView
		for j := range rng.IntN(5) {
			mv := lobby.MemberView{Player: str(), JoinSeq: uint64(j + 1), Status: lobby.StatusOnline}
			if rng.IntN(2) == 0 {
				mv.Status = lobby.StatusReconnecting
				mv.ReconnectDeadline = at.Add(time.Duration(rng.IntN(1e9)))
			}
			if rng.IntN(3) == 0 {
				mv.Attrs = map[string]string{}
				for range rng.IntN(4) {
					mv.Attrs[str()] = str()
				}
			}
			members = append(members, mv)
		}
		host := ""
		if len(members) > 0 && rng.IntN(4) > 0 {
			host = members[rng.IntN(len(members))].Player
		}
		var o lobby.Overrides
		if rng.IntN(2) == 0 {
			o = o.WithGrace(time.Duration(rng.IntN(1e10))).WithMaxMembers(rng.IntN(100) + 1)
		}
		m := newStateMsg(str(), rng.Uint64(), host, rng.IntN(2) == 0, o, members, at.Add(time.Duration(i)))
		m.Term = rng.Uint64()
		m.Reason = str()
		if rng.IntN(2) == 0 {
			m.SubjectID, m.PreviousHostID, m.At = rawID(str()), rawID(""), at.Format(time.RFC3339Nano)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendState(nil, &m); !bytes.Equal(got, want) {
			t.Fatalf("message %d:\nappendState  %s\nencoding/json %s", i, got, want)
		}
	}
}
