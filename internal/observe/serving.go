package observe

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
)

// Serving reads a starting `boxer serve`'s log from stderr until its
// "serving" line and returns the address it names ("http://127.0.0.1:N").
// The rest of the log is copied to rest (nil: discarded) in the
// background, so the server never blocks on a full pipe.
func Serving(stderr io.Reader, rest io.Writer) (string, error) {
	if rest == nil {
		rest = io.Discard
	}
	br := bufio.NewReader(stderr)
	for {
		line, err := br.ReadBytes('\n')
		var l struct{ Msg, Addr string }
		if json.Unmarshal(line, &l) == nil && l.Msg == "serving" {
			go io.Copy(rest, br)
			return l.Addr, nil
		}
		if err != nil {
			return "", errors.New("boxer serve exited before serving")
		}
	}
}
