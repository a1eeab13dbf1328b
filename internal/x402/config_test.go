package x402

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c *Config)
		wantErr string // "" means valid
	}{
		{name: "default is off and valid", edit: func(c *Config) { *c = DefaultConfig() }},
		{name: "complete x402"},
		{name: "unknown mode", edit: func(c *Config) { c.Mode = "on" }, wantErr: "--payments"},
		{name: "no pay-to", edit: func(c *Config) { c.PayTo = "" }, wantErr: "--x402-pay-to"},
		{name: "bad pay-to", edit: func(c *Config) { c.PayTo = "0x123" }, wantErr: "--x402-pay-to"},
		{name: "zero pay-to", edit: func(c *Config) { c.PayTo = "0x" + strings.Repeat("0", 40) }, wantErr: "zero address"},
		{name: "no facilitator", edit: func(c *Config) { c.FacilitatorURL = "" }, wantErr: "--x402-facilitator-url"},
		{name: "facilitator not http", edit: func(c *Config) { c.FacilitatorURL = "ftp://x" }, wantErr: "--x402-facilitator-url"},
		{name: "bad auth header", edit: func(c *Config) { c.FacilitatorAuthHeader = "Bearer x" }, wantErr: "Name: value"},
		{name: "good auth header", edit: func(c *Config) { c.FacilitatorAuthHeader = "Authorization: Bearer x" }},
		{name: "not eip155", edit: func(c *Config) { c.Network = "base" }, wantErr: "--x402-network"},
		{name: "bad asset", edit: func(c *Config) { c.Asset = "USDC" }, wantErr: "--x402-asset"},
		{name: "no asset name", edit: func(c *Config) { c.AssetName = "" }, wantErr: "--x402-asset-name"},
		{name: "margin over timeout", edit: func(c *Config) { c.ValidityMargin = 300 * time.Second }, wantErr: "validity margin"},
		{name: "zero price", edit: func(c *Config) { c.Routes[0].Price = "0" }, wantErr: "price is zero"},
		{name: "price too precise", edit: func(c *Config) { c.Routes[0].Price = "0.0000001" }, wantErr: "decimals"},
		{name: "duplicate route", edit: func(c *Config) { c.Routes[1].Path = c.Routes[0].Path }, wantErr: "twice"},
		{name: "bad example", edit: func(c *Config) { c.Routes[0].InputExample = []byte("{") }, wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig()
			if tt.edit != nil {
				tt.edit(&c)
			}
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestAtomicAmount(t *testing.T) {
	tests := []struct {
		price string
		want  string // "" means an error
	}{
		{"0.02", "20000"},
		{"$0.01", "10000"},
		{"1", "1000000"},
		{"1.5", "1500000"},
		{".5", "500000"},
		{"0.000001", "1"},
		{"0.0000010", "1"},
		{"0.0000001", ""},
		{"", ""},
		{"$", ""},
		{".", ""},
		{"-1", ""},
		{"1e-2", ""},
		{"0,02", ""},
		{"1.2.3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.price, func(t *testing.T) {
			n, err := AtomicAmount(tt.price, 6)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("accepted: %s", n)
				}
				return
			}
			if err != nil || n.String() != tt.want {
				t.Fatalf("got %v, %v; want %s", n, err, tt.want)
			}
		})
	}
}
