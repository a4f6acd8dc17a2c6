package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// TestLeave: a user exports her data, then deletes herself; her reports
// and token are gone, her ledger stays (and still checks), another user
// is untouched; the admin exports and deletes a named user the same way.
func TestLeave(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			opt := localOptions(t, 4)
			opt.Epsilon, opt.Budget = 1, 100
			s := newTestServer(t, kind, opt)
			alice, bob, carol := enrolled(t, s), enrolled(t, s), enrolled(t, s)
			three := 3.0
			for _, c := range []*client.Client{alice, bob, carol} {
				for k := range 3 {
					if _, _, err := c.Submit(ctx, api.Report{ID: fmt.Sprintf("r%d", k), Epsilon: 1, Values: []*float64{&three, nil, nil, nil}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ex, err := alice.Export(ctx)
			if err != nil || len(ex.Reports) != 3 || ex.Ledger.Spent != 3 || ex.Ledger.Reports != 3 || ex.Deleted != nil || *ex.Reports[0].Values[0] != 3 {
				t.Fatalf("export: %+v %v", ex, err)
			}
			d, err := alice.DeleteMe(ctx)
			if err != nil || d.User != ex.User || d.ReportsDeleted != 3 || !d.TokenRevoked || d.AlreadyDeleted ||
				d.Retained.Spent != 3 || d.Retained.ReportsCounted != 3 || d.Retained.Why == "" {
				t.Fatalf("delete: %+v %v", d, err)
			}
			// Her token no longer works.
			for _, call := range []func() error{
				func() error { _, err := alice.Status(ctx); return err },
				func() error { _, err := alice.Export(ctx); return err },
				func() error {
					_, _, err := alice.Submit(ctx, api.Report{ID: "late", Epsilon: 1, Values: make([]*float64, 4)})
					return err
				},
			} {
				if err := call(); !isStatus(err, 401) {
					t.Fatalf("a deleted user's token: %v", err)
				}
			}
			// The admin sees what stays: the ledger, no report.
			status, _, b := raw(t, s, "GET", api.PathAdminUsers+"/"+ex.User+"/export", adminToken, "")
			if status != 200 {
				t.Fatalf("admin export: %d %s", status, b)
			}
			if _, err := s.st.Report(ctx, ex.User, "r0"); err == nil {
				t.Fatal("a deleted user's report is still stored")
			}
			aex, err := s.st.ExportUser(ctx, ex.User)
			if err != nil || len(aex.Reports) != 0 || aex.User.Spent != 3e9 || aex.ErasedReports != 3 || aex.DeletedMS == 0 {
				t.Fatalf("stored after deletion: %+v %v", aex, err)
			}
			// The operator cannot give her a token again.
			if err := s.st.SetUserToken(ctx, ex.User, service.TokenHash("prt_again"), 0); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a token for a user who left: %v", err)
			}
			// Bob is untouched; the ledgers still check.
			if rs, err := bob.Reports(ctx); err != nil || len(rs) != 3 {
				t.Fatalf("Bob's reports: %d %v", len(rs), err)
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatalf("ledgers after a deletion: %v", err)
			}
			// The admin deletes Carol by name; a repeat says so.
			cst, _ := carol.Status(ctx)
			for k, want := range []bool{false, true} {
				status, _, b := raw(t, s, "DELETE", api.PathAdminUsers+"/"+cst.User, adminToken, "")
				if status != 200 {
					t.Fatalf("admin delete %d: %d %s", k, status, b)
				}
				var d api.Deletion
				mustJSON(t, b, &d)
				if d.AlreadyDeleted != want || (k == 0 && d.ReportsDeleted != 3) {
					t.Fatalf("admin delete %d: %+v", k, d)
				}
			}
			for _, c := range []struct{ method, path, token string }{
				{"DELETE", api.PathAdminUsers + "/u_nobody", adminToken},
				{"GET", api.PathAdminUsers + "/u_nobody/export", adminToken},
			} {
				if status, e, _ := raw(t, s, c.method, c.path, c.token, ""); status != 404 || e.Code != api.CodeNotFound {
					t.Fatalf("%s %s: %d %+v", c.method, c.path, status, e)
				}
			}
			if status, _, _ := raw(t, s, "DELETE", api.PathAdminUsers+"/"+cst.User, bob.Token, ""); status != 401 {
				t.Fatalf("a user deleted another: %d", status)
			}
			if err := s.st.Check(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReportsPaginate: pages of the requested size in submission order,
// a cursor to the next, none after the last; bad parameters refused.
func TestReportsPaginate(t *testing.T) {
	ctx := context.Background()
	opt := localOptions(t, 4)
	opt.Epsilon, opt.Budget = 1, 1000
	s := newTestServer(t, "sqlite", opt)
	c := enrolled(t, s)
	for k := range 25 {
		if _, _, err := c.Submit(ctx, api.Report{ID: fmt.Sprintf("r%02d", k), Epsilon: 1, Values: make([]*float64, 4)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	cursor, pages := "", 0
	for {
		p, err := c.ReportsPage(ctx, 10, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range p.Reports {
			got = append(got, r.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if pages != 3 || len(got) != 25 || got[0] != "r00" || got[24] != "r24" {
		t.Fatalf("%d pages: %v", pages, got)
	}
	if all, err := c.Reports(ctx); err != nil || len(all) != 25 {
		t.Fatalf("all: %d %v", len(all), err)
	}
	for _, q := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"cursor=abc", "cursor"}, {"page=2", "page"},
	} {
		status, e, _ := raw(t, s, "GET", api.PathReports+"?"+q.query, c.Token, "")
		if status != 400 || e.Field != q.field {
			t.Errorf("?%s: %d %+v", q.query, status, e)
		}
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
}
