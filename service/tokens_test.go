package service_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestTokens: tokens are rotated, revoked and expire while the server
// runs. A user rotates her own (the old one fails at once); the operator
// revokes and rotates hers and creates, expires and revokes admin tokens
// in the database (as privrec serve token does), including the token the
// server was started with; the server follows within 5 s.
func TestTokens(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			opt := localOptions(t, 4)
			opt.Now, opt.UserTokenTTL = clk.Now, time.Hour
			s := newTestServer(t, kind, opt)
			c := s.client("")
			e, err := c.Enroll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			old := c.Token
			if _, err := c.RotateToken(ctx); err != nil {
				t.Fatal(err)
			}
			if c.Token == old {
				t.Fatal("rotation kept the token")
			}
			if _, err := s.client(old).Status(ctx); err == nil {
				t.Fatal("the rotated-out token still works")
			}
			if st, err := c.Status(ctx); err != nil || st.User != e.User {
				t.Fatalf("the new token: %+v, %v", st, err)
			}
			// Expiry: an hour after the rotation.
			clk.Add(61 * time.Minute)
			_, err = c.Status(ctx)
			wantStatus(t, "an expired token", err, http.StatusUnauthorized)
			if !strings.Contains(err.Error(), "expired") {
				t.Fatalf("the refusal does not say expired: %v", err)
			}
			// The operator gives her a new token, then revokes it.
			tok := service.NewToken("prt_")
			if err := s.st.SetUserToken(ctx, e.User, service.TokenHash(tok), 0); err != nil {
				t.Fatal(err)
			}
			c.Token = tok
			if _, err := c.Status(ctx); err != nil {
				t.Fatalf("the operator's new token: %v", err)
			}
			if err := s.st.RevokeUserToken(ctx, e.User, clk.Now().UnixMilli()); err != nil {
				t.Fatal(err)
			}
			clk.Add(6 * time.Second)
			_, err = c.Status(ctx)
			wantStatus(t, "a revoked token", err, http.StatusUnauthorized)
			// Admin tokens: the configured one works until recorded
			// revoked; a created one works until it expires.
			admin := s.client(adminToken)
			if _, err := admin.Stats(ctx); err != nil {
				t.Fatal(err)
			}
			next := service.NewToken("pra_")
			if err := s.st.AddAdminToken(ctx, store.AdminToken{ID: "adm_1", Label: "ops", Hash: service.TokenHash(next),
				CreatedMS: clk.Now().UnixMilli(), ExpiresMS: clk.Now().Add(time.Hour).UnixMilli()}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.client(next).Stats(ctx); err != nil {
				t.Fatalf("a created admin token: %v", err)
			}
			if err := s.st.AddAdminToken(ctx, store.AdminToken{ID: "file_1", Hash: service.TokenHash(adminToken),
				CreatedMS: clk.Now().UnixMilli(), RevokedMS: clk.Now().UnixMilli()}); err != nil {
				t.Fatal(err)
			}
			clk.Add(6 * time.Second)
			_, err = admin.Stats(ctx)
			wantStatus(t, "the revoked configured admin token", err, http.StatusUnauthorized)
			if _, err := s.client(next).Stats(ctx); err != nil {
				t.Fatalf("the new admin token after revoking the old: %v", err)
			}
			clk.Add(time.Hour)
			_, err = s.client(next).Stats(ctx)
			wantStatus(t, "an expired admin token", err, http.StatusUnauthorized)
			if err := s.st.RevokeAdminToken(ctx, "nope", 1); err != store.ErrNotFound {
				t.Fatalf("revoking an unknown admin token: %v", err)
			}
		})
	}
}
