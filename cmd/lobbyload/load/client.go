// Package load drives the example WebSocket lobby server
// (examples/wsserver) over its wire protocol and measures what clients see:
// revisions delivered to every socket, with gaps, duplicates and
// reordering, commit-to-socket latency within and across server processes,
// and the store reads each process made per visible change (scraped from
// its /metrics).
package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// State is the part of a lobby.state message the tool reads.
type State struct {
	Type      string          `json:"type"`
	Version   uint64          `json:"version"`
	Reason    string          `json:"reason"`
	SubjectID json.RawMessage `json:"subjectId"`
}

// Subject returns the state's subject player, or "".
func (s State) Subject() string {
	var v string
	_ = json.Unmarshal(s.SubjectID, &v)
	return v
}

// ReasonSnapshot marks a state read without the change behind it; only such
// a state may skip revisions.
const ReasonSnapshot = "snapshot"

// Client speaks the server's HTTP and WebSocket protocol.
type Client struct {
	HTTP *http.Client
}

// NewClient returns a client whose HTTP transport keeps enough idle
// connections per server for a load run.
func NewClient() *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4096
	tr.MaxIdleConnsPerHost = 1024
	return &Client{HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Ticket asks base (http://host:port) for a socket ticket for user in room.
func (c *Client) Ticket(ctx context.Context, base, room, user string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/rooms/"+url.PathEscape(room)+"/socket-ticket", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("x-authenticated-user", user)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tr struct {
		Ticket string `json:"ticket"`
		Error  string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("ticket for %s in %s: HTTP %d %s %v", user, room, resp.StatusCode, tr.Error, err)
	}
	return tr.Ticket, nil
}

// Dial opens a socket with a ticket. The join is committed when it returns.
func (c *Client) Dial(ctx context.Context, base, ticket string) (*websocket.Conn, error) {
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws?ticket="+url.QueryEscape(ticket),
		&websocket.DialOptions{HTTPClient: c.HTTP})
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(1 << 20)
	return conn, nil
}

// Join gets a ticket and opens a socket for user in room on base.
func (c *Client) Join(ctx context.Context, base, room, user string) (*websocket.Conn, error) {
	t, err := c.Ticket(ctx, base, room, user)
	if err != nil {
		return nil, err
	}
	return c.Dial(ctx, base, t)
}

// ParseState returns the lobby.state in a message, if it is one.
func ParseState(data []byte) (State, bool) {
	// Cheap pre-check: most messages on a watcher socket are states, but
	// welcome, chat.history and typing.state arrive on attach.
	if !strings.Contains(string(data[:min(len(data), 40)]), `"lobby.state"`) {
		return State{}, false
	}
	var s State
	if json.Unmarshal(data, &s) != nil || s.Type != "lobby.state" {
		return State{}, false
	}
	return s, true
}
