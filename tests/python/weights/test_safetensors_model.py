"""gpuio.safetensors' whole-model API: save_model/load_model against safetensors.torch's
(shared and tied tensors, allocated and meta models, strict), and from_pretrained against transformers'
model_class.from_pretrained on tiny random GPT-2 and Llama checkpoints saved sharded with tied embeddings."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import gpuio.safetensors as gst

sft = pytest.importorskip("safetensors.torch")


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.norm = torch.nn.LayerNorm(4)
        self.register_buffer("scale", torch.arange(4.0))
        self.register_buffer("inv", torch.linspace(0, 1, 4), persistent=False)

    def forward(self, ids):
        return self.head(self.norm(self.emb(ids)) * self.scale * self.inv)


def _same_model(a: torch.nn.Module, b: torch.nn.Module, device: str | None = None) -> None:
    ta = dict(a.named_parameters(remove_duplicate=False)) | dict(a.named_buffers(remove_duplicate=False))
    tb = dict(b.named_parameters(remove_duplicate=False)) | dict(b.named_buffers(remove_duplicate=False))
    assert ta.keys() == tb.keys()
    for k in ta:
        assert ta[k].dtype == tb[k].dtype and ta[k].device == tb[k].device, k
        assert torch.equal(ta[k], tb[k]), k
        if device:
            assert tb[k].device.type == device


def test_save_model_keeps_one_name_as_safetensors(tmp_path):
    torch.manual_seed(0)
    m = Tied()
    sft.save_model(m, str(tmp_path / "ref.safetensors"))
    gst.save_model(m, tmp_path / "got.safetensors", metadata={"note": "x"})
    ref, got = sft.load_file(str(tmp_path / "ref.safetensors")), sft.load_file(str(tmp_path / "got.safetensors"))
    assert ref.keys() == got.keys() and "emb.weight" in got and "head.weight" not in got
    assert all(torch.equal(ref[k], got[k]) for k in ref)
    with gst.safe_open(tmp_path / "got.safetensors") as f:
        assert f.metadata() == {"note": "x", "head.weight": "emb.weight"}
    meta = {"head.weight": "mine"}
    gst.save_model(m, tmp_path / "own.safetensors", metadata=meta)
    assert meta == {"head.weight": "mine"}  # the caller's dict is left alone; its entries win
    with gst.safe_open(tmp_path / "own.safetensors") as f:
        assert f.metadata() == {"head.weight": "mine"}


def test_load_model_allocated_as_safetensors(tmp_path):
    torch.manual_seed(0)
    src = Tied()
    p = str(tmp_path / "m.safetensors")
    sft.save_model(src, p)
    ref, got = Tied(), Tied()
    assert sft.load_model(ref, p) == gst.load_model(got, p) == (set(), [])
    _same_model(ref, got)
    _same_model(src, got)
    assert got.head.weight is got.emb.weight
    # the file holding both tied names: the kept one is loaded, the other reported unexpected (as safetensors)
    both = {k: v.clone() for k, v in src.state_dict().items()}
    sft.save_file(both, str(tmp_path / "both.safetensors"))
    r = sft.load_model(Tied(), str(tmp_path / "both.safetensors"), strict=False)
    g = gst.load_model(Tied(), tmp_path / "both.safetensors", strict=False)
    assert (set(r[0]), sorted(r[1])) == (set(g[0]), sorted(g[1])) == (set(), ["head.weight"])
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "head.weight"'):
        gst.load_model(Tied(), tmp_path / "both.safetensors")


def test_load_model_strict_missing_unexpected_as_safetensors(tmp_path):
    torch.manual_seed(0)
    sd = {k: v for k, v in Tied().state_dict().items() if k not in ("head.weight", "norm.bias")}
    sd["extra"] = torch.ones(3)
    p = str(tmp_path / "m.safetensors")
    sft.save_file(sd, p)
    r = sft.load_model(Tied(), p, strict=False)
    g = gst.load_model(Tied(), p, strict=False)
    assert set(g[0]) == set(r[0]) == {"norm.bias"} and sorted(g[1]) == sorted(r[1]) == ["extra"]
    with pytest.raises(RuntimeError) as ref:
        sft.load_model(Tied(), p)
    with pytest.raises(RuntimeError) as got:
        gst.load_model(Tied(), p)
    assert str(got.value) == str(ref.value)


def test_load_model_into_a_meta_model(tmp_path):
    torch.manual_seed(0)
    src = Tied().to(torch.float64)
    p = tmp_path / "m.safetensors"
    gst.save_model(src, p)
    with torch.device("meta"):
        m = Tied()
    with pytest.raises(RuntimeError, match='Non-persistent buffer.*"inv"'):  # only the module's code knows it
        gst.load_model(m, p)
    with torch.device("meta"):
        m = Tied()
    missing, unexpected = gst.load_model(m, p, strict=False)
    assert missing == {"inv"} and unexpected == []
    assert m.head.weight is m.emb.weight and m.emb.weight.device.type == "cpu"
    assert m.emb.weight.dtype == torch.float32  # the model's dtype, as a copy into it would give
    assert torch.equal(m.emb.weight, src.emb.weight.float()) and m.emb.weight.requires_grad
    # parameters on meta, buffers built (as accelerate's init_empty_weights leaves them): a whole model
    m = Tied()
    for mod in m.modules():
        for k, v in [(k, v) for k, v in mod._parameters.items() if v is not None]:
            mod._parameters[k] = torch.nn.Parameter(v.to("meta"))
    m.head.weight = m.emb.weight
    assert gst.load_model(m, p) == (set(), [])
    ref = Tied()
    ref.load_state_dict({k: v.float() for k, v in src.state_dict().items()})
    _same_model(ref, m, "cpu")
    ids = torch.tensor([1, 2, 3])
    assert torch.equal(ref(ids), m(ids))


def _tiny(kind: str):
    transformers = pytest.importorskip("transformers")
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=300, n_positions=32,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel, cfg
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=300,
                                   max_position_embeddings=32, tie_word_embeddings=True, bos_token_id=0,
                                   eos_token_id=0)
    return transformers.LlamaForCausalLM, cfg


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def saved(request, tmp_path_factory):
    cls, cfg = _tiny(request.param)
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp(request.param)
    cls(cfg).save_pretrained(d, max_shard_size="100KB")
    assert (d / "model.safetensors.index.json").exists() and len(list(d.glob("*.safetensors"))) > 2
    return cls, d


@pytest.mark.parametrize("kwargs", [{}, {"dtype": torch.bfloat16}, {"device_map": "cpu"}, {"device_map": {"": "cpu"}}])
def test_from_pretrained_is_transformers_model(saved, kwargs):
    cls, d = saved
    ref = cls.from_pretrained(d, **kwargs)
    got = gst.from_pretrained(cls, d, **kwargs)
    assert type(got) is type(ref) and got.training == ref.training is False
    _same_model(ref, got)
    assert got.lm_head.weight is got.get_input_embeddings().weight  # tied as transformers ties them
    assert ref.lm_head.weight is ref.get_input_embeddings().weight
    assert got.config.to_dict() == ref.config.to_dict() and got.generation_config == ref.generation_config
    ids = torch.tensor([[1, 5, 7, 2, 9, 4]])
    with torch.no_grad():
        assert torch.equal(ref(ids).logits, got(ids).logits)
    if "llama" in d.name:
        assert "model.rotary_emb.inv_freq" in dict(got.named_buffers())  # non-persistent, rebuilt as transformers does


def test_from_pretrained_auto_class_and_config_override(saved):
    import transformers

    cls, d = saved
    got = gst.from_pretrained(transformers.AutoModelForCausalLM, d)
    assert type(got) is cls
    layers = "n_layer" if "gpt2" in d.name else "num_hidden_layers"
    ref = cls.from_pretrained(d, **{layers: 1})
    got = gst.from_pretrained(cls, d, **{layers: 1})
    _same_model(ref, got)


def test_from_pretrained_refuses_in_one_line(saved, tmp_path):
    cls, d = saved
    for kwargs, match in (({"revision": "main"}, "revision='main': gpuio.safetensors.from_pretrained does not take"),
                          ({"device_map": "auto"}, "device_map='auto': .* one device"),
                          ({"device_map": {"a": "cpu", "b": "cpu"}}, "device_map=.*one device")):
        with pytest.raises(ValueError, match=match) as e:
            gst.from_pretrained(cls, d, **kwargs)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="path='org/model' is not a local directory"):
        gst.from_pretrained(cls, "org/model")
    (tmp_path / "config.json").write_text((d / "config.json").read_text())
    with pytest.raises(ValueError, match="no model.safetensors or model.safetensors.index.json"):
        gst.from_pretrained(cls, tmp_path)


def test_importing_gpuio_safetensors_does_not_import_transformers():
    code = "import sys, gpuio.safetensors; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("device_map", ["cuda", "cuda:0", {"": "cuda:0"}])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_gpu_from_pretrained_onto_cuda(saved, device_map):
    pytest.importorskip("accelerate", reason="transformers' device_map= needs accelerate")
    cls, d = saved
    ref = cls.from_pretrained(d, device_map=device_map)
    st: dict = {}
    got = gst.from_pretrained(cls, d, device_map=device_map, stats=st)  # CUDA reads beside the build's CUDA work
    assert st["rebuilt"] is False and st["device"].startswith("cuda")
    _same_model(ref, got, "cuda")
    assert got.lm_head.weight is got.get_input_embeddings().weight and not got.training
    ids = torch.tensor([[1, 5, 7, 2, 9, 4]], device="cuda")
    with torch.no_grad():
        assert torch.equal(ref(ids).logits, got(ids).logits)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_gpu_load_model_meta_onto_cuda(tmp_path):
    torch.manual_seed(0)
    src = Tied()
    gst.save_model(src, tmp_path / "m.safetensors")
    m = Tied()  # parameters on meta, buffers built on the CPU: load_model moves them to the device asked for
    for mod in m.modules():
        for k, v in [(k, v) for k, v in mod._parameters.items() if v is not None]:
            mod._parameters[k] = torch.nn.Parameter(v.to("meta"))
    m.head.weight = m.emb.weight
    assert gst.load_model(m, tmp_path / "m.safetensors", device="cuda") == (set(), [])
    _same_model(src.to("cuda"), m, "cuda")
    assert m.head.weight is m.emb.weight


def test_from_pretrained_builds_while_reading(saved):
    """The read runs beside transformers' build; every parameter is the read's own memory (or, cast to another
    dtype, copied after the read), and nothing is built twice."""
    cls, d = saved
    for kwargs in ({}, {"dtype": torch.bfloat16}):
        st: dict = {}
        got = gst.from_pretrained(cls, d, stats=st, **kwargs)
        ref = cls.from_pretrained(d, **kwargs)
        _same_model(ref, got)
        assert st["rebuilt"] is False
        with gst.safe_open(str(d / "model.safetensors.index.json"), framework="pt") as f:
            names = list(f.keys())
        assert st["tensors"] == len(names) and st["bytes"] == sum(
            t.numel() * t.element_size() for t in gst.load_file(str(d)).values())
        assert st["read_s"] > 0 and st["build_s"] > 0 and st["seconds"] >= st["build_s"]


def test_settle_keeps_the_reads_memory_casts_again_and_refuses_what_was_derived():
    from gpuio.safetensors._model import _settle

    state = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3)}
    m = torch.nn.Module()
    m.w = torch.nn.Parameter(state["w"])  # the read's own memory: left as it is
    m.b = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))  # cast while building: cast again
    m.missing = torch.nn.Parameter(torch.full((2,), 7.0))  # transformers' own init of a missing key
    assert _settle(m, state, {"missing_keys": {"missing"}, "mismatched_keys": set()})
    assert m.w.data_ptr() == state["w"].data_ptr() and torch.equal(m.b, torch.ones(3, dtype=torch.float64))
    assert torch.equal(m.missing, torch.full((2,), 7.0))
    m.tied = m.b  # another name of a copied tensor
    assert _settle(m, state, {"missing_keys": {"missing"}, "mismatched_keys": set()})
    same = torch.nn.Module()
    same.w = torch.nn.Parameter(state["w"].clone())  # a copy of its own dtype: derived, not a cast
    assert not _settle(same, state, {"missing_keys": set(), "mismatched_keys": set()})
    m.fused = torch.nn.Parameter(torch.zeros(6))  # derived from the state under another name
    assert not _settle(m, state, {"missing_keys": {"missing"}, "mismatched_keys": set()})


def test_build_while_reading_builds_again_where_a_tensor_was_derived(saved, monkeypatch):
    """A build that derived a tensor from the state (bytes not read yet) is redone once the read is done, from
    the random generators' state of the first build: as the sequential path gives it."""
    from gpuio.safetensors import _model

    cls, d = saved
    config = cls.config_class.from_pretrained(d)
    seen = []

    def build(state):
        seen.append(torch.rand(4))
        model, info = cls.from_pretrained(None, config=config, state_dict=state, output_loading_info=True)
        if len(seen) == 1:
            model.derived = torch.nn.Parameter(torch.zeros(1))  # not the state's, no name in it
        return model, info

    st: dict = {}
    model, _ = _model._build_while_reading(_model._weights(str(d), config), torch.device("cpu"), build, st)
    assert st["rebuilt"] is True and len(seen) == 2 and torch.equal(seen[0], seen[1])
    assert not hasattr(model, "derived")
    _same_model(cls.from_pretrained(d), model)


def test_build_while_reading_raises_the_reads_error_after_the_build(saved, monkeypatch):
    from gpuio.safetensors import _model, _read

    cls, d = saved
    config = cls.config_class.from_pretrained(d)
    built = []

    def failing(*a, **k):
        raise OSError(5, "injected: the read failed")

    monkeypatch.setattr(_read, "read_spans", failing)

    def build(state):
        built.append(1)
        return cls.from_pretrained(None, config=config, state_dict=state, output_loading_info=True)

    with pytest.raises(OSError, match="injected"):
        _model._build_while_reading(_model._weights(str(d), config), torch.device("cpu"), build, None)
    assert built == [1]
