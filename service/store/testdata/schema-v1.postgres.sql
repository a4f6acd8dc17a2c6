-- The tables of the first release of privrec serve (schema version 1),
-- frozen as they were: TestMigrateFromV1 builds a database with them and
-- opens it with the current code.
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
	id TEXT PRIMARY KEY,
	token_hash BYTEA NOT NULL UNIQUE,
	budget_nano BIGINT NOT NULL,
	spent_nano BIGINT NOT NULL DEFAULT 0,
	reports BIGINT NOT NULL DEFAULT 0,
	created_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS reports (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	user_id TEXT NOT NULL REFERENCES users(id),
	client_id TEXT NOT NULL,
	body_hash BYTEA NOT NULL,
	epsilon_nano BIGINT NOT NULL,
	spent_after_nano BIGINT NOT NULL,
	received_ms BIGINT NOT NULL,
	vals TEXT NOT NULL,
	UNIQUE (user_id, client_id));
CREATE TABLE IF NOT EXISTS releases (
	id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	created_ms BIGINT NOT NULL,
	method TEXT NOT NULL,
	max_seq BIGINT NOT NULL,
	users_charged BIGINT NOT NULL,
	doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS release_charges (
	release_id BIGINT NOT NULL REFERENCES releases(id),
	user_id TEXT NOT NULL REFERENCES users(id),
	epsilon_nano BIGINT NOT NULL,
	PRIMARY KEY (release_id, user_id));
CREATE INDEX IF NOT EXISTS release_charges_user ON release_charges(user_id);
CREATE TABLE IF NOT EXISTS user_states (
	release_id BIGINT NOT NULL REFERENCES releases(id),
	user_id TEXT NOT NULL REFERENCES users(id),
	state TEXT NOT NULL,
	PRIMARY KEY (release_id, user_id));
