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
