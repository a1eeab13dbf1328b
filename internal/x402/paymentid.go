package x402

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"boxer"
)

// ExtensionPaymentIdentifier is the key of the payment-identifier extension
// (specs/extensions/payment_identifier.md): the client's idempotency key.
const ExtensionPaymentIdentifier = "payment-identifier"

// A payment id is 16 to 128 of [A-Za-z0-9_-], as the spec and the official
// helpers (isValidPaymentId) have it.
const (
	paymentIDMinLen = 16
	paymentIDMaxLen = 128
)

// paymentIdentifierExtension is what every priced route's 402 declares:
// ids are accepted, not required. It is the official server helper's
// declarePaymentIdentifierExtension(false), schema pattern included (the
// spec's text leaves the pattern out; its helpers and clients use it).
func paymentIdentifierExtension() Extension {
	return Extension{
		Info: map[string]any{"required": false},
		Schema: map[string]any{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type":    "object",
			"properties": map[string]any{
				"required": map[string]any{"type": "boolean"},
				"id": map[string]any{
					"type":      "string",
					"minLength": paymentIDMinLen,
					"maxLength": paymentIDMaxLen,
					"pattern":   "^[a-zA-Z0-9_-]+$",
				},
			},
			"required": []string{"required"},
		},
	}
}

// validPaymentID reports whether id has the spec's form.
func validPaymentID(id string) bool {
	if len(id) < paymentIDMinLen || len(id) > paymentIDMaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// PaymentIDOf returns the payment id p carries in
// extensions["payment-identifier"].info.id: "" when it carries none (no
// extension, or the server's declaration echoed without an id), an
// invalid_payment_id error when the extension is malformed or the id is not
// of the spec's form. A malformed id is refused rather than ignored: the
// client asked for idempotency, and running without it could charge a
// retry twice.
func PaymentIDOf(p *PaymentPayload) (string, *boxer.Error) {
	raw, ok := p.Extensions[ExtensionPaymentIdentifier]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var ext struct {
		Info *struct {
			ID *json.RawMessage `json:"id"`
		} `json:"info"`
	}
	if err := json.Unmarshal(raw, &ext); err != nil || ext.Info == nil {
		return "", boxer.Errorf(boxer.ECodeInvalidPaymentID, "extensions.%s must be an object with an info object", ExtensionPaymentIdentifier)
	}
	if ext.Info.ID == nil || string(*ext.Info.ID) == "null" {
		return "", nil
	}
	var id string
	if err := json.Unmarshal(*ext.Info.ID, &id); err != nil || !validPaymentID(id) {
		return "", boxer.Errorf(boxer.ECodeInvalidPaymentID,
			"extensions.%s.info.id must be a string of %d to %d letters, digits, '-' or '_'", ExtensionPaymentIdentifier, paymentIDMinLen, paymentIDMaxLen)
	}
	return id, nil
}

// PaymentIDConfig bounds what payment ids keep. Zero fields take the
// defaults.
type PaymentIDConfig struct {
	// Retention is how long a paid answer is kept for retries of its id
	// (default 24 h, as job_id results). After it, the id is new again.
	Retention time.Duration
	// Lease is how long an id is held for a request being answered; a
	// claim older than that, left by a process that died, is taken over.
	// It must outlast the longest paid request (body, queue, run, verify
	// and settle); default 10 min.
	Lease time.Duration
	// MaxBodyBytes bounds the request body read to fingerprint a request
	// (default 8 MiB, the API's largest body); BodyTimeout bounds its
	// arrival (default 20 s, the API's).
	MaxBodyBytes int64
	BodyTimeout  time.Duration
	// MaxAnswerBytes bounds one kept answer (default 8 MiB, the API's
	// largest kept result). A larger paid answer is sent once, and its
	// id keeps a result_not_kept error (410) in its place: a retry gets
	// that, never a second run or charge.
	MaxAnswerBytes int64
}

// Defaults of PaymentIDConfig.
const (
	DefaultPaymentIDRetention   = 24 * time.Hour
	DefaultPaymentIDLease       = 10 * time.Minute
	DefaultPaymentIDMaxBody     = 8 << 20
	DefaultPaymentIDBodyTimeout = 20 * time.Second
	DefaultPaymentIDMaxAnswer   = 8 << 20
)

// leastLease is how long a paid request can take: its body, the validity
// margin (which covers queue and run) and a verify and a settle.
func (c PaymentIDConfig) leastLease(facilitatorTimeout, validityMargin time.Duration) time.Duration {
	return c.BodyTimeout + validityMargin + 2*facilitatorTimeout
}

// withDefaults fills zero fields; a zero Lease becomes the default or, if
// longer, twice what a paid request can take.
func (c PaymentIDConfig) withDefaults(facilitatorTimeout, validityMargin time.Duration) PaymentIDConfig {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Retention, DefaultPaymentIDRetention)
	def(&c.BodyTimeout, DefaultPaymentIDBodyTimeout)
	def(&c.Lease, max(DefaultPaymentIDLease, 2*c.leastLease(facilitatorTimeout, validityMargin)))
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultPaymentIDMaxBody
	}
	if c.MaxAnswerBytes == 0 {
		c.MaxAnswerBytes = DefaultPaymentIDMaxAnswer
	}
	return c
}

// validate refuses negative bounds, and a lease shorter than a paid
// request can take: its id would be taken over, and the request run and
// charged twice.
func (c PaymentIDConfig) validate(facilitatorTimeout, validityMargin time.Duration) error {
	if c.Retention < 0 || c.Lease < 0 || c.MaxBodyBytes < 0 || c.BodyTimeout < 0 || c.MaxAnswerBytes < 0 {
		return errors.New("payment ids: negative bound")
	}
	c = c.withDefaults(facilitatorTimeout, validityMargin)
	if least := c.leastLease(facilitatorTimeout, validityMargin); c.Lease < least {
		return fmt.Errorf("payment ids: lease %s is shorter than a paid request can take (%s)", c.Lease, least)
	}
	return nil
}

// PaymentIDStore keeps payment ids durably; internal/store implements it
// (through cmd/boxer). payer is a lowercase 0x address.
//
// ClaimPaymentID takes (payer, id) for a request with fingerprint until
// until, atomically: of concurrent claims exactly one is claimed. When the
// id is held (pending or done, not expired) it returns that record and
// claimed false. FinishPaymentID keeps the pending claim's answer until
// until; ReleasePaymentID drops a pending claim with that fingerprint.
type PaymentIDStore interface {
	ClaimPaymentID(ctx context.Context, payer, id, fingerprint string, until time.Time) (rec *PaymentIDRecord, claimed bool, err error)
	FinishPaymentID(ctx context.Context, payer, id, fingerprint string, a KeptAnswer, until time.Time) error
	ReleasePaymentID(ctx context.Context, payer, id, fingerprint string) error
}

// PaymentIDRecord is what a store holds for a (payer, id).
type PaymentIDRecord struct {
	Fingerprint string
	Done        bool       // answered and paid; Answer holds the answer
	Answer      KeptAnswer // when Done
	// Mine is true when the claim is this node's, and Since is when it was
	// claimed: a pending record that is Mine and older than this process
	// was left by a process that died.
	Mine  bool
	Since time.Time
}

// KeptAnswer is a paid answer as a retry gets it back.
type KeptAnswer struct {
	Status int
	Header map[string][]string
	Body   []byte
}

// MemoryPaymentIDStore is a PaymentIDStore that forgets on restart, for
// tests and a process without a database. Expired ids are replaced, never
// pruned.
type MemoryPaymentIDStore struct {
	now func() time.Time
	mu  sync.Mutex
	ids map[string]*memoryPaymentID
}

type memoryPaymentID struct {
	rec   PaymentIDRecord
	until time.Time
}

// NewMemoryPaymentIDStore returns an empty store on the clock now (nil:
// time.Now).
func NewMemoryPaymentIDStore(now func() time.Time) *MemoryPaymentIDStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryPaymentIDStore{now: now, ids: map[string]*memoryPaymentID{}}
}

// ClaimPaymentID implements PaymentIDStore.
func (s *MemoryPaymentIDStore) ClaimPaymentID(_ context.Context, payer, id, fingerprint string, until time.Time) (*PaymentIDRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := payer + "/" + id
	if e, ok := s.ids[k]; ok && s.now().Before(e.until) {
		rec := e.rec
		return &rec, false, nil
	}
	s.ids[k] = &memoryPaymentID{rec: PaymentIDRecord{Fingerprint: fingerprint, Mine: true, Since: s.now()}, until: until}
	rec := s.ids[k].rec
	return &rec, true, nil
}

// FinishPaymentID implements PaymentIDStore.
func (s *MemoryPaymentIDStore) FinishPaymentID(_ context.Context, payer, id, fingerprint string, a KeptAnswer, until time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ids[payer+"/"+id]
	if !ok || e.rec.Done || e.rec.Fingerprint != fingerprint {
		return errors.New("payment id is not pending")
	}
	e.rec.Done, e.rec.Answer, e.until = true, a, until
	return nil
}

// ReleasePaymentID implements PaymentIDStore.
func (s *MemoryPaymentIDStore) ReleasePaymentID(_ context.Context, payer, id, fingerprint string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := payer + "/" + id
	if e, ok := s.ids[k]; ok && !e.rec.Done && e.rec.Fingerprint == fingerprint {
		delete(s.ids, k)
	}
	return nil
}
