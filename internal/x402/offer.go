package x402

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// offer is what one priced route asks for, computed once from Config.
type offer struct {
	route  Route
	req    PaymentRequirements
	domain Domain
	payTo  Address
	asset  Address
	bazaar Extension
	svm    *svmOffer // nil unless Solana is offered
}

// newOffer builds a route's requirements and bazaar extension. cfg must have
// passed Validate.
func newOffer(cfg *Config, r Route) (*offer, error) {
	amount, err := AtomicAmount(r.Price, cfg.AssetDecimals)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", r.Path, err)
	}
	chainID, err := ChainID(cfg.Network)
	if err != nil {
		return nil, err
	}
	payTo, err := ParseAddress(cfg.PayTo)
	if err != nil {
		return nil, err
	}
	asset, err := ParseAddress(cfg.Asset)
	if err != nil {
		return nil, err
	}
	if r.Method == "" {
		r.Method = http.MethodPost
	}
	o := &offer{
		route: r,
		// Addresses go out in EIP-55 form, the form the official client
		// signs, so that its "accepted" echo matches byte for byte too.
		req: PaymentRequirements{
			Scheme:            SchemeExact,
			Network:           cfg.Network,
			Amount:            amount.String(),
			Asset:             asset.String(),
			PayTo:             payTo.String(),
			MaxTimeoutSeconds: cfg.MaxTimeoutSeconds,
			Extra:             &AssetExtra{Name: cfg.AssetName, Version: cfg.AssetVersion},
		},
		domain: Domain{Name: cfg.AssetName, Version: cfg.AssetVersion, ChainID: chainID, VerifyingContract: asset},
		payTo:  payTo,
		asset:  asset,
	}
	o.bazaar = bazaarExtension(r)
	return o, nil
}

// bazaarExtension describes a body-method HTTP route for discovery catalogs:
// info holds an example call and answer, schema validates info (JSON Schema
// draft 2020-12), as the bazaar extension spec and the discovery records
// boxer is modelled on have it.
func bazaarExtension(r Route) Extension {
	orEmpty := func(j json.RawMessage) json.RawMessage {
		if len(j) == 0 {
			return json.RawMessage(`{}`)
		}
		return j
	}
	info := map[string]any{
		"input": map[string]any{
			"type":     "http",
			"method":   r.Method,
			"bodyType": "json",
			"body":     orEmpty(r.InputExample),
		},
		"output": map[string]any{
			"type":    "json",
			"example": orEmpty(r.OutputExample),
		},
	}
	schema := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"input": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"type":     map[string]any{"type": "string", "const": "http"},
					"method":   map[string]any{"type": "string", "enum": []string{r.Method}},
					"bodyType": map[string]any{"type": "string", "enum": []string{"json", "form-data", "text"}},
					"body":     orEmpty(r.BodySchema),
				},
				"required":             []string{"type", "method", "bodyType", "body"},
				"additionalProperties": false,
			},
			"output": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"type":    map[string]any{"type": "string"},
					"example": map[string]any{"type": "object"},
				},
				"required": []string{"type"},
			},
		},
		"required": []string{"input"},
	}
	return Extension{Info: info, Schema: schema}
}

// resourceURL is the absolute URL of the route as the caller sees it.
func resourceURL(publicURL string, r *http.Request, path string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/") + path
	}
	scheme := "http"
	if r != nil && r.TLS != nil {
		scheme = "https"
	}
	host := "localhost"
	if r != nil && r.Host != "" {
		host = r.Host
	}
	return scheme + "://" + host + path
}

// paymentRequired is the challenge for this route, with reason as its error.
func (o *offer) paymentRequired(publicURL string, r *http.Request, reason string) *PaymentRequired {
	return &PaymentRequired{
		X402Version: Version,
		Error:       reason,
		Resource: ResourceInfo{
			URL:         resourceURL(publicURL, r, o.route.Path),
			Description: o.route.Description,
			MimeType:    "application/json",
		},
		Accepts:    o.accepts(),
		Extensions: map[string]Extension{"bazaar": o.bazaar, ExtensionPaymentIdentifier: paymentIdentifierExtension()},
	}
}

// accepts lists the ways to pay: the EVM one, then Solana's once its fee
// payer is known.
func (o *offer) accepts() []PaymentRequirements {
	if o.svm != nil {
		if req, ok := o.svm.requirements(); ok {
			return []PaymentRequirements{o.req, req}
		}
	}
	return []PaymentRequirements{o.req}
}
