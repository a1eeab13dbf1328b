package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"boxer/internal/store"
)

const keysUsage = `usage: boxer keys add --name NAME [--rate N] | list | revoke ID  [--data-dir DIR]

Manages the API keys of the boxer whose database is in --data-dir (the
same as boxer serve's; it may be serving). A caller sends a key as
Authorization: Bearer <key>; a key holder is never charged, and is bound to
its --rate calls a minute (0: no bound). A key's secret is printed once, by
add, and only its SHA-256 is stored. Revocation takes effect at once.

With payments off, boxer serve refuses callers without a key once a key
exists, and refuses to start on an address other than loopback without
one, unless --allow-anonymous.
`

func cmdKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ef := newEnvFlags("keys", keysUsage, stderr)
	fs := ef.fs
	var dataDir, name string
	var perMinute int
	var database string
	ef.str(&dataDir, "data-dir", "BOXER_DATA_DIR", "boxer-data", "boxer serve's --data-dir")
	ef.str(&database, "database", "BOXER_DATABASE", "", "boxer serve's --database")
	fs.StringVar(&name, "name", "", "add: who or what the key is for")
	fs.IntVar(&perMinute, "rate", 0, "add: most calls a minute (0: no bound)")
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	// Flags may come before or after the key id (boxer keys revoke ID
	// --data-dir DIR): the flag package stops at the first argument.
	verb, rest, pos := args[0], args[1:], []string(nil)
	for {
		if !ef.parse(rest) {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	st, err := store.Open(databaseDSN(database, dataDir), store.ForAdmin())
	if err != nil {
		fmt.Fprintln(stderr, "boxer keys:", err)
		return 1
	}
	defer st.Close()
	switch {
	case verb == "add" && len(pos) == 0:
		k, token, err := st.AddKey(ctx, name, perMinute)
		if err != nil {
			fmt.Fprintln(stderr, "boxer keys add:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", token)
		fmt.Fprintf(stderr, "key %s (%s) added; the line above is its secret, shown this once\n", k.ID, k.Name)
	case verb == "list" && len(pos) == 0:
		keys, err := st.Keys(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "boxer keys list:", err)
			return 1
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tRATE/MIN\tCALLS\tLAST USED\tCREATED\tSTATE")
		for _, k := range keys {
			state := "active"
			if k.Revoked() {
				state = "revoked " + stamp(k.RevokedAt)
			}
			rate := "-"
			if k.RatePerMinute > 0 {
				rate = fmt.Sprint(k.RatePerMinute)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", k.ID, k.Name, rate, k.Calls, stamp(k.LastUsedAt), stamp(k.CreatedAt), state)
		}
		w.Flush()
	case verb == "revoke" && len(pos) == 1:
		if err := st.RevokeKey(ctx, pos[0]); err != nil {
			if errors.Is(err, store.ErrNoKey) {
				fmt.Fprintf(stderr, "boxer keys revoke: no key %q (boxer keys list shows them)\n", pos[0])
			} else {
				fmt.Fprintln(stderr, "boxer keys revoke:", err)
			}
			return 1
		}
		fmt.Fprintf(stderr, "key %s revoked\n", pos[0])
	default:
		fs.Usage()
		return 2
	}
	return 0
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04")
}

// isLoopback reports whether listen address addr takes connections from
// this host only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// databaseDSN is the database boxer opens: the Postgres URL database, or
// when it is empty the SQLite file in dataDir.
func databaseDSN(database, dataDir string) string {
	if database != "" {
		return database
	}
	return filepath.Join(dataDir, "boxer.db")
}

// defaultNode is the default --node: the machine's (a pod's) name.
func defaultNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "boxer"
	}
	return h
}
