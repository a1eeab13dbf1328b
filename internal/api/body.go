package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"boxer"
)

// readBody reads a JSON request body of at most limit bytes within
// timeout. The limit is enforced while reading (http.MaxBytesReader), so an
// oversized body costs limit bytes of memory, not its own size, and the
// connection is closed after the 413. The timeout is a read deadline on the
// connection; net/http clears it when the body reaches its end and it
// starts watching for a client that goes away, so a run may take longer
// than any body should (TestHTTPRunOutlastsBodyTimeout).
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, *boxer.Error) {
	if e := checkContentType(r.Header); e != nil {
		return nil, e
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, boxer.Errorf(boxer.ECodeInternal, "could not bound the body's read time: %v", err)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge(limit)
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			return nil, boxer.Errorf(boxer.ECodeRequestTimeout, "the request body took longer than %s to arrive", timeout)
		case r.Context().Err() != nil:
			return nil, boxer.Errorf(codeCanceled, "client went away while sending the body")
		default:
			return nil, boxer.Errorf(boxer.ECodeInvalidJSON, "could not read the request body: it ended early")
		}
	}
	return body, nil
}

func tooLarge(limit int64) *boxer.Error {
	return boxer.Errorf(boxer.ECodePayloadTooLarge, "the request body is larger than %d bytes", limit)
}

// checkContentType accepts application/json, application/*+json, and no
// Content-Type at all (some clients omit it; the body is parsed strictly
// anyway). A charset other than UTF-8 is refused: JSON is UTF-8 (RFC 8259).
// So is a Content-Encoding: bodies are not decompressed.
func checkContentType(h http.Header) *boxer.Error {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return boxer.Errorf(boxer.ECodeUnsupportedMedia, "Content-Encoding %q is not supported; send the body uncompressed", ce)
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return boxer.Errorf(boxer.ECodeUnsupportedMedia, "Content-Type %q is malformed; send application/json", ct)
	}
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return boxer.Errorf(boxer.ECodeUnsupportedMedia, "Content-Type %q is not supported; send application/json", mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return boxer.Errorf(boxer.ECodeUnsupportedMedia, "charset %q is not supported; JSON must be UTF-8", cs)
	}
	return nil
}

// parseBody parses body as one strict JSON value, mapping a malformed body to
// invalid_json.
func parseBody(body []byte) (*jsonValue, *boxer.Error) {
	if len(body) == 0 {
		return nil, boxer.Errorf(boxer.ECodeInvalidJSON, "the request body is empty; send a JSON object")
	}
	root, err := parseJSON(body)
	if err != nil {
		return nil, boxer.Errorf(boxer.ECodeInvalidJSON, "%s", err.Error())
	}
	return root, nil
}
