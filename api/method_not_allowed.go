package api

import (
	"cmp"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// routeMethods are the methods a route might allow, in the order an Allow header lists them.
// chi routes nothing else, so these are all a path can answer to.
var routeMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace,
}

// methodNotAllowed answers a request whose path has routes, none of them for its method: a 405
// whose Allow header lists the methods that path does take, as RFC 9110 requires. chi also
// sends here a method it does not know at all (FOO /rides), whatever the path; for a path that no
// method reaches that is a 404, as it would be for GET.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	allowed := allowedMethods(r)
	if len(allowed) == 0 {
		writeProblem(w, errNotFound("No such route."))
		return
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeProblem(w, errMethodNotAllowed(r.Method))
}

// allowedMethods asks the router that is serving r which methods it routes r's path for. The
// router is asked rather than given a list, so that a new route cannot be left out of Allow.
func allowedMethods(r *http.Request) []string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil || rctx.Routes == nil {
		return nil
	}
	// The path chi routed by (see chi's Mux.routeHTTP).
	path := rctx.RoutePath
	if path == "" {
		path = cmp.Or(r.URL.RawPath, r.URL.Path, "/")
	}
	var allowed []string
	for _, method := range routeMethods {
		if rctx.Routes.Match(chi.NewRouteContext(), method, path) {
			allowed = append(allowed, method)
		}
	}
	return allowed
}
