package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"boxer"
)

// httpStatus is the one table from an error code to its HTTP status. A code
// not in it is a bug and is sent as 500.
func httpStatus(code string) int {
	switch code {
	case boxer.ECodeInvalidJSON, boxer.ECodeInvalidRequest, boxer.ECodeUnsupportedLanguage, boxer.ECodeInvalidPaymentID:
		return http.StatusBadRequest // 400
	case boxer.ECodeUnauthorized, boxer.ECodeSignInRejected:
		return http.StatusUnauthorized // 401 (with WWW-Authenticate for a key)
	case boxer.ECodePaymentRequired:
		return http.StatusPaymentRequired // 402
	case boxer.ECodeForbiddenHost:
		return http.StatusForbidden // 403
	case boxer.ECodeNotFound:
		return http.StatusNotFound // 404
	case boxer.ECodeMethodNotAllowed:
		return http.StatusMethodNotAllowed // 405
	case boxer.ECodeJobIDConflict, boxer.ECodeSessionBusy, boxer.ECodeForkRefused,
		boxer.ECodePaymentIDConflict, boxer.ECodePaymentIDInFlight:
		return http.StatusConflict // 409
	case boxer.ECodeResultNotKept, boxer.ECodeSessionEnded, boxer.ECodeSessionLost:
		return http.StatusGone // 410
	case boxer.ECodeCodeTooLarge, boxer.ECodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge // 413
	case boxer.ECodeUnsupportedMedia:
		return http.StatusUnsupportedMediaType // 415
	case boxer.ECodeRequestTimeout:
		return http.StatusRequestTimeout // 408
	case boxer.ECodeRateLimited:
		return http.StatusTooManyRequests // 429, with Retry-After
	case codeCanceled:
		return statusClientClosed
	case boxer.ECodeBusy, boxer.ECodeUnavailable:
		return http.StatusServiceUnavailable // 503, with Retry-After
	case boxer.ECodeInternal, boxer.ECodeRunLost:
		return http.StatusInternalServerError // 500
	}
	return http.StatusInternalServerError
}

// codeCanceled marks a request whose client went away. Nothing is sent: there
// is no one to read it. It exists so the access log and the call record can
// say what happened, with nginx's 499.
const (
	codeCanceled       = "canceled"
	statusClientClosed = 499
)

// errorBody is the error envelope of both seed APIs.
type errorBody struct {
	Success bool         `json:"success"`
	Error   *boxer.Error `json:"error"`
}

// writeError sends e as the error envelope with its status from the table and
// records the outcome for the access log.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *boxer.Error) {
	st := stateOf(r)
	st.outcome = e.Code
	status := httpStatus(e.Code)
	if status == statusClientClosed {
		st.canceled = true
		return
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds(s.cfg.RetryAfter))
	}
	writeJSON(w, s.log, status, errorBody{Success: false, Error: e})
}

// internalError logs err with the request id and sends the caller only the
// id: internal detail (paths, errno, SQL) is not the caller's business and
// may help an attacker.
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.writeError(w, r, s.internalErrorOf(r, what, err))
}

// internalErrorOf logs what failed and returns the error the caller gets.
func (s *Server) internalErrorOf(r *http.Request, what string, err error) *boxer.Error {
	id := stateOf(r).id
	s.log.LogAttrs(r.Context(), slog.LevelError, what,
		slog.String("request_id", id), slog.String("error", err.Error()))
	return boxer.Errorf(boxer.ECodeInternal, "internal error; request id %s", id)
}

func retryAfterSeconds(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(secs, 1), 10)
}

// marshal encodes v as compact JSON without a trailing newline and without
// HTML escaping: a program's "<" must come back as "<", as the seeds'
// services (not written in Go) send it.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeJSON sends v with status. The types passed here always encode; a
// failure is a bug, logged and sent as a bare 500.
func writeJSON(w http.ResponseWriter, log *slog.Logger, status int, v any) {
	body, err := marshal(v)
	if err != nil {
		log.Error("encode response", slog.String("error", err.Error()))
		writeBody(w, http.StatusInternalServerError, []byte(`{"success":false,"error":{"code":"internal","message":"internal error"}}`))
		return
	}
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// A client that takes nothing holds a connection, a goroutine and
	// the answer's memory: it gets answerWriteBase, and a second more
	// for every 64 KiB, then the connection is closed.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWriteBase + time.Duration(len(body)>>16)*answerWritePer64K))
	w.Write(body)
}

// answerWriteBase is the least time a client has to take an answer, and
// answerWritePer64K what it gets on top for every 64 KiB of it.
var answerWriteBase, answerWritePer64K = 30 * time.Second, time.Second
