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

def test_a_large_world_is_made_and_worlds_made_so_far_stay_as_they_were():
    "400 entities a kind (the GPU experiment's warm world) needs 3-syllable names; 2,400 names were beyond 2 syllables"
    import hashlib, json, threading
    from venus_nb.synth import make_world, MAX_ENTITIES, SynthConfig
    made = []
    t = threading.Thread(target=lambda: made.append(make_world(0, 400)), daemon=True)
    t.start()
    t.join(30)
    assert made and len(made[0]) == 6 * 400 and len({e.slug for e in made[0].values()}) == 2400   # it looped forever
    digest = lambda w: hashlib.sha256(json.dumps({k: (v.kind, v.facts) for k, v in w.items()},
                                                 sort_keys=True).encode()).hexdigest()[:16]
    assert (digest(make_world(3, 112)), digest(make_world(7, 60))) == ('48fd70d8787299ed', 'b1b394bd913e5590')
    with pytest.raises(ValueError, match=f'1 to {MAX_ENTITIES:,} entities'): make_world(0, MAX_ENTITIES + 1)
    with pytest.raises(ValueError, match='SynthConfig.entities must be in'): SynthConfig(entities=10**6)

def test_a_negative_seed_is_refused():
    "random.Random(-1) is random.Random(1): seed -1 would be seed 1's world"
    from venus_nb.synth import make_world, SynthConfig
    with pytest.raises(ValueError, match='a world seed is an int >= 0'): make_world(-1)
    with pytest.raises(ValueError, match='SynthConfig.seed must be in'): SynthConfig(seed=-1)
