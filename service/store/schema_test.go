package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/service/store"
	"github.com/privrec/privrec/service/store/storetest"
)

// rawExec runs a file of ;-separated SQL statements on a database
// without going through the store (a database an older release made).
func rawExec(t *testing.T, kind, url string, files ...string) {
	t.Helper()
	driver, dsn := "pgx", url
	if kind == "sqlite" {
		driver, dsn = "sqlite", strings.TrimPrefix(url, "sqlite:")
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for q := range strings.SplitSeq(string(b), ";\n") {
			if strings.TrimSpace(stripComments(q)) == "" {
				continue
			}
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v\n%s", f, err, q)
			}
		}
	}
}

func stripComments(q string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(q, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestMigrateFromV1 builds a database with the first release's tables
// and rows (testdata/schema-v1.*.sql, frozen) and opens it with this
// code: it is migrated to the current schema, keeps every row, its
// ledgers check, it takes new reports, and reopening migrates nothing.
func TestMigrateFromV1(t *testing.T) {
	for _, kind := range storetest.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			url := storetest.URL(t, kind)
			rawExec(t, kind, url, filepath.Join("testdata", "schema-v1."+kind+".sql"), filepath.Join("testdata", "schema-v1-data.sql"))
			s, err := store.Open(ctx, url)
			if err != nil {
				t.Fatalf("opening a first-release database: %v", err)
			}
			if v, err := s.SchemaVersion(ctx); err != nil || v != store.SchemaVersion() {
				t.Fatalf("schema version %d, %v; want %d", v, err, store.SchemaVersion())
			}
			ms, err := s.Migrations(ctx)
			if err != nil || len(ms) != store.SchemaVersion() || ms[0].Version != 1 || !strings.Contains(ms[0].Description, "adopted") {
				t.Fatalf("migrations %+v, %v", ms, err)
			}
			if c, err := s.Config(ctx); err != nil || string(c) != `{"legacy":1}` {
				t.Fatalf("config %s, %v", c, err)
			}
			if err := s.Check(ctx); err != nil {
				t.Fatal(err)
			}
			if u, err := s.User(ctx, "alice"); err != nil || u.ID != "alice" || u.Spent != 3000 || u.Reports != 2 {
				t.Fatalf("alice = %+v, %v", u, err)
			}
			if st, err := s.UserState(ctx, 1, "alice"); err != nil || string(st) != `{"s":1}` {
				t.Fatalf("alice's state %s, %v", st, err)
			}
			if err := s.Init(ctx, []byte(`{"legacy":1}`)); err != nil {
				t.Fatalf("the recorded collection: %v", err)
			}
			if r := submit(t, s, sub("bob", "b2", "[4]", 1000)); r.Outcome != store.Stored || r.Report.Seq != 4 || r.Spent != 3000 {
				t.Fatalf("a new report after migrating: %+v", r)
			}
			// Reports stored before migration 6 have no mean report; a new
			// one carries its own.
			old, err := s.Reports(ctx, "alice")
			if err != nil || len(old) != 2 || old[0].Mean != nil || old[1].Mean != nil {
				t.Fatalf("alice's reports after migrating: %+v, %v", old, err)
			}
			withMean := sub("bob", "b3", "[5]", 1000)
			m := 3.75
			withMean.Mean = &m
			if r := submit(t, s, withMean); r.Outcome != store.Stored || r.Report.Mean == nil || *r.Report.Mean != m {
				t.Fatalf("a report with a mean after migrating: %+v", r)
			}
			if r, err := s.Report(ctx, "bob", "b3"); err != nil || r.Mean == nil || *r.Mean != m {
				t.Fatalf("the stored mean: %+v, %v", r, err)
			}
			enrol(t, s, "carol", 5000)
			if u, err := s.UserByToken(ctx, hash("token-carol")); err != nil || u.ID != "carol" {
				t.Fatalf("a user enrolled after migrating: %+v, %v", u, err)
			}
			if err := s.Check(ctx); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err = store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if ms2, _ := s.Migrations(ctx); len(ms2) != len(ms) || ms2[len(ms2)-1] != ms[len(ms)-1] {
				t.Fatalf("reopening migrated again: %+v, then %+v", ms, ms2)
			}
			// A schema from the future is refused, the database untouched.
			rawExec(t, kind, url, writeTemp(t, "INSERT INTO schema_migrations (version, description, applied_ms) VALUES (999, 'future', 0)"))
			if _, err := store.Open(ctx, url); !errors.Is(err, store.ErrNewerSchema) {
				t.Fatalf("a newer schema: %v, want ErrNewerSchema", err)
			}
		})
	}
}

func writeTemp(t *testing.T, sql string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "q.sql")
	if err := os.WriteFile(f, []byte(sql), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOpenRefuses: opening never creates a collection, and refuses a
// damaged one with an error saying what is wrong; creating refuses a
// database that holds a collection.
func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "mistyped.db")
	if _, err := store.Open(ctx, "sqlite:"+missing); !errors.Is(err, store.ErrNoCollection) || !strings.Contains(err.Error(), "no file") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening a missing file created it: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	if _, err := store.Open(ctx, "sqlite:"+empty); !errors.Is(err, store.ErrNoCollection) || !strings.Contains(err.Error(), "empty file") {
		t.Errorf("an empty file: %v", err)
	}
	text := filepath.Join(dir, "text.db")
	os.WriteFile(text, []byte("i1\ni2\ni3\n"), 0o600)
	for _, open := range []func(context.Context, string) (store.Store, error){store.Open, store.Create} {
		if _, err := open(ctx, "sqlite:"+text); !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "not an SQLite database") {
			t.Errorf("a text file: %v", err)
		}
	}
	// Another application's SQLite file: not created over.
	other := "sqlite:" + filepath.Join(dir, "other.db")
	rawExec(t, "sqlite", other, writeTemp(t, "CREATE TABLE notes (x TEXT)"))
	if _, err := store.Create(ctx, other); !errors.Is(err, store.ErrNoCollection) || !strings.Contains(err.Error(), "other tables (notes)") {
		t.Errorf("creating in another application's database: %v", err)
	}
	// Created, never initialised: no collection to open; Create again is
	// fine. Initialised: Create refuses, Open accepts.
	url := "sqlite:" + filepath.Join(dir, "new.db")
	s, err := store.Create(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := store.Open(ctx, url); !errors.Is(err, store.ErrNoCollection) {
		t.Errorf("tables without a collection: %v", err)
	}
	if s, err = store.Create(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := s.Init(ctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := store.Create(ctx, url); !errors.Is(err, store.ErrExists) {
		t.Errorf("creating over a collection: %v", err)
	}
	if s, err = store.Open(ctx, url); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// An empty PostgreSQL schema holds no collection; one holding
	// another application's "users" table is neither opened nor created
	// over.
	t.Run("postgres", func(t *testing.T) {
		url := storetest.URL(t, "postgres")
		if _, err := store.Open(ctx, url); !errors.Is(err, store.ErrNoCollection) {
			t.Errorf("an empty schema: %v", err)
		}
		rawExec(t, "postgres", url, writeTemp(t, "CREATE TABLE users (name TEXT)"))
		for _, open := range []func(context.Context, string) (store.Store, error){store.Open, store.Create} {
			if _, err := open(ctx, url); !errors.Is(err, store.ErrNoCollection) || !strings.Contains(err.Error(), "other tables (users)") {
				t.Errorf("a schema with another application's users table: %v", err)
			}
		}
	})
}

// TestGarbagePages: 20 pages of garbage in the middle of an SQLite file
// stop it from opening (PRAGMA quick_check).
func TestGarbagePages(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "privrec.db")
	s, err := store.Create(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init(ctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	enrol(t, s, "alice", 1<<40)
	big := strings.Repeat("x", 2000)
	for k := range 200 {
		submit(t, s, sub("alice", "r"+string(rune('A'+k%26))+strings.Repeat("z", k/26), big, 1))
	}
	s.Close()
	if err := storetest.CorruptPages(path, 10, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, "sqlite:"+path); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("20 garbage pages: %v, want ErrDamaged", err)
	}
}
