package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// uiRealm names River's UI in the browser's login prompt.
const uiRealm = "Rocket Rides: River's UI"

// requireBasicAuth answers every request to next that lacks username and password with 401 and
// the challenge that makes a browser ask for them. With no username configured, next is
// returned as it is: checkUIAccess allows that on loopback alone.
func requireBasicAuth(next http.Handler, username, password string) http.Handler {
	if username == "" {
		return next
	}
	wantUser, wantPassword := sha256.Sum256([]byte(username)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, password, _ := r.BasicAuth()
		// Digests of equal length, both compared every time: how long a refusal takes tells
		// neither which part was wrong nor how much of it matched.
		gotUser, gotPassword := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
		if subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPassword[:], wantPassword[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+uiRealm+`", charset="UTF-8"`)
			http.Error(w, "River's UI asks for the UI_USERNAME and UI_PASSWORD it was started with", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
