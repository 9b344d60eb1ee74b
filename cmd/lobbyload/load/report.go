package load

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is what a run measured.
type Report struct {
	Scenario       string   `json:"scenario"`
	Servers        []string `json:"servers"`
	RoomsPerServer int      `json:"roomsPerServer"`
	Rooms          int      `json:"rooms"`
	HomeOnly       bool     `json:"homeOnly"`
	Watchers       int      `json:"watcherSockets"`
	// WatchersLost were closed by the server before the end (by close code).
	WatchersLost   int      `json:"watchersLost"`
	WatchersLostBy []string `json:"watchersLostBy,omitempty"`
	TargetRate     float64  `json:"targetRate"`
	AchievedRate   float64  `json:"achievedRate"`
	Duration       float64  `json:"durationSeconds"`
	SetupSeconds   float64  `json:"setupSeconds"`
	DrainSeconds   float64  `json:"drainSeconds"`
	Seed           uint64   `json:"seed"`

	// ChangesSent are the visible changes made and acknowledged (a join's
	// upgrade completed, a leave's close 4003 received); ChangesRecorded
	// also counts those that failed after being sent.
	ChangesSent     int64    `json:"changesSent"`
	ChangesFailed   int64    `json:"changesFailed"`
	ChangesRecorded int64    `json:"changesRecorded"`
	Errors          []string `json:"errors,omitempty"`
	// UnexpectedSamples describe a few revisions the tool did not cause.
	UnexpectedSamples []string `json:"unexpectedSamples,omitempty"`

	Deliveries Deliveries      `json:"deliveries"`
	Latency    Latencies       `json:"latency"`
	Processes  []ProcessReport `json:"processes"`
}

// Deliveries count revisions at the watcher sockets. Expected is the changes
// of each room times its watchers; Received are those delivered, exactly or
// inside a snapshot jump.
type Deliveries struct {
	Expected      int64 `json:"expected"`
	Received      int64 `json:"received"`
	Gaps          int64 `json:"gaps"`      // jumps not marked as snapshots, during the churn
	SetupGaps     int64 `json:"setupGaps"` // such jumps among the watchers' own joins, before the churn
	Missed        int64 `json:"missed"`    // revisions skipped by those jumps
	Duplicates    int64 `json:"duplicates"`
	OutOfOrder    int64 `json:"outOfOrder"`
	SnapshotJumps int64 `json:"snapshotJumps"`
	Unexpected    int64 `json:"unexpected"` // revisions the tool did not cause
}

// Latencies are commit-to-socket times: from sending the command on one
// process to the revision's arrival on a watcher socket.
type Latencies struct {
	SameProcess          LatencySummary `json:"sameProcess"`
	CrossProcess         LatencySummary `json:"crossProcess"`
	SameProcessSnapshot  LatencySummary `json:"sameProcessViaSnapshot"`
	CrossProcessSnapshot LatencySummary `json:"crossProcessViaSnapshot"`
}

// LatencySummary in milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// ProcessReport is one server process's store reads during the churn.
type ProcessReport struct {
	Server               string             `json:"server"`
	ChangesInServedRooms int64              `json:"changesInServedRooms"`
	StoreCallsMeasured   bool               `json:"storeCallsMeasured"`
	StoreCalls           map[string]float64 `json:"storeCalls,omitempty"`
	StoreReads           float64            `json:"storeReads"`
	ReadsPerChange       float64            `json:"readsPerChange"`
	ReadsPerServedChange float64            `json:"readsPerServedChange"`
	Note                 string             `json:"note,omitempty"`
}

// OK reports whether every sent change reached every watcher, in order,
// without gaps or duplicates.
func (r *Report) OK() bool {
	d := r.Deliveries
	return r.ChangesFailed == 0 && r.WatchersLost == 0 && d.Received == d.Expected && d.Gaps == 0 && d.Duplicates == 0 && d.OutOfOrder == 0 && d.Unexpected == 0
}

// WriteText writes the report as a table.
func (r *Report) WriteText(w io.Writer) {
	watch := "every process"
	if r.HomeOnly {
		watch = "home process only"
	}
	fmt.Fprintf(w, "fanout: %d processes, %d rooms (%d per process), watchers on %s (%d sockets), seed %d\n",
		len(r.Servers), r.Rooms, r.RoomsPerServer, watch, r.Watchers, r.Seed)
	fmt.Fprintf(w, "changes: target %.0f/s, achieved %.0f/s over %.0fs; sent %d, failed %d; setup %.1fs, drain %.1fs\n",
		r.TargetRate, r.AchievedRate, r.Duration, r.ChangesSent, r.ChangesFailed, r.SetupSeconds, r.DrainSeconds)
	d := r.Deliveries
	fmt.Fprintf(w, "deliveries: expected %d, received %d; gaps %d (%d revisions missed; %d more gaps during setup), duplicates %d, out of order %d, snapshot jumps %d, unexpected %d\n",
		d.Expected, d.Received, d.Gaps, d.Missed, d.SetupGaps, d.Duplicates, d.OutOfOrder, d.SnapshotJumps, d.Unexpected)
	if r.WatchersLost > 0 {
		fmt.Fprintf(w, "watchers closed by the server before the end: %d (%s)\n", r.WatchersLost, strings.Join(r.WatchersLostBy, ", "))
	}
	for _, u := range r.UnexpectedSamples {
		fmt.Fprintf(w, "unexpected: %s\n", u)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tcount\tp50\tp99\tmax\t")
	for _, row := range []struct {
		name string
		s    LatencySummary
	}{
		{"same process", r.Latency.SameProcess},
		{"cross process", r.Latency.CrossProcess},
		{"same, via snapshot", r.Latency.SameProcessSnapshot},
		{"cross, via snapshot", r.Latency.CrossProcessSnapshot},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t\n", row.name, row.s.Count, row.s.P50Ms, row.s.P99Ms, row.s.MaxMs)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tserved changes\tLoad\tReadLog\tLogHeads\treads/change\treads/served change\t")
	for _, p := range r.Processes {
		if !p.StoreCallsMeasured {
			fmt.Fprintf(tw, "%s\t%d\tn/a\tn/a\tn/a\tn/a\tn/a\t\n", p.Server, p.ChangesInServedRooms)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t\n", p.Server, p.ChangesInServedRooms,
			p.StoreCalls["Load"], p.StoreCalls["ReadLog"], p.StoreCalls["LogHeads"], p.ReadsPerChange, p.ReadsPerServedChange)
	}
	tw.Flush()
	for _, p := range r.Processes {
		if p.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", p.Server, p.Note)
		}
	}
}
