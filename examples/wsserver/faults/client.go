package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/faults/history"
)

// wireState is a lobby.state as the driver reads it.
type wireState struct {
	Type    string  `json:"type"`
	Version uint64  `json:"version"`
	Term    uint64  `json:"term"`
	HostID  *string `json:"hostId"`
	Members []struct {
		UserID string `json:"userId"`
		Status string `json:"status"`
	} `json:"members"`
	Reason    string          `json:"reason"`
	SubjectID json.RawMessage `json:"subjectId"`
}

func (w wireState) state(at time.Time) history.State {
	s := history.State{Revision: w.Version, Term: w.Term, Reason: w.Reason, Full: w.Reason == "snapshot", At: at}
	if w.HostID != nil {
		s.Host = *w.HostID
	}
	_ = json.Unmarshal(w.SubjectID, &s.Subject)
	for _, m := range w.Members {
		s.Members = append(s.Members, history.Member{ID: m.UserID, Online: m.Status == "online"})
	}
	return s
}

// sock is one client socket and everything it received.
type sock struct {
	id     int
	lobby  string
	player string
	proc   *Proc
	conn   *websocket.Conn
	opened time.Time

	mu       sync.Mutex
	states   []history.State
	lastMsg  time.Time
	closed   time.Time
	code     int
	byClient bool   // the driver closed it on purpose
	why      string // how it ended, as the driver saw it
	hostTerm uint64 // the term of the last state that made this player host (0: never)
	dropped  int    // states left out on purpose (a broken client path)
	done     chan struct{}
}

func (s *sock) String() string {
	return fmt.Sprintf("socket %d (%s in %s on process %d)", s.id, s.player, s.lobby, s.proc.Idx)
}

func (s *sock) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// last returns the newest state the socket recorded.
func (s *sock) last() (history.State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.states) == 0 {
		return history.State{}, false
	}
	return s.states[len(s.states)-1], true
}

func (s *sock) record() history.Socket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return history.Socket{ID: s.id, Lobby: s.lobby, Player: s.player, Proc: s.proc.Idx, Opened: s.opened,
		States: append([]history.State(nil), s.states...), Closed: s.closed, Code: s.code}
}

// send writes one JSON message, with a timeout.
func (s *sock) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageText, b)
}

// closeBy ends the socket from the client side.
func (s *sock) closeBy(why string, normal bool) {
	s.mu.Lock()
	if s.why == "" {
		s.why, s.byClient = why, true
	}
	s.mu.Unlock()
	if normal {
		go s.conn.Close(websocket.StatusNormalClosure, "bye")
	} else {
		s.conn.CloseNow()
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// ticket asks p for a ticket for player in lobby.
func ticket(ctx context.Context, p *Proc, lobby, player string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Base()+"/rooms/"+url.PathEscape(lobby)+"/socket-ticket", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("x-authenticated-user", player)
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tr struct{ Ticket string }
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("ticket from process %d: %d %v", p.Idx, resp.StatusCode, err)
	}
	return tr.Ticket, nil
}

// snapshot reads lobby's current revision from p.
func snapshot(ctx context.Context, p *Proc, lobby string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Base()+"/rooms/"+url.PathEscape(lobby), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("x-authenticated-user", "harness")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var w wireState
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("snapshot from process %d: %d %v", p.Idx, resp.StatusCode, err)
	}
	return w.Version, nil
}

// dialOpts are what a socket needs from the driver.
type dialOpts struct {
	silence      time.Duration // no message for this long: the client gives the socket up
	dropRevision bool          // a broken client path: leave out some states
	onEnd        func(*sock)
}

var errNoState = errors.New("no lobby.state after attaching")

// dial opens a socket on p for player in lobby, with a ticket from issuer.
func dial(issuer, p *Proc, lobby, player string, id int, o dialOpts) (*sock, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	tk, err := ticket(ctx, issuer, lobby, player)
	if err != nil {
		return nil, err
	}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.Base(), "http")+"/ws?ticket="+url.QueryEscape(tk), nil)
	if err != nil {
		return nil, fmt.Errorf("dial process %d: %w", p.Idx, err)
	}
	c.SetReadLimit(1 << 20)
	now := time.Now()
	s := &sock{id: id, lobby: lobby, player: player, proc: p, conn: c, opened: now, lastMsg: now, done: make(chan struct{})}
	first := make(chan struct{})
	var once sync.Once
	go s.read(o, func() { once.Do(func() { close(first) }) })
	go s.keepalive(o)
	select {
	case <-first:
		return s, nil
	case <-s.done:
		return s, fmt.Errorf("%v ended before its first state (close %d)", s, s.code)
	case <-time.After(3 * time.Second):
		s.closeBy("no first state", false)
		return s, fmt.Errorf("%v: %w", s, errNoState)
	}
}

func (s *sock) read(o dialOpts, gotFirst func()) {
	defer func() {
		close(s.done)
		if o.onEnd != nil {
			o.onEnd(s)
		}
	}()
	for {
		_, data, err := s.conn.Read(context.Background())
		now := time.Now()
		if err != nil {
			s.mu.Lock()
			s.closed, s.code = now, int(websocket.CloseStatus(err))
			if s.why == "" {
				s.why = "ended by the server or the network"
			}
			s.mu.Unlock()
			return
		}
		var w wireState
		if json.Unmarshal(data, &w) != nil {
			continue
		}
		s.mu.Lock()
		s.lastMsg = now
		if w.Type == "lobby.state" {
			st := w.state(now)
			if o.dropRevision && len(s.states) > 0 && (len(s.states)+s.dropped)%3 == 2 && !st.Full {
				s.dropped++ // the broken client path loses this one
			} else {
				s.states = append(s.states, st)
			}
			if st.Host == s.player {
				s.hostTerm = st.Term
			}
		}
		s.mu.Unlock()
		if w.Type == "lobby.state" {
			gotFirst()
		}
	}
}

// keepalive sends an app ping every half second (each is a heartbeat and
// gets a pong), and gives the socket up when nothing at all arrived for
// the silence limit: a client whose server went quiet reconnects.
func (s *sock) keepalive(o dialOpts) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		quiet := time.Since(s.lastMsg)
		s.mu.Unlock()
		if o.silence > 0 && quiet > o.silence {
			s.closeBy("silent server", false)
			return
		}
		_ = s.send(map[string]string{"type": "ping"})
	}
}
