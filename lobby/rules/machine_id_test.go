package rules

import (
	"errors"
	"strings"
	"testing"
)

// An invalid ID's error names the ID once and is still ErrInvalidID.
func TestInvalidIDReadsOnce(t *testing.T) {
	for _, tt := range []struct {
		cmd  Command
		want string
	}{
		{TransferHost("ana", ""), "lobby: invalid ID of the new host: empty"},
		{Kick("ana", strings.Repeat("x", MaxIDLen+1), 0), "lobby: invalid ID of the kicked player: 129 bytes, the limit is 128"},
		{Join("\xff", nil), "lobby: invalid player ID: not valid UTF-8"},
		{Lock("\xff"), "lobby: invalid actor ID: not valid UTF-8"},
		{Join("ana", nil).WithSession(""), ""},
	} {
		err := tt.cmd.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v: %v, want nil", tt.cmd.Op, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidID) || err.Error() != tt.want {
			t.Errorf("%v: %v, want %q wrapping ErrInvalidID", tt.cmd.Op, err, tt.want)
		}
	}
	if err := ValidateID(""); err == nil || err.Error() != "lobby: invalid ID: empty" {
		t.Errorf("ValidateID(\"\") = %v", err)
	}
}
