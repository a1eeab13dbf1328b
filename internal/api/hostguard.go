package api

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"boxer"
)

// HostGuard defends a boxer that listens on loopback against DNS
// rebinding: a web page whose name an attacker points at 127.0.0.1 can
// send requests to it from the visitor's browser, and read the answers as
// its own origin's. Such a request arrives over loopback naming the
// attacker's host, so a request over loopback must name a loopback host
// (localhost, 127.0.0.0/8, ::1) or one of allowed: the names a reverse
// proxy on the same machine forwards in Host (--allowed-hosts). Requests
// over other interfaces are not concerned: the network reached boxer on
// purpose. Refused: 403 forbidden_host.
func HostGuard(allowedHosts []string, next http.Handler) http.Handler {
	allowed := make([]string, len(allowedHosts))
	for i, h := range allowedHosts {
		allowed[i] = strings.ToLower(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && fromLoopback(r.RemoteAddr) && !loopbackHost(r.Host) && !slices.Contains(allowed, strings.ToLower(hostOnly(r.Host))) {
			body, _ := marshal(errorBody{Error: boxer.Errorf(boxer.ECodeForbiddenHost,
				"Host %q is not this boxer's: a request over loopback must name localhost, or a name given to --allowed-hosts", r.Host)})
			writeBody(w, httpStatus(boxer.ECodeForbiddenHost), body)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func fromLoopback(remote string) bool {
	ip := net.ParseIP(hostOnly(remote))
	return ip != nil && ip.IsLoopback()
}

func loopbackHost(hostport string) bool {
	h := strings.ToLower(hostOnly(hostport))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
