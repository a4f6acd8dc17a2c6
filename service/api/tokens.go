package api

import (
	"io"
	"time"
)

// Paths of the admin token endpoints.
const (
	// PathAdminTokens: GET lists the admin tokens recorded in the
	// database, POST creates one; + "/{id}": DELETE revokes one.
	PathAdminTokens = "/v1/admin/tokens"
	// PathAdminToken: POST rotates the caller's own admin token.
	PathAdminToken = "/v1/admin/token"
	// PathAdminUsers + "/{id}/token": POST rotates a user's token,
	// DELETE revokes it.
)

// MaxTokenLabel bounds an admin token's label.
const MaxTokenLabel = 200

// AdminTokenRequest is the body of POST /v1/admin/tokens and POST
// /v1/admin/token: what the new token is for, and when it expires
// (0 or absent: never).
type AdminTokenRequest struct {
	Label            string `json:"label,omitempty"`
	ExpiresInSeconds int64  `json:"expires_in_seconds,omitempty"`
}

// AdminTokenInfo describes a recorded admin token; never its secret or
// its hash.
type AdminTokenInfo struct {
	ID      string     `json:"id"`
	Label   string     `json:"label"`
	Created time.Time  `json:"created"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
	Valid   bool       `json:"valid"`
}

// NewAdminToken is the answer to creating or rotating an admin token:
// the secret, shown once (the server keeps its SHA-256).
type NewAdminToken struct {
	AdminTokenInfo
	Token string `json:"token"`
	// RevokedID is, on a rotation, the ID under which the caller's old
	// token is now recorded as revoked.
	RevokedID string `json:"revoked_id,omitempty"`
}

// AdminTokenList is GET /v1/admin/tokens.
type AdminTokenList struct {
	AdminTokens []AdminTokenInfo `json:"admin_tokens"`
}

// UserTokenRevocation is the answer to DELETE /v1/admin/users/{id}/token.
type UserTokenRevocation struct {
	User    string    `json:"user"`
	Revoked time.Time `json:"revoked"`
}

// DecodeAdminTokenRequest reads an admin token request strictly; an empty
// body is the empty request.
func DecodeAdminTokenRequest(r io.Reader) (AdminTokenRequest, *Error) {
	var req AdminTokenRequest
	b, err := io.ReadAll(r)
	if err != nil {
		return req, jsonError(err)
	}
	if len(b) > 0 {
		if e := decodeStrictBytes(b, &req); e != nil {
			return req, e
		}
	}
	switch {
	case len(req.Label) > MaxTokenLabel:
		return req, BadRequest(CodeOutOfRange, "label", "label has %d bytes; at most %d", len(req.Label), MaxTokenLabel)
	case req.ExpiresInSeconds < 0 || req.ExpiresInSeconds > 100*365*24*3600:
		return req, BadRequest(CodeOutOfRange, "expires_in_seconds", "expires_in_seconds = %d: want 0 (never) to 100 years", req.ExpiresInSeconds)
	}
	return req, nil
}
