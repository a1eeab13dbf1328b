package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"boxer"
)

// A session lives on the node that made it. On a shared store any node
// may receive a call to it, behind a load balancer that knows nothing of
// sessions; that node forwards the call, as it came (headers, body,
// payment), to the session's node, and relays the answer. Forwarded, not
// redirected: a client behind the balancer may not reach the nodes, and
// the session's node checks the call's key and payment itself, so that
// nothing is charged twice or trusted on another node's word. A forwarded
// call carries forwardedHeader and is never forwarded again. A node that
// cannot be reached has lost its sessions with its process: session_lost.

const forwardedHeader = "X-Boxer-Forwarded-By"

// forwardTimeout bounds the connection to another node, not the call.
const forwardTimeout = 5 * time.Second

var forwardTransport = &http.Transport{
	DialContext:         (&net.Dialer{Timeout: forwardTimeout}).DialContext,
	MaxIdleConnsPerHost: 32,
	IdleConnTimeout:     time.Minute,
}

// forwarding wraps h, a route of one session, to send its calls to the
// session's node when that is another.
func (s *Server) forwarding(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		db, id := s.deps.Store, r.PathValue("session_id")
		if !db.Shared() || r.Header.Get(forwardedHeader) != "" || s.deps.Sessions != nil && s.deps.Sessions.Holds(id) {
			h.ServeHTTP(w, r) // one process's store, a forwarded call, or a session here: no query
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		node, addr, open, found, err := db.SessionPlace(ctx, id)
		cancel()
		if err != nil || !found || !open || node == db.Node() || addr == "" {
			h.ServeHTTP(w, r) // answered here: not_found, ended, lost, or this node's own
			return
		}
		st := stateOf(r)
		st.outcome, st.forwarded = "forwarded", true
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
				pr.Out.Host = pr.In.Host // the host the client named, which the node's host guard checks
				pr.Out.Header.Set(forwardedHeader, db.Node())
				pr.Out.Header.Set("X-Request-Id", st.id) // one id in both nodes' logs
			},
			ModifyResponse: func(resp *http.Response) error {
				resp.Header.Del("X-Request-Id") // already set, to the same id
				return nil
			},
			Transport:     forwardTransport,
			FlushInterval: -1, // streamed answers stream on
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if r.Context().Err() != nil {
					s.writeError(w, r, boxer.Errorf(codeCanceled, "client went away"))
					return
				}
				s.writeError(w, r, boxer.Errorf(boxer.ECodeSessionLost,
					"session %s was lost: node %s, which held it, cannot be reached (%v); create a new session", id, node, err))
			},
		}
		proxy.ServeHTTP(w, r)
	})
}
