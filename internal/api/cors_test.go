package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCORS(t *testing.T) {
	// Behind CORS, every route asks for payment: a preflight must never
	// see that.
	paid := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("PAYMENT-REQUIRED", "x")
		w.WriteHeader(http.StatusPaymentRequired)
	})
	const app = "https://app.example.com"
	for _, tc := range []struct {
		name                    string
		origins                 []string
		method, origin, reqMeth string
		status                  int
		allowOrigin, methods    string
		expose                  string
	}{
		{"preflight, allowed", []string{app}, "OPTIONS", app, "POST", 204, app, corsAllowMethods, ""},
		{"preflight, allowed by case", []string{app}, "OPTIONS", "HTTPS://APP.example.com", "POST", 204, "HTTPS://APP.example.com", corsAllowMethods, ""},
		{"preflight, other origin", []string{app}, "OPTIONS", "https://evil.example", "POST", 204, "", "", ""},
		{"preflight, CORS off", nil, "OPTIONS", app, "POST", 204, "", "", ""},
		{"preflight, any", []string{"*"}, "OPTIONS", "https://x.example", "POST", 204, "*", corsAllowMethods, ""},
		{"call, allowed", []string{app}, "POST", app, "", 402, app, "", corsExposeHeaders},
		{"call, other origin", []string{app}, "POST", "https://evil.example", "", 402, "", "", ""},
		{"call, no origin", []string{"*"}, "POST", "", "", 402, "", "", ""},
		{"OPTIONS, no preflight", []string{app}, "OPTIONS", "", "", 402, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCORS(tc.origins)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(tc.method, "/v1/exec", nil)
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.reqMeth != "" {
				r.Header.Set("Access-Control-Request-Method", tc.reqMeth)
			}
			w := httptest.NewRecorder()
			c.Handler(paid).ServeHTTP(w, r)
			h := w.Result().Header
			if w.Code != tc.status || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin ||
				h.Get("Access-Control-Allow-Methods") != tc.methods || h.Get("Access-Control-Expose-Headers") != tc.expose {
				t.Fatalf("status %d, headers %v", w.Code, h)
			}
			if tc.methods != "" && (h.Get("Access-Control-Allow-Headers") != corsAllowHeaders || h.Get("Access-Control-Max-Age") != corsMaxAge) {
				t.Fatalf("preflight headers %v", h)
			}
			if tc.status == 204 && h.Get("PAYMENT-REQUIRED") != "" {
				t.Fatal("the preflight reached the priced route")
			}
			if tc.origin != "" && h.Get("Vary") == "" {
				t.Fatal("no Vary: Origin: a cache could serve one origin's answer to another")
			}
		})
	}
}

func TestNewCORSRefusesWhatIsNotAnOrigin(t *testing.T) {
	for _, o := range []string{"app.example.com", "https://app.example.com/", "https://app.example.com/x", "ftp://x", "https://u@x", "https://x?q", ""} {
		if _, err := NewCORS([]string{o}); err == nil {
			t.Errorf("%q accepted", o)
		}
	}
	if _, err := NewCORS([]string{"http://localhost:3000", "https://a.example", "*"}); err != nil {
		t.Fatal(err)
	}
}

// With a list of origins, even an answer to a request without Origin
// varies by it: a shared cache must not hand it to an allowed origin.
func TestCORSVariesWithAList(t *testing.T) {
	c, err := NewCORS([]string{"https://app.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	c.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/v1/health", nil))
	if w.Header().Get("Vary") != "Origin" {
		t.Fatalf("Vary %q", w.Header().Get("Vary"))
	}
}
