"""Templates whose generation prompt opens the thinking (Qwen3-4B-Thinking-2507, DR-Venus' base): the model writes
from inside `<think>`, its turns are read with that opening in front, and the ids stay the generated ones."""
import pytest
from venus_nb.models import qwen3_tokenizer
from venus_nb.trajectory import Trajectory, thinking_opening, check_format, end_of_turn
from venus_nb.rollout import RolloutConfig, ScriptedEngine, rollout

@pytest.fixture(scope='module')
def q3(): return qwen3_tokenizer(thinking_2507=True)

def test_the_opening_is_read_from_the_template(q3, qwen3_tok, smol_tok):
    assert q3.apply_chat_template([{'role': 'user', 'content': 'q'}], tokenize=False,
                                  add_generation_prompt=True).endswith('<|im_start|>assistant\n<think>\n')
    assert (thinking_opening(q3), thinking_opening(qwen3_tok), thinking_opening(smol_tok)) == ('<think>\n', '', '')
    assert thinking_opening(qwen3_tok, enable_thinking=False) == ''   # an empty, closed thinking is not an opening

def test_generated_turns_pass_the_checker_and_spans_are_exact(q3, world):
    doc = world.docs[0]
    search = ('Look it up.\n</think>\n<tool_call>\n'
              f'{{"name": "search", "arguments": {{"query": ["{doc.title}"]}}}}\n</tool_call>')
    visit = ('Read it.\n</think>\n<tool_call>\n'
             f'{{"name": "visit", "arguments": {{"url": ["{doc.link}"], "goal": "facts"}}}}\n</tool_call>')
    answer = 'Done.\n</think>\n<answer>42</answer>'
    t = rollout(ScriptedEngine(q3, [search, visit, answer]), [{'question': 'q?', 'answer': '42'}], world,
                RolloutConfig(G=1, progress=False))[0]
    assert [x.kind for x in t.turns] == ['search', 'visit', 'answer'] and t.meta['stop'] == 'answer'
    assert t.format_errors() == []   # every turn well formed, the answer turn too
    assert [x.raw for x in t.turns] == ['<think>\n' + s for s in (search, visit, answer)]
    tk, eot = t.tokens, end_of_turn(q3)
    for (a, b), gen in zip(tk.assistant_spans, (search, visit, answer)):
        assert q3.decode(tk.ids[a:b]) == gen + eot   # the trained span is the generated ids, no opening
        assert q3.decode(tk.ids[:a]).endswith('<|im_start|>assistant\n<think>\n')
        assert all(tk.loss_mask[a:b]) and not any(tk.loss_mask[a - 3:a])
    assert q3.convert_tokens_to_ids('<think>') not in [tk.ids[i] for i in range(len(tk.ids)) if tk.loss_mask[i]]
    assert t.turns[1].observation and doc.title in t.turns[0].observation

def test_without_the_opening_every_turn_would_fail(q3, world):
    "What the kit did before: the generated text alone has no <think>, so every turn is malformed"
    assert check_format('Look.\n</think>\n<answer>x</answer>', True) == 'no <think>'
    assert check_format(thinking_opening(q3) + 'Look.\n</think>\n<answer>x</answer>', True) is None

def _strip_opening(rec):
    msgs = [dict(m, content=m['content'].removeprefix('<think>').removeprefix('\n')) if m['role'] == 'assistant' else m
            for m in rec['messages']]
    return dict(rec, messages=msgs)

def test_official_messages_stored_without_the_opening(dr_venus_records, q3):
    opening = thinking_opening(q3)
    for rec in dr_venus_records:
        orig = Trajectory.from_messages(rec['messages'], rec['question'], rec['gt'])
        bare = _strip_opening(rec)
        assert all(not m['content'].startswith('<think>') for m in bare['messages'] if m['role'] == 'assistant')
        read = Trajectory.from_messages(bare['messages'], rec['question'], rec['gt'], opening=opening)
        assert [(x.kind, x.format_error) for x in read.turns] == [(x.kind, x.format_error) for x in orig.turns]
        assert read.to_messages() == bare['messages']                       # the messages stay as stored
        assert read.shorten(100).turns[0].raw.startswith(opening)           # re-parsing keeps the opening
        unread = Trajectory.from_messages(bare['messages'], rec['question'], rec['gt'])
        assert {x.format_error for x in unread.turns} == {'no <think>'}
