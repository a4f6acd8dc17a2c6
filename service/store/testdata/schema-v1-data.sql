-- Rows of a collection made by the first release (schema version 1): two
-- users, three reports, one release charging both, one user state. Used
-- by TestMigrateFromV1 after the first release's tables.
INSERT INTO meta (key, value) VALUES ('config', '{"legacy":1}'), ('schema', '1');
INSERT INTO users (id, token_hash, budget_nano, spent_nano, reports, created_ms) VALUES ('alice', 'ta', 5000, 3000, 2, 1), ('bob', 'tb', 5000, 2000, 1, 2);
INSERT INTO reports (user_id, client_id, body_hash, epsilon_nano, spent_after_nano, received_ms, vals) VALUES ('alice', 'a1', 'h1', 1000, 1000, 10, '[1]'), ('alice', 'a2', 'h2', 1000, 2000, 11, '[2]'), ('bob', 'b1', 'h3', 1000, 1000, 12, '[3]');
INSERT INTO releases (created_ms, method, max_seq, users_charged, doc) VALUES (20, 'm', 3, 2, '{"r":1}');
INSERT INTO release_charges (release_id, user_id, epsilon_nano) VALUES (1, 'alice', 1000), (1, 'bob', 1000);
INSERT INTO user_states (release_id, user_id, state) VALUES (1, 'alice', '{"s":1}');
