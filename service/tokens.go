package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// Tokens can be rotated and revoked while the server runs: a user rotates
// her own (POST /v1/me/token); the operator rotates or revokes a user's,
// creates, lists and revokes admin tokens, and revokes the configured
// admin token — over HTTP (/v1/admin/tokens, /v1/admin/token,
// /v1/admin/users/{id}/token) or with privrec serve token against the
// database. A server
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

// CreateAdminToken records a new admin token and returns it (the secret
// once; the store keeps its SHA-256). expiresMS 0: never.
func CreateAdminToken(ctx context.Context, st store.Store, label string, nowMS, expiresMS int64) (store.AdminToken, string, error) {
	var b [6]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	tok := NewToken("pra_")
	t := store.AdminToken{ID: "adm_" + hex.EncodeToString(b[:]), Label: label, Hash: TokenHash(tok), CreatedMS: nowMS, ExpiresMS: expiresMS}
	if err := st.AddAdminToken(ctx, t); err != nil {
		return store.AdminToken{}, "", err
	}
	return t, tok, nil
}

// RevokeAdminHash revokes the admin token with this SHA-256: its record,
// or — for a token the database does not know, such as the one a server
// was started with (--admin-token-file) — a new record saying it is
// revoked, which every server consults before its configured token. It
// returns the record's ID.
func RevokeAdminHash(ctx context.Context, st store.Store, h []byte, nowMS int64) (string, error) {
	t, err := st.AdminToken(ctx, h)
	switch {
	case errors.Is(err, store.ErrNotFound):
		id := "file_" + hex.EncodeToString(h[:6])
		return id, st.AddAdminToken(ctx, store.AdminToken{ID: id, Label: "the configured admin token, revoked", Hash: h, CreatedMS: nowMS, RevokedMS: max(nowMS, 1)})
	case err != nil:
		return "", err
	}
	return t.ID, st.RevokeAdminToken(ctx, t.ID, nowMS)
}

// AdminTokenInfo describes a recorded admin token for the API.
func AdminTokenInfo(t store.AdminToken, nowMS int64) api.AdminTokenInfo {
	at := func(ms int64) *time.Time {
		if ms == 0 {
			return nil
		}
		t := time.UnixMilli(ms).UTC()
		return &t
	}
	return api.AdminTokenInfo{ID: t.ID, Label: t.Label, Created: time.UnixMilli(t.CreatedMS).UTC(), Expires: at(t.ExpiresMS), Revoked: at(t.RevokedMS), Valid: t.Valid(nowMS)}
}

// forgetAdmins drops every cached admin verdict, so that a revocation
// made through this server holds at once.
func (s *Server) forgetAdmins() {
	s.admMu.Lock()
	clear(s.adm)
	s.admMu.Unlock()
}

func (s *Server) getAdminTokens(w http.ResponseWriter, r *http.Request) {
	if !s.authAdmin(w, r) {
		return
	}
	ts, err := s.st.AdminTokens(r.Context())
	if err != nil {
		s.internal(w, r, "listing admin tokens", err)
		return
	}
	now := s.opt.Now().UnixMilli()
	out := api.AdminTokenList{AdminTokens: make([]api.AdminTokenInfo, 0, len(ts))}
	for _, t := range ts {
		out.AdminTokens = append(out.AdminTokens, AdminTokenInfo(t, now))
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// newAdminToken creates an admin token from a request body and answers
// it; revoke, when set, is the caller's token hash to revoke with it
// (rotation). It answers errors itself.
func (s *Server) newAdminToken(w http.ResponseWriter, r *http.Request, revoke []byte) {
	body := jsonBody(w, r, 4096)
	if body == nil {
		return
	}
	req, e := api.DecodeAdminTokenRequest(body)
	if e != nil {
		writeError(w, e)
		return
	}
	now := s.opt.Now().UnixMilli()
	var exp int64
	if req.ExpiresInSeconds > 0 {
		exp = now + req.ExpiresInSeconds*1000
	}
	t, tok, err := CreateAdminToken(r.Context(), s.st, req.Label, now, exp)
	if err != nil {
		s.internal(w, r, "creating an admin token", err)
		return
	}
	out := api.NewAdminToken{AdminTokenInfo: AdminTokenInfo(t, now), Token: tok}
	if revoke != nil {
		// The new token is recorded first: a failure here leaves the
		// caller with her old token, never with none.
		if out.RevokedID, err = RevokeAdminHash(r.Context(), s.st, revoke, now); err != nil {
			s.internal(w, r, "revoking the old admin token", err)
			return
		}
		s.forgetAdmins()
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) postAdminTokens(w http.ResponseWriter, r *http.Request) {
	if s.authAdmin(w, r) {
		s.newAdminToken(w, r, nil)
	}
}

// postAdminToken rotates the caller's admin token: a new one is issued
// (returned once) and the caller's stops working.
func (s *Server) postAdminToken(w http.ResponseWriter, r *http.Request) {
	if s.authAdmin(w, r) {
		h := sha256.Sum256([]byte(bearer(r)))
		s.newAdminToken(w, r, h[:])
	}
}

func (s *Server) deleteAdminToken(w http.ResponseWriter, r *http.Request) {
	if !s.authAdmin(w, r) {
		return
	}
	id := r.PathValue("id")
	now := s.opt.Now().UnixMilli()
	err := s.st.RevokeAdminToken(r.Context(), id, now)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Field: "id", Message: fmt.Sprintf("no admin token %q (GET %s lists them)", api.Truncate(id), api.PathAdminTokens)})
		return
	}
	if err != nil {
		s.internal(w, r, "revoking an admin token", err)
		return
	}
	s.forgetAdmins()
	ts, err := s.st.AdminTokens(r.Context())
	if err != nil {
		s.internal(w, r, "revoking an admin token", err)
		return
	}
	for _, t := range ts {
		if t.ID == id {
			writeJSON(w, http.StatusOK, AdminTokenInfo(t, now))
			return
		}
	}
	s.internal(w, r, "revoking an admin token", serverFault{fmt.Errorf("admin token %s vanished after its revocation", id)})
}

// postUserToken rotates a named user's token (the admin's POST
// /v1/me/token for her): the new one is returned once.
func (s *Server) postUserToken(w http.ResponseWriter, r *http.Request) {
	if !s.authAdmin(w, r) || !emptyBody(w, r) {
		return
	}
	id := r.PathValue("id")
	tok := NewToken("prt_")
	err := s.st.SetUserToken(r.Context(), id, TokenHash(tok), s.tokenExpiry())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, noSuchUser(id))
		return
	}
	if err != nil {
		s.internal(w, r, "rotating a user's token", err)
		return
	}
	s.forgetUser(id)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, api.Enrolment{User: id, Token: tok})
}

// deleteUserToken revokes a named user's token: she can no longer call
// the API until the admin rotates it.
func (s *Server) deleteUserToken(w http.ResponseWriter, r *http.Request) {
	if !s.authAdmin(w, r) {
		return
	}
	id := r.PathValue("id")
	now := s.opt.Now()
	err := s.st.RevokeUserToken(r.Context(), id, now.UnixMilli())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, noSuchUser(id))
		return
	}
	if err != nil {
		s.internal(w, r, "revoking a user's token", err)
		return
	}
	s.forgetUser(id)
	writeJSON(w, http.StatusOK, api.UserTokenRevocation{User: id, Revoked: time.UnixMilli(now.UnixMilli()).UTC()})
}
