"""Files and answers under hostile sizes and races: JSON arrays read within the record cap, cassettes appended (not
rewritten) per request, writes that two processes can race on without a torn file or an error, resume JSON read
through the capped reader, and OpenAI-compatible answers read within a deadline and a byte cap.

Every server here listens on 127.0.0.1; nothing reaches any other address."""
from conftest import ReplyHandler
import asyncio, http.server, json, math, multiprocessing as mp, os, sys, threading, time, tracemalloc, warnings
from pathlib import Path
import httpx, pytest
from venus_nb.base import MAX_RECORD_BYTES, atomic_open, read_records, write_atomic
from venus_nb.corpus import load_corpus
from venus_nb.web import Cassette
from venus_nb.synth import SynthData, write_world

MB = 1 << 20

def sparse(path:Path, head:bytes, size:int)->Path:
    "`path` holding `head`, then NUL bytes up to `size` that take no disk space"
    with open(path, 'wb') as f:
        f.write(head)
        f.truncate(size)
    return path

def peak_mb(f)->tuple:
    "What `f()` returns (or raises), and the most memory Python held while it ran, in MiB"
    tracemalloc.start()
    try:
        try: out = f()
        except Exception as e: out = e
        return out, tracemalloc.get_traced_memory()[1] / MB
    finally: tracemalloc.stop()

# ---- JSON arrays are read a record at a time, each record within the cap

def test_json_array_over_the_cap_is_never_read_whole(tmp_path):
    big = sparse(tmp_path/'big.json', b'[{"id": "a", "title": "A", "text": "first"}, {"id": "b", "text": "',
                 4 * MAX_RECORD_BYTES)
    out, peak = peak_mb(lambda: read_records(big, array=True))
    assert isinstance(out, ValueError) and 'big.json: not a valid JSON array' in str(out), out
    assert peak < 16, f'{peak:.0f} MiB held to read a {big.stat().st_size / MB:.0f} MiB array'
    out, peak = peak_mb(lambda: load_corpus(big))
    assert isinstance(out, ValueError) and 'big.json' in str(out) and peak < 16, (out, peak)

def test_json_array_record_over_the_cap_is_a_load_error_naming_the_file_and_the_cap(tmp_path):
    p = tmp_path/'long.json'
    p.write_text(json.dumps([{'id': 'a', 'text': 'short'}, {'id': 'b', 'text': 'x' * 5000},
                             {'id': 'c', 'text': 'never read'}]))
    kept, errors = read_records(p, array=True, max_line_bytes=1000)
    assert kept == [{'id': 'a', 'text': 'short'}]
    assert (len(errors) == 1 and errors[0].source == str(p) and errors[0].index == 1
            and '1,000 bytes' in errors[0].reason), errors

def test_json_array_streamed_reads_like_json_loads(tmp_path):
    recs = [{'n': i, 'text': 'café ☃ 😀 ' * (i % 7), 'f': [1.5e3, -2, None, True, False, {'x': 'a\\"b\\u00e9'}]}
            for i in range(3000)]
    for i, text in enumerate([json.dumps(recs), json.dumps(recs, indent=3, ensure_ascii=False),
                              '\n  ' + json.dumps(recs, separators=(',', ':'))]):
        p = tmp_path/f'{i}.json'
        p.write_bytes(text.encode())   # across many 64 KiB chunks, cut anywhere
        assert read_records(p, array=True) == (recs, [])
    for text in ['[]', ' [ ] \n', '[1, 2.5, "x", null, -0, 1e400]']:
        (p := tmp_path/'s.json').write_text(text)
        assert read_records(p, array=True) == (json.loads(text), [])
    (p := tmp_path/'bom.json').write_bytes(b'\xef\xbb\xbf[{"n": 1}]')
    assert read_records(p, array=True) == ([{'n': 1}], [])
    (p := tmp_path/'deep.json').write_text('[{"n": 1}, ' + '[' * 150 + ']' * 150 + ', {"n": 2}]')
    kept, errors = read_records(p, array=True)
    assert kept == [{'n': 1}, {'n': 2}] and [e.index for e in errors] == [1] and 'deeper than 100' in errors[0].reason
    for bad in ['[1, 2,]', '[1 2]', '[1, 2] 3', '[1, 2', '[{"n": 1}, tru', '["a\x00"]', '[1, 2]]']:
        (p := tmp_path/'bad.json').write_text(bad)
        with pytest.raises(ValueError, match='bad.json: not a valid JSON array'): read_records(p, array=True)

# ---- cassettes are appended one line per request

def record(tape:Path, n:int):
    "Record `n` requests (2 KiB bodies) through a `Cassette` into `tape`"
    inner = httpx.MockTransport(lambda req: httpx.Response(200, content=b'w' * 2048,
                                                           headers={'content-type': 'text/plain'}))
    async def go():
        async with httpx.AsyncClient(transport=Cassette(tape, inner=inner)) as c:
            for i in range(n): await c.get(f'https://example.org/page/{i}')
    asyncio.run(go())

def written_bytes()->int:
    "Bytes this process has handed to `write` so far"
    return int(next(l for l in Path('/proc/self/io').read_text().splitlines() if l.startswith('wchar')).split()[1])

@pytest.mark.skipif(not Path('/proc/self/io').exists(), reason='counts written bytes with /proc/self/io (Linux)')
def test_cassette_recording_writes_each_request_once(tmp_path):
    tape = tmp_path/'tape.jsonl'
    before = written_bytes()
    record(tape, 60)
    cost = written_bytes() - before
    assert cost < 2 * tape.stat().st_size, f'{cost:,} bytes written for a {tape.stat().st_size:,}-byte cassette'

def test_cassette_cut_last_line_then_recording_goes_on(tmp_path):
    tape = tmp_path/'tape.jsonl'
    record(tape, 3)
    whole = tape.read_bytes()
    tape.write_bytes(whole[:-40])   # killed while writing its last line
    record(tape, 2)                                               # pages 0 and 1 again, on lines of their own
    with pytest.warns(RuntimeWarning, match='1 unreadable line'): cas = Cassette(tape)
    assert [(e.index, e.reason.split(':')[0]) for e in cas.errors] == [(3, 'not JSON')]
    assert (sorted((k.split()[1], len(v)) for k, v in cas.replies.items())
            == [('https://example.org/page/0', 2), ('https://example.org/page/1', 2)])

# ---- writes: unique temporary files, fsynced, renamed; two writers never tear a file

SIZE = 256 * 1024

def _writer(path, k, n, errors):
    "Write `path` `n` times, each time whole with one byte repeated (the byte says which writer); errors go to `errors`"
    for i in range(n):
        try: write_atomic(path, bytes([65 + k]) * (SIZE + 4096 * (i % 7)))
        except Exception as e:
            errors.put(f'{type(e).__name__}: {e}')
            return

@pytest.mark.skipif('fork' not in mp.get_all_start_methods(), reason='the writers are forked')
def test_two_processes_writing_one_file_leave_one_whole_version(tmp_path):
    path, ctx = tmp_path/'shared.bin', mp.get_context('fork')
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, k, 150, errors)) for k in range(2)]
    for p in procs: p.start()
    seen = set()
    while any(p.is_alive() for p in procs):
        try: data = path.read_bytes()
        except FileNotFoundError: continue
        if data: seen.add((len(set(data)), (len(data) - SIZE) % 4096))
    for p in procs: p.join()
    errs = [errors.get(timeout=1) for _ in range(errors.qsize())]
    data = path.read_bytes()
    assert errs == [] and [p.exitcode for p in procs] == [0, 0], errs
    assert len(set(data)) == 1 and (len(data) - SIZE) % 4096 == 0 and seen <= {(1, 0)}, seen
    assert [f.name for f in tmp_path.iterdir()] == ['shared.bin']   # no temporary file left behind

def test_atomic_open_fsyncs_before_the_rename_and_cleans_up(tmp_path, monkeypatch):
    calls, real_replace, real_fsync = [], os.replace, os.fsync
    monkeypatch.setattr(os, 'fsync', lambda fd: calls.append('fsync') or real_fsync(fd))
    monkeypatch.setattr(os, 'replace', lambda a, b: calls.append('replace') or real_replace(a, b))
    write_atomic(tmp_path/'a.txt', 'text')
    assert calls[:2] == ['fsync', 'replace'] and (tmp_path/'a.txt').read_text() == 'text'
    with pytest.raises(KeyError):
        with atomic_open(tmp_path/'a.txt') as f:
            f.write('half')
            raise KeyError('boom')
    assert [f.name for f in tmp_path.iterdir()] == ['a.txt'] and (tmp_path/'a.txt').read_text() == 'text'

def test_write_world_keeps_the_old_files_when_a_write_fails(tmp_path):
    world = SynthData([{'id': 'd', 'text': 'a page'}], [{'id': 'q', 'question': 'q?', 'answer': 'a'}],
                      [{'question': 'q?', 'n': i} for i in range(500)])
    paths = write_world(world, tmp_path)
    old = {n: p.read_bytes() for n, p in paths.items()}
    world.records.insert(250, {'not': object()})   # json cannot write it: the write fails half way
    with pytest.raises(TypeError): write_world(world, tmp_path)
    assert {n: p.read_bytes() for n, p in paths.items()} == old
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(p.name for p in paths.values())

def test_write_verl_sft_keeps_the_old_files_when_a_write_fails(tmp_path, monkeypatch):
    import pandas as pd
    from venus_nb import verl_export as vx
    monkeypatch.setattr(vx, 'verl_sft_frame',
                        lambda *a, **k: pd.DataFrame({'messages': [[{'role': 'user', 'content': 'q'}]]}))
    monkeypatch.setattr(vx, 'sft_chat_template', lambda tok: '{{ messages }}')
    out = vx.write_verl_sft([], tmp_path, None)
    old = {n: (out/n).read_bytes() for n in ('train.parquet', 'sft.yaml')}
    def half_then_fail(self, f, *a, **k):
        (open(f, 'wb') if isinstance(f, (str, Path)) else f).write(b'PAR1 half')
        raise OSError('disk full')
    monkeypatch.setattr(pd.DataFrame, 'to_parquet', half_then_fail)
    with pytest.raises(OSError): vx.write_verl_sft([], tmp_path, None)
    assert {n: (out/n).read_bytes() for n in old} == old

# ---------------------------------------------------------------------------------------------------------------------
# JSON read on resume goes through the capped reader: a clear ValueError naming the file, never a crash or a huge read

DEEP = '[' * 100_000 + ']' * 100_000

def _big(path:Path)->Path:
    "A valid JSON object padded past the 64 MB cap"
    from venus_nb.base import MAX_RECORD_BYTES
    with open(path, 'w') as f:
        f.write('{}')
        f.write(' ' * (MAX_RECORD_BYTES + 1))
    return path

@pytest.mark.parametrize('text', ['[1]', '"x"', DEEP, None], ids=['list', 'string', 'deep', 'over-the-cap'])
def test_resume_json_is_bounded(tmp_path, text):
    from venus_nb.checkpoints import check_json
    from venus_nb.experiment import ExperimentConfig, saved_config_changes, check_resume
    for name in ('state.json', 'config.json'):
        p = tmp_path/name
        _big(p) if text is None else p.write_text(text)
        with pytest.raises(ValueError, match=name + ('' if text else '.* over ')): check_json(p, 'step')
    cfg = ExperimentConfig(igpo={}, output_dir=str(tmp_path))
    for check in (saved_config_changes, check_resume):
        with pytest.raises(ValueError, match='config.json'): check(tmp_path, cfg)

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
