package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lobbyhost/lobbyhost/cmd/lobbyload/load"
)

// table prints the markdown table of medians of failover or burst reports
// (JSON files), one row per label in order of first appearance.
func table(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("usage: lobbyload table REPORT.json [REPORT.json ...]")
	}
	var reps []*load.FailoverReport
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var r load.FailoverReport
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if r.Scenario != "failover" && r.Scenario != "burst" {
			return fmt.Errorf("%s: a %q report, not failover or burst", file, r.Scenario)
		}
		reps = append(reps, &r)
	}
	load.WriteTable(w, reps)
	return nil
}
