package phases

// HTTP status codes of the responses this package stores. They are plain numbers because the
// state machine knows nothing of HTTP; the API serves whatever was stored.
const (
	statusOK                  = 200
	statusCreated             = 201
	statusNotFound            = 404
	statusConflict            = 409
	statusPaymentRequired     = 402
	statusInternalServerError = 500
)

// methodPost is the method of every request this package runs, stored on its key.
const methodPost = "POST"
