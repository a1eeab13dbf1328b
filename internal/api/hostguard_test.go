package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A request over loopback naming another host is what DNS rebinding
// sends; it is refused unless that name is allowed (a local proxy's).
func TestHostGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	h := HostGuard([]string{"Boxer.Example.com"}, ok)
	for _, tc := range []struct {
		remote, host string
		status       int
	}{
		{"127.0.0.1:5555", "127.0.0.1:8080", 204},
		{"127.0.0.1:5555", "localhost:8080", 204},
		{"127.0.0.1:5555", "api.localhost", 204},
		{"[::1]:5555", "[::1]:8080", 204},
		{"127.0.0.1:5555", "boxer.example.com", 204}, // allowed: a local proxy's name
		{"127.0.0.1:5555", "boxer.example.com:443", 204},
		{"127.0.0.1:5555", "", 204}, // HTTP/1.0 without Host: no browser sends that
		{"127.0.0.1:5555", "attacker.example", 403},
		{"127.0.0.1:5555", "attacker.example:8080", 403},
		{"[::1]:5555", "203.0.113.7:8080", 403},
		{"127.0.0.2:5555", "evil.example", 403},
		{"198.51.100.4:5555", "anything.example", 204}, // over the network: reached on purpose
	} {
		r := httptest.NewRequest("POST", "/v1/exec", nil)
		r.RemoteAddr, r.Host = tc.remote, tc.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("from %s, Host %q: %d, want %d", tc.remote, tc.host, w.Code, tc.status)
		}
		if w.Code == 403 {
			wantError(t, w, 403, "forbidden_host")
		}
	}
}
