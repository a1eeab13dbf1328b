package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"boxer/internal/store"
)

// Sign-in is off without a public URL: a proof would otherwise be checked
// against the request's Host, which the caller picks, and a phishing site
// could relay its visitors' proofs (see signInHook). With one, it is on.
func TestSignInNeedsPublicURL(t *testing.T) {
	var logged bytes.Buffer
	st, err := store.Open(filepath.Join(t.TempDir(), "boxer.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := &Main{log: slog.New(slog.NewTextHandler(&logged, nil)), store: st}
	c := serveFlags(newEnvFlags("serve", "", &logged))
	c.Payments.Network = "eip155:8453"

	hook, err := signInHook(context.Background(), c, m)
	if err != nil || hook != nil {
		t.Fatalf("no public URL: hook %v, err %v; want sign-in off", hook != nil, err)
	}
	if !strings.Contains(logged.String(), "x402 sign-in is off: it needs --x402-public-url") {
		t.Fatalf("no warning logged: %q", logged.String())
	}

	c.Payments.PublicURL = "https://boxer.example"
	if hook, err = signInHook(context.Background(), c, m); err != nil || hook == nil {
		t.Fatalf("with a public URL: hook %v, err %v; want sign-in on", hook != nil, err)
	}
}
