package load

import (
	"math"
	"strings"
	"testing"
)

func sampleReport() *FailoverReport {
	return &FailoverReport{
		Scenario: "failover", Label: `min<b>"&`, Server: "http://127.0.0.1:1", Rooms: 2, PlayersPerRoom: 4,
		Players: 8, JoinSeconds: 0.5, PlayersPerSecond: 16,
		Handshake: FailoverSummary{Rooms: 1, FailedOver: 1, Delay: LatencySummary{Count: 1, P50Ms: 3, P99Ms: 4, MaxMs: 4},
			Noticed: LatencySummary{Count: 1, P50Ms: 2, P99Ms: 3, MaxMs: 3}, Expiry: LatencySummary{Count: 1, P50Ms: 1, P99Ms: 1, MaxMs: 1}, Overlapped: 1},
		TCPDrop: FailoverSummary{Rooms: 1, FailedOver: 1, Delay: LatencySummary{Count: 1, P50Ms: 5, P99Ms: 6, MaxMs: 6}},
		Errors:  []string{`join <script>alert(1)</script> in room-<i>`},
		Samples: []string{`room-<x>: new host "<u>", want p0`},
		Resources: &ServerResources{PIDs: []int{7}, CPUSeconds: 0.1, CPUPerPlayerUs: 12500, PeakRSSMB: 10, Sockets: 8,
			PeakRSSPerSocketKB: 1280, RSS: []RSSSample{{0, 9}, {0.1, 10}}},
		Series: Series{JoinMs: []float64{1, 2, 3, 4, 5, 6, 7, 8}, UpgradeMs: []float64{1, 1, 2, 2, 3, 3, 4, 4},
			FailoverHandshakeMs: []float64{3}, FailoverTCPDropMs: []float64{5}, JoinsPer100ms: []int{3, 5}},
	}
}

// The page has a figure per plot, the summary, and escapes every string
// that came from the server or the run.
func TestWriteHTML(t *testing.T) {
	var b strings.Builder
	if err := sampleReport().WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "<svg"); n != 4 {
		t.Errorf("%d SVG figures, want 4 (join/upgrade CDF, failover CDF, joins over time, RSS)", n)
	}
	for _, want := range []string{"Join and upgrade latency (CDF)", "Failover delay after the grace (CDF)",
		"Joins completed per 100 ms", "Server RSS", "<polyline", "<rect", "16 players/s", "12500 µs per player",
		"&lt;script&gt;", "room-&lt;i&gt;", "min&lt;b&gt;", "&lt;u&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "<i>", "<b>", "<u>", "<x>", " src=", "<link", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: unescaped or not self-contained", bad)
		}
	}
}

// A report without samples or resources still renders, saying so.
func TestWriteHTMLEmpty(t *testing.T) {
	var b strings.Builder
	if err := (&FailoverReport{Scenario: "failover"}).WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "<svg"); n != 3 || !strings.Contains(b.String(), "no data") {
		t.Errorf("%d figures (want 3, no RSS), or no 'no data'", n)
	}
}

func TestWriteTableMedians(t *testing.T) {
	var reps []*FailoverReport
	for _, pps := range []float64{300, 100, 200} {
		r := sampleReport()
		r.Label, r.PlayersPerSecond = "memory", pps
		reps = append(reps, r)
	}
	plain := sampleReport()
	plain.Label, plain.Resources, plain.WrongSuccessors = "", nil, 2
	reps = append(reps, plain)
	var b strings.Builder
	WriteTable(&b, reps)
	out := b.String()
	for _, want := range []string{
		"| memory | 200 | 12500 µs | 10.0 MB | 1280.0 KB | 3.0 / 4.0 ms | 6.0 ms |",
		"| http://127.0.0.1:1 | 16 | n/a | n/a | n/a |",
		"memory: median of 3 run(s)",
		"http://127.0.0.1:1: median of 1 run(s), 2 rooms × 4 players; in all runs: rooms without failover 0, wrong successors 2, split-brain 0, out of order 0, rooms left out 0, sockets lost 0",
		"| memory | close handshake | 3 | 3.0 / 4.0 ms | 2.0 / 3.0 ms | 1.0 / 1.0 ms | 3 |",
		"| memory | TCP reset (RST) | 3 | 5.0 / 6.0 ms |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "TCP close (FIN)") {
		t.Errorf("split table has a row for a drop style no run used:\n%s", out)
	}
	if got := median([]*FailoverReport{{PlayersPerSecond: 1}, {PlayersPerSecond: 4}}, func(r *FailoverReport) float64 { return r.PlayersPerSecond }); got != 2.5 {
		t.Errorf("median of 1 and 4 = %v, want 2.5", got)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0.36, 212, []float64{50, 100, 150, 200}},
		{0, 361, []float64{0, 100, 200, 300}},
		{-3, 7, []float64{-2, 0, 2, 4, 6}},
	} {
		got := niceTicks(c.lo, c.hi)
		if len(got) != len(c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
}
