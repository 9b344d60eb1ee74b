package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lobbyhost/lobbyhost/cmd/lobbyload/load"
)

// foFlags are the flags of the failover scenario only.
type foFlags struct {
	players, concurrency, closeConcurrency *int
	grace, timeout, idle                   *time.Duration
	pids, label, html, drops               *string
}

func failoverFlags(fs *flag.FlagSet) foFlags {
	return foFlags{
		players:          fs.Int("players", 4, "failover: players per room"),
		concurrency:      fs.Int("concurrency", 64, "failover: joins in flight"),
		closeConcurrency: fs.Int("close-concurrency", 0, "failover: host closes in flight (default: as many as -concurrency)"),
		grace:            fs.Duration("grace", 8*time.Second, "failover: the server's grace (must equal the server's -grace)"),
		timeout:          fs.Duration("failover-timeout", 0, "failover: a room without a new host this long after its host's close never failed over (default grace+10s)"),
		pids:             fs.String("pid", "", "failover: comma-separated PIDs of the server processes, for CPU and memory figures (Linux /proc)"),
		label:            fs.String("label", "", "failover: the server's name in the report and the table"),
		html:             fs.String("html", "", "failover: also write an HTML report with plots to this file"),
		idle:             fs.Duration("idle", 0, "failover: once the rooms are full, hold every socket open (heartbeating) this long and report the server's store calls per second, before the hosts drop"),
		drops:            fs.String("drops", "", "failover: comma-separated drop styles the rooms take in turn: handshake, fin (TCP close, no close frame), rst (TCP reset) (default handshake,rst; burst: all three)"),
	}
}

// run runs the failover scenario (with burst, every host dropped at once)
// and writes its reports.
func (f foFlags) run(ctx context.Context, server string, rooms int, burst bool, prefix, jsonOut string, strict bool) error {
	pids, err := parsePIDs(*f.pids)
	if err != nil {
		return err
	}
	drops, err := load.ParseDrops(*f.drops)
	if err != nil {
		return fmt.Errorf("-drops: %w", err)
	}
	rep, err := load.Failover(ctx, load.NewClient(), load.FailoverConfig{
		Server: server, Rooms: rooms, Players: *f.players, Concurrency: *f.concurrency,
		CloseConcurrency: *f.closeConcurrency, Burst: burst, Drops: drops, Grace: *f.grace, Timeout: *f.timeout,
		PIDs: pids, Prefix: prefix, Label: *f.label, Idle: *f.idle,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "lobbyload: "+f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	rep.WriteText(os.Stdout)
	if err := writeJSON(jsonOut, rep); err != nil {
		return err
	}
	if *f.html != "" {
		if err := writeFile(*f.html, rep.WriteHTML); err != nil {
			return err
		}
	}
	if strict && !rep.OK() {
		return errors.New("some rooms did not fail over rightly")
	}
	return nil
}

// parsePIDs reads a comma-separated list of process IDs.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("-pid: %q is not a process ID", f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// writeFile creates file and fills it with write.
func writeFile(file string, write func(io.Writer) error) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
