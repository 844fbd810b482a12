"""The GGUF header walk that finds the scoring model's output matrix: the same answer as gguf.GGUFReader, without
building the tokenizer's metadata (7-9 s on the shipped models, measured 2026-12-05; the walk takes 0.09 s)."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf not installed: pip install '.[local]'")

from pipeline.model.local import gguf_header  # noqa: E402
from pipeline.model.local.logprobs import OutputLayer  # noqa: E402


def _write(path, *, alignment=None, quantised=True):
    w = gguf.GGUFWriter(str(path), "qwen2")
    if alignment:
        w.add_custom_alignment(alignment)
    # What made the reader slow, and what a walk must step over correctly: arrays of strings, of numbers, strings
    # with multi-byte characters.
    w.add_token_list([f"tok{i}" for i in range(300)] + ["你好", "é"])
    w.add_token_types([1] * 302)
    w.add_token_merges(["a b", "c d"])
    w.add_string("general.name", "测试 model")
    w.add_float32("some.float", 0.5)
    w.add_bool("some.flag", True)
    w.add_tensor("token_embd.weight", np.arange(64 * 3, dtype=np.float32).reshape(3, 64))
    rows = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    if quantised:
        raw = gguf.quants.quantize(rows, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("output.weight", raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
        w.add_tensor("output.weight", rows)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return rows


@pytest.mark.parametrize("alignment", [None, 64])
@pytest.mark.parametrize("quantised", [True, False])
def test_the_header_walk_finds_every_tensor_where_the_reader_does(tmp_path, alignment, quantised):
    path = tmp_path / "m.gguf"
    _write(path, alignment=alignment, quantised=quantised)
    ours = gguf_header.tensors(path)
    reader = gguf.GGUFReader(str(path))
    assert set(ours) == {t.name for t in reader.tensors}
    for t in reader.tensors:
        assert ours[t.name].offset == int(t.data_offset)
        assert ours[t.name].type == int(t.tensor_type)
        assert ours[t.name].dims == tuple(int(x) for x in t.shape)


@pytest.mark.parametrize("quantised", [True, False])
def test_the_output_layer_reads_the_rows_the_reader_holds(tmp_path, quantised):
    path = tmp_path / "m.gguf"
    rows = _write(path, quantised=quantised)
    layer = OutputLayer(path)
    tensor = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == "output.weight")
    want = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    assert layer.vocab == 5
    assert np.array_equal(layer.block(0, 5), want)
    assert np.array_equal(layer.rows([3, 1]), want[[3, 1]])
    assert np.allclose(want, rows, atol=0.05)  # and it is the matrix that was written


def test_not_a_gguf_is_said_in_one_line(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf_header.tensors(path)
