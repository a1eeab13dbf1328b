package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CORS lets web pages on other origins call boxer from a browser.
//
// A preflight (OPTIONS with Origin and Access-Control-Request-Method) is
// answered here with 204 and never reaches a route: no payment is asked
// for it and no method check refuses it. Only an allowed origin gets the
// Access-Control-Allow-* headers; any other's preflight is still a 204,
// which the browser reads as a refusal. An allowed origin's other
// requests go on to the routes with Access-Control-Allow-Origin set and
// the headers x402 clients read (PAYMENT-REQUIRED, PAYMENT-RESPONSE)
// exposed.
//
// origins are exact origins ("https://app.example.com") or "*" for any;
// none turns CORS off (preflights still get their 204). boxer uses no
// cookies, so "*" exposes no ambient credential; it does let any page a
// visitor opens spend this boxer's CPU, which is why it is not the
// default.
type CORS struct {
	any     bool
	origins []string
}

// NewCORS checks origins (see CORS).
func NewCORS(origins []string) (*CORS, error) {
	c := &CORS{}
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("CORS origin %q is not scheme://host[:port]", o)
		}
		c.origins = append(c.origins, strings.ToLower(o))
	}
	return c, nil
}

// Headers a browser may send on a cross-origin call, and read from its
// answer.
const (
	corsAllowHeaders  = "Content-Type, Authorization, PAYMENT-SIGNATURE, SIGN-IN-WITH-X, Accept, Last-Event-ID, Mcp-Protocol-Version, Mcp-Session-Id"
	corsExposeHeaders = "PAYMENT-REQUIRED, PAYMENT-RESPONSE, Idempotent-Replayed, Retry-After, Mcp-Session-Id"
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsMaxAge        = "600"
)

func (c *CORS) allowed(origin string) bool {
	return origin != "" && (c.any || slices.Contains(c.origins, strings.ToLower(origin)))
}

// Handler wraps next with CORS.
func (c *CORS) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		// Answers differ by origin wherever a list of origins is: a cache
		// must not serve one origin's answer (or a no-origin one) to another.
		if origin != "" || len(c.origins) > 0 {
			h.Add("Vary", "Origin")
		}
		preflight := r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != ""
		if preflight {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
		}
		if c.allowed(origin) {
			if c.any {
				h.Set("Access-Control-Allow-Origin", "*")
			} else {
				h.Set("Access-Control-Allow-Origin", origin)
			}
			if preflight {
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", corsMaxAge)
			} else {
				h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
			}
		}
		if preflight {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
