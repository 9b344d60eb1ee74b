// Command testsummary reads `go test -json` on standard input, prints what a
// plain `go test` run prints (each package's ok or FAIL line, the output of
// failing tests), then a table of passed, failed and skipped tests and
// subtests for each module with the reason each skip gave, and ends with
// the line
//
//	N passed, N failed, N skipped
//
// It exits 1 when a test or a package failed (a build failure, a panic
// outside a test, a timeout, output cut short) or when no test ran at all.
//
//	go test -json ./... | go run ./testsummary -root ../..
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"citools/internal/repo"
)

func main() {
	root := flag.String("root", ".", "the checkout's root, to map packages to modules")
	raw := flag.String("raw", "", "also write the JSON input to this file")
	flag.Parse()

	var mods []string
	ms, err := repo.Modules(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	for _, m := range ms {
		mods = append(mods, m.Path)
	}

	var in io.Reader = os.Stdin
	if *raw != "" {
		f, err := os.Create(*raw)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	// Unbuffered, so that each package's line shows as soon as it ends.
	s := NewSummary(mods, os.Stdout)
	if err := s.Read(in); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if !s.Report() {
		os.Exit(1)
	}
}
