-- The tables of the first release of privrec serve (schema version 1),
-- frozen as they were: TestMigrateFromV1 builds a database with them and
-- opens it with the current code.
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
	id TEXT PRIMARY KEY,
	token_hash BLOB NOT NULL UNIQUE,
	budget_nano INTEGER NOT NULL,
	spent_nano INTEGER NOT NULL DEFAULT 0,
	reports INTEGER NOT NULL DEFAULT 0,
	created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS reports (
	seq INTEGER PRIMARY KEY,
	user_id TEXT NOT NULL REFERENCES users(id),
	client_id TEXT NOT NULL,
	body_hash BLOB NOT NULL,
	epsilon_nano INTEGER NOT NULL,
	spent_after_nano INTEGER NOT NULL,
	received_ms INTEGER NOT NULL,
	vals TEXT NOT NULL,
	UNIQUE (user_id, client_id));
CREATE TABLE IF NOT EXISTS releases (
	id INTEGER PRIMARY KEY,
	created_ms INTEGER NOT NULL,
	method TEXT NOT NULL,
	max_seq INTEGER NOT NULL,
	users_charged INTEGER NOT NULL,
	doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS release_charges (
	release_id INTEGER NOT NULL REFERENCES releases(id),
	user_id TEXT NOT NULL REFERENCES users(id),
	epsilon_nano INTEGER NOT NULL,
	PRIMARY KEY (release_id, user_id));
CREATE INDEX IF NOT EXISTS release_charges_user ON release_charges(user_id);
CREATE TABLE IF NOT EXISTS user_states (
	release_id INTEGER NOT NULL REFERENCES releases(id),
	user_id TEXT NOT NULL REFERENCES users(id),
	state TEXT NOT NULL,
	PRIMARY KEY (release_id, user_id));
