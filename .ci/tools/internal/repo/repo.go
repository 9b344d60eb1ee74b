// Package repo finds the Go modules of a lobbyhost checkout and the files
// each one would publish.
package repo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// Prefix is the module path every published lobbyhost module starts with.
const Prefix = "github.com/lobbyhost/lobbyhost"

// Module is one go.mod of the checkout.
type Module struct {
	// Path is the module path from the go.mod's module line.
	Path string
	// Dir is the module's directory relative to the checkout's root, in
	// slash form; "." for the root module.
	Dir string
	// File is the parsed go.mod.
	File *modfile.File
	// Files are the module's files relative to Dir, in slash form, sorted:
	// the files git tracks or would track (untracked, not ignored), minus
	// those of nested modules.
	Files []string
}

// Published reports whether m is one of the modules lobbyhost publishes.
func (m *Module) Published() bool {
	return m.Path == Prefix || strings.HasPrefix(m.Path, Prefix+"/")
}

// Modules lists every module of the checkout at root, the root module first,
// then by directory. The file list comes from git, so ignored files (build
// artifacts, test output) are never part of a module.
func Modules(root string) ([]*Module, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %v: %s", root, err, stderr.Bytes())
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		// A tracked file deleted in the working tree is not published.
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); err != nil {
			continue
		}
		files = append(files, f)
	}
	sort.Strings(files)

	var mods []*Module
	byDir := map[string]*Module{}
	for _, f := range files {
		if path.Base(f) != "go.mod" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s: no module line", f)
		}
		m := &Module{Path: mf.Module.Mod.Path, Dir: path.Dir(f), File: mf}
		mods = append(mods, m)
		byDir[m.Dir] = m
	}
	for _, f := range files {
		if m := owner(byDir, f); m != nil {
			rel := f
			if m.Dir != "." {
				rel = strings.TrimPrefix(f, m.Dir+"/")
			}
			m.Files = append(m.Files, rel)
		}
	}
	sort.Slice(mods, func(i, j int) bool {
		if (mods[i].Dir == ".") != (mods[j].Dir == ".") {
			return mods[i].Dir == "."
		}
		return mods[i].Dir < mods[j].Dir
	})
	return mods, nil
}

// owner returns the module whose directory is the deepest one holding f.
func owner(byDir map[string]*Module, f string) *Module {
	for d := path.Dir(f); ; d = path.Dir(d) {
		if m, ok := byDir[d]; ok {
			return m
		}
		if d == "." || d == "/" {
			return nil
		}
	}
}

// ForPackage returns the module among mods whose path is the longest prefix
// of the import path pkg, or nil.
func ForPackage(mods []*Module, pkg string) *Module {
	var best *Module
	for _, m := range mods {
		if pkg == m.Path || strings.HasPrefix(pkg, m.Path+"/") {
			if best == nil || len(m.Path) > len(best.Path) {
				best = m
			}
		}
	}
	return best
}
