package server_test

// The page built on the browser client (static/lobbyhost-client.js) in real
// headless Chromium, against the real server, each page behind a pageProxy
// that breaks its network on demand.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

// browser drives one headless Chromium.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	chromium := findChromium(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 760),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// open opens a tab on url; the returned function closes it.
func (b *browser) open(url string) (context.Context, context.CancelFunc) {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	// The tab lives as long as the context of its first action: this one,
	// not a per-step timeout.
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("opening a tab: %v", err)
	}
	b.run(ctx, "opening "+url, chromedp.Navigate(url))
	return ctx, cancel
}

func (b *browser) run(page context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(page, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// wait waits until the JavaScript expression is true on the page.
func (b *browser) wait(page context.Context, what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(page, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, pollTrue(expr, waitLimit)); err != nil {
		dctx, dcancel := context.WithTimeout(page, 5*time.Second)
		defer dcancel()
		state, derr := chromedp.Run(dctx, chromedp.Evaluate[string](`document.querySelector('#conn-status').textContent + ' | ' + `+
			`[...document.querySelectorAll('#log li')].slice(0, 12).map(e => e.textContent).join(' | ')`))
		b.t.Fatalf("waiting for %s: %v\npage: %s %v", what, err, state, derr)
	}
}

// pageView is what the page's window.lobbyhost.view() reports.
type pageView struct {
	Revision int64    `json:"revision"`
	Shown    []int64  `json:"shown"`
	Dropped  int      `json:"dropped"`
	Gaps     int      `json:"gaps"`
	Left     []string `json:"left"`
	Host     *string  `json:"host"`
	Term     int64    `json:"term"`
	IsHost   bool     `json:"isHost"`
	Conn     string   `json:"conn"`
	Status   string   `json:"status"`
	Attempt  int      `json:"attempt"`
}

func (b *browser) view(page context.Context) pageView {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(page, waitLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[pageView](`window.lobbyhost.view()`))
	if err != nil {
		b.t.Fatalf("reading the page's view: %v", err)
	}
	return v
}

// increasing checks that a page drew revisions only forward.
func increasing(t *testing.T, who string, shown []int64) {
	t.Helper()
	for i := 1; i < len(shown); i++ {
		if shown[i] <= shown[i-1] {
			t.Errorf("%s drew revision %d after %d: %v", who, shown[i], shown[i-1], shown)
		}
	}
}

// ticketCounter counts the ticket requests of each user.
type ticketCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *ticketCounter) authenticator() server.Authenticator {
	return server.AuthenticatorFunc(func(r *http.Request) (string, error) {
		user, err := server.HeaderAuthenticator{}.Authenticate(r)
		if err == nil {
			c.mu.Lock()
			c.n[user]++
			c.mu.Unlock()
		}
		return user, err
	})
}

func (c *ticketCounter) count(user string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[user]
}

// proxiedEnv starts a server whose browser origins include any loopback
// port (the proxies' addresses) and which counts ticket requests.
func proxiedEnv(t *testing.T) (*env, *ticketCounter) {
	tc := &ticketCounter{n: map[string]int{}}
	e := newEnv(t, func(c *server.Config) {
		c.AllowedOrigins = []string{"http://127.0.0.1:*"}
		c.Authenticator = tc.authenticator()
	})
	return e, tc
}

const (
	jsConn   = `document.querySelector('#conn-status').dataset.state`
	jsRole   = `document.querySelector('#role').dataset.role`
	jsNoHost = `document.querySelector('#role').dataset.role !== 'host' && document.querySelectorAll('.make-host, .kick').length === 0 && ` +
		`document.querySelector('#lock').hidden && document.querySelector('#members').classList.contains('stale')`
)

func memberJS(user, class string) string {
	return fmt.Sprintf(`!!document.querySelector('#members li[data-user=%q]%s')`, user, class)
}

// Two pages. The host's network goes and comes back within the grace: its
// page shows its own reconnect attempts and no host claim meanwhile, the
// other page counts the host's grace down and never reports a leave, and
// the host is still host, in the same term. Then a proxy kills the host's
// socket in the middle of a frame: the page reconnects and shows nothing
// older than it had. Then a revision is withheld from the other page and an
// old one replayed: it resyncs over the gap and never draws an older state.
// Last the host's page goes for good: past the grace the other page shows
// itself as host, one term later.
func TestBrowserClientHostDropsAndReturns(t *testing.T) {
	e, _ := proxiedEnv(t)
	pa, pb := newPageProxy(t), newPageProxy(t)
	pa.start(e.ts.Listener.Addr().String())
	pb.start(e.ts.Listener.Addr().String())
	br := newBrowser(t)
	const room = "reconnects"

	alice, closeAlice := br.open(pa.URL() + "/?user=alice&room=" + room)
	br.wait(alice, "alice hosting", memberJS("alice", ".host")+` && `+jsRole+` === 'host'`)
	bob, _ := br.open(pb.URL() + "/?user=bob&room=" + room)
	br.wait(bob, "bob sees both", memberJS("alice", ".host")+` && `+memberJS("bob", ":not(.host)"))
	br.wait(alice, "alice sees bob", memberJS("bob", "")+` && !!document.querySelector('#members li[data-user="bob"] .kick')`)
	term := br.view(alice).Term

	// alice's network goes, and stays down for a few attempts.
	pa.set(func() { pa.refusing = true })
	pa.kill()
	br.wait(alice, "alice's own reconnect attempts", jsConn+` === 'reconnecting' && window.lobbyhost.view().attempt >= 2 && `+
		`/attempt [0-9]+/.test(document.querySelector('#conn-status').textContent) && `+
		`/your place is kept for [0-9]+ s/.test(document.querySelector('#conn-status').textContent)`)
	br.wait(alice, "no host claim while alice's socket is gone", jsNoHost+` && !window.lobbyhost.view().isHost`)
	countdown := `document.querySelector('#members li[data-user="alice"] .countdown')`
	br.wait(bob, "alice's countdown on bob's page", memberJS("alice", ".reconnecting.host")+` && `+countdown+
		` && `+countdown+`.textContent === '8 s left'`)
	if got, want := br.run1(bob, countdown+`.dataset.deadline`), fmt.Sprint(epoch.Add(e.cfg.Policy.Grace).UnixMilli()); got != want {
		t.Errorf("alice's reconnect deadline on bob's page: %s, want %s", got, want)
	}
	screenshot(t, alice, "wsserver-client-reconnecting.png", "alice's page while her network is down")
	screenshot(t, bob, "wsserver-client-countdown.png", "bob's page counting alice's grace down")

	// The network is back: alice's next attempt gets in, as host.
	pa.set(func() { pa.refusing = false })
	br.wait(alice, "alice back as host", jsConn+` === 'connected' && `+jsRole+` === 'host'`)
	br.wait(bob, "alice online again on bob's page", memberJS("alice", ".host:not(.reconnecting)"))
	if v := br.view(bob); len(v.Left) != 0 || v.Term != term {
		t.Errorf("bob's page after alice came back in the grace: leaves %v, term %d; want none, term %d", v.Left, v.Term, term)
	}

	// A frame cut in the middle, the connection dead under it.
	pa.set(func() { pa.cutNext = true })
	carol := e.join(room, "carol")
	br.wait(alice, "alice back after the cut", jsConn+` === 'connected' && `+jsRole+` === 'host' && `+memberJS("carol", ""))
	pa.set(func() {
		if pa.cuts != 1 {
			t.Errorf("frames cut: %d, want 1", pa.cuts)
		}
	})
	br.wait(bob, "carol on bob's page", memberJS("carol", "")+` && `+memberJS("alice", ".host:not(.reconnecting)"))
	av := br.view(alice)
	increasing(t, "alice's page", av.Shown)
	if snap := e.snapshot(room); av.Revision != int64(snap.Revision) || av.Term != term {
		t.Errorf("alice's page after the cut: revision %d term %d; the lobby: revision %d, term %d", av.Revision, av.Term, snap.Revision, term)
	}
	if v := br.view(bob); len(v.Left) != 0 {
		t.Errorf("bob's page reported leaves: %v", v.Left)
	}

	// A gap for bob: the next revision never reaches him, and after the one
	// after it the proxy sends him an old one again.
	next := e.snapshot(room).Revision + 1
	pb.set(func() {
		pb.drop[next] = true
		pb.replay[next+1] = next - 1
	})
	carol.waitState("carol current", func(m msg) bool { return m.Version >= next-1 })
	dave := e.join(room, "dave")
	erin := e.join(room, "erin")
	erin.waitState("erin joined", func(m msg) bool { return m.Version >= next+1 })
	dave.waitState("dave sees erin", func(m msg) bool { return m.Version >= next+1 })
	br.wait(bob, "bob resynced past the gap", fmt.Sprintf(`window.lobbyhost.view().revision === %d && window.lobbyhost.view().gaps >= 1 && `+
		`window.lobbyhost.view().dropped >= 1`, next+1)+` && `+memberJS("dave", "")+` && `+memberJS("erin", ""))
	bv := br.view(bob)
	increasing(t, "bob's page", bv.Shown)
	for _, r := range bv.Shown {
		if r == int64(next) {
			t.Errorf("bob's page drew revision %d, which never reached it: %v", next, bv.Shown)
		}
	}

	// alice's page goes for good. Past the grace bob is host, one term on.
	closeAlice()
	br.wait(bob, "alice reconnecting", memberJS("alice", ".reconnecting"))
	e.advanceUntil(e.cfg.Policy.Grace, func(d time.Duration) bool {
		ctx, cancel := context.WithTimeout(bob, d+time.Second)
		defer cancel()
		return chromedp.Do(ctx, pollTrue(jsRole+` === 'host'`, d)) == nil
	})
	br.wait(bob, "bob hosting, alice gone", memberJS("bob", ".host")+` && !`+memberJS("alice", ""))
	bv = br.view(bob)
	if bv.Term != term+1 || bv.Host == nil || *bv.Host != "bob" {
		t.Errorf("bob's page after alice's grace: host %v term %d, want bob in term %d", bv.Host, bv.Term, term+1)
	}
	if len(bv.Left) != 1 || bv.Left[0] != "alice:lease_expired" {
		t.Errorf("bob's page reported leaves %v, want [alice:lease_expired]", bv.Left)
	}
	increasing(t, "bob's page", bv.Shown)
	screenshot(t, bob, "wsserver-client-succession.png", "bob's page after alice's grace")
}

// run1 evaluates a JavaScript expression to a string.
func (b *browser) run1(page context.Context, expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(page, waitLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// A kicked page stops: it shows why, asks for no further ticket and opens
// no further socket, even when its network drops afterwards.
func TestBrowserClientKickedStopsReconnecting(t *testing.T) {
	e, tickets := proxiedEnv(t)
	p := newPageProxy(t)
	p.start(e.ts.Listener.Addr().String())
	br := newBrowser(t)
	const room = "kicks"
	alice := e.join(room, "alice")
	erin, _ := br.open(p.URL() + "/?user=erin&room=" + room)
	br.wait(erin, "erin in", jsConn+` === 'connected' && `+memberJS("erin", ".me"))
	alice.waitState("erin joined", func(m msg) bool { return hasMember(m, "erin", "online") })

	alice.send(map[string]any{"type": "kick", "target": "erin", "block_ms": 60000})
	br.wait(erin, "erin removed", jsConn+` === 'removed' && window.lobbyhost.view().status === 'closed' && `+
		`document.querySelector('#role').textContent === 'The host removed you from the lobby' && `+jsNoHost)
	asked, sockets := tickets.count("erin"), 0
	p.set(func() { sockets = p.sockets })
	// Long enough for several retries at the client's backoff (250 ms
	// doubling): a client that went on trying would have asked by then.
	time.Sleep(2 * time.Second)
	if v := br.view(erin); v.Status != "closed" || v.Attempt != 0 {
		t.Errorf("kicked page: status %s attempt %d, want closed", v.Status, v.Attempt)
	}
	if n := tickets.count("erin"); n != asked {
		t.Errorf("kicked page asked for %d more tickets", n-asked)
	}
	p.set(func() {
		if p.sockets != sockets {
			t.Errorf("kicked page opened %d more sockets", p.sockets-sockets)
		}
	})
	screenshot(t, erin, "wsserver-client-kicked.png", "erin's page after the kick")
}
