// Package webhook delivers a finished job's result to the URL its caller
// named, signed so that the receiver can tell it came from this boxer and
// was not replayed: header X-Boxer-Signature is
//
//	t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the secret>
//
// (the receiver recomputes it with the secret it shares with the
// operator, compares in constant time, and refuses an old t). A delivery
// is tried a few times, with growing pauses, until the receiver answers
// 2xx.
//
// A webhook is a request boxer makes on a caller's behalf, so it is kept
// from reaching what only boxer's host can reach: unless AllowPrivate,
// an address that is loopback, private, link-local, unspecified or
// multicast is refused, checked on the address each connection is made
// to, so that a name that resolves elsewhere later (DNS rebinding) gains
// nothing.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config shapes a Sender.
type Config struct {
	// Secret signs every delivery; required.
	Secret []byte
	// AllowPrivate lets webhooks reach loopback and private addresses
	// (a receiver on the operator's own network, or a test's).
	AllowPrivate bool
	// Attempts and Backoff: a delivery is tried Attempts times, the n-th
	// retry Backoff*4^(n-1) after the one before. Defaults 4 and 1 s.
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one attempt. Default 10 s.
	Timeout time.Duration
}

// Sender delivers webhooks. It is safe for concurrent use.
type Sender struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
}

// MaxURLBytes bounds a webhook URL.
const MaxURLBytes = 2048

// New returns a Sender for cfg.
func New(cfg Config, log *slog.Logger) (*Sender, error) {
	if len(cfg.Secret) < 16 {
		return nil, errors.New("webhook: the secret must be at least 16 bytes")
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 4
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	s := &Sender{cfg: cfg, log: log, now: time.Now}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: s.control}
	s.client = &http.Client{
		Timeout: cfg.Timeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConns: 16,
			IdleConnTimeout: 30 * time.Second, TLSHandshakeTimeout: cfg.Timeout, ResponseHeaderTimeout: cfg.Timeout},
		// A redirect could lead anywhere; the receiver answers itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// Check says what is wrong with u as a webhook URL, if anything, as far as
// can be told before a connection: its scheme, its length, and a host
// that is an address (or localhost) boxer would refuse.
func (s *Sender) Check(u string) error {
	if len(u) > MaxURLBytes {
		return fmt.Errorf("is %d bytes; at most %d are allowed", len(u), MaxURLBytes)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil {
		return errors.New("must be an absolute http or https URL without credentials")
	}
	host := p.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil && !s.allowed(ip) {
		return fmt.Errorf("names %s, an address boxer does not send webhooks to (loopback, private, link-local)", p.Hostname())
	}
	return nil
}

func (s *Sender) allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if s.cfg.AllowPrivate {
		return !ip.IsUnspecified() && !ip.IsMulticast()
	}
	return ip.IsGlobalUnicast() && !ip.IsPrivate() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast()
}

// control refuses a connection to an address Check would refuse.
func (s *Sender) control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !s.allowed(ip) {
		return fmt.Errorf("webhook: refusing to connect to %s", host)
	}
	return nil
}

// Sign is the X-Boxer-Signature of body sent at t.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Deliver posts body, job jobID's result, to u until the receiver takes
// it, the attempts run out or ctx is done; it reports whether it was
// delivered, and logs each failure.
func (s *Sender) Deliver(ctx context.Context, u, jobID string, body []byte) bool {
	pause := s.cfg.Backoff
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, u, jobID, body)
		if err == nil {
			s.log.Info("webhook delivered", "job_id", jobID, "attempt", attempt)
			return true
		}
		s.log.Warn("webhook not delivered", "job_id", jobID, "attempt", attempt, "err", err)
		if attempt == s.cfg.Attempts {
			return false
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		pause *= 4
	}
}

func (s *Sender) post(ctx context.Context, u, jobID string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "boxer-webhook")
	req.Header.Set("X-Boxer-Job-Id", jobID)
	req.Header.Set("X-Boxer-Signature", Sign(s.cfg.Secret, body, s.now()))
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return nil
}
