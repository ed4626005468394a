package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the API's contract, built into the binary so that the document a server
// serves is the one it was built and tested with. The api package's tests validate every
// response they get against it.
//
//go:embed openapi.yaml
var openAPIDocument []byte

// openAPIContentType is application/yaml (RFC 9512), which every YAML tool and HTTP client
// knows, rather than the OpenAPI Initiative's application/vnd.oai.openapi: that one names the
// document's kind more precisely, but few clients recognise it, and an integrator's browser or
// code generator gains nothing from it since the document says its version itself.
const openAPIContentType = "application/yaml"

// openAPI is GET /openapi.yaml: the contract of this server, for an integrator or a code
// generator. Like the health checks it needs no token and is never shed or rate limited: it
// is a constant in memory and costs nothing to serve.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeBody(w, http.StatusOK, openAPIContentType, openAPIDocument)
}
