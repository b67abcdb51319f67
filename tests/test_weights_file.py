"""weights_file.py reads a safetensors file as the safetensors library does (every tensor equal to `load_file`'s),
straight into the tensors given, and names a truncated or malformed file."""
import pytest
import torch
from safetensors.torch import load_file, save_file

from transformer.weights_file import WeightsFile

TENSORS = {"matrix": torch.randn(5, 7), "half": torch.randn(3, 4).half(), "scalar": torch.tensor(2.5),
           "empty": torch.zeros(0, 3), "brain": torch.randn(6).bfloat16()}


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(TENSORS, str(path), metadata={"format": "pt"})
    return path


def test_every_tensor_equals_the_librarys_read(saved):
    expected = load_file(str(saved))
    with WeightsFile(saved) as stored:
        assert stored.shapes == {name: tuple(t.shape) for name, t in TENSORS.items()}
        for name, tensor in expected.items():
            got = stored.read(name)
            assert got.dtype == tensor.dtype and torch.equal(got, tensor), name
        into = torch.empty(5, 7)
        stored.read_into("matrix", into)  # into the given memory
        assert torch.equal(into, TENSORS["matrix"])
        widened = torch.empty(3, 4)  # float16 in the file, float32 here: converted exactly
        stored.read_into("half", widened)
        assert torch.equal(widened, TENSORS["half"].float())


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-10], "do not fit the file"),
    (lambda data: data[:6], "length does not fit"),
    (lambda data: (200).to_bytes(8, "little") + b"{not json" + b" " * 200, "not JSON"),
    (lambda data: (2).to_bytes(8, "little") + b"[]", "not a JSON object"),
    (lambda data: data.replace(b'"F32"', b'"I99"', 1), "is not one of"),
])
def test_a_damaged_file_is_named(saved, damage, message):
    saved.write_bytes(damage(saved.read_bytes()))
    with pytest.raises(ValueError, match=message):
        WeightsFile(saved)
