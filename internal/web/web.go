package web

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
)

//go:embed playground.html
var playground []byte

// csp lets the page run its own script and nothing else: the script is
// allowed by its hash, not by 'unsafe-inline', so that markup a future
// change let in by mistake (a program's output, an artifact's name) could
// not run script where the visitor's API key is kept.
var csp = "default-src 'none'; script-src '" + scriptHash(playground) + "'; style-src 'unsafe-inline'; img-src data: blob:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// scriptHash is the CSP source of page's one inline script.
func scriptHash(page []byte) string {
	_, rest, ok := bytes.Cut(page, []byte("<script>"))
	script, _, ok2 := bytes.Cut(rest, []byte("</script>"))
	if !ok || !ok2 {
		panic("web: the playground has no inline script")
	}
	sum := sha256.Sum256(script)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Handler serves the playground page.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		// Everything the page needs is in it: no script, style or image
		// from anywhere else may load, and no other site may frame it.
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(playground)
	})
}
