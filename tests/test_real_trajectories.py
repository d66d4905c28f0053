"Parsing, round trip and exact token spans on every real trajectory in ../shared/data."
import json, re
import pytest
from conftest import shared_file
from venus_nb.trajectory import Trajectory, from_record

def test_dr_venus_kinds_match_calls(dr_venus_records):
    for rec in dr_venus_records:
        t = from_record(rec)
        text = ''.join(m['content'] for m in rec['messages'] if m['role'] == 'assistant')
        counts = t.kind_counts()
        assert counts.get('search', 0) == len(re.findall(r'"name": "search"', text))
        assert counts.get('visit', 0) == len(re.findall(r'"name": "visit"', text))
        assert counts.get('answer') == 1 and t.turns[-1].kind == 'answer' and t.turns[-1].answer
        # every tool turn passes the DR-Venus checker; two final turns quote <answer> inside their thinking
        assert all(i == len(t.turns) - 1 for i, _ in t.format_errors()), t.format_errors()
        assert t.to_messages() == rec['messages']

def test_dr_venus_final_turn_verdicts(dr_venus_records):
    errs = [from_record(r).format_errors() for r in dr_venus_records]
    assert sum(map(len, errs)) == 2 and all(e[0][1] == 'expected one <answer>, found 2' for e in errs if e)

@pytest.mark.parametrize('rel', ['webdancer/sample_traj.jsonl', 'fireact/hotpotqa.jsonl'])
def test_jsonl_sources_parse_and_round_trip(rel):
    lines = shared_file(rel).read_text().splitlines()
    for line in lines:
        rec = json.loads(line)
        t = Trajectory.from_messages(rec['messages'])
        assert t.to_messages() == rec['messages']
        assert all(tr.kind in {'search', 'visit', 'answer', 'other', 'invalid'} for tr in t.turns)

def test_fireact_react_turns_are_read():
    recs = [json.loads(l) for l in shared_file('fireact/hotpotqa.jsonl').read_text().splitlines()]
    kinds = [tr.kind for r in recs for tr in Trajectory.from_messages(r['messages']).turns]
    assert kinds.count('search') > 500 and kinds.count('answer') >= 450

def test_webdancer_calls_are_read():
    recs = [json.loads(l) for l in shared_file('webdancer/sample_traj.jsonl').read_text().splitlines()]
    ts = [Trajectory.from_messages(r['messages']) for r in recs]
    counts = [t.kind_counts() for t in ts]
    assert sum(c.get('search', 0) for c in counts) == 204 and sum(c.get('visit', 0) for c in counts) == 18

def _check_spans(t, tok):
    tk = t.tokenize(tok)
    assert tk.ids == tok.apply_chat_template(t.to_messages(), tokenize=True, return_dict=False)
    assert tk.n_trained == sum(b - a for a, b in tk.assistant_spans)
    for turn, (a, b), obs in zip(t.turns, tk.assistant_spans, tk.observation_spans):
        assert tok.decode(tk.ids[b-1:b]) == '<|im_end|>'
        if obs: assert turn.observation.strip()[:40] in tok.decode(tk.ids[obs[0]:obs[1]])
        if obs: assert not any(tk.loss_mask[obs[0]:obs[1]])
    return tk

def test_qwen3_spans_exact(dr_venus_records, qwen3_tok):
    for rec in dr_venus_records: _check_spans(from_record(rec), qwen3_tok)

def test_smollm2_spans_exact(dr_venus_records, smol_tok):
    for rec in dr_venus_records[:3]:
        t = from_record(rec)
        tk = _check_spans(t, smol_tok)
        a, b = tk.assistant_spans[0]
        assert smol_tok.decode(tk.ids[a:b]) == t.turns[0].raw + '<|im_end|>'
