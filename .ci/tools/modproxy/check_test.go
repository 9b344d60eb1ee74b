package main

import (
	"strings"
	"testing"

	"citools/internal/repo"

	"golang.org/x/mod/modfile"
)

func mod(t *testing.T, dir, text string) *repo.Module {
	t.Helper()
	f, err := modfile.Parse(dir+"/go.mod", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &repo.Module{Path: f.Module.Mod.Path, Dir: dir, File: f}
}

const coreMod = "module github.com/lobbyhost/lobbyhost\n\ngo 1.25.0\n"

func TestCheckTakesTheVersionTheModulesRequire(t *testing.T) {
	v, err := Check([]*repo.Module{
		mod(t, ".", coreMod),
		mod(t, "store/a", "module github.com/lobbyhost/lobbyhost/store/a\n\ngo 1.25.0\n\nrequire github.com/lobbyhost/lobbyhost v0.3.0\n"),
		mod(t, "store/b", "module github.com/lobbyhost/lobbyhost/store/b\n\ngo 1.25.0\n\nrequire (\n\tgithub.com/lobbyhost/lobbyhost v0.3.0\n\tgithub.com/lobbyhost/lobbyhost/store/a v0.3.0\n)\n"),
	}, "")
	if err != nil || v != "v0.3.0" {
		t.Fatalf("Check = %q, %v; want v0.3.0", v, err)
	}
}

func TestCheckRefusesWhatCannotBePublished(t *testing.T) {
	for _, tt := range []struct {
		name string
		mods []string // go.mod texts after the core's
		want string
	}{
		{"replace", []string{"module github.com/lobbyhost/lobbyhost/store/a\n\nrequire github.com/lobbyhost/lobbyhost v0.1.0\n\nreplace github.com/lobbyhost/lobbyhost => ../..\n"}, "must not replace"},
		{"disagreeing versions", []string{
			"module github.com/lobbyhost/lobbyhost/store/a\n\nrequire github.com/lobbyhost/lobbyhost v0.1.0\n",
			"module github.com/lobbyhost/lobbyhost/store/b\n\nrequire github.com/lobbyhost/lobbyhost v0.2.0\n",
		}, "different versions"},
		{"pseudo-version", []string{"module github.com/lobbyhost/lobbyhost/store/a\n\nrequire github.com/lobbyhost/lobbyhost v0.0.0-00010101000000-000000000000\n"}, "not a release version"},
		{"nothing to go by", nil, "give -version"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mods := []*repo.Module{mod(t, ".", coreMod)}
			for i, text := range tt.mods {
				mods = append(mods, mod(t, "m"+string(rune('a'+i)), text))
			}
			if v, err := Check(mods, ""); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check = %q, %v; want an error saying %q", v, err, tt.want)
			}
		})
	}
}
