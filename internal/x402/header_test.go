package x402

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestPaymentRequiredWireTypes(t *testing.T) {
	o := testOffer(t, "/v1/exec")
	h, err := EncodeHeader(o.paymentRequired("https://boxer.test", nil, "PAYMENT-SIGNATURE header is required"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(h, "\r\n-_") || len(h)%4 != 0 {
		t.Fatalf("header is not standard padded base64 on one line: %q", h)
	}
	raw, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["x402Version"].(float64); !ok || v != 2 {
		t.Errorf("x402Version = %#v, want the number 2", m["x402Version"])
	}
	accepts := m["accepts"].([]any)
	if len(accepts) != 1 {
		t.Fatalf("accepts has %d entries", len(accepts))
	}
	req := accepts[0].(map[string]any)
	checks := []struct {
		field string
		want  any
	}{
		{"scheme", "exact"},
		{"network", "eip155:8453"},
		{"amount", "20000"},
		{"asset", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
		{"payTo", testPayTo},
		{"maxTimeoutSeconds", float64(300)},
	}
	for _, c := range checks {
		t.Run(c.field, func(t *testing.T) {
			if req[c.field] != c.want {
				t.Errorf("%s = %#v (%T), want %#v (%T)", c.field, req[c.field], req[c.field], c.want, c.want)
			}
		})
	}
	extra := req["extra"].(map[string]any)
	if len(extra) != 2 || extra["name"] != "USD Coin" || extra["version"] != "2" {
		t.Errorf("extra = %v, want exactly {name: USD Coin, version: 2}", extra)
	}
	res := m["resource"].(map[string]any)
	if res["url"] != "https://boxer.test/v1/exec" || res["mimeType"] != "application/json" {
		t.Errorf("resource = %v", res)
	}
	bazaar := m["extensions"].(map[string]any)["bazaar"].(map[string]any)
	input := bazaar["info"].(map[string]any)["input"].(map[string]any)
	if input["type"] != "http" || input["method"] != "POST" || input["bodyType"] != "json" {
		t.Errorf("bazaar input = %v", input)
	}
	if input["body"].(map[string]any)["code"] != "print(2 + 2)" {
		t.Errorf("bazaar input body = %v", input["body"])
	}
	out := bazaar["info"].(map[string]any)["output"].(map[string]any)
	if out["example"].(map[string]any)["result"].(map[string]any)["stdout"] != "4\n" {
		t.Errorf("bazaar output = %v", out)
	}
	if bazaar["schema"].(map[string]any)["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("bazaar schema = %v", bazaar["schema"])
	}

	var back PaymentRequired
	if err := DecodeHeader(h, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Accepts) != 1 || back.Accepts[0].Amount != "20000" || back.Accepts[0].MaxTimeoutSeconds != 300 || back.X402Version != 2 {
		t.Errorf("round trip = %+v", back)
	}
}

func TestPriceOfRunPython(t *testing.T) {
	if got := testOffer(t, "/v1/run-python").req.Amount; got != "10000" {
		t.Fatalf("run-python amount = %s, want 10000", got)
	}
}

// specExampleHeader is the PAYMENT-SIGNATURE example of the x402 v2 HTTP
// transport spec.
const specExampleHeader = "eyJ4NDAyVmVyc2lvbiI6MiwicmVzb3VyY2UiOnsidXJsIjoiaHR0cHM6Ly9hcGkuZXhhbXBsZS5jb20vcHJlbWl1bS1kYXRhIiwiZGVzY3JpcHRpb24iOiJBY2Nlc3MgdG8gcHJlbWl1bSBtYXJrZXQgZGF0YSIsIm1pbWVUeXBlIjoiYXBwbGljYXRpb24vanNvbiJ9LCJhY2NlcHRlZCI6eyJzY2hlbWUiOiJleGFjdCIsIm5ldHdvcmsiOiJlaXAxNTU6ODQ1MzIiLCJhbW91bnQiOiIxMDAwMCIsImFzc2V0IjoiMHgwMzZDYkQ1Mzg0MmM1NDI2NjM0ZTc5Mjk1NDFlQzIzMThmM2RDRjdlIiwicGF5VG8iOiIweDIwOTY5M0JjNmFmYzBDNTMyOGJBMzZGYUYwM0M1MTRFRjMxMjI4N0MiLCJtYXhUaW1lb3V0U2Vjb25kcyI6NjAsImV4dHJhIjp7Im5hbWUiOiJVU0RDIiwidmVyc2lvbiI6IjIifX0sInBheWxvYWQiOnsic2lnbmF0dXJlIjoiMHgyZDZhNzU4OGQ2YWNjYTUwNWNiZjBkOWE0YTIyN2UwYzUyYzZjMzQwMDhjOGU4OTg2YTEyODMyNTk3NjQxNzM2MDhhMmNlNjQ5NjY0MmUzNzdkNmRhOGRiYmY1ODM2ZTliZDE1MDkyZjllY2FiMDVkZWQzZDYyOTNhZjE0OGI1NzFjIiwiYXV0aG9yaXphdGlvbiI6eyJmcm9tIjoiMHg4NTdiMDY1MTlFOTFlM0E1NDUzODc5MWJEYmIwRTIyMzczZTM2YjY2IiwidG8iOiIweDIwOTY5M0JjNmFmYzBDNTMyOGJBMzZGYUYwM0M1MTRFRjMxMjI4N0MiLCJ2YWx1ZSI6IjEwMDAwIiwidmFsaWRBZnRlciI6IjE3NDA2NzIwODkiLCJ2YWxpZEJlZm9yZSI6IjE3NDA2NzIxNTQiLCJub25jZSI6IjB4ZjM3NDY2MTNjMmQ5MjBiNWZkYWJjMDg1NmYyYWViMmQ0Zjg4ZWU2MDM3YjhjYzVkMDRhNzFhNDQ2MmYxMzQ4MCJ9fX0="

func TestDecodePaymentHeader(t *testing.T) {
	o := testOffer(t, "/v1/exec")
	w := newWallet(t)
	good := paidHeader(t, w, o)
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	tests := []struct {
		name    string
		header  string
		wantErr string
	}{
		{"official client shape with echoes", good, ""},
		{"unpadded", strings.TrimRight(good, "="), ""},
		{"spec example", specExampleHeader, ""},
		{"empty", "", "empty"},
		{"not base64", "%%%", "base64"},
		{"url-safe alphabet", strings.ReplaceAll(strings.ReplaceAll(good, "+", "-"), "/", "_") + "-_", "URL-safe"},
		{"not JSON", enc("hello"), "JSON"},
		{"JSON array", enc("[1,2]"), "JSON"},
		{"version 1", enc(`{"x402Version":1,"scheme":"exact","network":"base","payload":{}}`), "x402Version is 1"},
		{"no version", enc(`{"accepted":{},"payload":{}}`), "x402Version is 0"},
		{"case variant key", enc(`{"x402Version":2,"payload":{},"Payload":{}}`), "only by case"},
		{"case variant in authorization", enc(`{"x402Version":2,"payload":{"authorization":{"nonce":"0x","Nonce":"0x"}}}`), "only by case"},
		{"string timeout", enc(`{"x402Version":2,"accepted":{"maxTimeoutSeconds":"300"},"payload":{}}`), "JSON"},
		{"too long", strings.Repeat("A", MaxHeaderBytes+4), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecodePaymentHeader(tt.header)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Raw()) == 0 || !json.Valid(p.Raw()) {
				t.Fatalf("raw payload not kept: %q", p.Raw())
			}
			if _, err := p.ExactEVM(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDecodeSpecExample(t *testing.T) {
	p, err := DecodePaymentHeader(specExampleHeader)
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.ExactEVM()
	if err != nil {
		t.Fatal(err)
	}
	if p.Accepted.Amount != "10000" || p.Accepted.MaxTimeoutSeconds != 60 || p.Resource.URL != "https://api.example.com/premium-data" {
		t.Errorf("accepted = %+v resource = %+v", p.Accepted, p.Resource)
	}
	if e.Authorization.From != "0x857b06519E91e3A54538791bDbb0E22373e36b66" || e.Authorization.ValidBefore != "1740672154" {
		t.Errorf("authorization = %+v", e.Authorization)
	}
}

func TestExactEVMRefusesOtherPayloads(t *testing.T) {
	tests := map[string]string{
		"missing": ``,
		"null":    `null`,
		"permit2": `{"signature":"0x00","permit2Authorization":{"from":"0x0"}}`,
		"string":  `"x"`,
	}
	for name, payload := range tests {
		t.Run(name, func(t *testing.T) {
			p := &PaymentPayload{Payload: json.RawMessage(payload)}
			if _, err := p.ExactEVM(); err == nil {
				t.Fatal("accepted a payload that is not EIP-3009")
			}
		})
	}
}
