CREATE OR REPLACE FUNCTION search_scoped(product bigint, words tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
    '''' || replace(replace(product || '~' || w.lexeme, '\', '\\'), '''', '''''') || ''''
      || coalesce(':' || (SELECT string_agg(x.p || x.weight, ',')
                          FROM unnest(w.positions, w.weights) x(p, weight)), ''),
    ' '), '')::tsvector
  FROM unnest(words) w
$$;

-- `q` for search_scoped over the records of `products`: each lexeme becomes
-- the OR of those products' lexemes, with its prefix mark and weights. Of no
-- product: a lexeme no record has.
CREATE OR REPLACE FUNCTION search_scoped_query(q tsquery, products bigint[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT regexp_replace(
    q::text, '''((?:[^'']|'''')*)''((?::[*A-D]+)?)',
    '(' || coalesce((SELECT string_agg('''' || p || '~\1''\2', ' | ' ORDER BY p) FROM unnest(products) p), '''~''')
        || ')',
    'g'
  )::tsquery
$$;
