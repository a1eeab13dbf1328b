package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestKeysLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		c := newClock()
		s, path := db.openTemp(t, c)
		ctx := context.Background()
		k, token, err := s.AddKey(ctx, " ci bot ", 30)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(token, TokenPrefix+k.ID+"_") || len(token) != len(TokenPrefix)+10+1+52 || k.Name != "ci bot" || k.RatePerMinute != 30 {
			t.Fatalf("key %+v, token %q", k, token)
		}
		var stored int
		if err := s.c().queryRow(context.Background(), `SELECT COUNT(*) FROM api_keys WHERE hash = ? AND hash NOT LIKE ?`, tokenHash(token), "%"+token[len(TokenPrefix)+11:]+"%").Scan(&stored); err != nil || stored != 1 {
			t.Fatalf("the hash is stored, the secret is not: %d rows (%v)", stored, err)
		}
		got, err := s.KeyByToken(ctx, token)
		if err != nil || got.ID != k.ID || got.Revoked() {
			t.Fatalf("KeyByToken = %+v, %v", got, err)
		}
		for _, wrong := range []string{"", token[:len(token)-1], token + "a", "Bearer " + token, strings.ToUpper(token)} {
			if _, err := s.KeyByToken(ctx, wrong); !errors.Is(err, ErrNoKey) {
				t.Errorf("KeyByToken(%q) = %v, want ErrNoKey", wrong, err)
			}
		}

		// Calls made with the key count, as a batch is written.
		for i := 0; i < 3; i++ {
			c.Advance(time.Second)
			if err := s.RecordCall(ctx, Call{At: c.Now(), Route: "/v1/exec", Status: 200, Ran: true, Key: k.ID}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RecordCall(ctx, Call{At: c.Now(), Route: "/v1/exec", Status: 200, Ran: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.FlushCalls(ctx); err != nil {
			t.Fatal(err)
		}

		// Managed from another process while the server holds the database.
		admin, err := Open(path, ForAdmin(), WithClock(c.Now))
		if err != nil {
			t.Fatalf("admin open beside the owner: %v", err)
		}
		defer admin.Close()
		if n, err := admin.ActiveKeys(ctx); err != nil || n != 1 {
			t.Fatalf("ActiveKeys = %d, %v", n, err)
		}
		if err := admin.RevokeKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if err := admin.RevokeKey(ctx, "nosuchkey"); !errors.Is(err, ErrNoKey) {
			t.Fatalf("revoking an unknown key: %v", err)
		}
		keys, err := admin.Keys(ctx)
		if err != nil || len(keys) != 1 {
			t.Fatalf("Keys = %+v, %v", keys, err)
		}
		if got := keys[0]; got.Calls != 3 || !got.LastUsedAt.Equal(c.Now().Truncate(time.Millisecond)) || !got.Revoked() {
			t.Fatalf("listed %+v: want 3 calls, last used %v, revoked", got, c.Now())
		}
		if got, err := s.KeyByToken(ctx, token); err != nil || !got.Revoked() {
			t.Fatalf("the owner sees the revocation at once: %+v, %v", got, err)
		}
		if n, _ := s.ActiveKeys(ctx); n != 0 {
			t.Fatalf("%d active keys after revocation", n)
		}
	})
}

func TestAddKeyRefuses(t *testing.T) {
	eachStore(t, func(t *testing.T, db testDB) {
		s, _ := db.openTemp(t, newClock())
		for _, tc := range []struct {
			name string
			rate int
		}{{"", 0}, {"  ", 0}, {strings.Repeat("x", 101), 0}, {"ok", -1}} {
			if _, _, err := s.AddKey(context.Background(), tc.name, tc.rate); err == nil {
				t.Errorf("AddKey(%q, %d) accepted", tc.name, tc.rate)
			}
		}
	})
}
