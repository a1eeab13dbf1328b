package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// dialect is what differs between the two databases a Store runs on:
// SQLite, the embedded default, and Postgres, shared by many nodes. The
// queries are written once, in SQLite's spelling; rebind turns their
// parameters into Postgres's, and the few words that differ are the
// dialect's own.
type dialect struct {
	name string // "sqlite" or "postgres"
	// numbered: parameters are $1, $2... rather than ? or ?N.
	numbered bool
	// greatest is the function that returns the largest of its arguments
	// (SQLite's two-argument MAX).
	greatest string
}

var (
	sqliteDialect   = dialect{name: "sqlite", greatest: "MAX"}
	postgresDialect = dialect{name: "postgres", numbered: true, greatest: "GREATEST"}
)

// rebind rewrites q's parameters for d: each ? in turn becomes $n, and
// ?N becomes $N. The queries hold no ? inside a string literal.
func (d dialect) rebind(q string) string {
	if !d.numbered || !strings.ContainsRune(q, '?') {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		j := i + 1
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		b.WriteByte('$')
		if j > i+1 {
			b.WriteString(q[i+1 : j])
		} else {
			n++
			b.WriteString(strconv.Itoa(n))
		}
		i = j - 1
	}
	return b.String()
}

// querier is what a *sql.DB and a *sql.Tx share.
type querier interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// conn runs queries, written in SQLite's spelling, on a database or in a
// transaction of d.
type conn struct {
	q querier
	d dialect
}

func (c conn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.q.ExecContext(ctx, c.d.rebind(q), args...)
}

func (c conn) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.q.QueryContext(ctx, c.d.rebind(q), args...)
}

func (c conn) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return c.q.QueryRowContext(ctx, c.d.rebind(q), args...)
}

// txn is a transaction whose queries are rebound as conn's are.
type txn struct {
	conn
	*sql.Tx
}

// begin starts a transaction on s's database.
func (s *Store) begin(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	t, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{conn{t, s.dialect}, t}, nil
}

// c runs queries on s's database, outside a transaction.
func (s *Store) c() conn { return conn{s.db, s.dialect} }

// boolInt is b as the 0 or 1 an INTEGER flag column holds in both
// databases.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
