package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"boxer"
	"boxer/internal/store"
)

// guard puts who may call in front of a route. A caller with a valid API
// key (Authorization: Bearer) passes, within its key's rate, and is never
// charged; an unknown or revoked key is refused. A caller without one
// pays on a priced route when payments are on, signs in as a payer on
// another route when sign-in is on (Deps.SignIn), and otherwise passes
// only if keys are not required (Config.KeysRequired).
func (s *Server) guard(route string, h http.HandlerFunc, priced bool) http.Handler {
	var pay http.Handler
	switch {
	case priced && s.deps.Payment != nil:
		pay = s.deps.Payment(route, h, s.writeError)
	case !priced && s.deps.SignIn != nil:
		pay = s.deps.SignIn(route, h, s.writeError)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token, ok := bearer(r); ok {
			key, e := s.checkKey(r.Context(), token, w)
			if e != nil {
				s.writeError(w, r, e)
				return
			}
			stateOf(r).key = key
			h(w, r)
			return
		}
		switch {
		case r.Header.Get("Authorization") != "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxer"`)
			s.writeError(w, r, boxer.Errorf(boxer.ECodeUnauthorized, "send the API key as Authorization: Bearer <key>"))
		case pay != nil:
			pay.ServeHTTP(w, r)
		case s.keysRequired(r.Context()):
			s.needKey(w, r)
		default:
			h(w, r)
		}
	})
}

// needKey refuses a caller without an API key.
func (s *Server) needKey(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="boxer"`)
	s.writeError(w, r, boxer.Errorf(boxer.ECodeUnauthorized, "this boxer needs an API key: send Authorization: Bearer <key> (its operator makes one with boxer keys add)"))
}

// BodyFirst is, for a front end that must read a whole request body
// before it knows what it asks of the API (the MCP endpoint, whose tool
// calls are API requests), what the API's routes do before their
// handlers: a caller without a key whom no payment could admit is refused
// before its body is read, and the body is read as the routes read theirs
// (readBody: its media type, at most limit bytes, within BodyTimeout),
// with the same errors. next gets the request with its body in memory.
func (s *Server) BodyFirst(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") == "" && s.deps.Payment == nil && s.keysRequired(r.Context()) {
			s.needKey(w, r)
			return
		}
		body, e := readBody(w, r, limit, s.cfg.BodyTimeout)
		if e != nil {
			s.writeError(w, r, e)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// keysRequired reports whether a caller without a key is refused now:
// KeysRequired and a key active. The count is read at most once a
// keyCountTTL, so that a key added or a last key revoked while boxer
// serves takes effect within it, without a query per request.
func (s *Server) keysRequired(ctx context.Context) bool {
	if !s.cfg.KeysRequired {
		return false
	}
	now := s.now()
	kc := &s.keyCount
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.at.IsZero() || now.Sub(kc.at) >= keyCountTTL || now.Before(kc.at) {
		n, err := s.deps.Store.ActiveKeys(ctx)
		if err != nil {
			return true // refuse rather than serve anybody
		}
		kc.active, kc.at = n, now
	}
	return kc.active > 0
}

const keyCountTTL = time.Second

// keyCount caches the number of active keys (keysRequired).
type keyCount struct {
	mu     sync.Mutex
	active int
	at     time.Time
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// checkKey returns the id of token's key if it may call now: known, not
// revoked, within its rate (else 429 with Retry-After on w).
func (s *Server) checkKey(ctx context.Context, token string, w http.ResponseWriter) (string, *boxer.Error) {
	k, err := s.deps.Store.KeyByToken(ctx, token)
	switch {
	case errors.Is(err, store.ErrNoKey):
		w.Header().Set("WWW-Authenticate", `Bearer realm="boxer", error="invalid_token"`)
		return "", boxer.Errorf(boxer.ECodeUnauthorized, "this API key is not valid")
	case err != nil:
		return "", boxer.Errorf(boxer.ECodeInternal, "could not check the API key; retry")
	case k.Revoked():
		w.Header().Set("WWW-Authenticate", `Bearer realm="boxer", error="invalid_token"`)
		return "", boxer.Errorf(boxer.ECodeUnauthorized, "this API key was revoked")
	}
	var (
		wait time.Duration
		ok   bool
	)
	if k.RatePerMinute > 0 && s.deps.Store.Shared() {
		// Many nodes: the key's rate is the cluster's, counted in the
		// database a minute at a time.
		if wait, ok, err = s.deps.Store.TakeKeyCall(ctx, k.ID, k.RatePerMinute, s.now()); err != nil {
			return "", boxer.Errorf(boxer.ECodeInternal, "could not count the API key's call; retry")
		}
	} else {
		wait, ok = s.keyRates.take(k.ID, k.RatePerMinute, s.now())
	}
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		return "", boxer.Errorf(boxer.ECodeRateLimited, "this API key may make %d calls a minute; retry in %s", k.RatePerMinute, wait.Round(time.Second))
	}
	return k.ID, nil
}

// keyRates holds a token bucket a rate-limited key: its rate a minute,
// the whole minute's worth at once at most.
type keyRates struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// take spends one call of key id, allowed perMinute a minute (0: any),
// or says how long until one is allowed.
func (kr *keyRates) take(id string, perMinute int, now time.Time) (time.Duration, bool) {
	if perMinute <= 0 {
		return 0, true
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if kr.buckets == nil {
		kr.buckets = map[string]*rate.Limiter{}
	}
	lim := kr.buckets[id]
	if lim == nil { // a key's rate is set when it is made, and never changes
		lim = rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute)
		kr.buckets[id] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}
