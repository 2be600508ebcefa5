"""Relevance evaluation: judged query sets (sets), ranking metrics (metrics),
and the runner behind `manage.py search_eval` (runner).

A judged set (shared FORMAT.md, "Judged query sets") is a folder with
`records.jsonl`, `queries.jsonl`, `qrels.tsv` and optionally
`query_types.tsv`. `evaluate` asks a ranking function for each query's ranked
record keys in each mode; the command passes the search engine, tests pass a
stand-in.

Each query is scored on its ranking with its `exclude` keys (and repeats)
removed, then the scores are averaged over the queries that have at least
one relevant judgment; the others are skipped. A record is relevant when its
grade is 1 or more; unlisted records are grade 0.

- nDCG@10 = DCG@10 / IDCG@10, with linear gains as in trec_eval's ndcg_cut:
  DCG@10 = sum over ranks i = 1..10 of grade(i) / log2(i + 1), and IDCG@10 is
  the same sum over all the query's judged grades sorted best first.
- Recall@100 = relevant records in the top 100 / all relevant records.
- MRR@10 = 1 / the rank of the first relevant record in the top 10, else 0.
"""
