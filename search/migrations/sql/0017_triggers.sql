
    DROP TRIGGER IF EXISTS search_index_product_insert ON backlog_product;
    DROP TRIGGER IF EXISTS search_index_product_update ON backlog_product;
    DROP TRIGGER IF EXISTS search_index_product_delete ON backlog_product;
    DROP TRIGGER IF EXISTS search_index_product_truncate ON backlog_product;
    DROP FUNCTION IF EXISTS search_index_product();
    DROP FUNCTION IF EXISTS search_unindex_product();
    DROP FUNCTION IF EXISTS search_truncate_product();
    

    DROP TRIGGER IF EXISTS search_index_feature_insert ON backlog_feature;
    DROP TRIGGER IF EXISTS search_index_feature_update ON backlog_feature;
    DROP TRIGGER IF EXISTS search_index_feature_delete ON backlog_feature;
    DROP TRIGGER IF EXISTS search_index_feature_truncate ON backlog_feature;
    DROP FUNCTION IF EXISTS search_index_feature();
    DROP FUNCTION IF EXISTS search_unindex_feature();
    DROP FUNCTION IF EXISTS search_truncate_feature();
    

    DROP TRIGGER IF EXISTS search_index_test_insert ON backlog_test;
    DROP TRIGGER IF EXISTS search_index_test_update ON backlog_test;
    DROP TRIGGER IF EXISTS search_index_test_delete ON backlog_test;
    DROP TRIGGER IF EXISTS search_index_test_truncate ON backlog_test;
    DROP FUNCTION IF EXISTS search_index_test();
    DROP FUNCTION IF EXISTS search_unindex_test();
    DROP FUNCTION IF EXISTS search_truncate_test();
    

    DROP TRIGGER IF EXISTS search_index_bug_insert ON backlog_bug;
    DROP TRIGGER IF EXISTS search_index_bug_update ON backlog_bug;
    DROP TRIGGER IF EXISTS search_index_bug_delete ON backlog_bug;
    DROP TRIGGER IF EXISTS search_index_bug_truncate ON backlog_bug;
    DROP FUNCTION IF EXISTS search_index_bug();
    DROP FUNCTION IF EXISTS search_unindex_bug();
    DROP FUNCTION IF EXISTS search_truncate_bug();
    

    CREATE OR REPLACE FUNCTION search_index_product() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_product ON COMMIT DROP AS SELECT * FROM new_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'product' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.id AS product_id FROM search_rows_product r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'product')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'product', r.id, r.key, r.id, NULL::bigint, r.name, x.body,
           NULL, NULL, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.name))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.name))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description))), 'B'), md5(r.name || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 1) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'product', '~t' || nullif(NULL, ''), '~v' || nullif(NULL, '')], NULL))
    FROM search_rows_product r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
        DROP TABLE search_rows_product;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'product' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.id AS product_id FROM new_rows r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'product')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'product', r.id, r.key, r.id, NULL::bigint, r.name, x.body,
           NULL, NULL, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.name))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.name))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description))), 'B'), md5(r.name || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 1) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'product', '~t' || nullif(NULL, ''), '~v' || nullif(NULL, '')], NULL))
    FROM new_rows r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_unindex_product() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_product ON COMMIT DROP AS SELECT * FROM old_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'product' AND d.record_id IN (SELECT r.id FROM search_rows_product r)
    ;
        DROP TABLE search_rows_product;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'product' AND d.record_id IN (SELECT r.id FROM old_rows r)
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_truncate_product() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM search_document WHERE kind = 'product';
      RETURN NULL;
    END $$;

    CREATE TRIGGER search_index_product_insert AFTER INSERT ON backlog_product
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_product();
    CREATE TRIGGER search_index_product_update AFTER UPDATE ON backlog_product
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_product();
    CREATE TRIGGER search_index_product_delete AFTER DELETE ON backlog_product
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_unindex_product();
    CREATE TRIGGER search_index_product_truncate AFTER TRUNCATE ON backlog_product
      FOR EACH STATEMENT EXECUTE FUNCTION search_truncate_product();
    

    CREATE OR REPLACE FUNCTION search_index_feature() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_feature ON COMMIT DROP AS SELECT * FROM new_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'feature' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.product_id AS product_id FROM search_rows_feature r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'feature')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'feature', r.id, r.key, r.product_id, r.id, r.name, x.body,
           NULL, NULL, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.name))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.name))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description, r.acceptance_criteria))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description, r.acceptance_criteria))), 'B'), md5(r.name || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 2) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'feature', '~t' || nullif(NULL, ''), '~v' || nullif(NULL, '')], NULL))
    FROM search_rows_feature r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, ''), nullif(r.acceptance_criteria, '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
        DROP TABLE search_rows_feature;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'feature' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.product_id AS product_id FROM new_rows r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'feature')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'feature', r.id, r.key, r.product_id, r.id, r.name, x.body,
           NULL, NULL, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.name))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.name))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description, r.acceptance_criteria))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description, r.acceptance_criteria))), 'B'), md5(r.name || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 2) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'feature', '~t' || nullif(NULL, ''), '~v' || nullif(NULL, '')], NULL))
    FROM new_rows r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, ''), nullif(r.acceptance_criteria, '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_unindex_feature() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_feature ON COMMIT DROP AS SELECT * FROM old_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'feature' AND d.record_id IN (SELECT r.id FROM search_rows_feature r)
    ;
        DROP TABLE search_rows_feature;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'feature' AND d.record_id IN (SELECT r.id FROM old_rows r)
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_truncate_feature() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM search_document WHERE kind = 'feature';
      RETURN NULL;
    END $$;

    CREATE TRIGGER search_index_feature_insert AFTER INSERT ON backlog_feature
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_feature();
    CREATE TRIGGER search_index_feature_update AFTER UPDATE ON backlog_feature
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_feature();
    CREATE TRIGGER search_index_feature_delete AFTER DELETE ON backlog_feature
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_unindex_feature();
    CREATE TRIGGER search_index_feature_truncate AFTER TRUNCATE ON backlog_feature
      FOR EACH STATEMENT EXECUTE FUNCTION search_truncate_feature();
    

    CREATE OR REPLACE FUNCTION search_index_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_test ON COMMIT DROP AS SELECT * FROM new_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'test' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.product_id AS product_id FROM search_rows_test r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'test')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'test', r.id, r.key, r.product_id, r.feature_id, r.title, x.body,
           r.status, NULL, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.title))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.title))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description, array_to_string(r.steps, E'\n')))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description, array_to_string(r.steps, E'\n')))), 'B'), md5(r.title || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 3) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'test', '~t' || nullif(r.status, ''), '~v' || nullif(NULL, '')], NULL))
    FROM search_rows_test r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, ''), nullif(array_to_string(r.steps, E'\n'), '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
        DROP TABLE search_rows_test;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'test' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.product_id AS product_id FROM new_rows r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'test')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'test', r.id, r.key, r.product_id, r.feature_id, r.title, x.body,
           r.status, NULL, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.title))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.title))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description, array_to_string(r.steps, E'\n')))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description, array_to_string(r.steps, E'\n')))), 'B'), md5(r.title || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 3) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'test', '~t' || nullif(r.status, ''), '~v' || nullif(NULL, '')], NULL))
    FROM new_rows r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, ''), nullif(array_to_string(r.steps, E'\n'), '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_unindex_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_test ON COMMIT DROP AS SELECT * FROM old_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'test' AND d.record_id IN (SELECT r.id FROM search_rows_test r)
    ;
        DROP TABLE search_rows_test;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'test' AND d.record_id IN (SELECT r.id FROM old_rows r)
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_truncate_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM search_document WHERE kind = 'test';
      RETURN NULL;
    END $$;

    CREATE TRIGGER search_index_test_insert AFTER INSERT ON backlog_test
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_test();
    CREATE TRIGGER search_index_test_update AFTER UPDATE ON backlog_test
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_test();
    CREATE TRIGGER search_index_test_delete AFTER DELETE ON backlog_test
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_unindex_test();
    CREATE TRIGGER search_index_test_truncate AFTER TRUNCATE ON backlog_test
      FOR EACH STATEMENT EXECUTE FUNCTION search_truncate_test();
    

    CREATE OR REPLACE FUNCTION search_index_bug() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_bug ON COMMIT DROP AS SELECT * FROM new_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'bug' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.product_id AS product_id FROM search_rows_bug r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'bug')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'bug', r.id, r.key, r.product_id, r.feature_id, r.title, x.body,
           r.status, r.severity, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.title))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.title))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description, r.actual_result, r.expected_result, r.steps))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description, r.actual_result, r.expected_result, r.steps))), 'B') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.environment))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.environment))), 'D'), md5(r.title || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 4) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'bug', '~t' || nullif(r.status, ''), '~v' || nullif(r.severity, '')], NULL))
    FROM search_rows_bug r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, ''), nullif(r.actual_result, ''), nullif(r.expected_result, ''), nullif(r.steps, ''), nullif(r.environment, '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
        DROP TABLE search_rows_bug;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'bug' AND (d.record_id, d.product_id) IN (
      SELECT o.record_id, o.product_id FROM search_document o
      JOIN (SELECT r.id, r.product_id AS product_id FROM new_rows r) n
        ON o.record_id = n.id AND o.product_id <> n.product_id
      WHERE o.kind = 'bug')
    ;
        
    INSERT INTO search_document (kind, record_id, key, product_id, feature_id, title, body, status, severity, created_at, updated_at, search_vector, content_hash, search_markers)
    SELECT 'bug', r.id, r.key, r.product_id, r.feature_id, r.title, x.body,
           r.status, r.severity, r.created_at, r.updated_at,
           setweight(to_tsvector('english', search_words(concat_ws(' ', r.title))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.title))), 'A') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.description, r.actual_result, r.expected_result, r.steps))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.description, r.actual_result, r.expected_result, r.steps))), 'B') || setweight(to_tsvector('english', search_words(concat_ws(' ', r.environment))) || to_tsvector('english', search_word_parts(concat_ws(' ', r.environment))), 'D'), md5(r.title || E'\n' || x.body)
           , array_to_tsvector(array_remove(ARRAY['~s' || (hashint8extended(r.id, 4) & 255), '~m' || to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYYMM'), '~k' || 'bug', '~t' || nullif(r.status, ''), '~v' || nullif(r.severity, '')], NULL))
    FROM new_rows r, LATERAL (SELECT concat_ws(E'\n', nullif(r.description, ''), nullif(r.actual_result, ''), nullif(r.expected_result, ''), nullif(r.steps, ''), nullif(r.environment, '')) AS body) x
    ON CONFLICT (kind, record_id, product_id) DO UPDATE SET key = EXCLUDED.key, feature_id = EXCLUDED.feature_id, title = EXCLUDED.title, body = EXCLUDED.body, status = EXCLUDED.status, severity = EXCLUDED.severity, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, search_vector = EXCLUDED.search_vector, content_hash = EXCLUDED.content_hash, search_markers = EXCLUDED.search_markers
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_unindex_bug() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('citus.version', true) IS NOT NULL THEN
        CREATE TEMPORARY TABLE search_rows_bug ON COMMIT DROP AS SELECT * FROM old_rows;
        
    DELETE FROM search_document d WHERE d.kind = 'bug' AND d.record_id IN (SELECT r.id FROM search_rows_bug r)
    ;
        DROP TABLE search_rows_bug;
      ELSE
        
    DELETE FROM search_document d WHERE d.kind = 'bug' AND d.record_id IN (SELECT r.id FROM old_rows r)
    ;
      END IF;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION search_truncate_bug() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM search_document WHERE kind = 'bug';
      RETURN NULL;
    END $$;

    CREATE TRIGGER search_index_bug_insert AFTER INSERT ON backlog_bug
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_bug();
    CREATE TRIGGER search_index_bug_update AFTER UPDATE ON backlog_bug
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION search_index_bug();
    CREATE TRIGGER search_index_bug_delete AFTER DELETE ON backlog_bug
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION search_unindex_bug();
    CREATE TRIGGER search_index_bug_truncate AFTER TRUNCATE ON backlog_bug
      FOR EACH STATEMENT EXECUTE FUNCTION search_truncate_bug();
    