// Command modproxy writes a file-based Go module proxy that serves every
// published lobbyhost module of a checkout at one version, built from the
// working tree the way the go command builds a module zip from a tag: the
// module's files under the path prefix module@version/, nested modules left
// out, the repository's LICENSE added to a nested module that has none.
//
//	go run ./modproxy -root ../.. -out /tmp/proxy
//
// It refuses a checkout that could not be published as it is: a go.mod with
// a replace directive, lobbyhost modules requiring each other at different
// versions, or a go.work whose replacements name another version. With
// GOPROXY=file:///tmp/proxy,<the usual proxies> and GONOSUMDB naming
// github.com/lobbyhost/lobbyhost, a fresh module sees what users will see
// once the tags are pushed.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"citools/internal/repo"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

func main() {
	root := flag.String("root", ".", "the checkout's root directory")
	out := flag.String("out", "", "directory to write the proxy into (created)")
	version := flag.String("version", "", "version to serve every module at (default: the one the modules require of each other)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "modproxy: -out is required")
		os.Exit(2)
	}
	if err := run(*root, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(root, out, version string) error {
	mods, err := repo.Modules(root)
	if err != nil {
		return err
	}
	var pub []*repo.Module
	for _, m := range mods {
		if m.Published() {
			pub = append(pub, m)
		}
	}
	if len(pub) == 0 {
		return fmt.Errorf("no module under %s in %s", repo.Prefix, root)
	}
	v, err := Check(pub, version)
	if err != nil {
		return err
	}
	if err := checkWork(root, pub, v); err != nil {
		return err
	}
	stamp, err := commitTime(root)
	if err != nil {
		return err
	}
	license, _ := os.ReadFile(filepath.Join(root, "LICENSE"))
	for _, m := range pub {
		h, n, err := write(root, out, m, v, stamp, license)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		fmt.Printf("%s %s %s (%d files)\n", m.Path, v, h, n)
	}
	return nil
}

// Check returns the version the published modules are served at: want if
// given, else the single version at which they require each other. It fails
// on any replace directive and on requirements that disagree.
func Check(pub []*repo.Module, want string) (string, error) {
	isPub := map[string]bool{}
	for _, m := range pub {
		isPub[m.Path] = true
	}
	var problems []string
	versions := map[string][]string{}
	for _, m := range pub {
		for _, r := range m.File.Replace {
			problems = append(problems, fmt.Sprintf("%s/go.mod: replace %s: a published go.mod must not replace (use go.work)", m.Dir, r.Old.Path))
		}
		for _, r := range m.File.Require {
			if isPub[r.Mod.Path] {
				versions[r.Mod.Version] = append(versions[r.Mod.Version], fmt.Sprintf("%s/go.mod requires %s", m.Dir, r.Mod.Path))
			}
		}
	}
	v := want
	if v == "" {
		if len(versions) == 1 {
			for k := range versions {
				v = k
			}
		} else if len(versions) == 0 {
			problems = append(problems, "no lobbyhost module requires another: give -version")
		}
	}
	for k, who := range versions {
		if v != "" && k != v {
			problems = append(problems, fmt.Sprintf("%s at %s, not %s", strings.Join(who, ", "), k, v))
		}
	}
	if v == "" && len(versions) > 1 {
		var all []string
		for k, who := range versions {
			all = append(all, fmt.Sprintf("%s: %s", k, strings.Join(who, ", ")))
		}
		sort.Strings(all)
		problems = append(problems, "lobbyhost modules require each other at different versions: "+strings.Join(all, "; "))
	}
	if v != "" && (!semver.IsValid(v) || semver.Canonical(v) != v || module.IsPseudoVersion(v)) {
		problems = append(problems, fmt.Sprintf("%s is not a release version (vX.Y.Z, as a tag would name it)", v))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return "", fmt.Errorf("not publishable as it is:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return v, nil
}

// checkWork makes sure the workspace's replacements, if any, point the
// version being prepared at the working tree.
func checkWork(root string, pub []*repo.Module, v string) error {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return err
	}
	isPub := map[string]bool{}
	for _, m := range pub {
		isPub[m.Path] = true
	}
	for _, r := range wf.Replace {
		if isPub[r.Old.Path] && r.Old.Version != v {
			return fmt.Errorf("go.work replaces %s at %q, but the modules require %s: update go.work", r.Old.Path, r.Old.Version, v)
		}
	}
	return nil
}

func commitTime(root string) (time.Time, error) {
	cmd := exec.Command("git", "log", "-1", "--format=%cI")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("git log in %s: %v", root, err)
	}
	return time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
}

type file struct{ rel, abs string }

func (f file) Path() string                 { return f.rel }
func (f file) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.abs) }

type bytesFile struct {
	rel  string
	data []byte
}

func (f bytesFile) Path() string                 { return f.rel }
func (f bytesFile) Lstat() (os.FileInfo, error)  { return bytesInfo{f}, nil }
func (f bytesFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type bytesInfo struct{ f bytesFile }

func (i bytesInfo) Name() string       { return filepath.Base(i.f.rel) }
func (i bytesInfo) Size() int64        { return int64(len(i.f.data)) }
func (i bytesInfo) Mode() os.FileMode  { return 0o644 }
func (i bytesInfo) ModTime() time.Time { return time.Time{} }
func (i bytesInfo) IsDir() bool        { return false }
func (i bytesInfo) Sys() any           { return nil }

// write adds m at version v to the proxy at out and returns the zip's hash
// (as go.sum records it) and the number of files in it.
func write(root, out string, m *repo.Module, v string, stamp time.Time, license []byte) (string, int, error) {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return "", 0, err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	var files []modzip.File
	hasLicense := false
	for _, rel := range m.Files {
		files = append(files, file{rel: rel, abs: filepath.Join(root, filepath.FromSlash(m.Dir), filepath.FromSlash(rel))})
		if rel == "LICENSE" {
			hasLicense = true
		}
	}
	// The go command does the same for a module in a subdirectory of its
	// repository, so that the published zip carries the licence.
	if !hasLicense && m.Dir != "." && license != nil {
		files = append(files, bytesFile{rel: "LICENSE", data: license})
	}
	zipPath := filepath.Join(dir, v+".zip")
	zf, err := os.Create(zipPath)
	if err != nil {
		return "", 0, err
	}
	mv := module.Version{Path: m.Path, Version: v}
	if err := modzip.Create(zf, mv, files); err != nil {
		zf.Close()
		return "", 0, err
	}
	if err := zf.Close(); err != nil {
		return "", 0, err
	}
	gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"))
	if err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, v+".mod"), gomod, 0o644); err != nil {
		return "", 0, err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, stamp.UTC()})
	if err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, v+".info"), info, 0o644); err != nil {
		return "", 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte(v+"\n"), 0o644); err != nil {
		return "", 0, err
	}
	h, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return "", 0, err
	}
	n, err := zipCount(zipPath)
	return h, n, err
}

func zipCount(p string) (int, error) {
	r, err := zip.OpenReader(p)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return len(r.File), nil
}
