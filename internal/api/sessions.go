package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"boxer"
	"boxer/internal/session"
)

// Sessions: /v1/sessions and below. A session is an interpreter that lives
// between calls (internal/session); its cells run through the same
// admission as runs, and with payments on its creation and each cell are
// priced calls.
//
// Who may reach a session: the API key that made it, and only that key;
// with payments on, the payer that paid for it (proving its address on
// the unpriced routes with x402 sign-in-with-x), and only that payer; a
// session made with neither is reached by its id alone, which is 128
// random bits. Caps count per key, per payer, or for all keyless callers
// together.

const (
	routeSessions    = "/v1/sessions"
	routeSession     = "/v1/sessions/{session_id}"
	routeSessionExec = "/v1/sessions/{session_id}/exec"
	routeSessionPut  = "/v1/sessions/{session_id}/files"
	routeSessionGet  = "/v1/sessions/{session_id}/files/{path...}"
	routeSessionFork = "/v1/sessions/{session_id}/fork"

	maxSessionIdleSecs = 24 * 3600
	maxSessionLifeSecs = 7 * 24 * 3600
	maxCellTimeoutSecs = 3600
)

// SessionCreateRequest is POST /v1/sessions' body.
type SessionCreateRequest struct {
	Files              map[string]string `json:"files,omitempty" jsonschema:"files to start with in the work dir: relative path -> UTF-8 text content"`
	MemoryMB           *int64            `json:"memory_mb,omitempty" jsonschema:"memory limit of the whole session in MiB"`
	CPUs               *float64          `json:"cpus,omitempty" jsonschema:"CPU limit of the whole session in cores"`
	IdleTimeoutSeconds *int64            `json:"idle_timeout_seconds,omitempty" jsonschema:"the session ends after this long without a call (default 600)"`
	MaxLifetimeSeconds *int64            `json:"max_lifetime_seconds,omitempty" jsonschema:"the session ends this long after it began (default 3600)"`
}

// SessionExecRequest is POST /v1/sessions/{session_id}/exec's body.
type SessionExecRequest struct {
	Code           string `json:"code" jsonschema:"Python source to run in the session's interpreter, at most 64 KiB of UTF-8"`
	TimeoutSeconds *int64 `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit of this cell in seconds (default 30); past it the cell is interrupted"`
}

// SessionFilesRequest is POST /v1/sessions/{session_id}/files' body.
type SessionFilesRequest struct {
	Files map[string]string `json:"files" jsonschema:"files to write into the work dir, replacing those there: relative path -> UTF-8 text content"`
}

// SessionForkRequest is POST /v1/sessions/{session_id}/fork's body: an
// empty object, or no body at all. The fork takes its parent's limits and
// timeouts.
type SessionForkRequest struct{}

// SessionInfo describes a session.
type SessionInfo struct {
	SessionID          string    `json:"session_id"`
	CreatedAt          time.Time `json:"created_at"`
	ExpiresAt          time.Time `json:"expires_at" jsonschema:"when the session ends unless called again (idle timeout) or at the latest (lifetime)"`
	LastUsedAt         time.Time `json:"last_used_at"`
	IdleTimeoutSeconds int64     `json:"idle_timeout_seconds"`
	MaxLifetimeSeconds int64     `json:"max_lifetime_seconds"`
	MemoryMB           int64     `json:"memory_mb"`
	CPUs               float64   `json:"cpus"`
	Execs              int64     `json:"execs" jsonschema:"cells run so far"`
	Busy               bool      `json:"busy" jsonschema:"a cell is running"`
	MemoryBytes        int64     `json:"memory_bytes" jsonschema:"memory the session holds now"`
}

func newSessionInfo(i *session.Info) SessionInfo {
	return SessionInfo{SessionID: i.ID, CreatedAt: i.CreatedAt.UTC(), ExpiresAt: i.ExpiresAt.UTC(), LastUsedAt: i.LastUsedAt.UTC(),
		IdleTimeoutSeconds: int64(i.IdleTimeout / time.Second), MaxLifetimeSeconds: int64(i.MaxLifetime / time.Second),
		MemoryMB: i.MemoryLimit >> 20, CPUs: i.CPUs, Execs: i.Execs, Busy: i.Busy, MemoryBytes: i.MemoryBytes}
}

// SessionExecResult is a cell's result: /v1/exec's, and what a notebook
// shows besides.
type SessionExecResult struct {
	ExecResult
	Value        *string  `json:"value" jsonschema:"repr of the cell's trailing expression; null if it has none or it is None"`
	Error        *string  `json:"error" jsonschema:"the exception that ended the cell, as type: message; null if none"`
	Figures      []Figure `json:"figures" jsonschema:"matplotlib figures the cell left open, drawn and closed"`
	SessionAlive bool     `json:"sessionAlive" jsonschema:"the session survived the cell; false after an OOM or a cell that would not stop"`
	SessionEnded *string  `json:"sessionEnded" jsonschema:"why the session ended, when it did"`
}

// Figure is a rich output of a cell.
type Figure struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data" jsonschema:"base64"`
}

// SessionExecResponse is POST /v1/sessions/{session_id}/exec's answer.
type SessionExecResponse struct {
	Success bool              `json:"success"`
	Result  SessionExecResult `json:"result"`
	Session SessionInfo       `json:"session"`
}

// SessionList is GET /v1/sessions' answer.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionFilesResponse is POST /v1/sessions/{session_id}/files' answer.
type SessionFilesResponse struct {
	Written []string    `json:"written"`
	Session SessionInfo `json:"session"`
}

// SessionDeleted is DELETE /v1/sessions/{session_id}'s answer.
type SessionDeleted struct {
	SessionID string `json:"session_id"`
	Deleted   bool   `json:"deleted"`
}

func (s *Server) sessionRoutes() {
	s.handle(http.MethodPost, routeSessions, s.guard(routeSessions, s.handleSessionCreate, true))
	s.handle(http.MethodGet, routeSessions, s.guard(routeSessions+" GET", s.handleSessionList, false))
	// A route of one session is forwarded to its node first (forward.go),
	// which checks keys and payments itself.
	s.handle(http.MethodGet, routeSession, s.forwarding(s.guard(routeSession, s.handleSessionGet, false)))
	s.handle(http.MethodDelete, routeSession, s.forwarding(s.guard(routeSession, s.handleSessionDelete, false)))
	s.handle(http.MethodPost, routeSessionExec, s.forwarding(s.guard(routeSessionExec, s.streamable(s.handleSessionExec), true)))
	s.handle(http.MethodPost, routeSessionFork, s.forwarding(s.guard(routeSessionFork, s.handleSessionFork, true)))
	s.handle(http.MethodPost, routeSessionPut, s.forwarding(s.guard(routeSessionPut, s.handleSessionPut, false)))
	s.handle(http.MethodGet, routeSessionGet, s.forwarding(s.guard(routeSessionGet, s.handleSessionFile, false)))
}

// sessionOwner is who may reach the caller's sessions: its API key, the
// payer that paid or signed in, or no one in particular (the id is the
// capability).
func sessionOwner(r *http.Request) string {
	st := stateOf(r)
	switch {
	case st.key != "":
		return "key:" + st.key
	case st.payer != "":
		return "payer:" + payerID(st.payer)
	}
	return ""
}

// sessionQuota is whose cap a new session counts against: the key's, the
// payer's, or for a caller with neither, its address's (behind a proxy on
// the same machine, every such caller's together).
func sessionQuota(r *http.Request) string {
	if owner := sessionOwner(r); owner != "" {
		return owner
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "anon:" + host
}

// sessions returns the session manager, or writes why there is none.
func (s *Server) sessions(w http.ResponseWriter, r *http.Request) *session.Manager {
	m := s.deps.Sessions
	if m == nil || !m.Enabled() {
		s.writeError(w, r, session.ErrOff)
		return nil
	}
	return m
}

// sessionError writes err: a *boxer.Error as it is, anything else as an
// internal error, logged.
func (s *Server) sessionError(w http.ResponseWriter, r *http.Request, err error) {
	var be *boxer.Error
	if errors.As(err, &be) {
		s.writeError(w, r, be)
		return
	}
	if r.Context().Err() != nil {
		s.writeError(w, r, boxer.Errorf(codeCanceled, "client went away"))
		return
	}
	s.writeError(w, r, s.runnerError(r, err))
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	m, req, size, ok := sessionCall(s, w, r, s.cfg.MaxRunBodyBytes, decodeSessionCreate)
	if ok {
		s.makeSession(w, r, m, size, func(ctx context.Context) (*session.Info, error) {
			return m.Create(ctx, sessionOwner(r), sessionQuota(r), *req)
		})
	}
}

// makeSession answers a call that makes a session, a start or a fork:
// make runs in a run slot, and its session is the 201's body. A paid
// session whose payment does not settle is ended (endUnpaid).
func (s *Server) makeSession(w http.ResponseWriter, r *http.Request, m *session.Manager, size int64, make func(context.Context) (*session.Info, error)) {
	release, ctx, e := s.admit(r, size)
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	defer release()
	info, err := make(ctx)
	if err != nil {
		s.sessionError(w, r, err)
		return
	}
	stateOf(r).ran = true
	s.endUnpaid(r, m, info.ID)
	writeJSON(w, s.log, http.StatusCreated, newSessionInfo(info))
}

// endUnpaid ends session id if the payment for the call that made it, or
// ran a cell in it, does not settle: its state would hold work no one paid
// for, which its files (served to a signed-in payer) could hand out free.
func (s *Server) endUnpaid(r *http.Request, m *session.Manager, id string) {
	owner := sessionOwner(r)
	afterPayment(r, func(paid bool) {
		if paid {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		var gone *boxer.Error // not found, or ended already
		if err := m.End(ctx, owner, id, "its payment did not settle"); err != nil && !errors.As(err, &gone) {
			s.log.LogAttrs(ctx, slog.LevelError, "end an unpaid session", slog.String("request_id", stateOf(r).id),
				slog.String("session_id", id), slog.String("error", err.Error()))
		}
	})
}

// sessionCall is how every session route with a body starts: the manager,
// and the body read within limit and decoded; ok is false once an error
// has been written instead.
func sessionCall[T any](s *Server, w http.ResponseWriter, r *http.Request, limit int64, decode func([]byte) (T, *boxer.Error)) (m *session.Manager, req T, size int64, ok bool) {
	if m = s.sessions(w, r); m == nil {
		return nil, req, 0, false
	}
	body, e := readBody(w, r, limit, s.cfg.BodyTimeout)
	if e == nil {
		req, e = decode(body)
	}
	if e != nil {
		s.writeError(w, r, e)
		return nil, req, 0, false
	}
	return m, req, int64(len(body)), true
}

func decodeSessionCreate(body []byte) (*session.Request, *boxer.Error) {
	root, e := parseBody(body)
	if e != nil {
		return nil, e
	}
	fields, e := requestObject(root, "files", "memory_mb", "cpus", "idle_timeout_seconds", "max_lifetime_seconds")
	if e != nil {
		return nil, e
	}
	var req session.Request
	if v, ok := fields["files"]; ok {
		if req.Files, e = decodeFiles(v, 0); e != nil {
			return nil, e
		}
	}
	if v, ok := fields["memory_mb"]; ok {
		n, e := integer("memory_mb", v, minMemoryMB, 1<<20)
		if e != nil {
			return nil, e
		}
		req.MemoryBytes = n << 20
	}
	if v, ok := fields["cpus"]; ok {
		if req.CPUs, e = number("cpus", v, boxer.MinCPUs, boxer.MaxCPUs); e != nil {
			return nil, e
		}
	}
	if req.IdleTimeout, e = seconds(fields, "idle_timeout_seconds", maxSessionIdleSecs); e != nil {
		return nil, e
	}
	if req.MaxLifetime, e = seconds(fields, "max_lifetime_seconds", maxSessionLifeSecs); e != nil {
		return nil, e
	}
	return &req, nil
}

// seconds reads an optional field of whole seconds, 1 to most; 0 if the
// request leaves it out.
func seconds(fields map[string]*jsonValue, name string, most int64) (time.Duration, *boxer.Error) {
	v, ok := fields[name]
	if !ok {
		return 0, nil
	}
	n, e := integer(name, v, 1, most)
	return time.Duration(n) * time.Second, e
}

func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	m, req, _, ok := sessionCall(s, w, r, s.cfg.MaxExecBodyBytes, func(b []byte) (cellRequest, *boxer.Error) {
		return decodeSessionExec(b, s.cfg.MaxCodeBytes)
	})
	if !ok {
		return
	}
	release, ctx, e := s.admit(r, int64(len(req.code)))
	if e != nil {
		s.writeError(w, r, e)
		return
	}
	defer release()
	res, err := m.Exec(ctx, sessionOwner(r), r.PathValue("session_id"), req.code, req.timeout, streamOf(r))
	if err != nil {
		s.sessionError(w, r, err)
		return
	}
	st := stateOf(r)
	st.ran, st.outcome = true, string(res.Status)
	s.metrics.ObserveRun(st.route, res.Status, res.Wall)
	s.endUnpaid(r, m, r.PathValue("session_id"))
	writeJSON(w, s.log, http.StatusOK, newSessionExecResponse(res))
}

// cellRequest is a checked session exec request.
type cellRequest struct {
	code    string
	timeout time.Duration // 0: the default
}

func decodeSessionExec(body []byte, maxCode int) (cellRequest, *boxer.Error) {
	var req cellRequest
	root, e := parseBody(body)
	if e != nil {
		return req, e
	}
	fields, e := requestObject(root, "code", "timeout_seconds")
	if e != nil {
		return req, e
	}
	if req.code, e = codeField(fields, maxCode, "the Python source to run in the session"); e != nil {
		return req, e
	}
	req.timeout, e = seconds(fields, "timeout_seconds", maxCellTimeoutSecs)
	return req, e
}

func newSessionExecResponse(res *session.ExecResult) SessionExecResponse {
	out := SessionExecResult{ExecResult: newExecResponse(&res.Result).Result, Value: res.Value, SessionAlive: res.Alive, Figures: []Figure{}}
	if res.Error != "" {
		out.Error = &res.Error
	}
	if res.Ended != "" {
		out.SessionEnded = &res.Ended
	}
	for _, png := range res.Figures {
		out.Figures = append(out.Figures, Figure{MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(png)})
	}
	return SessionExecResponse{Success: true, Result: out, Session: newSessionInfo(&res.Session)}
}

func (s *Server) handleSessionFork(w http.ResponseWriter, r *http.Request) {
	m, _, size, ok := sessionCall(s, w, r, s.cfg.MaxExecBodyBytes, decodeSessionFork)
	if ok {
		s.makeSession(w, r, m, size, func(ctx context.Context) (*session.Info, error) {
			return m.Fork(ctx, sessionOwner(r), sessionQuota(r), r.PathValue("session_id"))
		})
	}
}

// decodeSessionFork accepts no body, or an empty object.
func decodeSessionFork(body []byte) (struct{}, *boxer.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return struct{}{}, nil
	}
	root, e := parseBody(body)
	if e == nil {
		_, e = requestObject(root)
	}
	return struct{}{}, e
}

func (s *Server) handleSessionPut(w http.ResponseWriter, r *http.Request) {
	m, files, _, ok := sessionCall(s, w, r, s.cfg.MaxRunBodyBytes, decodeSessionFiles)
	if !ok {
		return
	}
	info, err := m.WriteFiles(r.Context(), sessionOwner(r), r.PathValue("session_id"), files)
	if err != nil {
		s.sessionError(w, r, err)
		return
	}
	written := make([]string, len(files))
	for i, f := range files {
		written[i] = f.Path
	}
	writeJSON(w, s.log, http.StatusOK, SessionFilesResponse{Written: written, Session: newSessionInfo(info)})
}

func decodeSessionFiles(body []byte) ([]boxer.File, *boxer.Error) {
	root, e := parseBody(body)
	if e != nil {
		return nil, e
	}
	fields, e := requestObject(root, "files")
	if e != nil {
		return nil, e
	}
	v, ok := fields["files"]
	if !ok {
		return nil, fieldError("files", "is required: an object of 1 to %d entries, relative path -> UTF-8 text", maxFiles)
	}
	return decodeFiles(v, 1)
}

func (s *Server) handleSessionFile(w http.ResponseWriter, r *http.Request) {
	m := s.sessions(w, r)
	if m == nil {
		return
	}
	p := r.PathValue("path")
	clean, err := cleanRelPath(p)
	if err != nil {
		s.writeError(w, r, boxer.Errorf(boxer.ECodeInvalidRequest, "path %q %v", p, err))
		return
	}
	f, size, err := m.OpenFile(r.Context(), sessionOwner(r), r.PathValue("session_id"), clean, m.Config().MaxFileBytes)
	if err != nil {
		s.sessionError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(size))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// Sent from the file at the client's pace, a buffer at a time, not
	// read whole first: a slow client costs a descriptor, not the file's
	// size in memory, and holds nothing of the session's (the open file
	// keeps what it reads). A client that reads nothing for a while is
	// dropped.
	rc := http.NewResponseController(w)
	buf := make([]byte, 64<<10)
	for left := size; left > 0; {
		n, err := f.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			left -= int64(n)
		}
		if err != nil {
			return // the file shrank under the caller's code: the answer ends short
		}
	}
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	m := s.sessions(w, r)
	if m == nil {
		return
	}
	info, err := m.Get(r.Context(), sessionOwner(r), r.PathValue("session_id"))
	if err != nil {
		s.sessionError(w, r, err)
		return
	}
	writeJSON(w, s.log, http.StatusOK, newSessionInfo(info))
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	m := s.sessions(w, r)
	if m == nil {
		return
	}
	owner := sessionOwner(r)
	if owner == "" && !s.cfg.ListKeylessSessions {
		// Keyless sessions are reached by id alone; here they may be many
		// callers', and none may list another's (see ListKeylessSessions).
		w.Header().Set("WWW-Authenticate", `Bearer realm="boxer"`)
		s.writeError(w, r, boxer.Errorf(boxer.ECodeUnauthorized, "listing sessions needs an API key on this server; a session made without one is reached by its id"))
		return
	}
	list := SessionList{Sessions: []SessionInfo{}}
	for _, i := range m.List(owner) {
		list.Sessions = append(list.Sessions, newSessionInfo(&i))
	}
	writeJSON(w, s.log, http.StatusOK, list)
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	m := s.sessions(w, r)
	if m == nil {
		return
	}
	id := r.PathValue("session_id")
	if err := m.Delete(r.Context(), sessionOwner(r), id); err != nil {
		s.sessionError(w, r, err)
		return
	}
	writeJSON(w, s.log, http.StatusOK, SessionDeleted{SessionID: id, Deleted: true})
}

// admit takes a run slot for a session's call, as run does for a run, and
// returns the call's context: the request's, cancelled too when
// Shutdown's grace period ends.
func (s *Server) admit(r *http.Request, size int64) (release func(), ctx context.Context, _ *boxer.Error) {
	free, e := s.acquire(r.Context(), size)
	if e != nil {
		return nil, nil, e
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.killRuns, cancel)
	return func() { stop(); cancel(); free() }, ctx, nil
}
