package server

import "testing"

func TestClientClassOf(t *testing.T) {
	tests := []struct{ ua, want string }{
		{"", "unknown"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148", "mobile"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) Chrome/120.0 Mobile Safari/537.36", "mobile"},
		{"Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36", "desktop"},
		{"Go-http-client/1.1", "desktop"},
	}
	for _, tt := range tests {
		if got := clientClassOf(tt.ua); got != tt.want {
			t.Errorf("clientClassOf(%q) = %q, want %q", tt.ua, got, tt.want)
		}
	}
}
