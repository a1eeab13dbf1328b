// Package x402 makes boxer's routes payable per call with the x402 protocol
// (version 2, HTTP transport): scheme "exact" on an EVM chain, paid by an
// EIP-3009 transferWithAuthorization of a token such as USDC on Base, and,
// when configured, scheme "exact" on Solana beside it (svm.go): a partially
// signed SPL TransferChecked that the facilitator co-signs as fee payer.
//
// It owns the protocol types and their base64 header encoding, the offer of
// each priced route (requirements and the bazaar discovery extension), the
// cheap local checks of a payment (requirements echo, recipient, amount,
// time window, EIP-712 signature recovery), the facilitator client
// (POST /verify, POST /settle) and the middleware that ties them together.
// Used payments are remembered through the NonceStore interface, which
// internal/store implements.
//
// # One paid request
//
//	client                       Payments.Wrap                 facilitator    handler
//	  |-- POST (no payment) ------>|                                 |             |
//	  |<-- 402 PAYMENT-REQUIRED ---|  (JSON PaymentRequired in body) |             |
//	  |-- POST PAYMENT-SIGNATURE ->|                                 |             |
//	  |                            | decode, local checks            |             |
//	  |                            | in-flight claim (payer+nonce)   |             |
//	  |                            | NonceStore.UseNonce             |             |
//	  |                            |-- /verify (own requirements) -->|             |
//	  |                            |<-- isValid ---------------------|             |
//	  |                            |-- run, response BUFFERED ---------------------->|
//	  |                            |<-- status, headers, body ------------------------|
//	  |                            |-- /settle (2xx only) ---------->|             |
//	  |                            |<-- success, transaction --------|             |
//	  |<-- 2xx + PAYMENT-RESPONSE -|                                 |             |
//
// # When the caller is charged
//
// Settlement happens after the run and before its output is released, so no
// one gets output without paying and no one pays for output they did not get:
//
//   - Handler answered 2xx (the program ran; a nonzero exit, a timeout or an
//     OOM are outcomes, answered 2xx): settle, then release the buffered
//     answer with PAYMENT-RESPONSE. If settlement fails or its outcome is
//     unknown, answer 402 with the reason (and the failed settlement in
//     PAYMENT-RESPONSE) and withhold the output. A settlement_pending
//     answer with a transaction (the transfer went out, its receipt came
//     late) is asked once more with the same payment, as the official
//     resource server does; the facilitator then waits for that transfer
//     instead of sending another, so the retry never charges twice. A
//     second pending answer withholds the output like any unsettled one,
//     though the transfer may still land: the log names it.
//   - Handler answered 5xx (boxer failed) or 429 (busy), or any other non-2xx
//     (the request was refused before running): pass the answer through and
//     do not settle. The caller is not charged.
//   - A refused payment (missing, malformed, wrong requirements, bad
//     signature, expired, replayed, refused by the facilitator) is a 402 and
//     the handler never runs. A facilitator that cannot be reached is a 503.
//
// A payment is single-use from the moment it passes the local checks, even
// when boxer then fails: a failed run leaves it unsettled, and the caller
// signs a new one for the retry.
//
// # Interop rules this package keeps
//
//   - amount is a JSON string, maxTimeoutSeconds a JSON number, x402Version
//     the number 2, extra exactly {name, version}.
//   - Headers are standard padded base64 of JSON, without newlines.
//   - The client's "accepted" echo is compared field by field, never as
//     bytes; its resource and extensions echoes are tolerated.
//   - The facilitator gets the client's payload unchanged and the route's
//     own requirements: sending the client's echo back would let an
//     underpayment through, since the facilitator checks the signed value
//     against the requirements it is given.
//   - A facilitator refuses with HTTP 200 and isValid/success false.
//   - Signatures are low-s only with v in {27, 28}; the facilitator does not
//     check this off chain.
//   - A payment sent twice at once runs the handler once: the second copy is
//     refused while the first is in flight.
//
// x402 v1 (X-PAYMENT, requirements in the body) is refused with a clear
// reason; the 402 body is the v2 PaymentRequired JSON.
//
// # Discovery
//
// Payments.Discovery is GET /.well-known/x402: one item per priced route,
// built from the same offer as its 402 challenge (discovery.go says which
// drafts its shape follows), so a catalog never lists a price the route
// does not ask.
//
// # The facilitator's health
//
// boxer asks the facilitator's GET /supported at start (CheckFacilitator)
// and then in the background (WatchFacilitator). An answer that does not
// list x402 v2, exact, on the configured network is a configuration
// error: serve refuses to start (ErrUnsupported). No answer, or an error
// answer, is an outage: boxer serves, Ready fails (GET /readyz answers 503,
// so a balancer sends calls elsewhere), and it asks again after 1 s,
// doubling to every 30 s, and every 5 minutes once it answers. Paid calls
// during an outage fail as before, uncharged.
package x402
