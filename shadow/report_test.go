package shadow_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/lease"
	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/shadow"
)

// The report prints times and durations exactly enough to compare: two
// entries half a millisecond apart, and advice to the nanosecond, are told
// apart in the text and the HTML.
func TestReportPrintsTimesExactly(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	rep := shadow.Report{
		Lobbies: []shadow.LobbyTimeline{{Lobby: "l", Entries: []shadow.Entry{
			{At: at.Add(250 * time.Microsecond), Kind: shadow.KindClose, Player: "p", Gen: 1},
			{At: at.Add(750*time.Microsecond + 3), Kind: shadow.KindTimedOut, Player: "p"},
		}}},
		Advice: []lobby.ClassAdvice{{Class: "mobile",
			Grace:        lease.Advice{Grace: 6776263478 * time.Nanosecond, Returns: 3},
			HeartbeatGap: lease.Advice{Grace: 5421010783 * time.Nanosecond}}},
		AdviceQuantile: 0.995,
	}
	var text, page bytes.Buffer
	if err := rep.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"09:00:00.000250000  close", "09:00:00.000750003  timed out", "covers 99.5% of", "grace 6.776263478s", "heartbeat gap 5.421010783s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"2026-03-01 09:00:00.000250000", "2026-03-01 09:00:00.000750003", "6.776263478s"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}
