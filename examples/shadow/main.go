// Command shadow runs lobbyhost in shadow mode beside a deliberately naive
// legacy host logic (the first close crowns the next socket) through a
// simulated day of traffic, seeded and on a fake clock, and prints the
// classified report of their disagreements.
//
//	go run ./examples/shadow
//	go run ./examples/shadow -html report.html -timelines
package main

import (
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"
)

func main() {
	htmlPath := flag.String("html", "", "also write the HTML report to this file")
	timelines := flag.Bool("timelines", false, "print every kept lobby timeline too")
	seed := flag.Uint64("seed", defaultDay.seed, "the simulation's seed")
	flag.Parse()

	d := defaultDay
	d.seed = *seed
	out, err := simulate(d)
	if err != nil {
		log.Fatal(err)
	}
	rep, stats := out.report, out.stats
	fmt.Printf("simulated day (seed %d):", d.seed)
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		fmt.Printf(" %s %d;", k, stats[k])
	}
	fmt.Println()
	if err := rep.WriteText(os.Stdout, *timelines); err != nil {
		log.Fatal(err)
	}
	if *htmlPath != "" {
		f, err := os.Create(*htmlPath)
		if err != nil {
			log.Fatal(err)
		}
		if err := rep.WriteHTML(f); err != nil {
			log.Fatal(err)
		}
		if err := f.Close(); err != nil {
			log.Fatal(err)
		}
	}
}
