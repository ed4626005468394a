package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/models"
)

type contextKey int

const userContextKey contextKey = iota

// userFrom returns the user that authenticate put in the request's context.
func userFrom(ctx context.Context) *models.User {
	return ctx.Value(userContextKey).(*models.User)
}

// authenticate lets a request through only with a valid "Authorization: Bearer <token>", sent
// once. It runs as soon as the headers are in, before any body is read. A token the API did not
// issue (no valid MAC under its token key) is refused without a lookup, so that made-up tokens
// cost the database nothing, whoever sends them.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header.Values("Authorization")) > 1 {
			writeProblem(w, errDuplicateHeader("Authorization"))
			return
		}

		// RFC 7235 allows one or more spaces between the scheme and the token.
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimLeft(token, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			writeProblem(w, errUnauthorized("Send your API token as \"Authorization: Bearer <token>\"."))
			return
		}
		if !s.tokenKey.Issued(token) {
			writeProblem(w, errUnauthorized("The API token is not valid."))
			return
		}

		ctx, cancel := context.WithTimeout(r.Context(), s.readTimeout)
		user, err := models.UserGetByAPITokenHash(ctx, s.pool, authtoken.Hash(token))
		cancel()
		if errors.Is(err, models.ErrNotFound) {
			writeProblem(w, errUnauthorized("The API token is not valid."))
			return
		}
		if err != nil {
			s.logger.ErrorContext(r.Context(), "API: failed to authenticate", slog.String("error", err.Error()))
			if models.IsUnavailable(err) {
				writeProblem(w, errDatabaseUnavailable())
				return
			}
			writeProblem(w, errInternal())
			return
		}

		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userContextKey, user)))
	})
}

// recoverPanics turns a panic in a handler into a 500 problem instead of a dropped connection.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger.ErrorContext(r.Context(), "API: panic serving request", slog.Any("panic", v))
				writeProblem(w, errInternal())
			}
		}()
		next.ServeHTTP(w, r)
	})
}
