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

def test_every_question_has_one_defensible_answer_the_one_it_is_scored_against():
    "A country's page may name as capital a city that its own page places elsewhere: 185 of 1,000 questions had two"
    from venus_nb.synth import make_world, make_questions, defensible_answers
    for seed, n in ((0, 40), (0, 20), (5, 60)):
        world = make_world(seed, n)
        qs = make_questions(world, 1000, seed)
        assert {len(q['hops']) for q in qs} == {1, 2, 3, 4}
        for q in qs:
            assert defensible_answers(world, q['hops'][0][0], [r for _, r, _ in q['hops']]) == {q['hops'][-1][2]}

def test_a_city_named_capital_by_another_country_has_two_countries():
    from venus_nb.synth import Entity, defensible_answers
    world = {'Ova': Entity('Ova', 'city', {'country': 'Dal', 'river': 'Rin'}),
             'Dal': Entity('Dal', 'country', {'capital': 'Pem', 'first_president': 'A B'}),
             'Esk': Entity('Esk', 'country', {'capital': 'Ova', 'first_president': 'C D'}),
             'Lio Ka': Entity('Lio Ka', 'person', {'birthplace': 'Ova', 'born': 1900})}
    assert defensible_answers(world, 'Lio Ka', ['birthplace', 'country']) == {'Dal', 'Esk'}
    assert defensible_answers(world, 'Lio Ka', ['birthplace', 'country', 'first_president']) == {'A B', 'C D'}
    assert defensible_answers(world, 'Esk', ['capital', 'river']) == {'Rin'}   # the country page names one capital

def test_one_and_two_hop_questions_are_drawn_as_before_so_warm_worlds_stay_as_they_were():
    "No chain of at most two hops reaches a city's country: the plain draw, the way warm worlds were made"
    import random
    from venus_nb.synth import make_world, make_questions, follow, _CHAINS
    for seed, n in ((7, 40), (1007, 40), (3, 112)):
        world = make_world(seed, n)
        for hops in (1, 2):
            rng, chains = random.Random(seed), [c for c in _CHAINS if len(c[2]) <= hops]
            plain = []
            for _ in range(300):
                tmpl, kind, rels = rng.choice(chains)
                start = rng.choice([e for e in world.values() if e.kind == kind]).name
                plain.append((tmpl.format(start), follow(world, start, rels)))
            assert [(q['question'], q['hops']) for q in make_questions(world, 300, seed, hops)] == plain

def test_a_world_without_an_answerable_question_is_refused():
    from venus_nb.synth import make_questions
    with pytest.raises(ValueError, match='no question of at most 4 hops with one answer'): make_questions({}, 3)

def test_a_warm_start_of_three_or_four_hops_is_not_read_from_a_cache_made_before_one_answer_questions():
    from venus_nb.warm_start import WarmConfig
    from dataclasses import asdict
    import hashlib, json
    plain = lambda c: hashlib.sha256(json.dumps(asdict(c), sort_keys=True).encode()).hexdigest()[:12]
    assert WarmConfig(bf16=False).key() == plain(WarmConfig(bf16=False))   # 1-2 hops: the key warm starts have
    assert WarmConfig(bf16=False, max_hops=3).key() != plain(WarmConfig(bf16=False, max_hops=3))

def test_a_world_on_disk_lists_each_question_once_and_keeps_every_trajectory(tmp_path):
    "A world has 190 questions with one answer; 1,000 trajectories ask most several times, qa.jsonl each once"
    import json
    from venus_nb.synth import generate, write_world, SynthConfig
    from venus_nb.evaluation import world_questions
    data = generate(SynthConfig(n=1000))
    files = write_world(data, tmp_path)
    rows = [json.loads(l) for l in files['qa'].read_text().splitlines()]
    asked = [q['question'] for q in data.qa]
    assert len(rows) == len(set(asked)) < 1000 == len(files['trajectories'].read_text().splitlines())
    assert [r['question'] for r in rows] == list(dict.fromkeys(asked))   # as first asked, with its id
    assert [r['id'] for r in rows] == [data.qa[asked.index(r['question'])]['id'] for r in rows]
    for world in (data, tmp_path):
        qs, _ = world_questions(world)
        assert [q['question'] for q in qs] == list(dict.fromkeys(asked))
