package server

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// metricsHostAllowed reports whether /metrics answers a request for host
// (a Host header, with or without a port): a loopback name or address, or
// one of Config.MetricsHosts. A browser page on a name an attacker
// controls can have that name resolve to this server (DNS rebinding) and
// read what it serves; its requests carry the attacker's name as Host, so
// answering only for the names the server is known by keeps the page out.
func (s *Server) metricsHostAllowed(host string) bool {
	h := hostOnly(host)
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	if ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range s.cfg.MetricsHosts {
		a = strings.ToLower(a)
		if a == h || (ip != nil && ip.Equal(net.ParseIP(a))) {
			return true
		}
	}
	return false
}

// hostOnly returns the lower-case host of a Host header, without its port
// or the brackets of an IPv6 address.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// checkMetricsHost reports whether h can be in Config.MetricsHosts: a
// host name or an IP address, without scheme or port.
func checkMetricsHost(h string) error {
	if h == "" || strings.ContainsAny(h, "/:[]* ") && net.ParseIP(h) == nil {
		return fmt.Errorf("server: MetricsHosts entry %q is not a host name or an IP address", h)
	}
	return nil
}

// metricsForHosts serves next only to requests for an allowed host
// (metricsHostAllowed); others get 403 host_forbidden.
func (s *Server) metricsForHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.metricsHostAllowed(r.Host) {
			writeError(w, http.StatusForbidden, "host_forbidden", "metrics are served only for the server's own host names")
			return
		}
		next.ServeHTTP(w, r)
	})
}
