package api

import (
	"net/http"

	"boxer"
)

// routeDiscovery is x402's well-known discovery document.
const routeDiscovery = "/.well-known/x402"

// handleDiscovery is GET /.well-known/x402: the payment layer's listing of
// the priced routes, each with the requirements its 402 challenge carries.
// The prices are fixed for the process's life, so caches may keep it a
// while.
func (s *Server) handleDiscovery(w http.ResponseWriter, r *http.Request) {
	var doc any
	ok := false
	if s.deps.Discovery != nil {
		doc, ok = s.deps.Discovery(r)
	}
	if !ok {
		s.writeError(w, r, boxer.Errorf(boxer.ECodeNotFound, "this boxer prices nothing: its runs are free (payments are off)"))
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, s.log, http.StatusOK, doc)
}
