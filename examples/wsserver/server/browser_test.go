package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/server"
)

// findChromium returns the browser to drive: $LOBBYHOST_CHROMIUM, or
// Debian's chromium on the PATH. Without one the test skips, except under
// CI=true, where it fails.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOBBYHOST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI must run the browser test (apt-get install -y chromium)")
	}
	t.Skip("skipping the browser test: chromium not found (apt-get install -y chromium, or set LOBBYHOST_CHROMIUM)")
	return ""
}

// artifactPath returns where to save a test artifact: under
// $LOBBYHOST_ARTIFACTS, else the system's temporary directory.
func artifactPath(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("LOBBYHOST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifact directory: %v", err)
	}
	return filepath.Join(dir, name)
}

// The page in a real browser: two players in one room; the host's page is
// closed, the other page counts down the host's grace, and once it has
// passed shows its player as host. Along the way: chat, typing and read
// receipts between the pages. Then the page's own socket goes: it shows
// that it is disconnected and offers no host action; and when another tab
// of its user supersedes it, it shows that and does not take the place
// back.
func TestBrowserHostSuccession(t *testing.T) {
	e := newEnv(t, func(c *serverConfig) { c.Policy.MaxConnectionsPerPlayer = 1 })

	browser := newBrowser(t).ctx
	newPage := func() (context.Context, context.CancelFunc) {
		ctx, cancel := chromedp.NewContext(browser)
		if err := chromedp.Do(ctx); err != nil {
			t.Fatalf("opening a tab: %v", err)
		}
		return ctx, cancel
	}
	// run does one action with a time limit.
	run := func(page context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(page, waitLimit)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// waitJS waits until the expression is true on the page.
	waitJS := func(page context.Context, what, expr string) {
		t.Helper()
		run(page, "waiting for "+what, pollTrue(expr, waitLimit))
	}
	member := func(user, class string) string {
		return fmt.Sprintf(`!!document.querySelector('#members li[data-user=%q]%s')`, user, class)
	}

	alice, closeAlice := newPage()
	defer closeAlice()
	bob, closeBob := newPage()
	defer closeBob()

	run(alice, "alice opens the page", chromedp.Navigate(e.ts.URL+"/?user=alice&room=lobby-1"))
	waitJS(alice, "alice hosting", member("alice", ".host")+` && document.querySelector('#role').dataset.role === 'host'`)
	run(bob, "bob opens the page", chromedp.Navigate(e.ts.URL+"/"))
	run(bob, "bob joins through the form",
		chromedp.SendKeys("#user", "bob"),
		chromedp.SendKeys("#room", "lobby-1"),
		chromedp.Click("#join"))
	waitJS(bob, "bob sees both, alice hosting", member("alice", ".host")+` && `+member("bob", ":not(.host)"))
	waitJS(alice, "alice sees bob", member("bob", ""))

	run(alice, "alice chats", chromedp.SendKeys("#chat-input", "hello from alice"))
	waitJS(bob, "alice typing", `document.querySelector('#typing').textContent.includes('alice is typing')`)
	run(alice, "alice sends", chromedp.Click("#send"))
	waitJS(bob, "alice's message", `[...document.querySelectorAll('#messages li .text')].some(e => e.textContent === 'hello from alice')`)
	waitJS(alice, "bob's read receipt", `[...document.querySelectorAll('#messages li.mine .receipts')].some(e => e.textContent === 'read by bob')`)

	// The host's page goes away.
	closeAlice()
	waitJS(bob, "alice reconnecting", member("alice", ".reconnecting.host"))
	if got := e.snapshot("lobby-1"); got.Host != "alice" {
		t.Fatalf("host during alice's grace: %q, want alice", got.Host)
	}
	// A countdown to alice's reconnect deadline: the grace from when she
	// left, on the server's (fake) clock.
	countdown := `document.querySelector('#members li[data-user="alice"] .countdown')`
	waitJS(bob, "alice's countdown", countdown+` && /^[0-9]+ s left$/.test(`+countdown+`.textContent)`)
	deadline, err := chromedp.Run(bob, chromedp.Evaluate[string](countdown+`.dataset.deadline`))
	if want := fmt.Sprint(epoch.Add(e.cfg.Policy.Grace).UnixMilli()); err != nil || deadline != want {
		t.Errorf("alice's reconnect deadline on bob's page: %q (%v), want %q", deadline, err, want)
	}
	left, err := chromedp.Run(bob, chromedp.Evaluate[string](countdown+`.textContent`))
	if err != nil || (left != "8 s left" && left != "7 s left") {
		t.Errorf("alice's countdown right after she left: %q (%v), want the grace, 8 s (7 s if a second passed)", left, err)
	}
	screenshot(t, bob, "wsserver-browser-grace.png", "bob's page during alice's grace")

	e.advanceUntil(e.cfg.Policy.Grace, func(d time.Duration) bool {
		ctx, cancel := context.WithTimeout(bob, d+time.Second)
		defer cancel()
		return chromedp.Do(ctx, pollTrue(`document.querySelector('#role').dataset.role === 'host'`, d)) == nil
	})
	waitJS(bob, "bob alone and hosting", member("bob", ".host")+` && document.querySelectorAll('#members li').length === 1`)
	rev, err := chromedp.Run(bob, chromedp.Text("#revision"))
	if err != nil || rev != "4" {
		t.Errorf("revision on bob's page: %q (%v), want 4 (alice joined, bob joined, alice disconnected, alice's grace expired)", rev, err)
	}

	screenshot(t, bob, "wsserver-browser-succession.png", "bob's page after the succession")

	// carol joins: bob, hosting, may hand her the role.
	carol := e.join("lobby-1", "carol")
	waitJS(bob, "carol with a Make host button", member("carol", "")+` && !!document.querySelector('#members li[data-user="carol"] .make-host')`)

	// bob's own socket goes. His page says so, and claims nothing: not the
	// host role, no Make host button, the list marked as out of date.
	run(bob, "drop", chromedp.Click("#drop"))
	waitJS(bob, "disconnected", `document.querySelector('#conn-status').dataset.state === 'disconnected'`)
	notHosting := `document.querySelector('#role').dataset.role !== 'host' && ` +
		`!document.querySelector('#role').textContent.includes('You are the host') && ` +
		`document.querySelectorAll('.make-host').length === 0 && ` +
		`document.querySelector('#members').classList.contains('stale')`
	waitJS(bob, "no host claim while disconnected", notHosting+` && document.querySelector('#role').dataset.role === 'disconnected'`)
	gone := carol.waitState("bob reconnecting", func(m msg) bool { return hasMember(m, "bob", "reconnecting") })
	if gone.host() != "bob" {
		t.Errorf("host during bob's grace: %q, want bob", gone.host())
	}
	screenshot(t, bob, "wsserver-browser-disconnected.png", "bob's page with its socket dropped")

	run(bob, "reconnect", chromedp.Click("#reconnect"))
	waitJS(bob, "back online as host", `document.querySelector('#conn-status').dataset.state === 'connected' && `+
		`document.querySelector('#revision').textContent === '7' && `+member("bob", ".host:not(.reconnecting)")+
		` && !!document.querySelector('#members li[data-user="carol"] .make-host')`)

	// Another tab of bob's (a client of its own, as if on another page or
	// server) supersedes the page: the page shows that it was removed and
	// does not reconnect, which would supersede the other tab in turn.
	other := e.join("lobby-1", "bob")
	waitJS(bob, "superseded", `document.querySelector('#conn-status').dataset.state === 'removed' && `+
		`!window.lobbyhost.view().retryScheduled && `+notHosting)
	screenshot(t, bob, "wsserver-browser-superseded.png", "bob's page superseded by another tab")
	if got := other.roundTrip(); len(got) > 0 {
		for _, m := range got {
			if m.Type == "lobby.state" && !hasMember(m, "bob", "online") {
				t.Errorf("bob's newer tab saw %s", m.view())
			}
		}
	}
}

// screenshot saves a PNG of the page as a test artifact.
func screenshot(t *testing.T, page context.Context, name, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(page, waitLimit)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := artifactPath(t, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatalf("saving the screenshot: %v", err)
	}
	t.Logf("screenshot of %s: %s", what, path)
}

// pollTrue waits up to timeout for a JavaScript expression to be true.
func pollTrue(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond))(ctx, tgt)
		return err
	})
}

// docsImage returns the path of an image under the repository's docs/img,
// found from this file's location, so the page's picture in the
// documentation is rewritten in place whatever directory the test runs in.
func docsImage(t *testing.T, name string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "img")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("docs/img: %v", err)
	}
	return filepath.Join(dir, name)
}

// The page's game-server controls in a real browser: the host sees Kick
// buttons and the Lock toggle, a plain member sees neither; locking shows
// the badge and refuses a new player; a reconnecting member counts down;
// kicking closes the target's socket with the kicked code. The final page
// is saved as docs/img/wsserver-kick-lock.png.
func TestBrowserKickAndLock(t *testing.T) {
	e := newEnv(t, nil)

	browser := newBrowser(t).ctx
	newPage := func() (context.Context, context.CancelFunc) {
		ctx, cancel := chromedp.NewContext(browser)
		if err := chromedp.Do(ctx); err != nil {
			t.Fatalf("opening a tab: %v", err)
		}
		return ctx, cancel
	}
	run := func(page context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(page, waitLimit)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitJS := func(page context.Context, what, expr string) {
		t.Helper()
		run(page, "waiting for "+what, pollTrue(expr, waitLimit))
	}
	member := func(user, class string) string {
		return fmt.Sprintf(`!!document.querySelector('#members li[data-user=%q]%s')`, user, class)
	}
	const room = "arena"

	alice, closeAlice := newPage()
	defer closeAlice()
	erin, closeErin := newPage()
	defer closeErin()
	run(alice, "alice opens the page", chromedp.Navigate(e.ts.URL+"/?user=alice&room="+room))
	waitJS(alice, "alice hosting", member("alice", ".host")+` && document.querySelector('#role').dataset.role === 'host'`)
	bob := e.join(room, "bob")
	carol := e.join(room, "carol")
	run(erin, "erin opens the page", chromedp.Navigate(e.ts.URL+"/?user=erin&room="+room))
	waitJS(erin, "erin sees everybody", member("alice", ".host")+` && `+member("carol", "")+` && `+member("erin", ".me"))

	// The host's controls, and none for a plain member.
	waitJS(alice, "Kick buttons and the Lock toggle", `['bob', 'carol', 'erin'].every(u => !!document.querySelector('#members li[data-user="' + u + '"] .kick')) && `+
		`!document.querySelector('#members li[data-user="alice"] .kick') && `+
		`!document.querySelector('#lock').hidden && document.querySelector('#lock').textContent === 'Lock' && document.querySelector('#locked-badge').hidden`)
	waitJS(erin, "no host controls for a member", `document.querySelectorAll('#members .kick').length === 0 && document.querySelector('#lock').hidden`)

	// Lock: everybody sees the badge, a new player is refused.
	run(alice, "alice locks", chromedp.Click("#lock"))
	waitJS(alice, "the locked badge and Unlock", `!document.querySelector('#locked-badge').hidden && document.querySelector('#lock').textContent === 'Unlock'`)
	waitJS(erin, "the locked badge for a member", `!document.querySelector('#locked-badge').hidden && document.querySelector('#lock').hidden`)
	bob.waitState("locked", func(m msg) bool { return m.Reason == "locked" })
	if code, close := e.dialRefused(room, "dave"); code != "lobby_locked" || close != server.CloseLobbyLocked {
		t.Errorf("a new player in the locked lobby: %q, close %d; want lobby_locked, %d", code, close, server.CloseLobbyLocked)
	}

	// carol's socket drops: the host's page counts down her grace.
	carol.conn.CloseNow()
	countdown := `document.querySelector('#members li[data-user="carol"] .countdown')`
	waitJS(alice, "carol's countdown", member("carol", ".reconnecting")+` && `+countdown+` && /^[0-9]+ s left$/.test(`+countdown+`.textContent)`)
	left, err := chromedp.Run(alice, chromedp.Evaluate[string](countdown+`.textContent`))
	if err != nil || (left != "8 s left" && left != "7 s left") {
		t.Errorf("carol's countdown right after she dropped: %q (%v), want the grace, 8 s (7 s if a second passed)", left, err)
	}

	// Kick bob: his socket is closed with the kicked code, the pages
	// drop him, and he cannot come back while the block lasts.
	run(alice, "alice kicks bob", chromedp.Click(`#members li[data-user="bob"] .kick`))
	if code := bob.waitClosed(); code != server.CloseKicked {
		t.Errorf("kicked bob: closed with %d, want %d", code, server.CloseKicked)
	}
	for _, p := range []context.Context{alice, erin} {
		waitJS(p, "bob gone", `!`+member("bob", "")+` && document.querySelector('#last-change').textContent.includes('kicked · bob')`)
	}
	if code, close := e.dialRefused(room, "bob"); code != "blocked" || close != server.CloseBlocked {
		t.Errorf("kicked bob joining again: %q, close %d; want blocked, %d", code, close, server.CloseBlocked)
	}
	waitJS(alice, "the final page", member("alice", ".host")+` && `+member("erin", "")+` && `+member("carol", ".reconnecting")+` && `+countdown+
		` && !document.querySelector('#locked-badge').hidden && document.querySelectorAll('#members li').length === 3`)

	ctx, cancel := context.WithTimeout(alice, waitLimit)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := docsImage(t, "wsserver-kick-lock.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatalf("saving the screenshot: %v", err)
	}
	t.Logf("screenshot of the host's page after lock and kick: %s", path)
}
