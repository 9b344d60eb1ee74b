// Command lobbyload drives server processes of the example WebSocket lobby
// server (examples/wsserver) and measures what their clients see. See
// README.md.
//
//	lobbyload -servers http://127.0.0.1:8081,http://127.0.0.1:8082 \
//	    -rooms 1000 -rate 1000 -duration 20s -json report.json
//	lobbyload -scenario failover -servers http://127.0.0.1:8080 -grace 200ms \
//	    -pid 1234 -json failover.json -html failover.html
//	lobbyload -scenario burst -servers http://127.0.0.1:8080 -grace 200ms -pid 1234
//	lobbyload table failover-*.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/lobbyhost/lobbyhost/cmd/lobbyload/load"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lobbyload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "table" {
		return table(os.Stdout, args[1:])
	}
	fs := flag.NewFlagSet("lobbyload", flag.ContinueOnError)
	scenario := fs.String("scenario", "fanout", "scenario to run: fanout, failover or burst (failover with every host dropped at once)")
	servers := fs.String("servers", "", "comma-separated base URLs (http://host:port) of server processes sharing one store")
	rooms := fs.Int("rooms", 100, "rooms per server process (each room's home); failover: rooms in all (default 2000)")
	rate := fs.Float64("rate", 100, "visible changes per second, all rooms together")
	duration := fs.Duration("duration", 10*time.Second, "how long to make changes")
	homeOnly := fs.Bool("home-only", false, "watch each room on its home process only (default: on every process)")
	writers := fs.Int("writers", 512, "change commands in flight at most")
	setup := fs.Int("setup-concurrency", 128, "sockets opened at once during setup")
	drain := fs.Duration("drain", 10*time.Second, "how long to wait for deliveries after the last change")
	prefix := fs.String("prefix", "", "room ID prefix (default: random per run)")
	seed := fs.Uint64("seed", 0, "random seed (default: random)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file (- for stdout)")
	strict := fs.Bool("strict", false, "exit 1 unless every change reached every watcher without gaps or duplicates (failover: every room failed over rightly)")
	cpuProfile := fs.String("cpuprofile", "", "write lobbyload's own CPU profile to this file (to see whether the tool, not the server, limits a run)")
	fo := failoverFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var bases []string
	for _, s := range strings.Split(*servers, ",") {
		if s = strings.TrimSuffix(strings.TrimSpace(s), "/"); s != "" {
			bases = append(bases, s)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch *scenario {
	case "fanout":
	case "failover", "burst":
		if len(bases) != 1 {
			return fmt.Errorf("%s needs one server in -servers, got %d", *scenario, len(bases))
		}
		roomsSet := false
		fs.Visit(func(f *flag.Flag) { roomsSet = roomsSet || f.Name == "rooms" })
		if !roomsSet {
			*rooms = 0 // the scenario's default
		}
		return fo.run(ctx, bases[0], *rooms, *scenario == "burst", *prefix, *jsonOut, *strict)
	default:
		return fmt.Errorf("unknown scenario %q (have: fanout, failover, burst)", *scenario)
	}
	rep, err := load.Fanout(ctx, load.NewClient(), load.FanoutConfig{
		Servers: bases, RoomsPerServer: *rooms, Rate: *rate, Duration: *duration, HomeOnly: *homeOnly,
		Writers: *writers, SetupConcurrency: *setup, Drain: *drain, Prefix: *prefix, Seed: *seed,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "lobbyload: "+f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	rep.WriteText(os.Stdout)
	if err := writeJSON(*jsonOut, rep); err != nil {
		return err
	}
	if *strict && !rep.OK() {
		return fmt.Errorf("deliveries incomplete or out of order")
	}
	return nil
}

// writeJSON writes v as indented JSON to file (- for stdout), if file is set.
func writeJSON(file string, v any) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if file == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
