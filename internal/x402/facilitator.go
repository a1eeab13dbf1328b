package x402

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxFacilitatorResponse bounds what is read of a facilitator answer.
const maxFacilitatorResponse = 1 << 20

// Facilitator verifies and settles payments. FacilitatorClient is the HTTP
// implementation; tests may substitute their own.
type Facilitator interface {
	Verify(ctx context.Context, p *PaymentPayload, req PaymentRequirements) (*VerifyResponse, error)
	Settle(ctx context.Context, p *PaymentPayload, req PaymentRequirements) (*SettleResponse, error)
}

// FacilitatorClient calls a facilitator's POST /verify and POST /settle.
type FacilitatorClient struct {
	url        string
	authName   string
	authValue  string
	timeout    time.Duration
	httpClient *http.Client
}

// NewFacilitatorClient returns a client for the facilitator at baseURL.
// authHeader is "" or "Name: value"; timeout bounds each call; hc may be nil
// for a default client.
func NewFacilitatorClient(baseURL, authHeader string, timeout time.Duration, hc *http.Client) (*FacilitatorClient, error) {
	c := &FacilitatorClient{url: strings.TrimRight(baseURL, "/"), timeout: timeout, httpClient: hc}
	if authHeader != "" {
		var err error
		if c.authName, c.authValue, err = parseAuthHeader(authHeader); err != nil {
			return nil, err
		}
	}
	if c.httpClient == nil {
		// A facilitator has no reason to redirect; following one could
		// carry the auth header to another host.
		c.httpClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return c, nil
}

// Verify asks the facilitator whether the payment is valid for req. A
// refusal is a VerifyResponse with IsValid false, whatever the HTTP status
// it came with; an error means the facilitator could not be asked.
func (c *FacilitatorClient) Verify(ctx context.Context, p *PaymentPayload, req PaymentRequirements) (*VerifyResponse, error) {
	var out struct {
		VerifyResponse
		IsValid *bool `json:"isValid"`
	}
	if err := c.call(ctx, "verify", p, req, &out); err != nil {
		return nil, err
	}
	if out.IsValid == nil {
		return nil, fmt.Errorf("facilitator verify: answer has no isValid")
	}
	out.VerifyResponse.IsValid = *out.IsValid
	return &out.VerifyResponse, nil
}

// Settle asks the facilitator to execute the payment on chain and waits for
// its answer. A failed settlement is a SettleResponse with Success false; an
// error means the outcome is unknown (the transaction may still land).
func (c *FacilitatorClient) Settle(ctx context.Context, p *PaymentPayload, req PaymentRequirements) (*SettleResponse, error) {
	var out struct {
		SettleResponse
		Success *bool `json:"success"`
	}
	if err := c.call(ctx, "settle", p, req, &out); err != nil {
		return nil, err
	}
	if out.Success == nil {
		return nil, fmt.Errorf("facilitator settle: answer has no success")
	}
	out.SettleResponse.Success = *out.Success
	return &out.SettleResponse, nil
}

// call posts one request. The official facilitator answers a refusal with
// HTTP 200 and isValid/success false, other facilitators with a 4xx carrying
// the same JSON: both decode into out. Any other answer is an error.
func (c *FacilitatorClient) call(ctx context.Context, op string, p *PaymentPayload, req PaymentRequirements, out any) error {
	payload := p.Raw()
	if payload == nil {
		var err error
		if payload, err = json.Marshal(p); err != nil {
			return fmt.Errorf("facilitator %s: %w", op, err)
		}
	}
	body, err := json.Marshal(FacilitatorRequest{
		X402Version:         p.X402Version,
		PaymentPayload:      payload,
		PaymentRequirements: req,
	})
	if err != nil {
		return fmt.Errorf("facilitator %s: %w", op, err)
	}
	status, data, err := c.exchange(ctx, http.MethodPost, op, body)
	if err != nil {
		return err
	}
	// Only a 2xx may say yes: another status counts only as a refusal.
	if status == http.StatusUnauthorized || status == http.StatusForbidden || (status >= 300 && !isRefusal(data)) {
		return fmt.Errorf("facilitator %s: HTTP %d: %s", op, status, excerpt(data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("facilitator %s: HTTP %d, answer is not JSON: %s", op, status, excerpt(data))
	}
	return nil
}

// isRefusal reports whether a facilitator's error answer still carries a
// refusal (isValid or success false), as the official facilitator's errors
// do, a settlement_pending among them: the refusal's reason then decides.
// An error status claiming success is not believed: the outcome stays
// unknown.
func isRefusal(data []byte) bool {
	var v struct {
		IsValid *bool `json:"isValid"`
		Success *bool `json:"success"`
	}
	if json.Unmarshal(data, &v) != nil {
		return false
	}
	return (v.IsValid != nil && !*v.IsValid) || (v.Success != nil && !*v.Success)
}

// exchange sends one request to the facilitator's /op (body nil for a
// GET), within the client's timeout and with its auth header, and returns
// the answer's status and at most maxFacilitatorResponse bytes of it.
func (c *FacilitatorClient) exchange(ctx context.Context, method, op string, body []byte) (int, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+"/"+op, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("facilitator %s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.authName != "" {
		req.Header.Set(c.authName, c.authValue)
	}
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("facilitator %s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxFacilitatorResponse))
	if err != nil {
		return 0, nil, fmt.Errorf("facilitator %s: reading answer: %w", op, err)
	}
	return resp.StatusCode, data, nil
}

// excerpt shortens a facilitator answer for an error message.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	if s == "" {
		s = "<empty>"
	}
	return s
}
