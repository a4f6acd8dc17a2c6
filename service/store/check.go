package store

import (
	"context"
	"database/sql"
)

// CheckSQLiteFile is the check OpenSQLite makes of a file before SQLite
// opens it (which would make an empty database of a missing or empty
// file), for other SQLite stores (the two aggregators' databases): without
// create the file must exist and start with the SQLite header; with
// create it may be missing or empty. It reports whether it holds a
// database; its errors wrap ErrNoCollection or ErrDamaged.
func CheckSQLiteFile(path string, create bool) (bool, error) { return sqliteFile(path, create) }

// QuickCheck runs PRAGMA quick_check on db (the file at path) and refuses
// a damaged file with an error wrapping ErrDamaged.
func QuickCheck(ctx context.Context, db *sql.DB, path string) error { return quickCheck(ctx, db, path) }
