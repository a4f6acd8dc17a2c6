package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Tokens can be rotated and revoked while the server runs: a user rotates
// her own (POST /v1/me/token); the operator rotates or revokes a user's,
// creates, lists and revokes admin tokens, and revokes the configured
// admin token, with privrec serve token against the database. A server
// keeps what it learnt of a token for at most authTTL, so a change made
// by another process (the CLI, another server on the same PostgreSQL)
// takes effect within authTTL; one made through this server at once.
const authTTL = 5 * time.Second

// authEntry is a cached user token.
type authEntry struct {
	id        string
	expiresMS int64 // 0: never
	at        time.Time
}

// admEntry is a cached admin verdict.
type admEntry struct {
	ok, known bool
	at        time.Time
}

// NewToken makes a fresh secret token with a prefix ("prt_" for users,
// "pra_" for admins): 256 random bits.
func NewToken(prefix string) string {
	var b [32]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// tokenExpiry is when a token issued now expires (0: never).
func (s *Server) tokenExpiry() int64 {
	if s.opt.UserTokenTTL <= 0 {
		return 0
	}
	return s.opt.Now().Add(s.opt.UserTokenTTL).UnixMilli()
}

// userOf resolves a user token's hash: her ID, or the error to answer
// (401 for an unknown, revoked or expired token).
func (s *Server) userOf(ctx context.Context, h [32]byte) (string, *api.Error) {
	now := s.opt.Now()
	s.authMu.RLock()
	e, ok := s.auth[h]
	s.authMu.RUnlock()
	if !ok || now.Sub(e.at) >= authTTL || now.Before(e.at) {
		u, err := s.st.UserByToken(ctx, h[:])
		if errors.Is(err, store.ErrNotFound) {
			s.forget(h)
			return "", &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: "unknown token"}
		}
		if err != nil {
			return "", &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, Message: err.Error()}
		}
		if u.TokenRevokedMS != 0 {
			s.forget(h)
			return "", &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: "this token was revoked"}
		}
		e = authEntry{id: u.ID, expiresMS: u.TokenExpiresMS, at: now}
		s.authMu.Lock()
		if len(s.auth) >= 1<<20 {
			clear(s.auth)
		}
		s.auth[h] = e
		s.authMu.Unlock()
	}
	if e.expiresMS != 0 && now.UnixMilli() >= e.expiresMS {
		return "", &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized,
			Message: "this token expired at " + time.UnixMilli(e.expiresMS).UTC().Format(time.RFC3339) + "; ask the operator for a new one"}
	}
	return e.id, nil
}

// forget drops a cached token.
func (s *Server) forget(h [32]byte) {
	s.authMu.Lock()
	delete(s.auth, h)
	s.authMu.Unlock()
}

// adminOK judges an admin token's hash: ok, and whether the database
// knows it (a known token is judged by its record alone).
func (s *Server) adminOK(ctx context.Context, h [32]byte) (ok, known bool, err error) {
	now := s.opt.Now()
	s.admMu.Lock()
	e, cached := s.adm[h]
	s.admMu.Unlock()
	if cached && now.Sub(e.at) < authTTL && !now.Before(e.at) {
		return e.ok, e.known, nil
	}
	t, err := s.st.AdminToken(ctx, h[:])
	switch {
	case errors.Is(err, store.ErrNotFound):
		e = admEntry{ok: s.isAdm && subtle.ConstantTimeCompare(h[:], s.admin[:]) == 1}
	case err != nil:
		return false, false, err
	default:
		e = admEntry{ok: t.Valid(now.UnixMilli()), known: true}
	}
	e.at = now
	s.admMu.Lock()
	if len(s.adm) >= 1024 {
		clear(s.adm)
	}
	s.adm[h] = e
	s.admMu.Unlock()
	return e.ok, e.known, nil
}

// postMyToken rotates the caller's token: a new one is issued and
// returned once, and the old one stops working.
func (s *Server) postMyToken(w http.ResponseWriter, r *http.Request) {
	id, ok := s.authUser(w, r)
	if !ok {
		return
	}
	if !emptyBody(w, r) {
		return
	}
	tok := NewToken("prt_")
	h := sha256.Sum256([]byte(tok))
	exp := s.tokenExpiry()
	if err := s.st.SetUserToken(r.Context(), id, h[:], exp); err != nil {
		s.internal(w, r, "rotating the token", err)
		return
	}
	s.forget(sha256.Sum256([]byte(bearer(r))))
	w.Header().Set("Cache-Control", "no-store")
	out := api.Enrolment{User: id, Token: tok}
	writeJSON(w, http.StatusCreated, out)
}

// emptyBody reads a request body that must be the empty object {} (enrol,
// token rotation), answering the error itself when it is not.
func emptyBody(w http.ResponseWriter, r *http.Request) bool {
	body := jsonBody(w, r, 1024)
	if body == nil {
		return false
	}
	if e := api.DecodeEmpty(body); e != nil {
		writeError(w, e)
		return false
	}
	return true
}
