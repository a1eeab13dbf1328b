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
//   - Handler answered with work an earlier request paid for (a job_id's
//     kept result, or word that its run is under way) and said so with
//     Waive: pass the answer through and do not settle.
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
// # Payment identifiers (the payment-identifier extension)
//
// Every 402 declares payment-identifier with info.required false, as the
// official declarePaymentIdentifierExtension(false) does. A payment whose
// extensions["payment-identifier"].info.id holds an id makes its request
// idempotent for its payer (paymentid_serve.go):
//
//   - The id must be 16 to 128 of [A-Za-z0-9_-]; anything else, or a
//     malformed extension, is 400 invalid_payment_id before anything runs.
//   - The key is payer + id, the payer recovered from the signature by the
//     local checks, which a request must pass first: an id never returns
//     another payer's answer, whatever the id.
//   - "The same request" is the route, method, path, query, Accept header,
//     body bytes and the payment's terms (network, asset, recipient,
//     amount): the fingerprint. Not the signature, nonce or validity: the
//     official client answers every attempt's 402 with a new signature
//     under the same id, and that is a retry. (The official example
//     servers hash the whole payload, signature included, which turns the
//     official client's own retry into a conflict.)
//   - First request: the id is claimed in the PaymentIDStore (one atomic
//     insert, pending for a lease), then served as any paid request. A
//     settled answer (2xx; serve answers 2xx only once settled) is kept
//     with its PAYMENT-RESPONSE; anything else (5xx, 429, a refused
//     payment, a failed settlement, a caller gone) releases the id, so
//     the retry runs. A paid answer over MaxAnswerBytes is sent once and
//     its retry answered 410 result_not_kept.
//   - Same id, same fingerprint, answered: the kept status, headers and
//     body, with Idempotent-Replayed: true. Nothing runs, nothing is
//     verified or settled; the retry's own payment is marked used, so it
//     can pay for nothing else.
//   - Same id, another fingerprint: 409 payment_id_conflict.
//   - Same id at once: in this process the later requests wait for the
//     first one's answer and get it; a pending claim of another node is
//     409 payment_id_in_flight (retry shortly), and so is one of this
//     process whose paid answer the store failed to keep (until its lease
//     ends); a pending claim of this node older than this process was
//     left by a process that died, and is taken over. (A process that
//     dies between settling and keeping the answer leaves a claim whose
//     retry runs and is charged again: the one window left.)
//   - Kept answers expire after Retention (24 h; the id is then new
//     again), pending claims after Lease; the api's janitor prunes both.
//
// With job_id (POST /v1/run-python), the two keys are both per payer and
// nest: a retry under the same payment id never reaches the job; a new
// payment id with a job_id already run or running reaches it, gets its kept
// result (or 202 while it runs), and is not charged (Waive), nor kept under
// the id, so the id's retry asks the job again. A job is charged once, to
// the payer whose request ran it. An async job's first 202 is kept under its
// payment id like any paid answer: its result is asked for with a new id
// (or none), which is free.
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
// during an outage fail as before, uncharged. Solana is the exception
// once serving: a facilitator that stops listing it (or its fee payer)
// withdraws it from the challenges and leaves the node ready, the EVM
// payment still working; listed again, it is offered again.
package x402
