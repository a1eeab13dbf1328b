package boxer

import "fmt"

// Error codes that cross the service's edge. They are part of the API: a
// client may switch on them, so they never change meaning. internal/api maps
// each to an HTTP status in one table.
const (
	ECodeInvalidJSON         = "invalid_json"
	ECodeInvalidRequest      = "invalid_request"
	ECodeUnsupportedLanguage = "unsupported_language"
	ECodeCodeTooLarge        = "code_too_large"
	ECodePayloadTooLarge     = "payload_too_large"
	ECodeUnsupportedMedia    = "unsupported_media_type"
	ECodeRequestTimeout      = "request_timeout"
	ECodeNotFound            = "not_found"
	ECodeMethodNotAllowed    = "method_not_allowed"
	ECodeJobIDConflict       = "job_id_conflict"
	ECodeResultNotKept       = "result_not_kept"
	ECodeSessionBusy         = "session_busy"
	ECodeSessionEnded        = "session_ended"
	ECodeSessionLost         = "session_lost"
	ECodeForkRefused         = "fork_refused"
	ECodeRunLost             = "run_lost"
	ECodeUnauthorized        = "unauthorized"
	ECodeForbiddenHost       = "forbidden_host"
	ECodePaymentRequired     = "payment_required"
	ECodeSignInRejected      = "sign_in_rejected" // x402 sign-in-with-x proof refused
	ECodeRateLimited         = "rate_limited"
	ECodeBusy                = "busy"
	ECodeUnavailable         = "unavailable"
	ECodeInternal            = "internal"
)

// Codes of the x402 payment-identifier extension: an id that is not 16 to
// 128 of [A-Za-z0-9_-]; an id the same payer used before for another
// request; an id whose first request is still being answered elsewhere.
const (
	ECodeInvalidPaymentID  = "invalid_payment_id"
	ECodePaymentIDConflict = "payment_id_conflict"
	ECodePaymentIDInFlight = "payment_id_in_flight"
)

// Error is a failure with a stable code and a message fit for the caller.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
