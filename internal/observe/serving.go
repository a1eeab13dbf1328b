package observe

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
)

// Serving reads a starting `boxer serve`'s log from stderr until its
// "serving" line and returns the address it names ("http://127.0.0.1:N").
// The rest of the log is drained in the background, so the server never
// blocks on a full pipe.
func Serving(stderr io.Reader) (string, error) {
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var l struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "serving" {
			go io.Copy(io.Discard, stderr)
			return l.Addr, nil
		}
	}
	return "", errors.New("boxer serve exited before serving")
}
