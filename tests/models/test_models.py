"""Unit tests for groc_cli.models: every output kind on tiny synthetic data."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from groc_cli.models import KINDS, LanguageModel, Lexicon, ModelConfig, build_model, config_class
from groc_cli.models.chars import encode_strings

VOCAB = ["<unk>", "<eos>", "the", "a", "cat", "dog", "sat", "on", "mat", "ran", "big", "small", "house", "tree"]
LEXICON = Lexicon(
    relations={"cat": ["feline", "tom"], "dog": ["canine", "puppy", "cat"], "house": ["home"], "big": ["large"]},
    definitions={
        "cat": ["a", "small", "domesticated", "feline", "animal"],
        "dog": ["a", "domesticated", "canine", "animal"],
        "tree": ["a", "tall", "woody", "plant"],
    },
)


def tiny_config(kind: str, **kw) -> ModelConfig:
    base = dict(
        output=kind, emb=16, hidden=24, layers=2, dropout=0.1, out_dropout=0.1,
        char_emb=8, char_filters=[(1, 8), (2, 8), (3, 16)], cutoffs=[4, 9] if kind == "adaptive" else None,
        correction=4,
    )
    base.update(kw)
    own = {f.name for f in dataclasses.fields(config_class(kind))}  # each kind takes its own settings only
    return ModelConfig(**{k: v for k, v in base.items() if k in own or k in kw})


def make(kind: str, vocab=VOCAB, seed: int = 0, **kw) -> LanguageModel:
    torch.manual_seed(seed)
    return build_model(tiny_config(kind, **kw), vocab, LEXICON if kind == "groc" else None)


def corpus(n: int = 400, seed: int = 0) -> torch.Tensor:
    # A deterministic pattern that an LSTM learns quickly.
    g = torch.Generator().manual_seed(seed)
    pattern = torch.tensor([2, 4, 6, 7, 2, 8, 1, 3, 5, 9, 1])
    seq = pattern.repeat(n // len(pattern) + 1)[:n]
    noise = torch.rand(n, generator=g) < 0.05
    return torch.where(noise, torch.randint(0, len(VOCAB), (n,), generator=g), seq)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_shapes_and_normalisation(kind):
    model = make(kind)
    ids = torch.randint(0, len(VOCAB), (5, 3))
    composed = model.compose()
    hidden, state = model(ids, model.init_state(3), composed)
    assert hidden.shape == (5, 3, 16)
    assert len(state) == 2 and state[0][0].shape == (1, 3, 24) and state[1][0].shape == (1, 3, 16)
    flat = hidden.reshape(-1, 16)
    lp = composed.log_probs(flat)
    assert lp.shape == (15, len(VOCAB)) and lp.dtype == torch.float32
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(15), atol=1e-5, rtol=0)
    nll = composed.nll(flat, ids.reshape(-1))
    assert nll.shape == (15,)
    torch.testing.assert_close(nll, -lp.gather(1, ids.reshape(-1, 1)).squeeze(1), atol=1e-5, rtol=1e-5)
    assert composed.nll(hidden, ids).shape == (5, 3)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_training_reduces_loss(kind):
    model = make(kind)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = corpus()
    B, T = 4, 10
    batched = data[: (data.numel() // B) * B].view(B, -1).t()

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            comp = model.compose(grad=False)
            h, _ = model(batched[:-1], model.init_state(B), comp)
            loss = comp.nll(h, batched[1:]).mean().item()
        model.train()
        return loss

    before = evaluate()
    for epoch in range(3):
        state = model.init_state(B)
        for pos in range(0, batched.size(0) - T - 1, T):
            state = model.detach_state(state)
            comp = model.compose(grad=model.sample_update())
            h, state = model(batched[pos : pos + T], state, comp)
            loss = comp.nll(h, batched[pos + 1 : pos + 1 + T]).mean() + model.regularization()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    after = evaluate()
    assert after < before - 0.3, (before, after)


@pytest.mark.slow
def test_groc_parameters_independent_of_vocab():
    small = [f"w{i}" for i in range(100)]
    large = [f"w{i}" for i in range(5000)]
    m_small, m_large = make("groc", small), make("groc", large)
    n = m_small.num_parameters()
    assert n == m_large.num_parameters()
    m_small.set_vocab(large + ["zebra"])
    assert m_small.num_parameters() == n
    assert set(m_small.state_dict()) == set(m_large.state_dict())


def test_groc_composes_unseen_words():
    model = make("groc").eval()
    model.set_vocab(VOCAB + ["xylophone", "quokkas"])
    with torch.no_grad():
        comp = model.compose(grad=False)
        h, _ = model(torch.tensor([[2], [len(VOCAB)]]), model.init_state(1), comp)
        lp = comp.log_probs(h.reshape(-1, 16))
    assert lp.shape == (2, len(VOCAB) + 2)
    assert torch.isfinite(lp).all() and (lp[:, -2:] > -50).all()


def test_groc_free_bias_is_one_trained_bias_per_word_that_follows_the_vocabulary():
    model = make("groc", bias="free")
    layer = model.output_layer
    assert layer.free_bias.shape == (len(VOCAB),) and not hasattr(layer, "bias_w")
    assert model.num_parameters() == make("groc").num_parameters() - (16 + 1) + len(VOCAB)
    with torch.no_grad():
        layer.free_bias.copy_(torch.arange(len(VOCAB), dtype=torch.float32))
    model.eval()
    torch.testing.assert_close(model.compose(grad=False).bias, layer.free_bias)
    # A step trains it like any parameter.
    model.train()
    comp = model.compose()
    h, _ = model(torch.tensor([[2], [4]]), model.init_state(1), comp)
    comp.nll(h, torch.tensor([[4], [6]])).sum().backward()
    assert layer.free_bias.grad is not None and layer.free_bias.grad.abs().sum() > 0
    assert any(p is layer.free_bias for p in layer.output_only_parameters())
    # Kept words keep their bias by string; a new word gets the mean of the biases the layer had.
    mean = float(layer.free_bias.detach().mean())
    model.set_vocab(["cat", "zebra", "<unk>", "<eos>"])
    assert layer.free_bias.tolist() == pytest.approx([VOCAB.index("cat"), mean, 0.0, 1.0])
    model.eval()
    with torch.no_grad():
        lp = model.compose(grad=False).log_probs(torch.zeros(1, 16))
    assert lp.shape == (1, 4) and torch.isfinite(lp).all()


def test_groc_free_bias_refuses_the_composed_bias_settings():
    for kw in ({"bias_activation": "tanh"}, {"bias_dropout": 0.2}):
        with pytest.raises(ValueError, match="with bias 'free' leave them unset"):
            tiny_config("groc", bias="free", **kw)
    with pytest.raises(ValueError, match="bias"):
        tiny_config("groc", bias="learned")


@pytest.mark.parametrize("flag,table", [("relations", "relations"), ("definitions", "definitions")])
def test_ablation_flags_ignore_lexicon(flag, table):
    torch.manual_seed(0)
    config = tiny_config("groc", **{flag: False})
    other = dataclasses.replace(LEXICON, **{table: {"cat": ["zzz"], "mat": ["qqq", "rrr"]}})
    a = build_model(config, VOCAB, LEXICON).eval()
    b = build_model(config, VOCAB, other).eval()
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        ea = a.output_layer.compose_inputs()
        eb = b.output_layer.compose_inputs()
    torch.testing.assert_close(ea, eb)
    # ...while with the flag on the same change does move the embeddings.
    torch.manual_seed(0)
    c = build_model(tiny_config("groc"), VOCAB, other).eval()
    c.load_state_dict(a.state_dict())
    d = build_model(tiny_config("groc"), VOCAB, LEXICON).eval()
    d.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert not torch.allclose(c.output_layer.compose_inputs(), d.output_layer.compose_inputs())


def test_string_table_equals_naive_composition():
    model = make("groc").eval()
    layer = model.output_layer
    with torch.no_grad():
        table = layer.compose_inputs()

        def surface(word: str) -> torch.Tensor:
            solo = build_model(tiny_config("groc"), [word]).output_layer
            return encode_strings(layer.chars, solo._chars, solo._lengths)[0]

        rows = []
        for w in VOCAB:
            c = surface(w)
            rels, defs = LEXICON.relations_of(w, 3), LEXICON.definition_of(w, 10)
            r = torch.stack([surface(x) for x in rels]).mean(0) if rels else torch.zeros_like(c)
            d = torch.stack([surface(x) for x in defs]).mean(0) if defs else torch.zeros_like(c)
            rows.append(layer.project(torch.cat([c, r, d])))
        naive = torch.stack(rows)
        subset = layer.compose_inputs(torch.tensor([5, 4, 13]))
    torch.testing.assert_close(table, naive, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(subset, naive[[5, 4, 13]], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["groc", "convolutional"])
def test_chunked_composition_equals_unchunked(kind):
    model = make(kind).eval()
    with torch.no_grad():
        full = model.output_layer.compose(grad=True)
        model.config.compose_chunk = 3
        chunked = model.output_layer.compose(grad=False)
        h = torch.randn(6, 16)
        torch.testing.assert_close(chunked.log_probs(h), full.log_probs(h), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cutoffs", [[4, 9], [4, 14]])  # the second leaves the last bin empty
def test_adaptive_loss_without_host_syncs_equals_the_cpu_path(monkeypatch, cutoffs):
    """On a GPU the adaptive loss takes every row through each tail bin instead of selecting the bin's rows
    (which waits for the device); forced here on the CPU, its losses and every gradient match the CPU path."""
    from groc_cli.models import adaptive

    results = []
    for dense in (False, True):
        monkeypatch.setattr(adaptive, "sync_free", lambda device, dense=dense: dense)
        model = make("adaptive", cutoffs=cutoffs, dropout=0.0, out_dropout=0.0)
        ids, targets = torch.randint(0, len(VOCAB), (7, 3)), torch.arange(21).remainder(len(VOCAB)).view(7, 3)
        hidden, _ = model(ids, model.init_state(3), composed := model.compose())
        nll = composed.nll(hidden.reshape(-1, hidden.size(-1)), targets.reshape(-1))
        nll.sum().backward()
        results.append((nll.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (nll_a, grads_a), (nll_b, grads_b) = results
    torch.testing.assert_close(nll_b, nll_a, rtol=1e-6, atol=1e-6)
    assert grads_a.keys() == grads_b.keys()
    assert (model.output_layer.bounds[-2] == model.output_layer.bounds[-1]) == (cutoffs[-1] == len(VOCAB))
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], rtol=1e-5, atol=1e-7, msg=name)


def test_update_prob_zero_freezes_output_only_parameters():
    model = make("groc", update_prob=0.0)
    layer = model.output_layer
    output_only = {id(p) for p in layer.output_only_parameters()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = corpus(60).view(-1, 3)
    grad = model.sample_update()
    assert grad is False
    comp = model.compose(grad=grad)
    h, _ = model(ids[:-1], model.init_state(3), comp)
    comp.nll(h, ids[1:]).mean().backward()
    opt.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    for n, p in model.named_parameters():
        if id(p) in output_only:
            assert n not in changed, n
    assert any(n.startswith("rnns.") for n in changed)
    # The shared encoder still learns through the input side.
    assert any("chars." in n for n in changed) and any("project" in n for n in changed)


def test_update_prob_is_seeded():
    model = make("groc", update_prob=0.3)
    draws = [[model.sample_update(torch.Generator().manual_seed(7 + i)) for i in range(50)] for _ in range(2)]
    assert draws[0] == draws[1] and 5 <= sum(draws[0]) <= 30
    assert all(make("tied").sample_update() for _ in range(5))  # a layer without sparse updates: every step
    with pytest.raises(ValueError, match="update_prob is a setting of output groc, not of tied"):
        make("tied", update_prob=0.3)


def test_sparse_step_input_embeddings_match_full_composition():
    model = make("groc").eval()
    ids = torch.tensor([[4, 5], [4, 13]])
    with torch.no_grad():
        full = model.compose(grad=True)
    nograd = model.compose(grad=False)
    sparse = model.output_layer.embed(ids, nograd)  # grad enabled: recomposed with autograd
    assert sparse.requires_grad
    torch.testing.assert_close(sparse, torch.nn.functional.embedding(ids, full.input_weight), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["lookup", "tied", "bilinear", "deep-residual", "convolutional", "adaptive"])
def test_set_vocab_keeps_shared_rows_and_round_trips(kind):
    model = make(kind).eval()
    new_vocab = ["<unk>", "<eos>", "cat", "the", "zebra", "dog", "quokka"] + VOCAB[8:]
    with torch.no_grad():
        old = model.compose(grad=False)
        old_in = model.output_layer.embed(torch.arange(len(VOCAB))[:, None], old)[:, 0]
        old_out = old.log_probs(torch.zeros(1, 16))
    model.set_vocab(new_vocab, generator=torch.Generator().manual_seed(1))
    assert model.vocab == new_vocab
    with torch.no_grad():
        new = model.compose(grad=False)
        new_in = model.output_layer.embed(torch.arange(len(new_vocab))[:, None], new)[:, 0]
    def moved_bin(j: int, w: str) -> bool:
        # Adaptive rows that change bin width are a least-squares fit, not a copy.
        bounds = [0, 4, 9, len(VOCAB)]
        return kind == "adaptive" and sum(j >= b for b in bounds[1:-1]) != sum(VOCAB.index(w) >= b for b in bounds[1:-1])

    for j, w in enumerate(new_vocab):
        if w in VOCAB and not moved_bin(j, w):
            torch.testing.assert_close(new_in[j], old_in[VOCAB.index(w)], atol=1e-4, rtol=1e-4)
    if kind in ("lookup", "tied", "convolutional"):
        torch.testing.assert_close(
            model.output_layer.bias[new_vocab.index("dog")], model.output_layer.bias.new_tensor(0) + model.output_layer.bias[5]
        )
        assert old_out.shape[1] == len(VOCAB)
    # state_dict round trip into a model built for the new vocabulary
    clone = make(kind, vocab=new_vocab, seed=3).eval()
    clone.load_state_dict(model.state_dict())
    with torch.no_grad():
        h = torch.randn(4, 16)
        torch.testing.assert_close(clone.compose(grad=False).log_probs(h), model.compose(grad=False).log_probs(h))


def test_tied_projection_regularization():
    model = make("tied", projection_reg=0.01)
    assert model.regularization().item() == pytest.approx(0.01 * 16)
    assert make("tied").regularization().item() == 0.0


def test_eval_composition_is_cached_until_parameters_change():
    model = make("groc").eval()
    with torch.no_grad():
        a = model.compose(grad=False)
        assert model.compose(grad=False) is a
        model.output_layer.project.bias.add_(1.0)
        assert model.compose(grad=False) is not a


@pytest.mark.parametrize("kind,kw", [("groc", {}), ("adaptive", {"cutoffs": [3, 7]})])
def test_config_json_round_trip(kind, kw):
    config = tiny_config(kind, **kw)  # groc's char_filters are tuples, which JSON makes lists
    again = ModelConfig.from_dict(json.loads(json.dumps(dataclasses.asdict(config))))
    assert again == config and type(again) is type(config)
    with pytest.raises(ValueError, match="output"):
        ModelConfig(output="nope")


def test_lexicon_from_parquet(tmp_path):
    path = tmp_path / "lex.parquet"
    table = pa.table({
        "word": ["cat", "dog"],
        "relations": [["feline"], []],
        "definition": [["a", "small", "animal"], ["a", "canine"]],
    })
    pq.write_table(table, path)
    lex = Lexicon.from_parquet(path)
    assert lex.relations == {"cat": ["feline"]}
    assert lex.definitions["dog"] == ["a", "canine"]
    assert lex.relations_of("Cat") == ["feline"]


def test_paper_parameter_counts():
    vocab = [f"w{i}" for i in range(10000)]
    counts = {}
    for kind in ("tied", "lookup", "adaptive"):
        with torch.device("meta"):
            counts[kind] = build_model(ModelConfig(output=kind), vocab).num_parameters()
    assert 9.5e6 < counts["tied"] < 10.5e6
    assert 12.5e6 < counts["lookup"] < 13.5e6
    assert 7.5e6 < counts["adaptive"] < 8.5e6


def test_window_conv_max_gradient():
    from groc_cli.models.chars import WindowConvMax

    torch.manual_seed(0)
    bags = torch.randint(0, 33, (7, 6, 3))
    table = torch.randn(33, 5, dtype=torch.double, requires_grad=True)
    invalid = torch.zeros(7, 6, dtype=torch.bool)
    invalid[0, 3:] = True
    assert torch.autograd.gradcheck(lambda t: WindowConvMax.apply(t, None, bags, invalid), (table,))
    reference = torch.nn.functional.embedding_bag(bags.reshape(-1, 3), table, mode="sum").view(7, 6, 5)
    reference = reference.masked_fill(invalid[:, :, None], float("-inf")).amax(1)
    torch.testing.assert_close(WindowConvMax.apply(table, None, bags, invalid), reference)


def test_window_conv_max_gradient_with_ties_matches_max():
    """Repeated windows tie exactly (a word with a letter twice, for a width-1 filter): the
    gradient goes to the first maximal window only, as torch's max(dim) routes it."""
    from groc_cli.models.chars import WindowConvMax

    torch.manual_seed(0)
    bags = torch.randint(0, 4, (50, 9, 2))  # 4 table rows: most windows repeat within a word
    invalid = torch.zeros(50, 9, dtype=torch.bool)
    invalid[::3, 6:] = True
    table = torch.randint(-2, 3, (4, 6)).double().requires_grad_(True)
    weights = torch.randn(50, 6, dtype=torch.double)
    (WindowConvMax.apply(table, None, bags, invalid) * weights).sum().backward()
    ours = table.grad.clone()
    table.grad = None
    y = torch.nn.functional.embedding_bag(bags.reshape(-1, 2), table, mode="sum").view(50, 9, 6)
    values = y.masked_fill(invalid[:, :, None], float("-inf")).max(dim=1).values
    (values * weights).sum().backward()
    assert bool((y == values[:, None, :]).sum(1).gt(1).any())  # the case under test: ties exist
    torch.testing.assert_close(ours, table.grad)


def test_window_conv_max_accumulates_bf16_gradients_in_float32():
    # Under --amp the byte table arrives in bfloat16. Each table row sums thousands of
    # (word, filter) gradient terms; a bfloat16 accumulator lost ~6% of the gradient here
    # and made GroC stall and the convolutional layer diverge in paper-scale CUDA runs.
    from groc_cli.models.chars import WindowConvMax

    g = torch.Generator().manual_seed(0)
    rows, filters, n, P, W = 50, 16, 20000, 8, 3
    table = torch.randn(rows * W, filters, generator=g).bfloat16()
    bags = torch.randint(0, rows, (n, P, W), generator=g) + torch.arange(W) * rows
    grad = torch.randn(n, filters, generator=g).bfloat16()
    low = table.clone().requires_grad_()
    out = WindowConvMax.apply(low, None, bags, None)
    out.backward(grad)
    exact = table.double().requires_grad_()
    WindowConvMax.apply(exact, None, bags, None).backward(grad.double())
    assert low.grad.dtype == torch.bfloat16
    assert float((low.grad.double() - exact.grad).norm() / exact.grad.norm()) < 0.005


def test_char_encoder_backward_skips_only_masked_offsets():
    """The backward scatters offset k only into filters wider than k; every parameter's
    gradient equals the one from scattering into all filters (the rest are masked)."""
    from groc_cli.models.chars import CharEncoder, StringTable

    torch.manual_seed(0)
    encoder = CharEncoder(8, [(1, 4), (2, 4), (3, 6), (5, 6)], 1).double()
    assert encoder.offset_first_filter == (0, 4, 8, 14, 14)
    table = StringTable(["cat", "catalogue", "a", "anna", "mississippi", "tattoo"])
    grads = []
    for first in (encoder.offset_first_filter, (0,) * encoder.max_width):
        encoder.offset_first_filter = first
        encoder.zero_grad()
        out = torch.cat([encoder(table.chars[i : i + 1, : int(table.lengths[i])], table.lengths[i : i + 1])
                         for i in range(len(table.strings))])
        (out * torch.linspace(-1, 1, out.numel(), dtype=torch.double).view_as(out)).sum().backward()
        grads.append([p.grad.clone() for p in encoder.parameters()])
    for ours, full in zip(*grads):
        torch.testing.assert_close(ours, full)


def test_char_encoding_independent_of_batch_padding():
    layer = make("groc").output_layer.eval()
    table = layer._chars
    lengths = layer._lengths
    with torch.no_grad():
        mixed = layer.chars(table, lengths)  # one padded batch of mixed lengths
        bucketed = encode_strings(layer.chars, table, lengths, chunk=2)
    torch.testing.assert_close(mixed, bucketed, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_output_layers_under_bf16_autocast(kind):
    # CPU oneDNN has no bf16 LSTM on every machine, so the prefix LSTM stays out of
    # this check; on CUDA the whole forward runs under autocast.
    model = make(kind, **({"projection_reg": 0.1} if kind == "tied" else {}))
    ids = torch.randint(0, len(VOCAB), (4, 2))
    hidden = torch.randn(8, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        comp = model.compose(grad=True)
        emb = model.output_layer.embed(ids, comp)
        lp = comp.log_probs(hidden)
        loss = comp.nll(hidden, ids.reshape(-1)).mean() + model.regularization()
    assert emb.shape == (4, 2, 16)
    assert lp.dtype == torch.float32 and torch.isfinite(lp).all()
    (loss + emb.float().pow(2).mean()).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("launch_cost", [0, 3, 1000])
def test_merged_length_buckets_give_the_same_encodings_and_gradients(launch_cost):
    """CUDA merges neighbouring byte lengths into fewer buckets (BucketPlan launch_cost);
    any grouping must give the per-length buckets' encodings and parameter gradients."""
    from groc_cli.models.chars import BucketPlan, CharEncoder, StringTable

    torch.manual_seed(0)
    encoder = CharEncoder(8, [(1, 4), (2, 4), (3, 6), (5, 6)], 1).double()
    words = ["a", "cat", "dog", "anna", "tattoo", "catalogue", "mississippi", "internationalisation", "ox", "hmmm"]
    table = StringTable(words, max_chars=16)
    weights = torch.linspace(-1, 1, len(words) * encoder.out_dim, dtype=torch.double).view(len(words), -1)
    results = []
    for cost in (0, launch_cost):
        plan = BucketPlan(encoder, table.chars, table.lengths, launch_cost=cost)
        encoder.zero_grad()
        out = plan.encode(encoder)
        (out * weights).sum().backward()
        results.append((len(plan.buckets), out.detach(), [p.grad.clone() for p in encoder.parameters()]))
    (n_ref, out_ref, grads_ref), (n, out, grads) = results
    if launch_cost >= 1000:
        assert n == 1 < n_ref  # everything in one padded bucket
    torch.testing.assert_close(out, out_ref)
    for ours, ref in zip(grads, grads_ref):
        torch.testing.assert_close(ours, ref)


def test_composition_reuses_its_bucket_plan_until_the_vocabulary_changes():
    model = make("groc").eval()
    layer = model.output_layer
    with torch.no_grad():
        first = layer.compose_inputs()
        plans = dict(layer._plans._plans)
        assert len(plans) == 1
        torch.testing.assert_close(layer.compose_inputs(), first)
        assert layer._plans._plans == plans  # reused, not rebuilt
        layer.set_vocab(VOCAB + ["catalogue"])
        assert layer._plans._plans == {}
        assert layer.compose_inputs().shape[0] == len(VOCAB) + 1


def _naive_surface(encoder, word_bytes: list[int]) -> torch.Tensor:
    """One word's surface encoding the textbook way, with plain autograd: byte embedding
    (PAD embeds to zero), one Conv1d per filter width over the word padded with width - 1
    PAD bytes, max over the windows that start before the final EOW, then conv bias,
    activation and highway layers."""
    from groc_cli.models.chars import PAD

    W, E = encoder.max_width, encoder.char_emb
    ids = torch.tensor(word_bytes + [PAD] * (W - 1))
    x = encoder.embedding(ids) * (ids != PAD).to(encoder.embedding.weight.dtype)[:, None]  # [L + W - 1, E]
    kernel = (encoder.conv_weight * encoder.conv_mask).view(W, E, -1)  # offset, byte dim, filter
    starts = max(len(word_bytes) - 1, 1)
    pooled = []
    for f in range(kernel.size(2)):
        w = int(encoder.filter_widths[f])
        weight = kernel[:w, :, f].t().unsqueeze(0)  # Conv1d weight [1 filter, E, w]
        y = torch.nn.functional.conv1d(x.t().unsqueeze(0), weight)[0, 0, :starts]
        pooled.append(y.max())
    h = encoder.activation(torch.stack(pooled) + encoder.conv_bias)
    for hw in encoder.highways:
        transform, gate = hw(h).chunk(2, dim=-1)
        gate = torch.sigmoid(gate)
        h = gate * encoder.highway_activation(transform) + (1 - gate) * h
    return h


def test_composition_and_its_gradients_equal_a_naive_float64_implementation():
    """Every speed device of the composition (folded byte table, length buckets, the
    custom max-pool and its scatter backward, the permutation back to string order, the
    deduplicated string table, blockwise projection) computes what the textbook
    formulation computes: the same E_in and the same gradient for every parameter."""
    from groc_cli.models.chars import encode_word

    words = VOCAB + ["mississippi", "tattoo", "aaaaaa", "x"]  # repeated letters tie within a word
    torch.manual_seed(0)
    layer = build_model(tiny_config("groc"), words, LEXICON).output_layer.double()
    weights = torch.randn(len(words), 16, dtype=torch.double)
    (layer.compose_inputs() * weights).sum().backward()
    ours = {name: p.grad.clone() for name, p in layer.named_parameters() if p.grad is not None}
    layer.zero_grad()
    enc, f = layer.chars, layer.chars.out_dim
    cache: dict[str, torch.Tensor] = {}

    def surface(word: str) -> torch.Tensor:
        if word not in cache:
            cache[word] = _naive_surface(enc, encode_word(word, layer.config.max_word_chars))
        return cache[word]

    rows = []
    for w in words:
        c = surface(w)
        rels, defs = LEXICON.relations_of(w, 3), LEXICON.definition_of(w, 10)
        r = torch.stack([surface(x) for x in rels]).mean(0) if rels else torch.zeros(f, dtype=torch.double)
        d = torch.stack([surface(x) for x in defs]).mean(0) if defs else torch.zeros(f, dtype=torch.double)
        rows.append(layer.project(torch.cat([c, r, d])))
    naive = torch.stack(rows)
    (naive * weights).sum().backward()
    with torch.no_grad():
        torch.testing.assert_close(layer.compose_inputs(), naive)
    reference = {name: p.grad for name, p in layer.named_parameters() if p.grad is not None}
    assert set(ours) == set(reference) and "chars.conv_weight" in ours
    for name, grad in reference.items():
        # Entries past a filter's width are held at zero by the mask: neither path moves them.
        torch.testing.assert_close(ours[name], grad, msg=name)


@pytest.mark.slow
def test_paper_size_surface_encoder_gives_the_papers_groc_parameter_counts():
    """Table 2: GroC 9M on PTB and WikiText-2; Table 11: 9.7M. The configs' encoder (1,024 filters of widths
    1-6, a 1,024-wide highway and a 1,024 -> d projection) gives them within 5%, with either bias."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "recipes" / "configs"
    for dataset, size in (("penn", 10000), ("wikitext2", 33278)):
        settings = tomllib.loads((root / dataset / "groc.toml").read_text())["model"]
        assert settings["char_projection"] and sum(n for _, n in settings["char_filters"]) == 1024
        for bias in ("composed", "free"):
            n = build_model(ModelConfig(**settings, bias=bias), [f"w{i}" for i in range(size)]).num_parameters()
            assert 9.0e6 * 0.95 <= n <= 9.7e6 * 1.05, (dataset, bias, n)
        small = tomllib.loads((root / dataset / "groc-small-encoder.toml").read_text())["model"]
        assert "char_filters" not in small  # groc's default 256-filter encoder, kept under its own name
        assert build_model(ModelConfig(**small), [f"w{i}" for i in range(size)]).num_parameters() < 7.5e6


@pytest.mark.parametrize("kind", ["groc", "convolutional"])
def test_char_projection_maps_the_surface_encoding_to_emb(kind):
    model = make(kind, char_projection=True)
    chars = model.output_layer.chars
    assert chars.out_dim == 16 and chars.n_filters == 32 and chars.projection.weight.shape == (16, 32)
    assert chars.projection.bias is None
    if kind == "groc":
        assert model.output_layer.project.weight.shape == (16, 3 * 16)  # [c; r; d] in emb dimensions
    comp = model.compose()
    h, _ = model(torch.tensor([[2], [4]]), model.init_state(1), comp)
    comp.nll(h, torch.tensor([[4], [6]])).sum().backward()
    assert chars.projection.weight.grad.abs().sum() > 0
