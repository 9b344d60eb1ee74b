package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

// testTicketKeyHex is the ticket key the test processes share.
const testTicketKeyHex = "6c6f626279686f73742074657374207469636b6574206b65792c203332206279746573206f72206d6f7265"

func TestMultiProcessTicketRefusals(t *testing.T) { mpOnStores(t, mpRefusals) }

// mpUpgrade tries a WebSocket upgrade on base with query q and returns the
// status and the error code of the answer (101 and "" when it upgraded).
func mpUpgrade(t *testing.T, base, q string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/ws?"+q, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upgrade on %s: %v", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	var e struct{ Error string }
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("upgrade on %s: %d with an undecodable body: %v", base, resp.StatusCode, err)
	}
	return resp.StatusCode, e.Error
}

// mpRefusals: three processes share a ticket key and a store. A ticket one
// process issued opens a socket on another exactly once; a forged,
// tampered, replayed, expired or wrong-room ticket is refused by every
// process, each with its own code.
func mpRefusals(t *testing.T, bin string, storeArgs ...string) {
	var procs []*mpProc
	for i := range 3 {
		procs = append(procs, mpStart(t, bin, i, storeArgs...))
	}
	for _, p := range procs {
		(&process{base: p.base}).healthy(t)
	}
	room := randomName("tickets-")
	key, err := hex.DecodeString(testTicketKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	// A signer holding the shared key, with a clock an hour behind: its
	// tickets are genuine but expired.
	past := clockwork.NewFakeClockAt(time.Now().Add(-time.Hour))
	oldSigner, err := server.NewSignedTickets([][]byte{key}, past, time.Minute, server.NewMemoryRedemptions())
	if err != nil {
		t.Fatal(err)
	}
	// A signer with another key: a forger who knows the format.
	forger, err := server.NewSignedTickets([][]byte{[]byte(strings.Repeat("k", 32))}, nil, time.Minute, server.NewMemoryRedemptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	issue := func(p *mpProc, room, user string) string {
		t.Helper()
		v, err := mpTicket(p.base, room, user)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	q := func(ticket string) string { return "ticket=" + url.QueryEscape(ticket) }

	// Replay: the first redemption, on another process than the issuer,
	// opens the socket; every later one, on any process, is refused.
	for i, p := range procs {
		user := "replay" + string(rune('a'+i))
		v := issue(procs[(i+1)%3], room, user)
		if st, code := mpUpgrade(t, p.base, q(v)); st != http.StatusSwitchingProtocols {
			t.Fatalf("ticket from process %d on process %d: %d %s, want 101", (i+1)%3, p.idx, st, code)
		}
		for _, r := range procs {
			if st, code := mpUpgrade(t, r.base, q(v)); st != http.StatusUnauthorized || code != "ticket_used" {
				t.Errorf("replayed ticket on process %d: %d %q, want 401 ticket_used", r.idx, st, code)
			}
		}
	}

	for _, p := range procs {
		// Forged: right layout, wrong key.
		f, err := forger.Issue(ctx, room, "mallory")
		if err != nil {
			t.Fatal(err)
		}
		if st, code := mpUpgrade(t, p.base, q(f.Value)); st != http.StatusUnauthorized || code != "ticket_forged" {
			t.Errorf("forged ticket on process %d: %d %q, want 401 ticket_forged", p.idx, st, code)
		}
		// Tampered: a genuine ticket with its user changed.
		v := issue(procs[(p.idx+1)%3], room, "mallory")
		body, sig, _ := strings.Cut(v, ".")
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)-1] = 'z' // "mallorz"
		tampered := base64.RawURLEncoding.EncodeToString(raw) + "." + sig
		if st, code := mpUpgrade(t, p.base, q(tampered)); st != http.StatusUnauthorized || code != "ticket_forged" {
			t.Errorf("tampered ticket on process %d: %d %q, want 401 ticket_forged", p.idx, st, code)
		}
		// Garbage: not a ticket at all.
		if st, code := mpUpgrade(t, p.base, q("not-a-ticket")); st != http.StatusUnauthorized || code != "ticket_unknown" {
			t.Errorf("garbage ticket on process %d: %d %q, want 401 ticket_unknown", p.idx, st, code)
		}
		// Expired: genuinely signed, past its expiry.
		e, err := oldSigner.Issue(ctx, room, "late")
		if err != nil {
			t.Fatal(err)
		}
		if st, code := mpUpgrade(t, p.base, q(e.Value)); st != http.StatusUnauthorized || code != "ticket_expired" {
			t.Errorf("expired ticket on process %d: %d %q, want 401 ticket_expired", p.idx, st, code)
		}
		// Wrong room: a genuine ticket for this room, presented for another.
		w := issue(procs[(p.idx+2)%3], room, "wanderer")
		if st, code := mpUpgrade(t, p.base, q(w)+"&roomId="+url.QueryEscape(room+"-other")); st != http.StatusForbidden || code != "wrong_room" {
			t.Errorf("other room's ticket on process %d: %d %q, want 403 wrong_room", p.idx, st, code)
		}
	}
}
