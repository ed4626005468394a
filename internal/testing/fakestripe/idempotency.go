package fakestripe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
)

// idempotencyStore keeps Stripe's idempotent results. Per account (here: API key) and
// Idempotency-Key it holds the first request that began executing and, once it finished, the
// answer it got, so that a client retrying after a lost response gets that same answer instead
// of a second charge. Stripe forgets keys after 24 hours; this store keeps them until Reset.
type idempotencyStore struct {
	mu       sync.Mutex
	requests map[idempotencyScope]*idempotentRequest
}

type idempotencyScope struct {
	account string // a digest of the API key, which a journal may hold where the key may not go
	key     string
}

type idempotentRequest struct {
	endpoint  string // method and path the key was first used with
	params    string // canonical encoding of the decoded parameters it was first used with
	requestID string
	finished  bool
	result    result // valid once finished
}

func newIdempotencyStore() *idempotencyStore {
	return &idempotencyStore{requests: make(map[idempotencyScope]*idempotentRequest)}
}

func (st *idempotencyStore) reset() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests = make(map[idempotencyScope]*idempotentRequest)
}

// do runs h for req under Stripe's rules: a key seen before with the same endpoint and
// parameters replays the saved answer; with another endpoint or other parameters it is a 400
// idempotency_error; while the first request is still executing it is a 409. Parameters are
// compared decoded, so the order a client encodes them in does not matter. A result that is not
// saved (see result.saved) releases the key for a retry.
func (st *idempotencyStore) do(req *apiRequest, h handlerFunc) result {
	scope := idempotencyScope{account: accountOf(req.apiKey), key: req.idempotencyKey}
	// url.Values.Encode sorts by key, which makes it canonical for the comparison.
	params := req.params.Encode()

	st.mu.Lock()
	if prev, ok := st.requests[scope]; ok {
		res := prev.answer(req, params)
		st.mu.Unlock()
		return res
	}
	claim := &idempotentRequest{endpoint: req.endpoint(), params: params, requestID: req.id}
	st.requests[scope] = claim
	st.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // h panicked: release the key rather than answer 409 forever
			st.release(scope)
		}
	}()

	res := h(req)

	if res.saved {
		st.mu.Lock()
		claim.finished = true
		claim.result = res
		st.mu.Unlock()
		req.changes.Idempotent = &idempotentRecord{
			Account: scope.account, Key: scope.key, Endpoint: claim.endpoint, Params: claim.params,
			RequestID: claim.requestID, Status: res.status, Body: res.body,
		}
	} else {
		st.release(scope)
	}
	finished = true
	return res
}

func (st *idempotencyStore) release(scope idempotencyScope) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.requests, scope)
}

// answer is what a request reusing the key of prev gets. Must be called with the store's lock.
func (prev *idempotentRequest) answer(req *apiRequest, params string) result {
	key := req.idempotencyKey
	switch {
	case !prev.finished:
		return rejected(newAPIError(http.StatusConflict, errorTypeIdempotency, "idempotency_key_in_use", "",
			fmt.Sprintf("There is currently another in-progress request using this Idempotency Key "+
				"(that probably means you submitted twice, and the other request is still going through): %s. "+
				"Please try again later.", key)))
	case prev.endpoint != req.endpoint():
		return rejected(newAPIError(http.StatusBadRequest, errorTypeIdempotency, "", "",
			fmt.Sprintf("Keys for idempotent requests can only be used for the same endpoint they were "+
				"first used for ('%s' vs '%s'). Try using a key other than '%s' if you meant to execute "+
				"a different request.", prev.endpoint, req.endpoint(), key)))
	case prev.params != params:
		return rejected(newAPIError(http.StatusBadRequest, errorTypeIdempotency, "", "",
			fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were "+
				"first used with. Try using a key other than '%s' if you meant to execute a different request.", key)))
	}
	res := prev.result
	res.replayed = true
	res.originalRequestID = prev.requestID
	return res
}

// accountOf names the account an API key belongs to: one per key, as the stand-in models it.
func accountOf(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:])
}
