package phases

// HTTP status codes of the responses this package stores. They are plain numbers because the
// state machine knows nothing of HTTP; the API serves whatever was stored.
const (
	statusCreated             = 201
	statusPaymentRequired     = 402
	statusInternalServerError = 500
)
