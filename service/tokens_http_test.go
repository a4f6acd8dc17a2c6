package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestAdminTokensHTTP: an admin rotates and revokes admin and user tokens
// over HTTP, without a restart and without database access, and each
// change holds at once on the server that made it: a created token
// works, a revoked one gets 401, rotating the configured token leaves
// only the new one, a user's revoked token is refused until the admin
// rotates it, and her reports survive. Bad requests change nothing.
func TestAdminTokensHTTP(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := newTestServer(t, kind, localOptions(t, 8))
			status := func(method, path, token, body string, want int) []byte {
				t.Helper()
				code, e, b := raw(t, s, method, path, token, body)
				if code != want {
					t.Fatalf("%s %s: %d %+v, want %d", method, path, code, e, want)
				}
				return b
			}
			var list api.AdminTokenList
			mustJSON(t, status("GET", api.PathAdminTokens, adminToken, "", 200), &list)
			if len(list.AdminTokens) != 0 {
				t.Fatalf("a fresh collection lists %+v", list)
			}
			// Create: the new token works; bad bodies change nothing.
			var ops api.NewAdminToken
			mustJSON(t, status("POST", api.PathAdminTokens, adminToken, `{"label":"ops","expires_in_seconds":3600}`, 201), &ops)
			if !strings.HasPrefix(ops.Token, "pra_") || ops.Label != "ops" || ops.Expires == nil || !ops.Valid {
				t.Fatalf("created %+v", ops)
			}
			for _, bad := range []string{`{"label":"x","expires_in_seconds":-1}`, `{"lable":"x"}`, `{"label":"` + strings.Repeat("x", 201) + `"}`, `null`} {
				status("POST", api.PathAdminTokens, adminToken, bad, 400)
			}
			if code, _, _ := rawType(t, s, "POST", api.PathAdminTokens, adminToken, `{}`, "text/plain"); code != 415 {
				t.Fatalf("a text/plain body: %d, want 415", code)
			}
			mustJSON(t, status("GET", api.PathAdminTokens, ops.Token, "", 200), &list)
			if len(list.AdminTokens) != 1 || list.AdminTokens[0].ID != ops.ID || strings.Contains(string(mustMarshal(t, list)), "pra_") {
				t.Fatalf("list %+v (one token, no secret)", list)
			}
			// A user's token is no admin token.
			u := enrolled(t, s)
			status("GET", api.PathAdminTokens, u.Token, "", 401)
			// Revoke: refused at once on this server; unknown IDs are 404.
			var second api.NewAdminToken
			mustJSON(t, status("POST", api.PathAdminTokens, ops.Token, `{}`, 201), &second)
			status("DELETE", api.PathAdminTokens+"/"+second.ID, ops.Token, "", 200)
			status("GET", api.PathAdminStats, second.Token, "", 401)
			status("DELETE", api.PathAdminTokens+"/adm_nope", ops.Token, "", 404)
			// Rotate the configured token: a new one, and the old refused.
			var rot api.NewAdminToken
			mustJSON(t, status("POST", api.PathAdminToken, adminToken, `{"label":"rotated"}`, 201), &rot)
			if rot.RevokedID == "" || rot.Token == "" || rot.Token == adminToken {
				t.Fatalf("rotation answered %+v", rot)
			}
			status("GET", api.PathAdminStats, adminToken, "", 401)
			status("GET", api.PathAdminStats, rot.Token, "", 200)
			// Rotate a recorded token (ops).
			var rot2 api.NewAdminToken
			mustJSON(t, status("POST", api.PathAdminToken, ops.Token, "", 201), &rot2)
			if rot2.RevokedID != ops.ID {
				t.Fatalf("rotating ops revoked %q, want %q", rot2.RevokedID, ops.ID)
			}
			status("GET", api.PathAdminStats, ops.Token, "", 401)
			mustJSON(t, status("GET", api.PathAdminTokens, rot2.Token, "", 200), &list)
			valid := 0
			for _, a := range list.AdminTokens {
				if a.Valid {
					valid++
				}
			}
			if len(list.AdminTokens) != 5 || valid != 2 {
				t.Fatalf("after the rotations: %+v (want 5 records, 2 valid)", list)
			}

			// A user's token: revoked, refused; rotated, she is back with
			// her report.
			status("POST", api.PathReports, u.Token, reportBody("r1", 4, "[1,null,2,3,null,4,5,null]"), 201)
			me, err := u.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var rev api.UserTokenRevocation
			mustJSON(t, status("DELETE", api.PathAdminUsers+"/"+me.User+"/token", rot.Token, "", 200), &rev)
			if rev.User != me.User {
				t.Fatalf("revocation %+v", rev)
			}
			status("GET", api.PathMe, u.Token, "", 401)
			status("DELETE", api.PathAdminUsers+"/u_nope/token", rot.Token, "", 404)
			status("POST", api.PathAdminUsers+"/u_nope/token", rot.Token, "", 404)
			status("POST", api.PathAdminUsers+"/"+me.User+"/token", u.Token, "", 401)
			var en api.Enrolment
			mustJSON(t, status("POST", api.PathAdminUsers+"/"+me.User+"/token", rot.Token, "", 201), &en)
			if en.User != me.User || en.Token == u.Token {
				t.Fatalf("rotation %+v", en)
			}
			status("GET", api.PathMe, u.Token, "", 401)
			u.Token = en.Token
			if st, err := u.Status(ctx); err != nil || st.Reports != 1 {
				t.Fatalf("with the rotated token: %+v, %v", st, err)
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
