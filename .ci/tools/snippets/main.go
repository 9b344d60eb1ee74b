// Command snippets writes the Go blocks of the README and the adapter
// documents as programs, one directory each, so that a module that requires
// the published lobbyhost modules can build them: the documentation's code
// is checked as users copy it, not a copy of it kept elsewhere.
//
//	go run ./snippets -root ../.. -module github.com/lobbyhost/lobbyhost/store/pgxstore -out /tmp/consumer
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the checkout's root directory")
	module := flag.String("module", "", "write the snippets that users of this module read")
	out := flag.String("out", "", "directory to write the programs into")
	list := flag.Bool("list", false, "print the modules that have snippets and exit")
	flag.Parse()
	if *list {
		seen := map[string]bool{}
		for _, s := range Snippets {
			if !seen[s.Module] {
				seen[s.Module] = true
				fmt.Println(s.Module)
			}
		}
		return
	}
	if *module == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "snippets: -module and -out are required")
		os.Exit(2)
	}
	names, err := Write(*root, *out, *module)
	if err != nil {
		fmt.Fprintln(os.Stderr, "snippets:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(names, " "))
}
