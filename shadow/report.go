package shadow

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby"
)

// Kind is what a timeline entry records.
type Kind uint8

// The kinds of timeline entries.
const (
	KindJoin         Kind = iota + 1 // evidence: a connection opened
	KindClose                        // evidence: a connection closed
	KindLeave                        // evidence: a player left
	KindLegacy                       // the legacy host changed
	KindLobbyhost                    // lobbyhost's host changed
	KindDisagreement                 // a disagreement was recorded
	KindTimedOut                     // lobbyhost timed out a member's last connection
)

var kindNames = [...]string{KindJoin: "join", KindClose: "close", KindLeave: "leave", KindLegacy: "legacy host", KindLobbyhost: "lobbyhost host", KindDisagreement: "disagreement", KindTimedOut: "timed out"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(?)"
}

// Entry is one line of a lobby's timeline. In a Report, Player and Other
// are pseudonyms.
type Entry struct {
	At   time.Time
	Kind Kind
	// Player is the evidence's player, or the host (legacy host for a
	// disagreement); "" for none.
	Player string
	// Other is lobbyhost's host, for a disagreement.
	Other    string
	Gen      uint64
	Revision uint64
	Class    Class
	Note     string
}

// Evidence returns the player the entry's evidence is about ("" unless
// the entry is a join, close, leave or timeout).
func (e Entry) Evidence() string {
	switch e.Kind {
	case KindJoin, KindClose, KindLeave, KindTimedOut:
		return e.Player
	}
	return ""
}

// LegacyHost returns the legacy host the entry shows, and whether it shows
// one (a legacy host change or a disagreement).
func (e Entry) LegacyHost() (string, bool) {
	return e.Player, e.Kind == KindLegacy || e.Kind == KindDisagreement
}

// LobbyhostHost returns lobbyhost's host the entry shows, and whether it
// shows one (a lobbyhost host change or a disagreement).
func (e Entry) LobbyhostHost() (string, bool) {
	switch e.Kind {
	case KindLobbyhost:
		return e.Player, true
	case KindDisagreement:
		return e.Other, true
	}
	return "", false
}

// timeOfDay and dateTime print a timeline's times to the nanosecond, with
// a fixed width: a close and the expiry it raced can be microseconds
// apart, and the report must show which came first and by how much.
const (
	timeOfDay = "15:04:05.000000000"
	dateTime  = "2006-01-02 " + timeOfDay
)

// Text renders the entry on one line.
func (e Entry) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-14s", e.At.UTC().Format(timeOfDay), e.Kind)
	switch e.Kind {
	case KindJoin, KindClose:
		fmt.Fprintf(&b, " %s gen %d", e.Player, e.Gen)
	case KindLeave, KindTimedOut:
		fmt.Fprintf(&b, " %s", e.Player)
	case KindLegacy:
		fmt.Fprintf(&b, " %s", hostName(e.Player))
	case KindLobbyhost:
		fmt.Fprintf(&b, " %s (rev %d)", hostName(e.Player), e.Revision)
	case KindDisagreement:
		fmt.Fprintf(&b, " %s: legacy %s, lobbyhost %s (rev %d)", e.Class, hostName(e.Player), hostName(e.Other), e.Revision)
	}
	if e.Note != "" {
		fmt.Fprintf(&b, " [%s]", e.Note)
	}
	return b.String()
}

// ClassReport is one class's counter and sample of decision-log lines.
type ClassReport struct {
	Class   Class
	Count   uint64
	Samples []string
}

// LobbyTimeline is the kept timeline of one lobby that disagreed.
type LobbyTimeline struct {
	Lobby   string
	Entries []Entry
}

// Report is a copy of what a Shadow recorded; it holds pseudonyms only.
type Report struct {
	// Comparisons counts ReportLegacyHost calls; Disagreements the
	// disagreements recorded.
	Comparisons, Disagreements uint64
	// Classes has one entry per class, in the order of Classes.
	Classes []ClassReport
	// Lobbies are the kept timelines, by lobby ID.
	Lobbies []LobbyTimeline
	// Advice is what the Service measured per client class (with
	// lobby.WithClientClass among the Shadow's options): the grace and the
	// heartbeat gap that cover AdviceQuantile of the observations. It is a
	// proposal for the operator; nothing changes the policy by itself.
	Advice         []lobby.ClassAdvice
	AdviceQuantile float64
}

// AdviceQuantile is the share of observations the report's advice covers.
const AdviceQuantile = 0.95

// Count returns the number of disagreements of class c.
func (r Report) Count(c Class) uint64 {
	for _, cr := range r.Classes {
		if cr.Class == c {
			return cr.Count
		}
	}
	return 0
}

// Report returns a copy of the counters, samples and kept timelines.
func (s *Shadow) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Report{Comparisons: s.compar}
	for _, c := range Classes {
		r.Disagreements += s.counts[c]
		r.Classes = append(r.Classes, ClassReport{Class: c, Count: s.counts[c], Samples: slices.Clone(s.sample[c])})
	}
	for id, l := range s.lobbs {
		if !l.keep {
			continue
		}
		lt := LobbyTimeline{Lobby: id, Entries: make([]Entry, len(l.timeline))}
		for i, e := range l.timeline {
			e.Player, e.Other = s.svc.Pseudonym(e.Player), s.svc.Pseudonym(e.Other)
			lt.Entries[i] = e
		}
		r.Lobbies = append(r.Lobbies, lt)
	}
	slices.SortFunc(r.Lobbies, func(a, b LobbyTimeline) int { return strings.Compare(a.Lobby, b.Lobby) })
	r.Advice, r.AdviceQuantile = s.svc.Advice(AdviceQuantile), AdviceQuantile
	return r
}

// WriteText writes the summary (counts per class), the sample lines per
// class and, if timelines is true, every kept timeline.
func (r Report) WriteText(w io.Writer, timelines bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "shadow report: %d comparisons, %d disagreements\n", r.Comparisons, r.Disagreements)
	for _, c := range r.Classes {
		fmt.Fprintf(&b, "  %-18s %6d\n", c.Class, c.Count)
	}
	for _, c := range r.Classes {
		if len(c.Samples) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%d), sample:\n", c.Class, c.Count)
		for _, line := range c.Samples {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	if len(r.Advice) > 0 {
		fmt.Fprintf(&b, "\ngrace advice (covers %g%% of observations; the policy is not changed):\n", 100*r.AdviceQuantile)
		for _, a := range r.Advice {
			fmt.Fprintf(&b, "  %-12s grace %v (%d returns, %d expired)  heartbeat gap %v (%d timed out)\n",
				a.Class, a.Grace.Grace, a.Grace.Returns, a.Grace.Expiries, a.HeartbeatGap.Grace, a.HeartbeatGap.Expiries)
		}
	}
	if timelines {
		for _, lt := range r.Lobbies {
			fmt.Fprintf(&b, "\nlobby %s\n", lt.Lobby)
			for _, e := range lt.Entries {
				fmt.Fprintf(&b, "  %s\n", e.Text())
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var htmlReport = template.Must(template.New("report").Funcs(template.FuncMap{
	"clock": func(t time.Time) string { return t.UTC().Format(dateTime) },
	"legacy": func(e Entry) string {
		if h, ok := e.LegacyHost(); ok {
			return hostName(h)
		}
		return ""
	},
	"lobbyhost": func(e Entry) string {
		if h, ok := e.LobbyhostHost(); ok {
			return hostName(h)
		}
		return ""
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lobbyhost shadow report</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
.disagreement{background:#fde8e8}.unexplained{background:#f8b4b4;font-weight:bold}
code{font-size:90%}
</style></head><body>
<h1>lobbyhost shadow report</h1>
<p>{{.Comparisons}} comparisons, {{.Disagreements}} disagreements. Player IDs are pseudonyms.</p>
<h2>Disagreements by class</h2>
<table><tr><th>class</th><th>count</th></tr>
{{range .Classes}}<tr{{if and (eq .Class.String "unexplained") .Count}} class="unexplained"{{end}}><td>{{.Class}}</td><td>{{.Count}}</td></tr>
{{end}}</table>
{{range .Classes}}{{if .Samples}}<h3>{{.Class}}: sample of the decision log</h3>
<ul>{{range .Samples}}<li><code>{{.}}</code></li>{{end}}</ul>
{{end}}{{end}}
{{if .Advice}}<h2>Grace advice</h2>
<p>Covers {{.AdviceQuantile}} of the observations per client class; a proposal, the policy is not changed.</p>
<table><tr><th>class</th><th>grace</th><th>returns</th><th>expired</th><th>heartbeat gap</th><th>timed out</th></tr>
{{range .Advice}}<tr><td>{{.Class}}</td><td>{{.Grace.Grace}}</td><td>{{.Grace.Returns}}</td><td>{{.Grace.Expiries}}</td><td>{{.HeartbeatGap.Grace}}</td><td>{{.HeartbeatGap.Expiries}}</td></tr>
{{end}}</table>{{end}}
<h2>Timelines</h2>
{{range .Lobbies}}<h3 id="lobby-{{.Lobby}}">lobby {{.Lobby}}</h3>
<table><tr><th>time</th><th>what</th><th>player</th><th>gen</th><th>legacy host</th><th>lobbyhost host</th><th>revision</th><th>class</th><th>note</th></tr>
{{range .Entries}}<tr{{if .Class}} class="disagreement{{if eq .Class.String "unexplained"}} unexplained{{end}}"{{end}}><td>{{clock .At}}</td><td>{{.Kind}}</td><td>{{.Evidence}}</td><td>{{if .Gen}}{{.Gen}}{{end}}</td><td>{{legacy .}}</td><td>{{lobbyhost .}}</td><td>{{if .Revision}}{{.Revision}}{{end}}</td><td>{{if .Class}}{{.Class}}{{end}}</td><td>{{.Note}}</td></tr>
{{end}}</table>
{{end}}</body></html>
`))

// WriteHTML writes the report as a self-contained HTML page: the counts,
// the samples and one timeline per kept lobby. Everything is escaped.
func (r Report) WriteHTML(w io.Writer) error {
	return htmlReport.Execute(w, r)
}

func hostName(p string) string {
	if p == "" {
		return "(none)"
	}
	return p
}
