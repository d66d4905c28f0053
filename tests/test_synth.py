"""The generated world on disk: a failed write keeps the old files whole."""
import pytest
from venus_nb.synth import SynthData, write_world

def test_write_world_keeps_the_old_files_when_a_write_fails(tmp_path):
    world = SynthData([{'id': 'd', 'text': 'a page'}], [{'id': 'q', 'question': 'q?', 'answer': 'a'}],
                      [{'question': 'q?', 'n': i} for i in range(500)])
    paths = write_world(world, tmp_path)
    old = {n: p.read_bytes() for n, p in paths.items()}
    world.records.insert(250, {'not': object()})   # json cannot write it: the write fails half way
    with pytest.raises(TypeError): write_world(world, tmp_path)
    assert {n: p.read_bytes() for n, p in paths.items()} == old
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(p.name for p in paths.values())
