package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"boxer/internal/store"
	"boxer/internal/x402"
)

func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), append([]string{"keys"}, args...), &out, &errb)
		return out.String(), errb.String(), code
	}
	token, msg, code := run("add", "--name", "agent one", "--rate", "60", "--data-dir", dir)
	token = strings.TrimSpace(token)
	if code != 0 || !strings.HasPrefix(token, store.TokenPrefix) || !strings.Contains(msg, "shown this once") {
		t.Fatalf("add: %d %q %q", code, token, msg)
	}
	list, _, code := run("list", "--data-dir", dir)
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "agent one") || !strings.Contains(lines[1], " 60 ") || !strings.HasSuffix(lines[1], "active") {
		t.Fatalf("list: %d\n%s", code, list)
	}
	if strings.Contains(list, token[len(store.TokenPrefix)+11:]) {
		t.Fatal("list shows the secret")
	}
	id := strings.Fields(lines[1])[0]
	if _, msg, code := run("revoke", id, "--data-dir", dir); code != 0 || msg != "key "+id+" revoked\n" {
		t.Fatalf("revoke: %d %q", code, msg)
	}
	if _, msg, code := run("revoke", "nosuch", "--data-dir", dir); code != 1 || !strings.Contains(msg, `no key "nosuch"`) {
		t.Fatalf("revoke unknown: %d %q", code, msg)
	}
	for _, bad := range [][]string{{}, {"add", "--data-dir", dir}, {"frob", "--data-dir", dir}, {"revoke", "--data-dir", dir}} {
		if _, _, code := run(bad...); code == 0 {
			t.Errorf("keys %v succeeded", bad)
		}
	}
}

// Who may call without a key (see Main.keyPolicy).
func TestKeyPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		addr     string
		payments string
		anon     bool
		keys     int
		refused  bool
		required bool
	}{
		// Required means from the first active key on, even one added later.
		{"loopback, no keys", "127.0.0.1:8080", x402.ModeOff, false, 0, false, true},
		{"localhost, no keys", "localhost:8080", x402.ModeOff, false, 0, false, true},
		{"ipv6 loopback", "[::1]:8080", x402.ModeOff, false, 0, false, true},
		{"all interfaces, no keys", ":8080", x402.ModeOff, false, 0, true, false},
		{"network, no keys", "0.0.0.0:8080", x402.ModeOff, false, 0, true, false},
		{"network, no keys, allowed", "0.0.0.0:8080", x402.ModeOff, true, 0, false, false},
		{"network, a key", "0.0.0.0:8080", x402.ModeOff, false, 1, false, true},
		{"loopback, a key", "127.0.0.1:8080", x402.ModeOff, false, 1, false, true},
		{"a key, anonymous allowed", "0.0.0.0:8080", x402.ModeOff, true, 1, false, false},
		{"network, payments on", "0.0.0.0:8080", x402.ModeX402, false, 0, false, false},
		{"stdio", "", x402.ModeOff, false, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.Open(filepath.Join(t.TempDir(), "boxer.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for i := 0; i < tc.keys; i++ {
				if _, _, err := st.AddKey(context.Background(), "k", 0); err != nil {
					t.Fatal(err)
				}
			}
			cfg := &serveConfig{Addr: tc.addr, AllowAnon: tc.anon, DataDir: "d"}
			cfg.Payments.Mode = tc.payments
			m := &Main{cfg: cfg, log: slog.New(slog.DiscardHandler), store: st}
			err = m.keyPolicy(context.Background())
			if (err != nil) != tc.refused || cfg.API.KeysRequired != tc.required {
				t.Fatalf("err %v, keys required %v; want refused %v, required %v", err, cfg.API.KeysRequired, tc.refused, tc.required)
			}
		})
	}
}
